#!/bin/bash
# scratch: H200 -> suite reruns (28, then 26 and 24); else -> the two-graph promotion GPU test
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 KERNELOPT_WORKER_USER=root
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$card" | tee $OUT/card.txt
git rev-parse --short HEAD 2>/dev/null | tee $OUT/head.txt
s=$SECONDS
if [[ $card == *H200* ]]; then
  BENCH_CARD=H200 BENCH_RESUME=benchmarks/h200-2026-12-03-suite-modes BENCH_NAME=suite_modes \
    PROBLEMS=${PROBLEMS-level1/28_token_log_probs_256k,level1/26_token_log_probs,level1/24_log_softmax_vocab} \
    RERUN=${RERUN-level1/26_token_log_probs,level1/24_log_softmax_vocab} TIME_LIMIT=20 BUDGET=8 \
    BENCH_TIMEOUT=${BT:-555} PROBLEM_TIMEOUT=${PT:-300} BENCH_STOP_AFTER=${SA:-300} \
    bash scripts/device/gpu_check.sh bench 2>&1 | tail -25
elif [[ ${RUN_TESTS:-1} == 1 ]]; then
  timeout -s INT ${LIMIT:-560} python3 -m pytest -m gpu -v -s -p no:cacheprovider ${FILES:-tests/test_gpu_graph.py} \
    -k "${K:-two_graphs}" > $OUT/pytest_gpu.txt 2>&1
  grep -E "PASSED|FAILED|passed|failed|^E " $OUT/pytest_gpu.txt | tail -12
else
  echo "not an H200: nothing run"
fi
echo "elapsed $((SECONDS - s))"
