"""measured inside a worker"""
import os, statistics, threading, time
_RM = {}
def measure(path):
    import torch
    from kernelopt.evaluate.runner_model import RunnerModel
    from kernelopt.measure.split_timer import read_call
    if path not in _RM:
        _RM[path] = RunnerModel({"problem_path": path}, torch.device("cuda"))
    rm = _RM[path]
    t = []
    with torch.no_grad():
        rm.forward(); torch.cuda.synchronize()
        for i in range(200):
            a = time.perf_counter(); rm.forward(); t.append((time.perf_counter() - a) * 1e6)
            if i % 10 == 0: torch.cuda.synchronize()
    r = [read_call(rm.forward, device="cuda", flush_l2=True, include_host=True).ms for _ in range(30)]
    e = []
    x = torch.empty(1, device="cuda")
    for i in range(200):
        a = time.perf_counter(); torch.empty_like(x); x.add_(1); e.append((time.perf_counter() - a) * 1e6)
    return {"host_us": round(statistics.median(t), 1), "read_ms": round(statistics.median(r), 4),
            "tiny_op_us": round(statistics.median(e), 2),
            "threads": threading.active_count(), "affinity": len(os.sched_getaffinity(0)), "nice": os.nice(0),
            "torch_threads": torch.get_num_threads(), "env": sorted(os.environ)}


def one(path, warm):
    import torch
    from kernelopt.evaluate.runner_model import RunnerModel
    from kernelopt.measure.split_timer import read_call
    if path not in _RM:
        _RM[path] = RunnerModel({"problem_path": path}, torch.device("cuda"))
    rm = _RM[path]
    with torch.no_grad():
        if warm:
            rm.forward(); torch.cuda.synchronize()
        return read_call(rm.forward, device="cuda", flush_l2=True, include_host=True).ms


_OP = {}
def op_steps(spin_ms):
    """one call of the op's pieces, each timed; spin_ms of host busy-wait first (a hot core)"""
    import torch
    from kernelopt.capture.rewrites import group_norm_op as g
    if not _OP:
        x = torch.randn(64, 320, 64, 64, device="cuda", dtype=torch.bfloat16)
        w = torch.rand(320, device="cuda", dtype=torch.bfloat16); b = torch.rand(320, device="cuda", dtype=torch.bfloat16)
        ss = torch.randn(64, 640, device="cuda", dtype=torch.bfloat16)
        scale, shift = (t[:, :, None, None] for t in ss.chunk(2, dim=1))
        _OP.update(x=x, w=w, b=b, scale=scale, shift=shift)
        torch.ops.kernelopt.group_norm.default(x, w, b, 32, 1e-5, scale, shift, 1.0, True); torch.cuda.synchronize()
    o = _OP; x = o["x"]
    if spin_ms:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < spin_ms / 1000: pass
    out = {}
    c = time.perf_counter
    t = c(); torch.ops.kernelopt.group_norm.default(x, o["w"], o["b"], 32, 1e-5, o["scale"], o["shift"], 1.0, True); out["op"] = c() - t
    t = c(); g.planned(x, o["w"], o["b"], 32, 1e-5, o["scale"], o["shift"], 1.0, True, None, 0, "", 0); out["planned"] = c() - t
    t = c(); key = g.signature(x, o["w"], o["b"], 32, o["scale"], o["shift"], 1.0, None, 0, "", 0); out["signature"] = c() - t
    made = g._PLANS[key]
    t = c(); y = torch.empty(x.shape, dtype=x.dtype, device=x.device); out["empty"] = c() - t
    t = c(); made.library.launch(x, y, (o["w"], o["b"], o["scale"], o["shift"], None), made.shape, 1.0, True, 1e-5); out["launch"] = c() - t
    t = c(); torch.cuda.current_device(); out["current_device"] = c() - t
    torch.cuda.synchronize()
    return {k: round(v * 1e6, 1) for k, v in out.items()}


_LIB = []
def dispatch(n=50):
    """a do-nothing op with a Python kernel, called through torch.ops: the dispatcher's way into Python"""
    import sys, threading, torch
    if not _LIB:
        lib = torch.library.Library("kopt_probe", "DEF")
        lib.define("noop(Tensor x) -> Tensor")
        lib.impl("noop", lambda x: x, "CUDA")
        _LIB.append(lib)
    x = torch.empty(4, device="cuda")
    f = torch.ops.kopt_probe.noop.default
    t = []
    for _ in range(n):
        a = time.perf_counter(); f(x); t.append((time.perf_counter() - a) * 1e6)
    u = []
    g = torch.ops.aten.neg.default
    for _ in range(n):
        a = time.perf_counter(); g(x); u.append((time.perf_counter() - a) * 1e6)
    return {"noop_first": round(t[0], 1), "noop_med": round(statistics.median(t), 1), "aten_med": round(statistics.median(u), 1),
            "threads": [(th.name, th.daemon) for th in threading.enumerate()], "switch": sys.getswitchinterval()}
