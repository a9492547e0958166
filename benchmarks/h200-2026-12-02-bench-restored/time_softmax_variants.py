"""Times register-resident CUDA row softmax variants against the naive Triton file (nw 4 and 16) and torch."""
import statistics, sys, pathlib
import torch, cupy as cp
sys.path.insert(0, "examples/kernels")
import softmax_naive as sn
import triton

src = pathlib.Path("benchmarks/h200-2026-12-02-bench-restored/softmax_regs.cuh").read_text()
variants = [(512, 16, "false"), (1024, 8, "false"), (512, 16, "true"), (1024, 8, "true")]
names = [f"row_softmax_regs<{t},{v},{f}>" for t, v, f in variants]
mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=names)
R, C = 4096, 32768
x = torch.randn(R, C, device="cuda")
y = torch.empty_like(x)
flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
ref = torch.softmax(x.double(), -1).float()

def cuda_variant(i):
    t, v, _ = variants[i]
    f = mod.get_function(names[i])
    def run():
        f((R,), (t,), (cp.from_dlpack(x), cp.from_dlpack(y), cp.int64(C), cp.int64(C), cp.int64(C)))
    return run

def triton_nw(nw):
    def run():
        sn.softmax_kernel[(R,)](x, y, C, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(C), num_warps=nw)
    return run

def torch_sm():
    def run():
        torch.softmax(x, -1, out=y) if False else y.copy_(torch.softmax(x, -1))
    return run

cands = {f"cuda {variants[i]}": cuda_variant(i) for i in range(len(variants))}
cands.update({"triton nw4": triton_nw(4), "triton nw16": triton_nw(16), "triton nw32": triton_nw(32), "torch": torch_sm()})
for name, run in cands.items():
    y.zero_(); run(); torch.cuda.synchronize()
    err = (y - ref).abs().max().item()
    print(name, "max abs err vs fp64", err, flush=True)
times = {k: [] for k in cands}
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for rep in range(40):
    for name, run in cands.items():
        flush.zero_()
        s.record(); run(); e.record(); e.synchronize()
        times[name].append(s.elapsed_time(e) * 1000)
floor = 2 * R * C * 4 / 4.8e12 * 1e6
base = statistics.median(times["triton nw4"])
for name, t in times.items():
    t = sorted(t[5:])
    med = statistics.median(t)
    print(f"{name:22s} median {med:8.1f} us  q1 {t[len(t)//4]:8.1f} q3 {t[3*len(t)//4]:8.1f}  vs nw4 {base/med:.3f}x  floor(4.8TB/s) {floor/med:.2%}")
