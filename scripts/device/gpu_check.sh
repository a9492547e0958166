#!/usr/bin/env bash
# One full GPU pass on the lent H200 (run from the repo root through the device tool):
#   scripts/device/gpu_check.sh [all|fixtures|tests|cli|verify|optimize|llm]
# (run scripts/device/fetch_wheels.sh first and carry .whl for the llm step)
# Everything worth keeping is written under $OUT (or ./.device_out when run by hand).
set -uo pipefail
OUT=${OUT:-.device_out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# Wheels from scripts/device/fetch_wheels.sh travel in .whl (name it in the device tool's carry).
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH || exit 1
fi
KO="python3 -m kernelopt"
STORE=$OUT/kernelopt.db
P=examples/problems
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee "$OUT/env.txt"
step=${1:-all}
if [[ $step == all || $step == fixtures ]]; then
  mkdir -p /tmp/fixtures
  python3 scripts/record_captures.py /tmp/fixtures \
    $P/level1/12_softmax_wide.py $P/level1/15_rmsnorm.py $P/level2/03_gemm_bias_gelu.py \
    $P/level2/07_conv2d_bn_relu.py $P/level3/03_transformer_block.py 2>&1 | tail -20
  tar czf "$OUT/fixtures.tgz" -C /tmp/fixtures .
fi
if [[ $step == all || $step == tests ]]; then
  python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tee "$OUT/pytest_gpu.txt" | tail -40
fi
if [[ $step == all || $step == cli ]]; then
  $KO doctor --store "$STORE" 2>&1 | tee "$OUT/doctor.txt"
  for p in level2/03_gemm_bias_gelu level1/10_row_l2_normalize level1/12_softmax_wide; do
    $KO analyze $P/$p.py --store "$STORE" 2>&1 | tee "$OUT/analyze_$(basename $p).txt"
  done
fi
if [[ $step == all || $step == verify ]]; then
  for p in level1/10_row_l2_normalize level1/12_softmax_wide; do
    name=$(basename $p)
    python3 scripts/config_sweep.py $P/$p.py --out /tmp/$name.best.py --limit ${SWEEP_LIMIT:-16} 2>&1 | tee "$OUT/sweep_$name.txt" | tail -25
    kernel=$(sed -n 's/^wrote .* (kernel \(.*\))$/\1/p' "$OUT/sweep_$name.txt")
    [[ -n $kernel ]] && $KO verify $P/$p.py --kernel "$kernel" --candidate /tmp/$name.best.py \
      --export /tmp/$name.kopt.json --store "$STORE" 2>&1 | tee "$OUT/verify_$name.txt"
  done
fi
if [[ $step == all || $step == optimize ]]; then
  timeout 300 python3 -m pytest -m gpu -q -s -p no:cacheprovider tests/test_gpu_optimize.py 2>&1 | tee "$OUT/pytest_gpu_optimize.txt" | grep -E "passed|failed|error|per GPU-minute|Error|stopped" | tail -20
  timeout 200 $KO optimize $P/level1/10_row_l2_normalize.py --budget 16 --max-targets 1 --export /tmp/rowl2.kopt.json \
    --store "$STORE" 2>"$OUT/optimize_progress.txt" | tee "$OUT/optimize_row_l2.txt"
  timeout 300 $KO bench $P --problems ${BENCH_PROBLEMS:-12_softmax_wide,15_rmsnorm} --time-limit 120 --out /tmp/bench \
    --store "$STORE" 2>&1 | tail -40 | tee "$OUT/bench.txt"
  cp /tmp/bench/results.json "$OUT/bench_results.json" 2>/dev/null
fi
if [[ $step == all || $step == llm ]]; then
  timeout 300 python3 -m pytest -m gpu -q -s -p no:cacheprovider tests/test_gpu_llm.py 2>&1 | tee "$OUT/pytest_gpu_llm.txt" | tail -20
fi
