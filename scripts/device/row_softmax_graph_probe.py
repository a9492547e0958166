"""Probe: where the time of kernelopt's row softmax goes inside a compiled graph, for a graph variant
that ran slower than the op alone.

    PYTHONPATH=src python3 scripts/device/row_softmax_graph_probe.py

On 2026-12-04 (code cc027f4) the log-softmax-over-50257 variant under ``kernelopt.cluster_softmax``
(one op call, no Triton kernel) ran 0.664 ms against max-autotune-no-cudagraphs' 0.450, where the op's
kernel alone had run 0.327 ms at 708d8c7 (``benchmarks/h200-2026-12-04-cluster-softmax``). This times,
each interleaved with ``torch.compile(mode="max-autotune-no-cudagraphs")`` of the same log-softmax in
this process (``kernelopt.measure.compare``: L2 flushed, 30 rounds, medians in ms):

- ``run``: the built kernel called directly (the probe's earlier reading);
- ``nonan_run``: the same source with ``fmaxf`` for the NaN-keeping max (with the ``lse`` argument, the
  only change to the kernel since 708d8c7);
- ``op_call``: ``torch.ops.kernelopt.row_softmax`` (the custom op's Python path, what the graph calls);
- ``reference``: torch's own computation, what the op falls back to where ``supports`` says no;
- ``variant``: the model compiled under the option as the graph stage compiles it,

then a profiler table of the variant's calls. Needs an sm_90 GPU, nvcc and ninja; each build takes 50-60 s
on a fresh H200, and each line is printed as soon as it is known.

Its answer (2026-12-05, 179a9bd, section 6 of that folder's README): the kernel itself was 2x slower (0.651
ms, as were the op's path and the variant), and ``fmaxf`` in place of the NaN-keeping max gave 0.327 ms;
the max is now PTX ``max.NaN``, so ``nonan_run`` swaps that body for ``fmaxf`` and should now read the same
as ``run``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from kernelopt.capture import compat
from kernelopt.capture.rewrites import row_softmax_kernel as kernel
from kernelopt.capture.rewrites import row_softmax_op as op
from kernelopt.capture.rewrites.cluster_softmax import rewrite_for_cluster_softmax
from kernelopt.measure import compare

ROWS, COLUMNS, TEMPERATURE = 2048, 50257, 0.7


def timed(name: str, stock: Callable[[], Any], fn: Callable[[], Any]) -> None:
    fn()
    torch.cuda.synchronize()
    r = compare(stock, fn, device="cuda", trials=30)
    row = {"case": name, "stock_ms": round(r.baseline.median_ms, 4), "ms": round(r.candidate.median_ms, 4)}
    print(json.dumps({**row, "speedup": round(r.speedup, 3)}), flush=True)


def built(label: str, make: Callable[[], Any]) -> Any:
    """Build one variant and say how long it took: each line comes out as soon as it is known (a call
    that built all three before printing was cut by its time-out with nothing to show)."""
    started = time.monotonic()
    kernel = make()
    print(json.dumps({"built": label, "s": round(time.monotonic() - started, 1)}), flush=True)
    return kernel


def main() -> None:
    arch = torch.cuda.get_device_capability()
    head = built("head", lambda: kernel.launcher(torch.float32, torch.float32, arch))
    x = torch.randn(ROWS, COLUMNS, device="cuda") * 3
    scale = 1 / TEMPERATURE

    def model(x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x / TEMPERATURE, dim=-1)

    stock = torch.compile(model, mode="max-autotune-no-cudagraphs")
    stock(x)
    blocks = op.cluster_blocks(COLUMNS)
    print(json.dumps({"supports": op.supports(x, False), "blocks": blocks}), flush=True)
    y = torch.empty_like(x)
    timed("run", lambda: stock(x), lambda: head.run(x, y, blocks, True, scale, True, False))
    timed("op_call", lambda: stock(x), lambda: torch.ops.kernelopt.row_softmax(x, scale, True, False))
    timed("reference", lambda: stock(x), lambda: op.reference(x, scale, True, False))
    variant_probe(x, stock)
    source = kernel.source_for(torch.float32, torch.float32)
    nonan = built("nonan", lambda: kernel.built(source.replace(kernel.NAN_MAX_BODY, "return fmaxf(a, b);"), arch))
    timed("nonan_run", lambda: stock(x), lambda: nonan.run(x, y, blocks, True, scale, True, False))


def variant_probe(x: torch.Tensor, stock: Callable[[], Any]) -> None:
    """The model compiled under the option as the graph stage compiles it, timed, then its calls profiled."""

    def rewritten(x: torch.Tensor) -> torch.Tensor:  # a code object of its own: Dynamo reuses no stock compile
        return torch.log_softmax(x / TEMPERATURE, dim=-1)

    with (
        compat.fresh_compile(),
        compat.post_grad_pass(rewrite_for_cluster_softmax),
        compat.inductor_config_patch(compat.mode_options("max-autotune-no-cudagraphs")),
    ):
        variant = torch.compile(rewritten)
        variant(x)
    before = Counter(op.FALLBACKS)
    timed("variant", lambda: stock(x), lambda: variant(x))
    print(json.dumps({"variant_fallbacks": op.fallbacks_since(before)}), flush=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            variant(x)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15), flush=True)


if __name__ == "__main__":
    main()
