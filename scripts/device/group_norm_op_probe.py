"""Probe: ``torch.ops.kernelopt.group_norm`` (each group read once, held in one cluster's shared memory)
against the stock compile of ``F.group_norm``, at the suite's group norms' shapes and at every cluster size
that holds their groups, each part in shared memory alone ("held") or (clusters of 8 and 16) partly in
registers ("wide"), held with its moments folded as it lands ("one-pass"), or each part read twice, the second time from L2 ("reread": 4, 8 and 16 blocks a group,
``in_flight`` clusters at once, 0 the op's rule); level2/09's also channels-last (the channels-last kernel, against the stock compile of the same
channels-last input).

    PYTHONPATH=src python3 scripts/device/group_norm_op_probe.py [--mode max-autotune-no-cudagraphs] [--cases ...]

One JSON line per case and cluster size as it is measured: the largest error against float64 (the op's
and the stock compile's beside it), the clusters the GPU holds at once for the shape, and the op timed
interleaved with the stock compile of the same function in this process (``kernelopt.measure.compare``:
L2 flushed, 30 rounds; medians in ms), through the registered op (its whole host path and output
allocation, as a compiled graph calls it). Needs an sm_90 GPU and nvcc.
"""

from __future__ import annotations

import argparse
import itertools
import json

import torch
import torch.nn.functional as F

from kernelopt.capture.rewrites import group_norm_kernel as kernel
from kernelopt.capture.rewrites import group_norm_op as op
from kernelopt.measure import compare

CASES = [  # name, shape, groups, dtype, channels-last input (as Inductor lays out a convolution's output)
    ("level1/16_groupnorm", (64, 64, 256, 256), 8, torch.float32, False),
    ("level2/09_conv2d_groupnorm", (64, 128, 128, 128), 8, torch.float32, False),
    ("level2/09_conv2d_groupnorm", (64, 128, 128, 128), 8, torch.float32, True),
    ("level2/13_groupnorm_scale_shift_silu", (64, 320, 64, 64), 32, torch.bfloat16, False),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="max-autotune-no-cudagraphs")
    parser.add_argument(
        "--cases",
        default="",
        help="names to probe, comma-separated (a trailing ':cl' for the channels-last case); all by default",
    )
    parser.add_argument("--forms", default="", help="forms to probe, comma-separated; all by default")
    args = parser.parse_args()
    wanted = set(filter(None, args.cases.split(",")))
    forms = frozenset(filter(None, args.forms.split(",")))
    for name, shape, groups, dtype, channels_last in CASES:
        if not wanted or (name + (":cl" if channels_last else "")) in wanted:
            probe_case(name, shape, groups, dtype, args.mode, channels_last, forms)


def probe_case(
    name: str,
    shape: tuple[int, ...],
    groups: int,
    dtype: torch.dtype,
    mode: str,
    channels_last: bool = False,
    wanted_forms: frozenset[str] = frozenset(),
) -> None:
    torch.manual_seed(0)
    channels = shape[1]
    x = (torch.randn(shape, device="cuda") * 2 + 0.5).to(dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    weight = (torch.rand(channels, device="cuda") + 0.5).to(dtype)
    bias = torch.randn(channels, device="cuda").to(dtype)
    eps = 1e-5

    def stock_fn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, groups, weight, bias, eps)

    compiled = torch.compile(stock_fn, mode=mode)
    exact = F.group_norm(x.double(), groups, weight.double(), bias.double(), eps)
    stock_out = compiled(x, weight, bias)
    stock_err = (stock_out.double() - exact).abs().max().item()
    hw = x.numel() // (shape[0] * channels)
    columns = channels // groups * hw
    if channels_last:
        chosen = op.channels_last_blocks(hw, channels // groups, x.element_size())
    else:
        chosen = op.cluster_blocks(columns, x.element_size())
    library = kernel.launcher(dtype, op.row_softmax_op.capability(x.device.index))
    base = {"case": name, "shape": list(shape), "groups": groups, "dtype": str(dtype), "mode": mode,
            "channels_last": channels_last, "columns": columns, "chosen": chosen}  # fmt: skip
    forms = [(c, f, 0) for c, f in itertools.product(op.CLUSTER_SIZES, ("held", "one-pass", "wide"))]
    if not channels_last:  # the reread form: 4, 8 and 16 blocks a group, the op's clusters at once and others
        forms += [(c, "reread", f) for c in (4, 8, 16) for f in (0, 4, 8, 16, 32)]
    for clusters, form, in_flight in forms:
        if wanted_forms and form not in wanted_forms:
            continue
        if form == "reread":
            held = op.reread_takes(columns, x.element_size())
        elif channels_last:
            held = form == "held" and op.channels_last_part(hw, channels // groups, x.element_size(), clusters) <= (
                kernel.PART_BYTES_LIMIT
            )
        else:
            wide = form == "wide"
            held = op.fits(columns, x.element_size(), clusters, wide) and not (wide and clusters < 8)
        if not held:
            continue
        row = {**base, "clusters": clusters, "form": form, "in_flight": in_flight}
        try:
            row["active_clusters"] = library.active_clusters(x, groups, clusters, form)

            def call(clusters: int = clusters, form: str = form, in_flight: int = in_flight) -> torch.Tensor:
                return torch.ops.kernelopt.group_norm(
                    x, weight, bias, groups, eps, clusters=clusters, form=form, in_flight=in_flight
                )

            got = call()
            torch.cuda.synchronize()
            row["max_abs_err"] = (got.double() - exact).abs().max().item()
            row["stock_max_abs_err"] = stock_err
            timed = compare(lambda: compiled(x, weight, bias), call, device="cuda", trials=30)
        except Exception as exc:  # a shape the GPU refuses: said, and the next one measured
            print(json.dumps({**row, "error": f"{type(exc).__name__}: {exc}"[:300]}), flush=True)
            continue
        moved = 2 * x.numel() * x.element_size()
        row.update(
            stock_ms=round(timed.baseline.median_ms, 4),
            op_ms=round(timed.candidate.median_ms, 4),
            speedup=round(timed.speedup, 3),
            op_tb_per_s=round(moved / (timed.candidate.median_ms * 1e-3) / 1e12, 2),
            stock_tb_per_s_if_read_once=round(moved / (timed.baseline.median_ms * 1e-3) / 1e12, 2),
        )
        print(json.dumps(row), flush=True)
    print(json.dumps({**base, "kind": "fallbacks", "fallbacks": dict(op.row_softmax_op.FALLBACKS)}), flush=True)


if __name__ == "__main__":
    main()
