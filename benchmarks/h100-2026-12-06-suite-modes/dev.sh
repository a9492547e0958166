#!/bin/bash
# scratch: H200 -> the H200 scoreboard's next rows (28, then 26 and 24 again);
# else -> an H100 scoreboard of its own, begun in benchmarks/h100-2026-12-06-suite-modes (resumed where it exists)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 KERNELOPT_WORKER_USER=root
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$card" | tee $OUT/card.txt
s=$SECONDS
common="TIME_LIMIT=20 BUDGET=8 BENCH_TIMEOUT=${BT:-560} PROBLEM_TIMEOUT=${PT:-300} BENCH_STOP_AFTER=${SA:-260}"
if [[ $card == *H200* ]]; then
  env $common BENCH_CARD=H200 BENCH_RESUME=benchmarks/h200-2026-12-03-suite-modes BENCH_NAME=suite_modes \
    PROBLEMS=level1/28_token_log_probs_256k,level1/26_token_log_probs,level1/24_log_softmax_vocab \
    RERUN=level1/26_token_log_probs,level1/24_log_softmax_vocab bash scripts/device/gpu_check.sh bench 2>&1 | tail -25
else
  env $common BENCH_CARD=H100 BENCH_RESUME=benchmarks/h100-2026-12-06-suite-modes BENCH_NAME=suite_modes_h100 \
    PROBLEMS=${H100_PROBLEMS:-level1/28_token_log_probs_256k,level1/24_log_softmax_vocab,level1/26_token_log_probs,level1/10_row_l2_normalize,level1/13_log_softmax_wide} \
    bash scripts/device/gpu_check.sh bench 2>&1 | tail -25
fi
echo "elapsed $((SECONDS - s))"
