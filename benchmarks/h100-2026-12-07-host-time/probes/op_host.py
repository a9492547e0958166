"""the op's host time a call at level2/13's shapes"""
import statistics, time, torch
import kernelopt.capture.rewrites.group_norm_op  # registers the op
x = torch.randn(64, 320, 64, 64, device="cuda", dtype=torch.bfloat16)
w = torch.rand(320, device="cuda", dtype=torch.bfloat16); b = torch.rand(320, device="cuda", dtype=torch.bfloat16)
ss = torch.randn(64, 640, device="cuda", dtype=torch.bfloat16)
scale, shift = (t[:, :, None, None] for t in ss.chunk(2, dim=1))
op = torch.ops.kernelopt.group_norm.default
def call(): return op(x, w, b, 32, 1e-5, scale, shift, 1.0, True)
from kernelopt.measure.timer import read_host
print("op read_host us", round(read_host(call, device="cuda") * 1000, 1))
for label, fn in (("op", call), ("empty_like", lambda: torch.empty_like(x)), ("op_cpu_dispatch_only", None)):
    if fn is None: continue
    with torch.no_grad():
        fn(); torch.cuda.synchronize(); times = []
        for _ in range(300):
            t0 = time.perf_counter(); fn(); times.append((time.perf_counter() - t0) * 1e6)
            if len(times) % 20 == 0: torch.cuda.synchronize()
    print(label, "host us median", round(statistics.median(times), 1), "p10", round(sorted(times)[30], 1))
