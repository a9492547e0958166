set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 KERNELOPT_WORKER_USER=root
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 190 python3 -m pytest -m gpu -s -q -p no:cacheprovider tests/test_gpu_group_norm.py 2>&1 | tee $OUT/gn.txt | grep -E "passed|failed|Error|speedup" | tail -20
timeout 100 python3 scripts/device/group_norm_op_probe.py --cases level2/13_groupnorm_scale_shift_silu,level2/09_conv2d_groupnorm:cl --forms held 2>&1 | grep -v AUTOTUNE | tee $OUT/op_probe.txt | grep '^{' | python3 -c '
import sys, json
for l in sys.stdin:
    r = json.loads(l)
    print({k: r.get(k) for k in ("case","channels_last","clusters","form","active_clusters","max_abs_err","stock_max_abs_err","stock_ms","op_ms","speedup","op_tb_per_s","error")})'
timeout 30 ncu --clock-control none -k regex:group_norm --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats python3 scripts/device/now_ncu.py 2>&1 | grep -vE "^==PROF==|^\s*$|-----" | tee $OUT/ncu.txt | grep -E "group_norm_|Throughput|Duration|Issued|Eligible W" | head -20
timeout 90 python3 scripts/device/group_norm_block_probe.py --problems level2/13_groupnorm_scale_shift_silu --layouts on 2>&1 | grep -v AUTOTUNE | tee $OUT/block.txt | grep '^{"problem'
