"""Gate 4 (performance): margin, noise, the roofline plausibility check, the end-to-end summary."""

from __future__ import annotations

import json

import pytest

from kernelopt.measure import METHOD_CUDA_EVENTS, Comparison, Timing
from kernelopt.verify.performance import PerformancePolicy, judge_end_to_end, judge_performance


def _timing(samples_ms: list[float]) -> Timing:
    return Timing(samples_ms=tuple(samples_ms), device="cuda:0 NVIDIA H200", method=METHOD_CUDA_EVENTS, l2_flushed=True)


def _comparison(baseline_ms: list[float], candidate_ms: list[float]) -> Comparison:
    return Comparison.from_timings(_timing(baseline_ms), _timing(candidate_ms))


def test_two_percent_with_a_three_percent_margin_fails() -> None:
    comparison = _comparison([0.0102] * 20, [0.0100] * 20)  # 10.2 us vs 10 us, no noise
    verdict = judge_performance(comparison, None)
    assert verdict.gate == "performance" and not verdict.passed
    assert verdict.reason == "speedup 1.020x (IQR 1.020-1.020x) is within the 3% margin"


def test_twenty_percent_with_low_noise_passes() -> None:
    baseline = [1.19, 1.20, 1.21, 1.20, 1.22, 1.18, 1.20, 1.20]
    comparison = _comparison(baseline, [1.0] * 8)
    verdict = judge_performance(comparison, None)
    assert verdict.passed
    # Sorted ratios 1.18 ... 1.22: q1 = 1.1975, q3 = 1.2025, noise = 0.005 / 2.4 = 0.21%.
    assert verdict.reason == "speedup 1.20x (IQR 1.20-1.20x) beyond margin 3% and noise 0.2%"
    assert verdict.details["speedup"] == pytest.approx(1.2)
    assert verdict.details["baseline_median_us"] == pytest.approx(1200.0)
    assert verdict.details["candidate_median_us"] == pytest.approx(1000.0)
    assert verdict.details["required_speedup"] == pytest.approx(1.03)


def test_twenty_percent_with_fifteen_percent_noise_fails() -> None:
    # Ratios 1.0, 1.02, 1.2, 1.38, 1.4: median 1.2, IQR 1.02-1.38, noise 0.36 / 2.4 = 15%.
    comparison = _comparison([1.0, 1.02, 1.2, 1.38, 1.4], [1.0] * 5)
    assert comparison.noise == pytest.approx(0.15)
    verdict = judge_performance(comparison, None)
    assert not verdict.passed
    assert verdict.reason == "speedup 1.20x (IQR 1.02-1.38x) does not clear the noise: needs > 1.30x (2 x noise 15%)"
    assert verdict.details["noise"] == pytest.approx(0.15)


def test_slower_candidate_fails() -> None:
    verdict = judge_performance(_comparison([1.0] * 4, [1.25] * 4), None)
    assert not verdict.passed
    assert verdict.reason == "speedup 0.80x (IQR 0.80-0.80x): the candidate is not faster than the original"


def test_faster_than_the_roofline_is_suspicious() -> None:
    # The candidate's bytes need 3 us at peak bandwidth; it claims 2 us.
    comparison = _comparison([0.010] * 10, [0.002] * 10)
    verdict = judge_performance(comparison, min_time_us=3.0)
    assert not verdict.passed
    assert verdict.reason.startswith(
        "suspicious: the candidate's median 2 us is below 95% of 3 us, the least time its bytes take "
        "at the measured peak bandwidth"
    )
    assert verdict.reason.endswith("(speedup 5.00x (IQR 5.00-5.00x))")
    assert verdict.details["min_time_us"] == 3.0


def test_near_the_roofline_is_allowed_by_the_slack() -> None:
    comparison = _comparison([0.010] * 10, [0.0029] * 10)  # 2.9 us >= 0.95 x 3 us
    assert judge_performance(comparison, min_time_us=3.0).passed
    assert not judge_performance(comparison, min_time_us=3.0, policy=PerformancePolicy(roofline_slack=1.0)).passed


def test_zero_candidate_time_is_suspicious() -> None:
    verdict = judge_performance(_comparison([0.01] * 3, [0.0] * 3), None)
    assert not verdict.passed and verdict.reason.startswith("suspicious: the candidate's median time is 0")


def test_policy_margin_and_noise_k() -> None:
    comparison = _comparison([1.05] * 6, [1.0] * 6)
    assert judge_performance(comparison, None).passed
    assert not judge_performance(comparison, None, PerformancePolicy(margin=0.06)).passed


def test_negative_min_time_is_rejected() -> None:
    with pytest.raises(ValueError):
        judge_performance(_comparison([1.0], [0.5]), -1.0)


def test_details_are_strict_json() -> None:
    verdict = judge_performance(_comparison([1.0, 1.02, 1.2, 1.38, 1.4], [1.0] * 5), 100.0)
    json.dumps(verdict.to_dict(), allow_nan=False)
    assert set(verdict.details) >= {"speedup", "q1", "q3", "noise", "baseline_median_us", "candidate_median_us"}


def test_end_to_end_summary() -> None:
    summary = judge_end_to_end(_comparison([1.08, 1.07, 1.09, 1.08], [1.0] * 4))
    assert summary["speedup"] == pytest.approx(1.08)
    assert summary["beyond_noise"] is True
    assert summary["rounds"] == 4 and summary["l2_flushed"] is True
    assert summary["summary"].startswith("end to end speedup 1.080x (IQR")
    json.dumps(summary, allow_nan=False)


def test_end_to_end_within_noise_says_so() -> None:
    summary = judge_end_to_end(_comparison([1.0, 1.02, 1.2, 1.38, 1.4], [1.0] * 5))
    assert summary["beyond_noise"] is False
    assert summary["summary"].endswith("(within noise)")
