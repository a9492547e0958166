"""Probe: why a cluster-op graph variant reads 1.1-1.2x end to end where its kernel alone reads 1.4-1.8x.

    PYTHONPATH=src python3 scripts/device/graph_gap_probe.py [problem.py ...]

On an H100 (2026-12-05, ``benchmarks/h100-2026-12-05-cluster``) the op's shared-memory form ran token
log-probs 1.84x over ``max-autotune-no-cudagraphs`` alone, but its graph variant read 1.11x in the graph
search and 1.20x with 14.5 % noise in the full re-check. Gate 4 times a whole forward with
``include_host`` (each reading the larger of the device's time and the host's time to make the call), so
a host path slower than the kernel would read as the gap, and host jitter as the noise.

For each problem (default: the suite's three rows the op takes), in this process, the stock compile
(``max-autotune-no-cudagraphs``), the graph variant compiled under that mode's options with the op's
rewrite in its bulk form (as the graph stage compiles it), and the op called alone are timed call by call
as :func:`kernelopt.measure.timer.time_call` times one (L2 flushed, events around the call), in strict
rotation, 40 rounds; each call's device ms and host ms are kept apart. One JSON line per problem and
side: medians and quartiles of both, and how many calls the host bound; then each side's host cost of a
call with nothing queued (no flush: the host's own cost), and a profiler table of the variant.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from kernelopt.capture import compat
from kernelopt.capture.rewrites import row_softmax_op as op
from kernelopt.capture.rewrites.cluster_norm import rewrite_for_cluster_norm_bulk
from kernelopt.capture.rewrites.cluster_softmax import rewrite_for_cluster_softmax_bulk
from kernelopt.capture.rewrites.row_softmax_kernel import launcher
from kernelopt.measure.clocks import CudaEventBackend
from kernelopt.problem.loader import load_problem

ROOT = Path(__file__).resolve().parents[2] / "examples" / "problems" / "level1"
DEFAULT = ["26_token_log_probs.py", "24_log_softmax_vocab.py", "10_row_l2_normalize.py"]
ROUNDS = 40


def load(path: Path) -> tuple[torch.nn.Module, list[Any]]:
    """The problem's model and inputs on the GPU, as kernelopt loads them (seeded, eval mode)."""
    problem = load_problem(path)
    return problem.build_model(0, "cuda"), problem.make_inputs(0, "cuda")


def quartiles(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4)
    return {"median": round(statistics.median(values), 4), "q1": round(q[0], 4), "q3": round(q[2], 4)}


def rotation(sides: dict[str, Callable[[], Any]], backend: CudaEventBackend) -> dict[str, dict[str, list[float]]]:
    """Each side timed once a round, in turn, as ``time_call`` times a call (device and host kept apart)."""
    readings: dict[str, dict[str, list[float]]] = {name: {"device": [], "host": []} for name in sides}
    for round_index in range(ROUNDS + 3):
        for name, fn in sides.items():
            backend.reserve(2)
            backend.flush_l2()
            start = backend.mark()
            began = time.perf_counter()
            fn()
            host = (time.perf_counter() - began) * 1000.0
            end = backend.mark()
            backend.synchronize()
            if round_index >= 3:
                readings[name]["device"].append(backend.elapsed_ms(start, end))
                readings[name]["host"].append(host)
    return readings


def host_only(fn: Callable[[], Any], calls: int = 200) -> float:
    """Median host microseconds of a call with the GPU kept busy by the calls before it (no flush)."""
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1e6)
        if len(times) % 20 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return round(statistics.median(times), 1)


def probe(path: Path, backend: CudaEventBackend) -> None:
    model, inputs = load(path)
    norm = "l2" in path.stem
    rewrite = rewrite_for_cluster_norm_bulk if norm else rewrite_for_cluster_softmax_bulk
    stock = torch.compile(model, mode="max-autotune-no-cudagraphs")
    stock(*inputs)
    clone = load(path)[0]  # a module of its own: Dynamo reuses no stock compile for it
    with (
        compat.fresh_compile(),
        compat.post_grad_pass(rewrite),
        compat.inductor_config_patch(compat.mode_options("max-autotune-no-cudagraphs")),
    ):
        variant = torch.compile(clone)
        variant(*inputs)
    x = inputs[0]
    if norm:
        alone: Callable[[], Any] = lambda: torch.ops.kernelopt.row_l2_normalize(x, 1e-12, True)
    else:
        alone = lambda: torch.ops.kernelopt.row_softmax(x, 1.0, True, x.dtype != torch.float32, True, True)
    sides = {"stock": lambda: stock(*inputs), "variant": lambda: variant(*inputs), "op_alone": alone}
    for fn in sides.values():
        fn()
    torch.cuda.synchronize()
    before = dict(op.FALLBACKS)
    readings = rotation(sides, backend)
    for name, r in readings.items():
        bound = sum(h > d for h, d in zip(r["host"], r["device"]))
        line = {
            "problem": path.stem,
            "side": name,
            "device_ms": quartiles(r["device"]),
            "host_ms": quartiles(r["host"]),
        }
        print(json.dumps({**line, "host_bound_calls": f"{bound}/{len(r['host'])}"}), flush=True)
    ratio = [s / v for s, v in zip(readings["stock"]["device"], readings["variant"]["device"])]
    print(json.dumps({"problem": path.stem, "variant_speedup_device": quartiles(ratio)}), flush=True)
    print(json.dumps({"problem": path.stem, "host_us_no_flush": {n: host_only(f) for n, f in sides.items()},
                      "fallbacks": {k: v - before.get(k, 0) for k, v in op.FALLBACKS.items() if v != before.get(k, 0)}}),
          flush=True)  # fmt: skip
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            variant(*inputs)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12), flush=True)


def host_parts(x: torch.Tensor) -> None:
    """The host microseconds of each piece of the op's call path, one line (``x``: a CUDA input)."""
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    kernel = launcher(x.dtype, out.dtype, op.capability(x.device.index))
    blocks = op.blocks_for(x, True)

    def guard() -> None:
        with torch.cuda.device(x.device):
            pass

    parts = {
        "dispatcher_op": lambda: torch.ops.kernelopt.row_softmax.default(x, 1.0, True, True, True, True),
        "python_impl": lambda: op.row_softmax(x, 1.0, True, True, True, True),
        "launch_only": lambda: kernel.run_bulk(x, out, blocks, op.BULK_THREADS, 1.0, True, True),
        "empty": lambda: torch.empty(x.shape, dtype=torch.float32, device=x.device),
        "device_guard": guard,
        "current_stream": lambda: torch.cuda.current_stream(x.device).cuda_stream,
        "raw_stream": lambda: compat.raw_stream(x.device.index),
    }
    print(json.dumps({"host_us": {name: host_only(fn) for name, fn in parts.items()}}), flush=True)


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]] or [ROOT / name for name in DEFAULT]
    backend = CudaEventBackend(torch.device("cuda"), flush_l2=True, cuda_graph=False)
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    for path in paths:
        probe(path, backend)
    host_parts(torch.randn(1024, 128256, device="cuda").to(torch.bfloat16))


if __name__ == "__main__":
    main()
