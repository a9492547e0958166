"""Which kernels are worth searching: ranked by what they can buy end to end.

A kernel's ceiling on the whole model is its headroom (time above its
roofline) over the model's time: Amdahl. Kernels under 1 % of the time or
already at 90 % of the roofline cannot buy anything worth a search; vendor
calls and aten fallbacks are not ours to replace. Every skip has a reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kernelopt.measure.roofline import ROOFLINE_DONE, amdahl_bound

MIN_SHARE = 0.01
WORTH_SAYING = 1.10  # a bound beyond the kernels' own that is worth a line to the user
COPY_SHARE = 0.05  # kernels that only move data taking this share of the compiled forward: worth another layout


@dataclass(frozen=True)
class Target:
    name: str
    time_us: float
    headroom_us: float
    share: float
    pct_of_peak: float | None
    gain_bound: float  # best end-to-end speedup from this kernel alone: total / (total - headroom)


@dataclass(frozen=True)
class Skipped:
    name: str
    reason: str


def select_targets(
    launches: Iterable[Mapping[str, Any]],
    total_us: float,
    min_share: float = MIN_SHARE,
    roofline_done: float = ROOFLINE_DONE,
) -> tuple[list[Target], list[Skipped]]:
    """Rank generated Triton kernels by headroom / total time; say why every other launch is skipped.

    A name that two graphs both use (a training step's forward and backward can) is skipped: the
    evaluation worker addresses a kernel by its name, and a search must never time one graph's
    kernel against the other's."""
    per_kernel: dict[str, dict[str, float]] = {}
    skipped: list[Skipped] = []
    graphs_of: dict[str, set[int]] = {}
    for row in launches:
        if row["kind"] == "triton":
            graphs_of.setdefault(row["name"], set()).add(int(row.get("graph") or 0))
    for row in launches:
        if row["kind"] == "triton" and len(graphs_of[row["name"]]) > 1:
            if not any(s.name == row["name"] for s in skipped):
                skipped.append(
                    Skipped(
                        row["name"],
                        f"its name repeats in graphs {sorted(graphs_of[row['name']])}: not searched "
                        "(kernels are addressed by name)",
                    )
                )
            continue
        if row["kind"] != "triton":
            skipped.append(Skipped(row["name"], f"{row['kind']} call: kept as the compiler made it"))
            continue
        agg = per_kernel.setdefault(row["name"], {"time_us": 0.0, "headroom_us": 0.0, "pct": 0.0, "n": 0})
        agg["time_us"] += row.get("time_us") or 0.0
        agg["headroom_us"] += row.get("headroom_us") or 0.0
        agg["pct"] = max(agg["pct"], row.get("pct_of_peak") or 0.0)
        agg["n"] += 1
        agg["moves"] = float(bool(row.get("moves_only")) and agg.get("moves", 1.0) > 0)  # every launch a copy
    targets = []
    for name, agg in per_kernel.items():
        share = agg["time_us"] / total_us if total_us > 0 else 0.0
        if share < min_share:
            skipped.append(
                Skipped(name, f"{100 * share:.1f}% of the time (< {100 * min_share:.0f}%): cannot buy more than that")
            )
            continue
        if agg["pct"] >= roofline_done:
            reason = f"already at {agg['pct']:.0f}% of the copy roofline (>= {roofline_done:.0f}%)"
            if agg.get("moves"):
                reason += "; it only moves data: removing it is the only gain (--operators ...,graph-variants)"
            skipped.append(Skipped(name, reason))
            continue
        headroom = min(agg["headroom_us"], total_us)
        bound = amdahl_bound(total_us, max(headroom, 0.0)) if total_us > 0 else 1.0
        targets.append(Target(name, agg["time_us"], headroom, share, agg["pct"], bound))
    targets.sort(key=lambda t: t.headroom_us, reverse=True)
    return targets, skipped


def _beyond_fusion(amdahl: float, fusion: float | None) -> str | None:
    """A graph far above its traffic floor while its kernels sit near their rooflines, in words; None
    where it is not (no floor, near it, or the kernels' own headroom explains it)."""
    if fusion is None or fusion < WORTH_SAYING or fusion <= amdahl * 1.05:
        return None
    return (
        f"the compiled graph takes {fusion:.2f}x its traffic floor while its kernels can buy at most "
        f"{amdahl:.2f}x at their rooflines: the rest is intermediate tensors through memory"
    )


def structure_pays(
    amdahl: float,
    fusion: float | None,
    moves_share: float,
    rereads_share: float = 0.0,
    own_ops: Mapping[str, int] | None = None,
) -> str | None:
    """Why the graph stage (whole call sequences regenerated under other options) can pay where
    the kernel search cannot, or None: a graph far above its traffic floor while its kernels sit
    near their rooflines (intermediate tensors' round trips: fusion), kernels that only move
    data taking a share of the compiled forward's time (layout copies: another layout removes them),
    or kernels that pass over their rows more than once taking one (a softmax's statistics Inductor
    did not compute in one loop: :mod:`kernelopt.capture.rewrites.online_softmax` gives them back to its online
    softmax; a second read: a split of each row across programs that keep it in registers removes it,
    :mod:`kernelopt.capture.row_split`, as does kernelopt's own softmax or L2 norm across a Hopper cluster,
    :mod:`kernelopt.capture.rewrites.cluster_softmax`, :mod:`kernelopt.capture.rewrites.cluster_norm`, and a group norm's
    by :mod:`kernelopt.capture.rewrites.cluster_group_norm`), or ops that a rewrite handing them to those
    kernels of kernelopt's found in the capture (``own_ops``, by option: level2/13's group norm after a
    small matmul reads its input in two kernels, each at its roofline and neither passing twice, and has
    no floor for its vendor call, yet the op ran it 1.2-1.35x at gate 4 on the H100)."""
    fused = _beyond_fusion(amdahl, fusion)
    if fused is not None:
        return f"{fused}, headroom only other fusion can buy"
    if moves_share >= COPY_SHARE:
        return (
            f"kernels that only move data take {100 * moves_share:.0f}% of the compiled forward's time: no launch config "
            "removes a layout copy, another layout can"
        )
    if rereads_share >= COPY_SHARE:
        return (
            f"kernels that read their rows twice take {100 * rereads_share:.0f}% of the compiled forward's time: no "
            "launch config removes the second read; a softmax's statistics in one loop (Inductor's online softmax), "
            "a row split across programs or a softmax or norm held on chip across a cluster can"
        )
    if own_ops:
        return (
            "kernelopt's own kernels can take ops of the graphs ("
            + ", ".join(f"{option}: {count}" for option, count in sorted(own_ops.items()))
            + "): held on chip across a cluster, which no launch config of Inductor's kernels does"
        )
    return None


def reread_options_first(
    amdahl: float, fusion: float | None, rereads_share: float, own_ops: Mapping[str, int] | None = None
) -> bool:
    """Whether the graph stage compiles its reread option sets (online softmax, on-chip softmax and norm,
    row splits) before the others, as its compile budget may not reach them all: where kernels read their
    rows twice, and where the graph sits far above a traffic floor that already counts every second read
    the chip cannot hold (kernels each at its roofline that a kernel holding the statistic would fuse). A
    rewrite of kernelopt's that finds nothing, and a row split where no reduction is wide, cost no compile
    (the capture's probes leave them out). And where a rewrite handing ops to kernelopt's own kernels found
    some (``own_ops``): its option set is among them."""
    return rereads_share >= COPY_SHARE or _beyond_fusion(amdahl, fusion) is not None or bool(own_ops)


def headroom_elsewhere(
    amdahl: float, fusion: float | None, launch_overhead: float, gpu_busy: float, graph_stage: bool = False
) -> list[str]:
    """One line for each kind of headroom the kernel search cannot reach, where it is worth
    saying: a graph far above its traffic floor (fusion: the graph stage, ``graph_stage`` says
    whether this run has it), and a forward whose GPU waits between launches (launch overhead:
    CUDA graphs)."""
    notes = []
    fused = _beyond_fusion(amdahl, fusion)
    if fused is not None:
        notes.append(
            f"{fused}, headroom only fusion can buy"
            + ("" if graph_stage else " (the graph-variants operator regenerates graphs under other fusion choices)")
        )
    if launch_overhead >= WORTH_SAYING:
        notes.append(
            f"the GPU is busy {100 * gpu_busy:.0f}% of the compiled forward: removing the gaps between launches "
            f"could buy up to {launch_overhead:.2f}x (torch.compile's CUDA-graph modes, mode='reduce-overhead'; "
            "kernelopt's backend runs its verified kernels under them)"
        )
    return notes
