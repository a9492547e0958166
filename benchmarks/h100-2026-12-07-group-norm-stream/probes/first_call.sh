set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 KERNELOPT_WORKER_USER=root
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 170 python3 scripts/device/group_norm_op_probe.py --cases level2/13_groupnorm_scale_shift_silu,level2/09_conv2d_groupnorm --forms held,stream 2>&1 | grep -v AUTOTUNE | tee $OUT/op_probe.txt | grep '^{' | python3 -c '
import sys, json
for l in sys.stdin:
    r = json.loads(l)
    print({k: r.get(k) for k in ("case","clusters","form","in_flight","active_clusters","max_abs_err","stock_max_abs_err","stock_ms","op_ms","speedup","op_tb_per_s","error")})'
timeout 140 python3 scripts/device/host_time_probe.py --problem level2/13_groupnorm_scale_shift_silu 2>&1 | tee $OUT/probe13.txt | grep '^{'
timeout 40 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_measure_timer.py 2>&1 | tail -2 | tee $OUT/timer.txt
timeout 200 python3 -m pytest -m gpu -s -q -p no:cacheprovider tests/test_gpu_group_norm.py 2>&1 | tee $OUT/gn.txt | grep -E "host|passed|failed|Error|speedup" | tail -30
