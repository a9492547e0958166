"""Probe: the op's shared-memory form (``bulk``: each block's part of the row copied into shared memory by
one bulk (TMA) copy) against its register form and the best stock compile, for every cluster size and
block width that holds the row.

    PYTHONPATH=src python3 scripts/device/row_softmax_bulk_probe.py [--cols 65536,65535]

What section 4 of ``benchmarks/h200-2026-12-04-cluster-softmax`` left to try: the op holds each block's
part in registers (512 threads x 32 elements, two blocks an SM), so an SM alternates between reading its
two blocks' parts and writing them, and the kernel moves about 2.5 TB/s (59 % of the copy roofline at
2048 x 50257). Here one thread issues a ``cp.async.bulk`` of the block's 16-byte-aligned middle into
shared memory (the few elements before and after it by plain loads), every thread waits on an mbarrier,
and the max, the sum and the output are computed from shared memory: no per-element load instructions,
few registers, and as many blocks an SM as shared memory holds, at different phases. The grid (one row a
cluster) and the cluster exchange are the register form's. The op launches it with
``BULK_THREADS`` threads and the fewest blocks whose parts fit ``BULK_PART_BYTES`` (the graph stage's
``kernelopt.cluster_softmax_bulk`` variant); both numbers are chosen, not measured, and this sets them.

One JSON line per case and shape as it is measured: the largest error against float64 (the op's and the
stock compile's beside it), the clusters the GPU holds at once for the shape, and the kernel timed
interleaved with ``torch.compile(mode="max-autotune-no-cudagraphs")`` of the same function in this
process (``kernelopt.measure.compare``: L2 flushed, 30 rounds; medians in ms); the op's own choice of
shape is marked ``chosen``, and a line ``"kind": "op"`` times that shape through the registered op (its
whole host path and output allocation, as a compiled graph calls it). The last case is the op's other build, a row's L2 normalisation
(``kernelopt.row_l2_normalize``), against the compiled ``x / torch.norm(x)``. Needs an sm_90 GPU and nvcc.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from kernelopt.capture.rewrites import row_softmax_kernel as kernel
from kernelopt.capture.rewrites import row_softmax_op as op
from kernelopt.measure import compare

MAX_SMEM = 227 * 1024  # bytes of shared memory one block of an sm_90 GPU may have
THREADS = (256, 512)
CASES = [  # rows, columns, dtype, log, scale, out_float, lse, norm (the op's L2-normalisation build)
    (2048, 50257, torch.float32, True, 1 / 0.7, False, False, False),  # the suite's log-softmax over a vocabulary
    (1024, 128256, torch.bfloat16, True, 1.0, True, True, False),  # the suite's token log-probs
    (4096, 65536, torch.float32, False, 1.0, False, False, False),  # the suite's softmax-wide
    (4096, 16384, torch.float32, False, 1.0, False, False, False),
    (4096, 32000, torch.bfloat16, True, 1.0, True, False, False),
    (2048, 131072, torch.float32, True, 1.0, False, False, False),  # the suite's log-softmax-wide
    (8192, 65535, torch.float32, False, 1.0, False, False, True),  # the suite's row-L2 width (x / ||x||)
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cols", help="only the cases of these row widths, comma-separated (default: every case)")
    widths = parser.parse_args().cols
    only = {int(w) for w in widths.split(",")} if widths else None
    arch = torch.cuda.get_device_capability()
    for rows, cols, dtype, log, scale, out_float, lse, norm in CASES:
        if only is not None and cols not in only:
            continue
        out_dtype = torch.float32 if out_float else dtype
        started = time.monotonic()
        library = kernel.launcher(dtype, out_dtype, arch)
        print(
            json.dumps({"cols": cols, "dtype": str(dtype), "built_s": round(time.monotonic() - started, 1)}), flush=True
        )
        x = torch.randn(rows, cols, device="cuda", dtype=dtype) * 3

        def stock(
            x: torch.Tensor = x,
            log: bool = log,
            scale: float = scale,
            out_float: bool = out_float,
            lse: bool = lse,
            norm: bool = norm,
        ) -> torch.Tensor:
            if norm:
                return x / torch.norm(x, p=2, dim=-1, keepdim=True)
            y = x.float() * scale
            if lse:
                out = y - torch.logsumexp(y, dim=-1, keepdim=True)
            else:
                out = torch.log_softmax(y, dim=-1) if log else torch.softmax(y, dim=-1)
            return out if out_float else out.to(x.dtype)

        compiled = torch.compile(stock, mode="max-autotune-no-cudagraphs")
        compiled()
        if norm:
            exact = x.double() / torch.linalg.vector_norm(x.double(), dim=-1, keepdim=True)
        else:
            exact = op.reference(x.double(), scale, log, True, lse)
        stock_err = (compiled().double() - exact).abs().max().item()
        y = torch.empty(x.shape, dtype=out_dtype, device="cuda")
        held, chosen = op.cluster_blocks(cols), op.blocks_for(x, True)
        shapes = [("registers", held, 512)] if held else []
        shapes += [
            ("bulk", c, t) for c in (1, 2, 4, 8) for t in THREADS if -(-cols // c) * x.element_size() + 16 <= MAX_SMEM
        ]
        if op.supports(x, out_float, bulk=True):  # the registered op, its whole host path, as a graph calls it
            shapes.append(("op", chosen, kernel.BULK_THREADS))
        for kind, clusters, threads in shapes:
            row = {
                "rows": rows,
                "cols": cols,
                "dtype": str(dtype),
                "op": "l2_normalize" if norm else "log_softmax" if log else "softmax",
                "kind": kind,
                "clusters": clusters,
                "threads": threads,
            }
            row["chosen"] = kind != "bulk" or (clusters == chosen and threads == kernel.BULK_THREADS)

            def call(kind: str = kind, clusters: int = clusters, threads: int = threads) -> torch.Tensor:
                if kind == "op":  # its own output, as the graph's
                    if norm:
                        return torch.ops.kernelopt.row_l2_normalize(x, 1e-12, True)
                    return torch.ops.kernelopt.row_softmax(x, scale, log, out_float, lse, True)
                if kind == "registers":
                    library.run(x, y, clusters, True, scale, log, lse, norm=norm)
                else:
                    library.run_bulk(x, y, clusters, threads, scale, log, lse, norm=norm)
                return y

            try:
                if kind == "bulk":
                    row["active_clusters"] = library.active_clusters(x, y, clusters, threads)
                y.fill_(float("nan"))
                out = call()
                torch.cuda.synchronize()
                row["max_abs_err"] = (out.double() - exact).abs().max().item()
                row["stock_max_abs_err"] = stock_err
                timed = compare(lambda: compiled(), call, device="cuda", trials=30)
            except Exception as exc:  # a shape the GPU refuses: said, and the next one measured
                print(json.dumps({**row, "error": f"{type(exc).__name__}: {exc}"[:300]}), flush=True)
                continue
            moved = x.numel() * (x.element_size() + y.element_size())
            row.update(
                stock_ms=round(timed.baseline.median_ms, 4),
                kernel_ms=round(timed.candidate.median_ms, 4),
                speedup=round(timed.speedup, 3),
                tb_per_s=round(moved / (timed.candidate.median_ms * 1e-3) / 1e12, 2),
            )
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
