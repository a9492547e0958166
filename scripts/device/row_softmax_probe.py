"""Probe: ``torch.ops.kernelopt.row_softmax`` (a row held on chip across a Hopper cluster) against the
best stock compile of the same softmax, for every cluster shape that holds the row.

    PYTHONPATH=src python3 scripts/device/row_softmax_probe.py

One JSON line per case and shape: the largest error against float64, and the kernel timed interleaved
with ``torch.compile(mode="max-autotune-no-cudagraphs")`` of the same function in this process
(``kernelopt.measure.compare``: L2 flushed, 30 rounds; medians in ms and the speedup). The shape the op
picks by itself is marked ``chosen``. Needs an sm_90 GPU and nvcc.
"""

from __future__ import annotations

import functools
import json
import time

import torch

from kernelopt.capture.rewrites import row_softmax_kernel as kernel
from kernelopt.capture.rewrites import row_softmax_op as op
from kernelopt.measure import compare

# the kernel as the op builds it, and with __launch_bounds__ asking for other numbers of blocks an SM holds
MIN_BLOCKS = (1, 2, 3)


def source(in_dtype: torch.dtype, out_dtype: torch.dtype, min_blocks: int) -> str:
    built = f"__launch_bounds__(THREADS, {kernel.MIN_BLOCKS})"
    return kernel.source_for(in_dtype, out_dtype).replace(built, f"__launch_bounds__(THREADS, {min_blocks})")


CASES = [  # rows, columns, dtype, log, scale, out_float
    (4096, 65536, torch.float32, False, 1.0, False),
    (2048, 131072, torch.float32, True, 1.0, False),
    (2048, 50257, torch.float32, True, 1 / 0.7, False),
    (4096, 16384, torch.float32, False, 1.0, False),
    (4096, 32000, torch.bfloat16, True, 1.0, True),
]


def main() -> None:
    from concurrent.futures import ThreadPoolExecutor

    pairs = {(c[2], torch.float32 if c[5] else c[2]) for c in CASES}
    sources = [source(i, o, b) for i, o in pairs for b in MIN_BLOCKS]
    with ThreadPoolExecutor(len(sources)) as pool:  # nvcc runs in subprocesses: the builds overlap
        list(pool.map(lambda text: kernel.built(text, torch.cuda.get_device_capability()), sources))
    for rows, cols, dtype, log, scale, out_float in CASES:
        x = torch.randn(rows, cols, device="cuda", dtype=dtype) * 3

        def stock(x: torch.Tensor = x, log: bool = log, scale: float = scale, out_float: bool = out_float):
            y = x.float() * scale
            out = torch.log_softmax(y, dim=-1) if log else torch.softmax(y, dim=-1)
            return out if out_float else out.to(x.dtype)

        compiled = torch.compile(stock, mode="max-autotune-no-cudagraphs")
        compiled()
        exact = op.reference(x.double(), scale, log, True)
        chosen = op.cluster_blocks(cols)
        shapes = [(chosen, True, b) for b in MIN_BLOCKS] + [(chosen, False, kernel.MIN_BLOCKS)]
        for clusters, vec, min_blocks in shapes:
            row = {"rows": rows, "cols": cols, "dtype": str(dtype), "log": log, "clusters": clusters, "vec": vec}
            row.update(min_blocks=min_blocks, chosen=clusters == chosen and vec and min_blocks == kernel.MIN_BLOCKS)
            y = torch.empty(x.shape, dtype=torch.float32 if out_float else dtype, device="cuda")
            started = time.monotonic()
            try:
                built = kernel.built(source(dtype, y.dtype, min_blocks), torch.cuda.get_device_capability())
                built.run(x, y, clusters, vec, scale, log, False)
                torch.cuda.synchronize()
            except Exception as exc:
                print(json.dumps({**row, "error": f"{type(exc).__name__}: {exc}"[:300]}), flush=True)
                continue
            row["first_call_s"] = round(time.monotonic() - started, 1)
            row["max_abs_err"] = (y.double() - exact).abs().max().item()
            row["stock_max_abs_err"] = (compiled().double() - exact).abs().max().item()
            run = functools.partial(built.run, x, y, clusters, vec, scale, log, False)  # this iteration's
            timed = compare(compiled, run, device="cuda", trials=30)
            row.update(
                stock_ms=round(timed.baseline.median_ms, 4),
                kernel_ms=round(timed.candidate.median_ms, 4),
                speedup=round(timed.speedup, 3),
            )
            print(json.dumps(row), flush=True)
        print(json.dumps({"rows": rows, "cols": cols, "op_call_ok": torch.allclose(
            torch.ops.kernelopt.row_softmax(x, scale, log, out_float).double(), exact.to(torch.float32 if out_float else dtype).double(),
            rtol=1e-2, atol=1e-3)}), flush=True)


if __name__ == "__main__":
    main()
