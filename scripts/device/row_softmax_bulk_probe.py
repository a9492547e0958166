"""Probe: the op's shared-memory form (``bulk``: each block's part of the row copied into shared memory by
bulk (TMA) copies) in each of its built variants, against the best stock compile, and the op's chosen
launch shape against every cluster size and block width that holds the row.

    PYTHONPATH=src python3 scripts/device/row_softmax_bulk_probe.py [--cols 65536,65535] [--old old.cu]

The form's variants (``row_softmax_kernel.source_for``): the part copied in 1, 2 or 4 pieces, each with its
own mbarrier, the threads folding one piece into their running max and sum while the next lands;
exponentials by ``expf`` or by PTX's ``ex2.approx`` (as Triton's float32 exp compiles); plain or streaming
(evict-first) stores. ``--old`` takes an earlier version of the op's CUDA source (its ``CUDA_SOURCE``,
dtypes left as ``__IN__`` and ``__OUT__``), timed beside them at the same shape.

One JSON line per case and variant or shape as it is measured: the largest error against float64 (the
op's and the stock compile's beside it), the clusters the GPU holds at once for the shape, and the kernel
timed interleaved with ``torch.compile(mode="max-autotune-no-cudagraphs")`` of the same function in this
process (``kernelopt.measure.compare``: L2 flushed, 30 rounds; medians in ms). A line ``"kind": "op"``
times the op's own variant and shape through the registered op (its whole host path and output
allocation, as a compiled graph calls it). For the 65536-wide softmax, lines ``"kind": "stock"`` time
three stock compiles of it against the op on an unscaled input: the suite problem's own
``torch.softmax(x, dim=1)``, this probe's function with ``x`` as its argument, and as the stock compile
below takes it (``x`` a default argument), so that a difference between this probe's stock and the
suite's is read, not guessed. The last case is the op's other build, a row's L2 normalisation
(``kernelopt.row_l2_normalize``), against the compiled ``x / torch.norm(x)``. Needs an sm_90 GPU and nvcc.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from kernelopt.capture.rewrites import row_softmax_kernel as kernel
from kernelopt.capture.rewrites import row_softmax_op as op
from kernelopt.measure import compare

MAX_SMEM = 227 * 1024  # bytes of shared memory one block of an sm_90 GPU may have
THREADS = (256, 512)
MODE = "max-autotune-no-cudagraphs"
CASES = [  # rows, columns, dtype, log, scale, out_float, lse, norm (the op's L2-normalisation build)
    (2048, 50257, torch.float32, True, 1 / 0.7, False, False, False),  # the suite's log-softmax over a vocabulary
    (1024, 128256, torch.bfloat16, True, 1.0, True, True, False),  # the suite's token log-probs
    (4096, 65536, torch.float32, False, 1.0, False, False, False),  # the suite's softmax-wide
    (4096, 16384, torch.float32, False, 1.0, False, False, False),
    (4096, 32000, torch.bfloat16, True, 1.0, True, False, False),
    (2048, 131072, torch.float32, True, 1.0, False, False, False),  # the suite's log-softmax-wide
    (8192, 65535, torch.float32, False, 1.0, False, False, True),  # the suite's row-L2 width (x / ||x||)
]
VARIANTS = list(itertools.product((1, 2, 4), (False, True), (False, True)))  # pieces, fast exp, streaming


def stock_function(log: bool, scale: float, out_float: bool, lse: bool, norm: bool) -> Callable[..., torch.Tensor]:
    """What the op computes, written as a user would for torch.compile."""

    def stock(x: torch.Tensor) -> torch.Tensor:
        if norm:
            return x / torch.norm(x, p=2, dim=-1, keepdim=True)
        y = x.float() * scale
        if lse:
            out = y - torch.logsumexp(y, dim=-1, keepdim=True)
        else:
            out = torch.log_softmax(y, dim=-1) if log else torch.softmax(y, dim=-1)
        return out if out_float else out.to(x.dtype)

    return stock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cols", help="only the cases of these row widths, comma-separated (default: every case)")
    parser.add_argument("--old", type=Path, help="an earlier CUDA source of the op, timed beside its variants")
    args = parser.parse_args()
    only = {int(w) for w in args.cols.split(",")} if args.cols else None
    old = args.old.read_text() if args.old else None
    arch = torch.cuda.get_device_capability()
    for case in CASES:
        if only is None or case[1] in only:
            probe_case(*case, old=old, arch=arch)


def probe_case(rows: int, cols: int, dtype: torch.dtype, log: bool, scale: float, out_float: bool, lse: bool,
               norm: bool, old: str | None, arch: tuple[int, int]) -> None:  # fmt: skip
    """One case's lines: every variant at the op's shape, the op's variant at every other shape, the op."""
    own = (kernel.BULK_PIECES, kernel.BULK_FAST_EXP, kernel.BULK_STREAMING)
    out_dtype = torch.float32 if out_float else dtype
    started = time.monotonic()
    sources = {v: kernel.source_for(dtype, out_dtype, *v) for v in VARIANTS}
    if old is not None:
        sources["old"] = old.replace("__IN__", kernel.C_TYPES[dtype]).replace("__OUT__", kernel.C_TYPES[out_dtype])
    with ThreadPoolExecutor(max_workers=len(sources)) as pool:  # nvcc in parallel, one build a variant
        libraries = dict(zip(sources, pool.map(lambda s: kernel.built(s, arch), sources.values())))
    print(json.dumps({"cols": cols, "dtype": str(dtype), "built_s": round(time.monotonic() - started, 1)}), flush=True)
    x = torch.randn(rows, cols, device="cuda", dtype=dtype) * 3
    stock = stock_function(log, scale, out_float, lse, norm)

    def held(x: torch.Tensor = x, stock: Callable[..., torch.Tensor] = stock) -> torch.Tensor:
        return stock(x)

    compiled = torch.compile(held, mode=MODE)
    compiled()
    if norm:
        exact = x.double() / torch.linalg.vector_norm(x.double(), dim=-1, keepdim=True)
    else:
        exact = op.reference(x.double(), scale, log, True, lse)
    stock_err = (compiled().double() - exact).abs().max().item()
    y = torch.empty(x.shape, dtype=out_dtype, device="cuda")
    chosen = op.blocks_for(x, True)
    base = {
        "rows": rows,
        "cols": cols,
        "dtype": str(dtype),
        "op": "l2_normalize" if norm else "log_softmax" if log else "softmax",
    }

    def measure(row: dict, library: kernel.Library, clusters: int, threads: int) -> None:
        def call() -> torch.Tensor:
            library.run_bulk(x, y, clusters, threads, scale, log, lse, norm=norm)
            return y

        timed_line(row, call, lambda: compiled(), y, lambda: library.active_clusters(x, y, clusters, threads))

    def timed_line(row: dict, call: Callable[[], torch.Tensor], baseline: Callable[[], torch.Tensor],
                   out: torch.Tensor, active: Callable[[], int] | None = None) -> None:  # fmt: skip
        try:
            if active is not None:
                row["active_clusters"] = active()
            out.fill_(float("nan"))
            got = call()
            torch.cuda.synchronize()
            row["max_abs_err"] = (got.double() - exact).abs().max().item()
            row["stock_max_abs_err"] = stock_err
            timed = compare(baseline, call, device="cuda", trials=30)
        except Exception as exc:  # a shape the GPU refuses: said, and the next one measured
            print(json.dumps({**row, "error": f"{type(exc).__name__}: {exc}"[:300]}), flush=True)
            return
        moved = x.numel() * (x.element_size() + out.element_size())
        row.update(
            stock_ms=round(timed.baseline.median_ms, 4),
            kernel_ms=round(timed.candidate.median_ms, 4),
            speedup=round(timed.speedup, 3),
            tb_per_s=round(moved / (timed.candidate.median_ms * 1e-3) / 1e12, 2),
        )
        print(json.dumps(row), flush=True)

    if chosen is None:
        return
    for variant, library in libraries.items():  # every variant at the op's shape
        pieces, fast, streaming = (None, None, None) if variant == "old" else variant
        row = {**base, "kind": "variant", "variant": "old" if variant == "old" else
               {"pieces": pieces, "fast_exp": fast, "streaming": streaming},
               "clusters": chosen, "threads": kernel.BULK_THREADS, "chosen": variant == own}  # fmt: skip
        measure(row, library, chosen, kernel.BULK_THREADS)
    for clusters, threads in itertools.product((1, 2, 4, 8), THREADS):  # the op's variant at every shape
        if -(-cols // clusters) * x.element_size() + 16 > MAX_SMEM or (clusters, threads) == (
            chosen,
            kernel.BULK_THREADS,
        ):
            continue
        measure({**base, "kind": "shape", "clusters": clusters, "threads": threads, "chosen": False},
                libraries[own], clusters, threads)  # fmt: skip

    def through_op() -> torch.Tensor:  # its own output, as the graph's
        if norm:
            return torch.ops.kernelopt.row_l2_normalize(x, 1e-12, True)
        return torch.ops.kernelopt.row_softmax(x, scale, log, out_float, lse, True)

    if op.supports(x, out_float, bulk=True):
        timed_line({**base, "kind": "op", "clusters": chosen, "threads": kernel.BULK_THREADS}, through_op,
                   lambda: compiled(), y)  # fmt: skip
    if cols == 65536 and not log and not norm:
        stock_forms(x, libraries[own], chosen, stock)


def stock_forms(x: torch.Tensor, library: kernel.Library, clusters: int,
                stock: Callable[..., torch.Tensor]) -> None:  # fmt: skip
    """The 65536-wide softmax's stock compiles, each timed against the op's kernel on the suite problem's
    own input (unscaled ``randn``): the suite's ``torch.softmax(x, dim=1)``, this probe's function with ``x``
    an argument, and with ``x`` a default argument as :func:`main` compiles it."""
    x0 = torch.randn(x.shape, device="cuda", dtype=x.dtype)
    y = torch.empty_like(x0)
    exact0 = torch.softmax(x0.double(), dim=1)

    def held(x: torch.Tensor = x0) -> torch.Tensor:
        return stock(x)

    forms = {
        "suite: torch.softmax(x, dim=1)": (torch.compile(lambda x: torch.softmax(x, dim=1), mode=MODE), (x0,)),
        "probe's function, x an argument": (torch.compile(stock, mode=MODE), (x0,)),
        "probe's function, x a default argument": (torch.compile(held, mode=MODE), ()),
    }

    def call() -> torch.Tensor:
        library.run_bulk(x0, y, clusters, kernel.BULK_THREADS, 1.0, False, False)
        return y

    call()
    torch.cuda.synchronize()
    kernel_err = (y.double() - exact0).abs().max().item()
    for name, (compiled, inputs) in forms.items():
        err = (compiled(*inputs).double() - exact0).abs().max().item()
        timed = compare(lambda c=compiled, i=inputs: c(*i), call, device="cuda", trials=30)
        line = {"cols": x.shape[-1], "kind": "stock", "form": name, "stock_ms": round(timed.baseline.median_ms, 4),
                "kernel_ms": round(timed.candidate.median_ms, 4), "speedup": round(timed.speedup, 3),
                "stock_max_abs_err": err, "max_abs_err": kernel_err}  # fmt: skip
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
