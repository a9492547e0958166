"""Probe: the suite's group-norm problems whole, compiled by stock Inductor and by Inductor under
``kernelopt.cluster_group_norm`` (the group norm and what follows it one call of kernelopt's op), in the
same stock mode, timed interleaved in this process.

    PYTHONPATH=src python3 scripts/device/group_norm_block_probe.py [--mode max-autotune-no-cudagraphs] [--layouts both|on|off]

One JSON line per problem and variant (``layouts``: Inductor's layout optimisation on, as stock, or off):
each compile's largest error against the float64 model, the op's fallbacks (none, or the variant timed
torch's group norm), the kernels each compile launches with their device times (a copy before the op, or its
channels-last kernel reading the convolution's output in place), and the two timed by ``kernelopt.measure.compare``
(L2 flushed, 30 rounds; medians in ms), device time alone and, as the performance gate reads a forward, the
longer of the device's and the host's (``host_speedup``), with each compile's host time of a call made
right after another (``host_us``); ``--profile`` prints where the variant's host time goes (cProfile). A quick reading of whether the op pays inside a model; ``kernelopt bench`` is the judged one.
Needs an sm_90 GPU and nvcc.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from kernelopt.capture import compat
from kernelopt.capture.rewrites import group_norm_op, row_softmax_op
from kernelopt.capture.rewrites.cluster_group_norm import CLUSTER_GROUP_NORM_OPTION
from kernelopt.capture.rewrites.passes import compile_with_options
from kernelopt.measure import compare
from kernelopt.measure.timer import read_host
from kernelopt.problem.loader import load_problem

PROBLEMS = ["level2/13_groupnorm_scale_shift_silu", "level2/09_conv2d_groupnorm"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="max-autotune-no-cudagraphs")
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--layouts", choices=["both", "on", "off"], default="both")
    parser.add_argument("--profile", action="store_true", help="where the variant's host time goes (cProfile)")
    args = parser.parse_args()
    layouts = {"both": (True, False), "on": (True,), "off": (False,)}[args.layouts]
    for name in args.problems.split(","):
        probe(name, args.mode, layouts, args.profile)


def probe(name: str, mode: str, layouts_tried: tuple[bool, ...], profiled: bool = False) -> None:
    path = Path("examples/problems") / f"{name}.py"
    loaded = load_problem(path).module
    torch.manual_seed(0)
    model = loaded.Model(*loaded.get_init_inputs()).cuda().eval()
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in loaded.get_inputs()]
    with torch.no_grad():
        exact = copy.deepcopy(model).double()(*[t.double() if t.is_floating_point() else t for t in inputs])
    stock = torch.compile(model, mode=mode)
    stock_err = _err(stock, inputs, exact)
    for layouts in layouts_tried:
        options: dict[str, Any] = {**compat.mode_options(mode), CLUSTER_GROUP_NORM_OPTION: True}
        if not layouts:
            options["layout_optimization"] = False
        # the file loaded afresh: a Model whose forward is a code object of its own, so that Dynamo keeps
        # the stock compile and this one apart
        again = load_problem(path).module
        twin = again.Model(*again.get_init_inputs()).cuda().eval()
        twin.load_state_dict(model.state_dict())
        variant = torch.compile(
            twin, backend=lambda gm, example, o=options: compile_with_options(gm, example, lambda g: None, o)
        )
        before = Counter(row_softmax_op.FALLBACKS)
        row: dict[str, Any] = {"problem": name, "mode": mode, "layouts": layouts, "stock_max_abs_err": stock_err}
        try:
            row["max_abs_err"] = _err(variant, inputs, exact)
            row["fallbacks"] = row_softmax_op.fallbacks_since(before)
            with torch.no_grad():
                timed = compare(lambda: stock(*inputs), lambda v=variant: v(*inputs), device="cuda", trials=30)
                hosted = compare(
                    lambda: stock(*inputs), lambda v=variant: v(*inputs), device="cuda", trials=30, include_host=True
                )
        except Exception as exc:  # said, and the next variant measured
            print(json.dumps({**row, "error": f"{type(exc).__name__}: {exc}"[:400]}), flush=True)
            continue
        row.update(
            stock_ms=round(timed.baseline.median_ms, 4),
            ms=round(timed.candidate.median_ms, 4),
            speedup=round(timed.speedup, 3),
            host_speedup=round(hosted.speedup, 3),
            stock_host_us=_host_us(lambda: stock(*inputs)),
            host_us=_host_us(lambda v=variant: v(*inputs)),
            kernels=_kernels(lambda v=variant: v(*inputs)),  # whether the op read its input in place
            stock_kernels=_kernels(lambda: stock(*inputs)),
            host_path=group_norm_op.use_host() or "C++",  # the op's: C++, or why Python
            host_counts=group_norm_op.host_counts(),  # plans kept, calls launched from C++, calls handed to Python
        )
        print(json.dumps(row), flush=True)
        if profiled:
            _profile(lambda v=variant: v(*inputs))


def _host_us(call: Any) -> float:
    """The host's time of one call made right after another, in µs (the judge's, ``read_host``)."""
    with torch.no_grad():
        return round(read_host(call, device="cuda") * 1000.0, 1)


def _profile(call: Any, calls: int = 200) -> None:
    """The top of cProfile's table of ``calls`` calls by their own time: where the host time goes."""
    import cProfile
    import pstats

    with torch.no_grad():
        call()
        with cProfile.Profile() as prof:
            for _ in range(calls):
                call()
        torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def _kernels(call: Any, calls: int = 5) -> list[list[Any]]:
    """The CUDA kernels one call launches, in order: name (shortened) and the median of ``calls`` calls'
    device time in µs. Where a compile's time goes inside the model: a kernel's time beside the others'
    is what a standalone probe of one part cannot show."""
    from torch.profiler import ProfilerActivity, profile

    per_call: list[list[Any]] = []
    for _ in range(calls):
        with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        per_call.append([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA])
    first = per_call[0]
    if any(len(events) != len(first) for events in per_call):  # a call launched other kernels: names only
        return [[e.name[:60], None] for e in first]
    return [
        [e.name[:60], round(statistics.median(events[i].time_range.elapsed_us() for events in per_call), 1)]
        for i, e in enumerate(first)
    ]


def _err(fn: Any, inputs: list[Any], exact: torch.Tensor) -> float:
    with torch.no_grad():
        got = fn(*inputs)
    torch.cuda.synchronize()
    return (got.double() - exact).abs().max().item()


if __name__ == "__main__":
    main()
