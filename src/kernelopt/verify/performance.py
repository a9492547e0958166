"""Gate 4: is the candidate measurably faster than the original kernel, and plausibly so?

This module only judges measurements; the timing itself is
:func:`kernelopt.measure.compare` (interleaved rounds, L2 flushed, medians).
Two rules:

* a speedup counts only when it clears both a fixed margin and the measured
  noise: ``speedup > 1 + max(margin, noise_k * noise)``. Comparing a kernel
  with itself gives ``1 ± noise``, and a 1-2 % "win" on a GPU is often a
  different clock state, not a better kernel; the search should not spend its
  budget chasing those, nor the user trust them;
* a candidate faster than physics allows is rejected as suspicious: when its
  median time is below ``roofline_slack`` x the time its bytes need at the
  measured peak bandwidth, it did not do the work (cached or skipped output,
  a side stream the events do not see; hacks 1, 5 and 21 of the reference).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelopt.config import default_of
from kernelopt.measure.timer import Comparison
from kernelopt.verify import _format as fmt
from kernelopt.verify.verdict import Verdict

GATE = "performance"


@dataclass(frozen=True)
class PerformancePolicy:
    """Thresholds of the performance gate.

    ``margin``: the smallest speedup that counts, whatever the noise (the
    ``margin`` setting of :mod:`kernelopt.config`).
    ``noise_k``: how many times the relative noise (half the per-round ratio
    IQR over the median) the speedup must clear; 2 keeps a same-kernel A/B
    from passing by chance. ``roofline_slack``: the fraction of the roofline
    minimum time below which a candidate is suspicious; 0.95 leaves room for
    the measured peak bandwidth being itself a slight underestimate.
    """

    margin: float = default_of("margin")
    noise_k: float = 2.0
    roofline_slack: float = 0.95
    overhead_k: float = 2.0
    overhead_slack_ms: float = 0.25
    lead_k: float = 1.25

    def required_speedup(self, noise: float) -> float:
        return 1.0 + max(self.margin, self.noise_k * noise)


@dataclass(frozen=True)
class Calibration:
    """What the judge's clock saw of a trusted call in the candidate's process (the original, before any
    candidate ran there), per call: the milliseconds that process's own reading did not explain
    (``overhead_ms``: the request, the reply, the flush, the synchronize) and the device's lead inside
    them (``lead_ms``: ``split_timer.read_call`` keeps the device busy a fixed number of cycles before
    its start mark). Every later reading of that process is checked against it
    (:func:`judge_timing_evidence`). Empty: not calibrated, and nothing it reports is believed."""

    overhead_ms: tuple[float, ...] = ()
    lead_ms: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.lead_ms and len(self.lead_ms) != len(self.overhead_ms):
            raise ValueError(
                f"a calibration needs one lead per call: {len(self.lead_ms)} leads for {len(self.overhead_ms)} calls"
            )

    def __bool__(self) -> bool:
        return bool(self.overhead_ms)

    def allowed_ms(self, policy: PerformancePolicy) -> float:
        """The unexplained milliseconds a later call may show: ``overhead_k`` times the upper quartile of
        the overhead less its lead, plus the lead once (``lead_k`` times the longest seen) and the slack.
        A lead of 1 ms counted as overhead would let a reading be shaved by 2 ms more."""
        leads = self.lead_ms or (0.0,) * len(self.overhead_ms)
        beyond = sorted(u - lead for u, lead in zip(self.overhead_ms, leads))
        upper = max(beyond[len(beyond) * 3 // 4], 0.0) if beyond else 0.0
        return policy.overhead_k * upper + policy.lead_k * max(leads, default=0.0) + policy.overhead_slack_ms

    def to_dict(self) -> dict[str, list[float]]:
        return {"calibration_ms": list(self.overhead_ms), "calibration_lead_ms": list(self.lead_ms)}


def _speedup_digits(speedup: float) -> int:
    """Three decimals near 1 (1.012x), where they matter; two elsewhere (1.21x)."""
    return 3 if math.isfinite(speedup) and abs(speedup - 1.0) < 0.1 else 2


def _speedup_text(comparison: Comparison) -> str:
    d = _speedup_digits(comparison.speedup)
    return f"speedup {comparison.speedup:.{d}f}x (IQR {comparison.speedup_q1:.{d}f}-{comparison.speedup_q3:.{d}f}x)"


def _details(comparison: Comparison, min_time_us: float | None, policy: PerformancePolicy) -> dict[str, Any]:
    return {
        "speedup": fmt.finite_or_none(comparison.speedup),
        "q1": fmt.finite_or_none(comparison.speedup_q1),
        "q3": fmt.finite_or_none(comparison.speedup_q3),
        "noise": fmt.finite_or_none(comparison.noise),
        "required_speedup": fmt.finite_or_none(policy.required_speedup(comparison.noise)),
        "baseline_median_us": comparison.baseline.median_ms * 1000.0,
        "candidate_median_us": comparison.candidate.median_ms * 1000.0,
        "min_time_us": min_time_us,
        "rounds": len(comparison.ratios),
        "method": comparison.baseline.method,
        "device": comparison.baseline.device,
        "l2_flushed": comparison.baseline.l2_flushed and comparison.candidate.l2_flushed,
    }


def judge_performance(
    comparison: Comparison, min_time_us: float | None, policy: PerformancePolicy | None = None
) -> Verdict:
    """Gate 4 from an interleaved comparison of the original (baseline) and the candidate.

    ``min_time_us``: the least time the candidate's memory traffic can take at
    the measured peak bandwidth (bytes / peak), or None when unknown, which
    skips the plausibility check.
    """
    policy = policy or PerformancePolicy()
    if min_time_us is not None and not min_time_us >= 0:
        raise ValueError(f"min_time_us must be a non-negative number or None, got {min_time_us}")
    details = _details(comparison, min_time_us, policy)
    candidate_us = comparison.candidate.median_ms * 1000.0
    speed = _speedup_text(comparison)

    if candidate_us == 0:
        return Verdict(
            GATE, False, f"suspicious: the candidate's median time is 0 ({speed}); "
            "either the clock is too coarse for this kernel or the candidate did no work", details,
        )  # fmt: skip
    if min_time_us is not None and candidate_us < policy.roofline_slack * min_time_us:
        return Verdict(
            GATE,
            False,
            f"suspicious: the candidate's median {fmt.number(candidate_us)} us is below "
            f"{fmt.percent(policy.roofline_slack)} of {fmt.number(min_time_us)} us, the least time its bytes "
            f"take at the measured peak bandwidth; it cannot have done all its work "
            f"(cached or skipped output, or work the timer did not see?) ({speed})",
            details,
        )

    noise = comparison.noise
    required = policy.required_speedup(noise)
    if comparison.speedup > required:
        return Verdict(
            GATE, True,
            f"{speed} beyond margin {fmt.percent(policy.margin)} and noise {fmt.percent(noise)}", details,
        )  # fmt: skip
    if comparison.speedup <= 1.0:
        reason = f"{speed}: the candidate is not faster than the original"
    elif policy.noise_k * noise <= policy.margin:
        reason = f"{speed} is within the {fmt.percent(policy.margin)} margin"
    else:
        reason = (
            f"{speed} does not clear the noise: needs > {required:.{_speedup_digits(required)}f}x "
            f"({policy.noise_k:g} x noise {fmt.percent(noise)})"
        )
    return Verdict(GATE, False, reason, details)


def beyond_noise(comparison: Comparison) -> bool:
    """Whether a whole model's speedup clears twice its measured noise (never where the noise is unknown)."""
    return comparison.speedup > 1.0 + 2.0 * comparison.noise if math.isfinite(comparison.noise) else False


def graphs_unpaid(gain: Comparison) -> str | None:
    """Why CUDA graphs do not pay for a compiled model, in one line, given its forward (baseline) timed
    against its own replays (candidate); None where the replays win beyond noise."""
    if beyond_noise(gain):
        return None
    return (
        f"CUDA graphs do not pay for this model (its replays ran {gain.speedup:.3f}x its forward, "
        f"noise {100 * gain.noise:.1f}%): judged without them"
    )


def judge_end_to_end(comparison: Comparison) -> dict[str, Any]:
    """Summary of the whole model's speedup (re-stitched vs compiled baseline) for the report.

    Informational: the end-to-end number is what the user sees, but whether a
    kernel is kept was decided per kernel. ``beyond_noise`` says whether the
    speedup clears twice the measured noise, so the report can say "within
    noise" instead of printing 1.01x as a win.
    """
    speedup, noise, cleared = comparison.speedup, comparison.noise, beyond_noise(comparison)
    summary = f"end to end {_speedup_text(comparison)}, noise {fmt.percent(noise)}, n={len(comparison.ratios)}"
    if not cleared:
        summary += " (within noise)"
    return {
        "speedup": fmt.finite_or_none(speedup),
        "q1": fmt.finite_or_none(comparison.speedup_q1),
        "q3": fmt.finite_or_none(comparison.speedup_q3),
        "noise": fmt.finite_or_none(noise),
        "beyond_noise": cleared,
        "baseline_median_ms": comparison.baseline.median_ms,
        "candidate_median_ms": comparison.candidate.median_ms,
        "baseline_iqr_ms": comparison.baseline.iqr_ms,
        "candidate_iqr_ms": comparison.candidate.iqr_ms,
        "rounds": len(comparison.ratios),
        "method": comparison.baseline.method,
        "device": comparison.baseline.device,
        "l2_flushed": comparison.baseline.l2_flushed and comparison.candidate.l2_flushed,
        "summary": summary,
    }


def judge_timing_evidence(
    reported_ms: Sequence[float],
    wall_ms: Sequence[float],
    calibration: Calibration,
    policy: PerformancePolicy | None = None,
    what: str = "candidate",
) -> Verdict | None:
    """None when the candidate's process's own readings agree with the judge's clock; else a failed
    performance verdict naming the disagreement.

    The candidate's process times its own calls, so it could report any number. The judge
    times every such call from the outside (request to reply): the reading can never exceed
    that, and the wall time it does not explain must stay within what the same call cost
    when the runner timed the original kernel before any candidate had run in it
    (``calibration``, :meth:`Calibration.allowed_ms`). A reading shaved below the truth shows
    up as unexplained wall time; the lie it can hide is bounded by the calibrated overhead,
    and the roofline check bounds it from below. The candidate's own account of its lead is
    never used: only the calibration's."""
    policy = policy or PerformancePolicy()
    if not calibration:
        return Verdict(
            GATE,
            False,
            f"no calibration of the candidate's process: {what} timing not trusted",
            {"rule": "timing_evidence"},
        )
    allowed = calibration.allowed_ms(policy)
    unexplained = sorted(w - r for w, r in zip(wall_ms, reported_ms))
    over = [r - w for w, r in zip(wall_ms, reported_ms) if r > w + 0.01]
    details = {
        "rule": "timing_evidence",
        "allowed_unexplained_ms": allowed,
        "median_unexplained_ms": unexplained[len(unexplained) // 2] if unexplained else None,
        **calibration.to_dict(),
        "wall_ms": list(wall_ms),
        "reported_ms": list(reported_ms),
    }
    if over:
        return Verdict(
            GATE,
            False,
            (
                f"timing evidence inconsistent: the {what}'s process reported {len(over)} reading(s) longer than "
                f"the whole call took on the judge's clock (by up to {max(over):.3f} ms)"
            ),
            details,
        )
    median = unexplained[len(unexplained) // 2] if unexplained else None
    if median is not None and median > allowed:
        return Verdict(
            GATE,
            False,
            (
                f"timing evidence inconsistent: the judge's clock saw {median:.3f} ms per {what} call that its "
                f"process's readings do not explain; calibrated overhead allows {allowed:.3f} ms "
                f"({policy.overhead_k:g} x the calibration's upper quartile + {policy.lead_k:g} x its longest "
                f"device lead + {policy.overhead_slack_ms:g} ms)"
            ),
            details,
        )
    return None
