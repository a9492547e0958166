set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 KERNELOPT_WORKER_USER=root
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 80 python3 - <<'PY' 2>&1 | tee $OUT/worker_env.txt
import subprocess, sys, tempfile, time
from kernelopt.pipeline.evaluator import compile_cache_env
from kernelopt.workers.environment import worker_env
work = tempfile.mkdtemp()
env = worker_env(work, env=compile_cache_env())
print("build dir", env.get("KERNELOPT_CUDA_BUILD_DIR"), "PATH", env.get("PATH")[:200])
code = "import time, torch; t=time.perf_counter(); from kernelopt.capture.rewrites import group_norm_op as g; print('use_host:', g.use_host(), round(time.perf_counter()-t,1), 's'); print(g.host_state())"
r = subprocess.run([sys.executable, "-c", code], env=env, cwd=work, capture_output=True, text=True, timeout=70)
print(r.returncode, r.stdout[-1500:], r.stderr[-2500:])
PY
timeout 150 python3 -m pytest -m gpu -s -q -p no:cacheprovider tests/test_gpu_group_norm.py -k "gates and 13_" 2>&1 | tee $OUT/gate13.txt | grep -E "passed|failed|Error|host path|13_" | tail -8
timeout 240 python3 -m pytest -m gpu -s -q -p no:cacheprovider tests/test_gpu_group_norm.py 2>&1 | tee $OUT/gn.txt | grep -E "passed|failed|Error|host path" | tail -12
