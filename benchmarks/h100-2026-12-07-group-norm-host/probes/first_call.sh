set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 KERNELOPT_WORKER_USER=root
nvidia-smi --query-gpu=name --format=csv,noheader; nvcc --version | tail -1; g++ --version | head -1
timeout 90 python3 - <<'PY' 2>&1 | tee $OUT/smoke.txt
import time, torch
from kernelopt.capture.rewrites import group_norm_op
t = time.perf_counter(); why = group_norm_op.use_host(); print("use_host", why, round(time.perf_counter() - t, 1), "s")
x = torch.randn(64, 640, 16, 16, device="cuda", dtype=torch.bfloat16); w = torch.rand(640, device="cuda", dtype=torch.bfloat16); b = torch.randn(640, device="cuda", dtype=torch.bfloat16)
lin = torch.randn(64, 1280, device="cuda", dtype=torch.bfloat16); sc, sh = (t[:, :, None, None] for t in lin.chunk(2, 1))
call = lambda: torch.ops.kernelopt.group_norm(x, w, b, 32, 1e-5, sc, sh, 1.0, True)
a = call(); c = call(); print("equal", torch.equal(a, c), "counts", group_norm_op.host_counts())
def loop(n=2000):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): call()
    e = time.perf_counter() - t; torch.cuda.synchronize(); return e / n * 1e6
small = torch.randn(2, 32, 8, 8, device="cuda", dtype=torch.bfloat16)
x = small; w = torch.rand(32, device="cuda", dtype=torch.bfloat16); b = torch.randn(32, device="cuda", dtype=torch.bfloat16)
sc = sh = None; call = lambda: torch.ops.kernelopt.group_norm(x, w, b, 1, 1e-5); call(); call()
from kernelopt.measure.timer import read_host
for rnd in range(2):
    print("C++ host path: us a call (tiny input, 2000 back to back)", round(loop(), 2), "read_host", round(read_host(call, device="cuda") * 1000, 1))
    group_norm_op.drop_host(); call()
    print("Python host path:", round(loop(), 2), "read_host", round(read_host(call, device="cuda") * 1000, 1))
    group_norm_op.use_host(); call()
print("counts", group_norm_op.host_counts())
PY
timeout 230 python3 -m pytest -m gpu -s -q -p no:cacheprovider tests/test_gpu_group_norm.py 2>&1 | tee $OUT/gn.txt | grep -E "passed|failed|Error|speedup|verdict|host" | tail -30
timeout 100 python3 scripts/device/host_time_probe.py --python-host 2>&1 | grep -v AUTOTUNE | tee $OUT/probe13.txt | grep '^{'
