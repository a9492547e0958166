#!/bin/bash
# this session's last device call: the H200 reruns, else (another card) the GPU tests not yet run at this code
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 KERNELOPT_WORKER_USER=root
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$card" | tee $OUT/card.txt
s=$SECONDS
t() { python3 -m pytest -m gpu -v -s -p no:cacheprovider "$@" 2>&1 | grep -E "PASSED|FAILED|ERROR|passed|failed|^E " | tail -12; }
if [[ $card == *H200* ]]; then
  BENCH_RESUME=benchmarks/h200-2026-12-03-suite-modes BENCH_NAME=suite_modes PROBLEMS=level1/24_log_softmax_vocab,level1/26_token_log_probs \
    RERUN=level1/24_log_softmax_vocab,level1/26_token_log_probs TIME_LIMIT=20 BUDGET=8 BENCH_TIMEOUT=450 PROBLEM_TIMEOUT=260 BENCH_STOP_AFTER=240 \
    bash scripts/device/gpu_check.sh bench 2>&1 | tail -25
  left=$((${LIMIT:-540} - (SECONDS - s))); echo "left $left"
  (( left > 170 )) && timeout -s INT $left python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_optimize.py > $OUT/pytest_gpu_optimize.txt 2>&1
  grep -E "PASSED|FAILED|passed|failed" $OUT/pytest_gpu_optimize.txt | tail -8
else
  timeout -s INT 200 python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_optimize.py > $OUT/pytest_gpu_optimize.txt 2>&1
  grep -E "PASSED|FAILED|passed|failed" $OUT/pytest_gpu_optimize.txt | tail -8
  left=$((${LIMIT:-540} - (SECONDS - s))); echo "left $left"
  timeout -s INT $left python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_graph.py \
    -k "two_graphs or one_graph_winner or pass_gate_1 or transposed" > $OUT/pytest_gpu_graph.txt 2>&1
  grep -E "PASSED|FAILED|passed|failed" $OUT/pytest_gpu_graph.txt | tail -8
fi
