"""Probe: the host's time of a problem's forward, stock and under ``kernelopt.cluster_group_norm``, and of
kernelopt's group-norm op alone at the problem's group norm, in this process, with the device idle and busy.

    PYTHONPATH=src python3 scripts/device/host_time_probe.py [--problem level2/13_groupnorm_scale_shift_silu]

Gate 4 reads a forward as the longer of its device time and the host's time of a forward called right
after another (``read_host``). Where the host's is the longer, a candidate loses whatever its kernels gain:
level2/13's op candidate read 0.85x at fc965f3 on the H100 with a 1.045x device gain, its forward's
host time in a loop above its 0.19 ms device time (``benchmarks/h100-2026-12-07-host-time``). One JSON
line per subject, in µs a call:

- ``device``: one call's device time (``time_fn``, L2 flushed, median of 30);
- ``host_idle``: the host's time of a call made on an idle device (synchronized before each);
- ``host_loop``: ``read_host``, calls back to back (the judge's);
- ``host_busy``: the same behind a device lead of ``--lead-ms`` (a launch that waits on the device,
  such as one the driver cannot queue, shows as host time near the device's).

The op's subjects are read through its C++ host path (the kernel at its CUDA key, ``group_norm_host``),
then again through Python's (``--python-host``: ``group_norm_op.drop_host``). Needs an sm_90 GPU and nvcc
for the op.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from kernelopt.capture import compat
from kernelopt.capture.rewrites import group_norm_op
from kernelopt.capture.rewrites.cluster_group_norm import CLUSTER_GROUP_NORM_OPTION
from kernelopt.capture.rewrites.passes import compile_with_options
from kernelopt.measure.clocks import LEAD_CYCLES, device_sleep
from kernelopt.measure.timer import read_host, time_fn
from kernelopt.problem.loader import load_problem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="level2/13_groupnorm_scale_shift_silu")
    parser.add_argument("--mode", default="max-autotune-no-cudagraphs")
    parser.add_argument("--lead-ms", type=float, default=5.0, help="the device's lead before the busy loop")
    parser.add_argument("--python-host", action="store_true", help="also read the op's subjects through Python's path")
    args = parser.parse_args()
    path = Path("examples/problems") / f"{args.problem}.py"
    loaded = load_problem(path).module
    torch.manual_seed(0)
    model = loaded.Model(*loaded.get_init_inputs()).cuda().eval()
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in loaded.get_inputs()]
    stock = torch.compile(model, mode=args.mode)
    again = load_problem(path).module  # a forward of its own code object: Dynamo keeps the two compiles apart
    twin = again.Model(*again.get_init_inputs()).cuda().eval()
    twin.load_state_dict(model.state_dict())
    options = {**compat.mode_options(args.mode), CLUSTER_GROUP_NORM_OPTION: True}
    variant = torch.compile(twin, backend=lambda gm, ex: compile_with_options(gm, ex, lambda g: None, options))
    subjects: dict[str, Any] = {"stock": lambda: stock(*inputs), "variant": lambda: variant(*inputs)}
    op = _op_alone(model, inputs)
    if op is not None:
        subjects["op alone"] = op
    with torch.no_grad():
        for fn in subjects.values():
            fn()
        torch.cuda.synchronize()
        for name, fn in subjects.items():
            row = {"problem": args.problem, "subject": name, **_timings(fn, args.lead_ms)}
            print(json.dumps(row), flush=True)
        print(json.dumps({"host_path": group_norm_op.use_host() or "C++", "counts": group_norm_op.host_counts()}))
        if args.python_host:
            group_norm_op.drop_host()
            for name in ("variant", "op alone"):
                if name in subjects:
                    row = {"problem": args.problem, "subject": f"{name}, Python's host path"}
                    print(json.dumps({**row, **_timings(subjects[name], args.lead_ms)}), flush=True)
            group_norm_op.use_host()


def _op_alone(model: torch.nn.Module, inputs: list[Any]) -> Any:
    """A call of ``torch.ops.kernelopt.group_norm`` on what the model's first ``nn.GroupNorm`` reads in
    its forward (its weight, bias, groups and eps; no epilogue), or None where the model has none."""
    norm = next((m for m in model.modules() if isinstance(m, torch.nn.GroupNorm)), None)
    if norm is None:
        return None
    seen: list[torch.Tensor] = []
    handle = norm.register_forward_hook(lambda module, args, out: seen.append(args[0].detach().clone()))
    with torch.no_grad():
        model(*inputs)
    handle.remove()
    x = seen[0]
    return lambda: torch.ops.kernelopt.group_norm(x, norm.weight, norm.bias, norm.num_groups, norm.eps)


def _timings(fn: Any, lead_ms: float) -> dict[str, float]:
    device_us = time_fn(fn, device="cuda").median_ms * 1000.0
    idle = []
    for _ in range(20):
        torch.cuda.synchronize()
        began = time.perf_counter()
        fn()
        idle.append((time.perf_counter() - began) * 1e6)
    torch.cuda.synchronize()
    loop_us = read_host(fn, device="cuda") * 1000.0
    cycles = int(LEAD_CYCLES * lead_ms)  # LEAD_CYCLES is about a millisecond of the device's clock
    device_sleep(cycles)
    busy_us = read_host(fn, device="cuda") * 1000.0
    return {
        "device": round(device_us, 1),
        "host_idle": round(statistics.median(idle), 1),
        "host_loop": round(loop_us, 1),
        "host_busy": round(busy_us, 1),
    }


if __name__ == "__main__":
    main()
