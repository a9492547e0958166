"""Gate 3: is the re-stitched model as accurate as the compiled model it replaces?

The orchestrator runs, on several seeds, three things on the same inputs: the
re-stitched model (candidate kernels swapped in), the unmodified compiled
baseline, and a float64 eager reference. Each output's error is
:func:`relative_error` against the float64 reference. The candidate may be a
little less accurate than the compiler's own kernels (it may reorder a
reduction) but not by much: its error must stay within ``max_ratio`` times the
baseline's. That catches precision downgrades that pass the sub-kernel gate on
one kernel but compound through a model (hack 13), and partial work whose
error only shows at model scale (hack 10).

A relative bound is only meaningful when the reference carries signal. When an
all-zeros output would also pass, or when the reference is near-constant, the
problem itself is degenerate (hack 9: KernelBench L2/23, 80 and 83 are
identically zero); the verdict says so in ``details["degenerate"]`` and in its
reason, so that nobody reports a speedup on it as if it meant something.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from kernelopt.verify import _format as fmt
from kernelopt.verify._chunks import blocks, chunk_elements_for, flat
from kernelopt.verify.verdict import Verdict

GATE = "model"
_TINY = torch.finfo(torch.float64).tiny


def relative_error(out: Tensor, ref64: Tensor, *, chunk_elements: int | None = None) -> float:
    """``‖out − ref‖₂ / max(‖ref‖₂, tiny)``, in float64, block by block.

    Non-finite values: where the reference is finite, a NaN or Inf in ``out``
    makes the error ``inf`` (a NaN must never average away); where the
    reference itself is NaN or ±Inf, ``out`` must hold the same (else ``inf``)
    and those elements are left out of both norms. ``out`` may live on another
    device than ``ref64``; its blocks move to the reference's device. A shape
    mismatch raises ``ValueError``: re-stitching swaps kernels, never buffers,
    so it is a harness bug, not a candidate's error.
    """
    if out.shape != ref64.shape:
        raise ValueError(f"output shape {tuple(out.shape)} differs from the reference's {tuple(ref64.shape)}")
    wide = torch.complex128 if (out.dtype.is_complex or ref64.dtype.is_complex) else torch.float64
    sums: list[Tensor] = []
    for _, index in blocks(ref64.shape, chunk_elements or chunk_elements_for(ref64)):
        r = flat(ref64, index).to(wide)
        o = flat(out, index).to(device=r.device, dtype=wide)
        r_finite = torch.isfinite(r)
        broken = (r_finite & ~torch.isfinite(o)) | (~r_finite & ~((r == o) | (torch.isnan(r) & torch.isnan(o))))
        err_sq = torch.where(r_finite, (o - r).abs().square(), 0.0).sum()
        ref_sq = torch.where(r_finite, r.abs().square(), 0.0).sum()
        sums.append(torch.stack([broken.any().to(torch.float64), err_sq, ref_sq]))
    if not sums:
        return 0.0
    broken_any, err_sq, ref_sq = torch.stack(sums).sum(dim=0).cpu().tolist()
    if broken_any:
        return math.inf
    return math.sqrt(err_sq) / max(math.sqrt(ref_sq), _TINY)


def output_stats(ref64: Tensor, *, chunk_elements: int | None = None) -> float:
    """Spread of a reference output: population std over mean absolute value, finite elements only.

    Near 0 means the output is (nearly) the same number everywhere, so a
    kernel can match it without computing it. An all-zero output gives 0.0.
    Fewer than two finite elements (a scalar loss) give NaN: spread within one
    value says nothing, and :func:`judge_model` does not flag on NaN.
    """
    chunk_elements = chunk_elements or chunk_elements_for(ref64)
    totals = torch.zeros(3, dtype=torch.float64, device=ref64.device)
    for _, index in blocks(ref64.shape, chunk_elements):
        r = flat(ref64, index).to(torch.float64)
        finite = torch.isfinite(r)
        values = torch.where(finite, r, 0.0)
        totals += torch.stack([finite.sum().to(torch.float64), values.sum(), values.abs().sum()])
    count, total, total_abs = totals.cpu().tolist()
    if count < 2:
        return math.nan
    mean, mean_abs = total / count, total_abs / count
    if mean_abs == 0:
        return 0.0
    squares = torch.zeros((), dtype=torch.float64, device=ref64.device)
    for _, index in blocks(ref64.shape, chunk_elements):
        r = flat(ref64, index).to(torch.float64)
        squares += torch.where(torch.isfinite(r), (r - mean).square(), 0.0).sum()
    return math.sqrt(float(squares.item()) / count) / mean_abs


@dataclass(frozen=True)
class ModelGatePolicy:
    """How much less accurate than the compiled baseline a candidate model may be.

    A candidate passes when, for every seed and output,
    ``error <= max_ratio * max(baseline error, rel_floor)``. ``max_ratio=10``
    tolerates a different summation order (typically within 2-3x of the
    baseline's error) but rejects a float32 -> bfloat16 downgrade (about 100x
    at fp32). ``rel_floor`` keeps the bound sensible when the baseline is exact
    (error 0, e.g. a pure copy): 10 x 1e-6 is about 100 float32 ulps.
    A reference with std/mean|.| below ``degenerate_threshold`` counts as
    near-constant.
    """

    max_ratio: float = 10.0
    rel_floor: float = 1e-6
    degenerate_threshold: float = 1e-3

    def limit(self, baseline_error: float) -> float:
        return self.max_ratio * max(baseline_error, self.rel_floor)


@dataclass(frozen=True)
class SeedResult:
    """Errors on one seed, one entry per model output.

    ``zero_errors``: :func:`relative_error` of an all-zeros output against the
    reference (1.0 unless the reference is ~0). ``ref_std_over_mean_abs``:
    :func:`output_stats` of the reference.
    """

    seed: int
    candidate_errors: list[float]
    baseline_errors: list[float]
    zero_errors: list[float]
    ref_std_over_mean_abs: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # a name per output ("output 0", "grad of fc.weight")

    def __post_init__(self) -> None:
        n = len(self.candidate_errors)
        lengths = {len(self.baseline_errors), len(self.zero_errors), len(self.ref_std_over_mean_abs) or n}
        if lengths != {n}:
            raise ValueError(f"seed {self.seed}: every error list needs one entry per output ({n})")


def judge_model(per_seed: list[SeedResult], policy: ModelGatePolicy | None = None) -> Verdict:
    """Gate 3: pass iff every seed's every output is within the policy's bound.

    Fails closed when the baseline's own error is not finite (it has NaN or
    Inf where the float64 reference is finite): the bound is then undefined,
    and the user keeps the baseline. Degenerate outputs add a warning but do
    not by themselves fail the gate.
    """
    policy = policy or ModelGatePolicy()
    failures: list[str] = []
    degenerate: list[dict[str, object]] = []
    rows: list[dict[str, object]] = []
    worst: tuple[float, str] = (-1.0, "")
    for result in per_seed:
        errors = zip(result.candidate_errors, result.baseline_errors, result.zero_errors)
        for i, (cand, base, zero) in enumerate(errors):
            where = f"seed {result.seed}, {result.labels[i] if i < len(result.labels) else f'output {i}'}"
            spread = result.ref_std_over_mean_abs[i] if result.ref_std_over_mean_abs else math.nan
            limit = policy.limit(base)
            ratio = cand / max(base, policy.rel_floor) if math.isfinite(base) else math.nan
            rows.append({
                "seed": result.seed, "output": i, "candidate_error": fmt.finite_or_none(cand),
                "baseline_error": fmt.finite_or_none(base), "zero_error": fmt.finite_or_none(zero),
                "ref_std_over_mean_abs": fmt.finite_or_none(spread), "ratio": fmt.finite_or_none(ratio),
            })  # fmt: skip
            if not math.isfinite(base):
                failures.append(
                    f"{where}: the compiled baseline's own error is {fmt.number(base)} (NaN or Inf where the "
                    "float64 reference is finite); the model gate cannot judge this output"
                )
            elif not cand <= limit:  # also catches NaN
                failures.append(_excess_reason(where, cand, base, policy))
            if ratio > worst[0]:
                worst = (ratio, where)
            why = []
            if math.isfinite(base) and zero <= limit:
                why.append(
                    f"an all-zeros output would pass (its error {fmt.number(zero)} <= limit {fmt.number(limit)})"
                )
            if spread < policy.degenerate_threshold:
                threshold = fmt.number(policy.degenerate_threshold)
                why.append(f"reference std/mean|.| is {fmt.number(spread)} < {threshold}")
            if why:
                degenerate.append({"seed": result.seed, "output": i, "why": "; ".join(why)})
    details: dict[str, object] = {
        "max_ratio": policy.max_ratio,
        "rel_floor": policy.rel_floor,
        "degenerate": bool(degenerate),
        "degenerate_outputs": degenerate,
        "worst_ratio": fmt.finite_or_none(worst[0]) if worst[1] else None,
        "per_seed": rows,
    }
    warning = "; warning: output is near-constant/near-zero; an all-zeros output would pass" if degenerate else ""
    if not rows:
        return Verdict(
            GATE, False, "no seeds or outputs were compared; the model gate needs at least one seed", details
        )
    if failures:
        suffix = f" ({len(failures)} of {len(rows)} seed-outputs failed)" if len(failures) > 1 else ""
        return Verdict(GATE, False, failures[0] + suffix + warning, details)
    n_seeds = len(per_seed)
    return Verdict(
        GATE,
        True,
        f"{n_seeds} seed(s) x {len(rows) // max(n_seeds, 1)} output(s) within {fmt.factor(policy.max_ratio)} "
        f"of the compiled baseline's error (worst {fmt.factor(worst[0])}: {worst[1]})" + warning,
        details,
    )


def _excess_reason(where: str, cand: float, base: float, policy: ModelGatePolicy) -> str:
    limit = fmt.factor(policy.max_ratio)
    if base >= policy.rel_floor:
        return (
            f"{where}: error {fmt.number(cand)} is {fmt.factor(cand / base)} the compiled baseline's "
            f"{fmt.number(base)} (limit {limit})"
        )
    return (
        f"{where}: error {fmt.number(cand)} is {fmt.factor(cand / policy.rel_floor)} the floor "
        f"{fmt.number(policy.rel_floor)} (the compiled baseline's error is {fmt.number(base)}; limit {limit})"
    )
