set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 KERNELOPT_WORKER_USER=root
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$card"
if [[ $card == *H200* ]]; then
  T=$(( 225 - SECONDS )); S=$(( T - 10 ))
  BENCH_CARD=H200 BENCH_RESUME=benchmarks/h200-2026-12-03-suite-modes BENCH_NAME=suite_modes \
    PROBLEMS=level1/28_token_log_probs_256k,level2/13_groupnorm_scale_shift_silu BENCH_EXPECT_FROM=benchmarks/h100-2026-12-06-suite-modes \
    TIME_LIMIT=20 BUDGET=8 BENCH_TIMEOUT=$T PROBLEM_TIMEOUT=210 BENCH_SLOT=$S bash scripts/device/gpu_check.sh bench
  exit
fi
timeout 215 python3 -m kernelopt optimize examples/problems/level2/13_groupnorm_scale_shift_silu.py --time-limit 20 --budget 8 \
  --max-targets 1 --export $OUT/13.kopt.json --no-report --store /tmp/k.db --json > $OUT/opt13.json 2> $OUT/opt13.err
echo "optimize rc=$? at ${SECONDS}s"; tail -5 $OUT/opt13.err
python3 - <<'PY'
import json, os
text = open(os.environ["OUT"] + "/opt13.json").read()
r = json.JSONDecoder().raw_decode(text[min(i for i in (text.find("{\n"), text.find('{"')) if i >= 0):])[0]
print({k: r.get(k) for k in ("graph_stage", "speedup_vs_compile", "speedup_vs_compile_iqr", "compiled_ms", "optimized_ms", "final_reason", "op_hosts", "base_mode")})
for g in r.get("graphs") or []:
    print("graph", {k: g.get(k) for k in ("graph", "speedup", "evaluations", "failures_by_gate", "final_check", "note", "promoted")})
for k in r.get("kernels") or []:
    print("kernel", k["name"], k["speedup"], k["evaluations"])
PY
(( SECONDS < 170 )) && timeout $(( 228 - SECONDS )) python3 -m pytest -m gpu -s -q -p no:cacheprovider tests/test_gpu_group_norm.py -k "analysis_counts and 13_" 2>&1 | tee $OUT/gn.txt | grep -E "passed|failed|Error|own ops" | tail -5
