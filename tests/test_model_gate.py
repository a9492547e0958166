"""Gate 3 (model level): relative error against float64, the 10x-of-baseline rule, degenerate flags."""

from __future__ import annotations

import json
import math

import pytest
import torch

from kernelopt.verify.model_gate import ModelGatePolicy, SeedResult, judge_model, output_stats, relative_error

NAN, INF = math.nan, math.inf


# --------------------------------------------------------------------------- relative_error


def test_relative_error_hand_computed() -> None:
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)  # norm 5
    assert relative_error(torch.tensor([3.0, 4.5]), ref) == pytest.approx(0.1)
    assert relative_error(ref.clone(), ref) == 0.0
    assert relative_error(torch.zeros(2), ref) == pytest.approx(1.0)


def test_relative_error_nan_where_reference_is_finite_is_infinite() -> None:
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert relative_error(torch.tensor([3.0, NAN]), ref) == INF
    assert relative_error(torch.tensor([INF, 4.0]), ref) == INF


def test_relative_error_non_finite_reference_must_be_matched_and_is_left_out() -> None:
    ref = torch.tensor([3.0, 4.0, NAN, -INF], dtype=torch.float64)
    assert relative_error(torch.tensor([3.0, 4.5, NAN, -INF]), ref) == pytest.approx(0.1)
    assert relative_error(torch.tensor([3.0, 4.0, 0.0, -INF]), ref) == INF
    assert relative_error(torch.tensor([3.0, 4.0, NAN, INF]), ref) == INF


def test_relative_error_zero_reference() -> None:
    ref = torch.zeros(4, dtype=torch.float64)
    assert relative_error(torch.zeros(4), ref) == 0.0
    assert relative_error(torch.full((4,), 1e-3), ref) > 1e100


def test_relative_error_chunked_matches_whole() -> None:
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(37, 11, generator=g, dtype=torch.float64)
    out = (ref + 1e-3 * torch.randn(37, 11, generator=g, dtype=torch.float64)).float().t().contiguous().t()
    whole = relative_error(out, ref)
    assert whole == pytest.approx(float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)))
    assert relative_error(out, ref, chunk_elements=5) == pytest.approx(whole, rel=1e-12)


def test_relative_error_zero_dim_empty_and_shape_mismatch() -> None:
    assert relative_error(torch.tensor(2.2), torch.tensor(2.0, dtype=torch.float64)) == pytest.approx(0.1)
    assert relative_error(torch.zeros(0), torch.zeros(0, dtype=torch.float64)) == 0.0
    with pytest.raises(ValueError, match="shape"):
        relative_error(torch.zeros(3), torch.zeros(4, dtype=torch.float64))


# --------------------------------------------------------------------------- output_stats


def test_output_stats_hand_computed() -> None:
    assert output_stats(torch.tensor([1.0, 3.0], dtype=torch.float64)) == pytest.approx(0.5)  # std 1 / mean|.| 2
    assert output_stats(torch.tensor([1.0, -1.0], dtype=torch.float64)) == pytest.approx(1.0)
    assert output_stats(torch.full((10,), 7.0, dtype=torch.float64)) == 0.0
    assert output_stats(torch.zeros(10, dtype=torch.float64)) == 0.0


def test_output_stats_ignores_non_finite_and_is_nan_for_a_single_value() -> None:
    assert output_stats(torch.tensor([1.0, 3.0, NAN, INF], dtype=torch.float64)) == pytest.approx(0.5)
    assert math.isnan(output_stats(torch.tensor(4.0, dtype=torch.float64)))
    assert math.isnan(output_stats(torch.zeros(0, dtype=torch.float64)))


def test_output_stats_chunked() -> None:
    ref = torch.arange(1000, dtype=torch.float64).reshape(10, 100)
    assert output_stats(ref, chunk_elements=7) == pytest.approx(output_stats(ref), rel=1e-12)


# --------------------------------------------------------------------------- judge_model


def _seed(seed: int, cand: float, base: float, zero: float = 1.0, spread: float = 1.0) -> SeedResult:
    return SeedResult(seed, [cand], [base], [zero], [spread])


def test_within_ten_times_the_baseline_passes() -> None:
    verdict = judge_model([_seed(0, 7.0e-4, 7.4e-5), _seed(1, 1.0e-4, 7.4e-5)])
    assert verdict.gate == "model" and verdict.passed
    assert verdict.reason == (
        "2 seed(s) x 1 output(s) within 10x of the compiled baseline's error (worst 9.46x: seed 0, output 0)"
    )
    assert verdict.details["degenerate"] is False
    assert verdict.details["worst_ratio"] == pytest.approx(7.0e-4 / 7.4e-5)


def test_eleven_times_the_baseline_fails() -> None:
    verdict = judge_model([_seed(0, 1e-4, 7.4e-5), _seed(1, 11 * 7.4e-5, 7.4e-5)])
    assert not verdict.passed
    assert verdict.reason == "seed 1, output 0: error 8.1e-4 is 11x the compiled baseline's 7.4e-5 (limit 10x)"


def test_reason_names_seed_and_output() -> None:
    result = SeedResult(3, [1e-5, 3.1e-3], [1e-5, 7.4e-5], [1.0, 1.0], [1.0, 1.0])
    verdict = judge_model([result])
    assert verdict.reason == "seed 3, output 1: error 3.1e-3 is 41.9x the compiled baseline's 7.4e-5 (limit 10x)"


def test_floor_applies_when_the_baseline_is_exact() -> None:
    assert judge_model([_seed(0, 9e-6, 0.0)]).passed  # limit 10 x 1e-6
    verdict = judge_model([_seed(0, 2e-5, 0.0)])
    assert not verdict.passed
    assert verdict.reason == (
        "seed 0, output 0: error 2e-5 is 20x the floor 1e-6 (the compiled baseline's error is 0; limit 10x)"
    )


def test_policy_is_configurable() -> None:
    policy = ModelGatePolicy(max_ratio=2.0, rel_floor=1e-3)
    assert policy.limit(0.0) == pytest.approx(2e-3)
    assert not judge_model([_seed(0, 3e-4, 1e-4)], ModelGatePolicy(max_ratio=2.0)).passed
    assert judge_model([_seed(0, 1.5e-3, 1e-4)], policy).passed


def test_all_zeros_would_pass_flags_a_degenerate_problem() -> None:
    # The reference is ~0 (L2/23-style): zeros err as little as anything else.
    verdict = judge_model([_seed(0, 0.0, 0.0, zero=0.0, spread=0.0)])
    assert verdict.passed
    assert verdict.details["degenerate"] is True
    assert verdict.reason.endswith("warning: output is near-constant/near-zero; an all-zeros output would pass")
    why = verdict.details["degenerate_outputs"][0]["why"]
    assert "all-zeros output would pass" in why and "std/mean" in why


def test_zeros_passing_a_loose_bound_is_flagged_even_with_spread() -> None:
    verdict = judge_model([_seed(0, 0.05, 0.2, zero=1.0, spread=1.0)])  # limit 2.0 > 1.0
    assert verdict.passed and verdict.details["degenerate"] is True


def test_near_constant_reference_is_flagged() -> None:
    verdict = judge_model([_seed(0, 1e-6, 1e-6, zero=1.0, spread=5e-4)])
    assert verdict.passed and verdict.details["degenerate"] is True
    assert "warning: output is near-constant" in verdict.reason
    clean = judge_model([_seed(0, 1e-6, 1e-6, zero=1.0, spread=2e-3)])
    assert clean.details["degenerate"] is False and "warning" not in clean.reason


def test_nan_spread_of_a_scalar_output_is_not_flagged() -> None:
    verdict = judge_model([_seed(0, 1e-6, 1e-6, zero=1.0, spread=NAN)])
    assert verdict.passed and verdict.details["degenerate"] is False


def test_failure_carries_the_degenerate_warning_too() -> None:
    verdict = judge_model([_seed(0, 0.5, 1e-3, zero=0.0, spread=0.0)])
    assert not verdict.passed and "warning: output is near-constant" in verdict.reason


def test_non_finite_candidate_error_fails() -> None:
    assert not judge_model([_seed(0, INF, 1e-5)]).passed
    assert not judge_model([_seed(0, NAN, 1e-5)]).passed


def test_non_finite_baseline_error_fails_closed() -> None:
    verdict = judge_model([_seed(0, 1e-5, INF)])
    assert not verdict.passed
    assert "compiled baseline's own error is inf" in verdict.reason


def test_several_failures_are_counted() -> None:
    verdict = judge_model([_seed(0, 1.0, 1e-5), _seed(1, 1.0, 1e-5), _seed(2, 1e-5, 1e-5)])
    assert verdict.reason.startswith("seed 0, output 0:") and "(2 of 3 seed-outputs failed)" in verdict.reason


def test_no_seeds_fails() -> None:
    assert not judge_model([]).passed


def test_seed_result_lists_must_align() -> None:
    with pytest.raises(ValueError, match="one entry per output"):
        SeedResult(0, [1e-5, 1e-5], [1e-5], [1.0, 1.0], [1.0, 1.0])
    SeedResult(0, [1e-5], [1e-5], [1.0])  # spread may be left out


def test_details_are_strict_json() -> None:
    verdict = judge_model([_seed(0, INF, 1e-5), _seed(1, 1e-5, NAN, spread=NAN)])
    json.dumps(verdict.to_dict(), allow_nan=False)


def test_with_real_tensors() -> None:
    g = torch.Generator().manual_seed(1)
    ref = torch.randn(256, 64, generator=g, dtype=torch.float64)
    baseline = ref.float()
    bf16 = ref.to(torch.bfloat16).float()  # precision downgrade: ~1e-3 vs ~3e-8
    zeros = torch.zeros_like(baseline)
    result = SeedResult(
        seed=0,
        candidate_errors=[relative_error(bf16, ref)],
        baseline_errors=[relative_error(baseline, ref)],
        zero_errors=[relative_error(zeros, ref)],
        ref_std_over_mean_abs=[output_stats(ref)],
    )
    verdict = judge_model([result])
    assert not verdict.passed and "the floor 1e-6" in verdict.reason
    assert verdict.details["degenerate"] is False
