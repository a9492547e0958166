set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 KERNELOPT_WORKER_USER=root
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$card"; git log --oneline -1 2>/dev/null
R=
if [[ $card == *H200* ]]; then
  timeout 120 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_gpu_group_norm.py -k "reread and not dtype1 and not dtype2" 2>&1 | tee $OUT/reread.txt | tail -2 \
    && R=level1/16_groupnorm
  T=470; S=455
else
  timeout 235 python3 -m pytest -m gpu -s -q -p no:cacheprovider tests/test_gpu_group_norm.py 2>&1 | tee $OUT/gn.txt | grep -E "passed|failed|Error|host path" | tail -12
  T=$(( 585 - SECONDS )); S=$(( T - 12 ))
fi
echo "bench: timeout $T slot $S"
BENCH_CARD=H200 BENCH_RESUME=benchmarks/h200-2026-12-03-suite-modes BENCH_NAME=suite_modes \
  PROBLEMS=level1/28_token_log_probs_256k,level1/16_groupnorm,level2/13_groupnorm_scale_shift_silu,level2/09_conv2d_groupnorm \
  RERUN=$R BENCH_EXPECT_FROM=benchmarks/h100-2026-12-06-suite-modes \
  BENCH_ELSE_PROBLEMS=level2/13_groupnorm_scale_shift_silu,level1/16_groupnorm,level2/09_conv2d_groupnorm \
  BENCH_ELSE_RERUN=level1/16_groupnorm,level2/09_conv2d_groupnorm BENCH_ELSE_RESUME=benchmarks/h100-2026-12-06-suite-modes \
  BENCH_ELSE_EXPECT_FROM=benchmarks/h100-2026-12-06-suite-modes \
  TIME_LIMIT=20 BUDGET=8 BENCH_TIMEOUT=$T PROBLEM_TIMEOUT=300 BENCH_SLOT=$S bash scripts/device/gpu_check.sh bench
