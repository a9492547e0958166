"""Gate 2 (sub-kernel correctness): every rule on hand-built tensors, CPU only.

The same functions run on CUDA tensors; nothing here depends on the device.
"""

from __future__ import annotations

import math

import pytest
import torch

from kernelopt.verify.correctness import (
    bitwise_changes,
    check_case,
    combine_cases,
    compare_tensor,
    diff_tensor,
    nan_fill_,
)
from kernelopt.verify.tolerance import Tolerance
from kernelopt.verify.verdict import Verdict

NAN, INF = math.nan, math.inf


def _randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


# --------------------------------------------------------------------------- values


def test_exact_copy_matches() -> None:
    expected = _randn(64, 33)
    assert compare_tensor("out_ptr0", expected, expected.clone()) is None


def test_difference_within_float32_tolerance_matches() -> None:
    expected = torch.tensor([1.0, 2.0, -4.0])
    actual = expected * (1 + 5e-5)  # rtol 1e-4 allows 1e-4 * |x| + atol
    assert compare_tensor("out_ptr0", expected, actual) is None


def test_one_element_beyond_tolerance_names_count_and_index() -> None:
    expected = torch.zeros(64, 33)
    expected[0, 0] = 1.0  # max|original| = 1 -> atol stays 1e-5
    actual = expected.clone()
    actual[12, 7] = 0.032
    reason = compare_tensor("out_ptr0", expected, actual)
    assert reason == (
        "out_ptr0: 1 of 2112 elements differ beyond rtol=1e-4, atol=1e-5; "
        "max abs err 3.2e-2 at index (12, 7) (original 0, candidate 3.2e-2)"
    )


def test_reason_points_at_the_worst_failing_element() -> None:
    expected = torch.ones(10)
    actual = expected.clone()
    actual[2] += 1e-3
    actual[7] += 5e-3
    reason = compare_tensor("out_ptr1", expected, actual)
    assert reason is not None
    assert "2 of 10 elements" in reason and "index (7,)" in reason and "max abs err 5e-3" in reason


def test_absolute_tolerance_scales_with_the_originals_magnitude() -> None:
    expected = torch.zeros(8)
    expected[0] = 100.0  # effective atol = 1e-5 * 100 = 1e-3
    within = expected.clone()
    within[5] = 9e-4
    assert compare_tensor("out_ptr0", expected, within) is None
    beyond = expected.clone()
    beyond[5] = 2e-3
    reason = compare_tensor("out_ptr0", expected, beyond)
    assert reason is not None and "atol=1e-3 (1e-5 x max|original| 100)" in reason


def test_precision_downgrade_to_bfloat16_fails_float32_tolerance() -> None:
    expected = _randn(4096)
    downgraded = expected.to(torch.bfloat16).to(torch.float32)
    reason = compare_tensor("out_ptr0", expected, downgraded)
    assert reason is not None and "differ beyond rtol=1e-4" in reason


def test_half_precision_tolerances_apply_by_dtype() -> None:
    expected = torch.tensor([1.0, -2.0, 0.5], dtype=torch.bfloat16)
    actual = torch.tensor([1.0078125, -2.0, 0.5], dtype=torch.bfloat16)  # one bf16 ulp at 1.0
    assert compare_tensor("out_ptr0", expected, actual) is None
    assert compare_tensor("out_ptr0", expected.float(), actual.float()) is not None


def test_explicit_tolerance_overrides_the_dtype_default() -> None:
    expected = torch.tensor([1.0, 2.0])
    actual = torch.tensor([1.05, 2.0])
    assert compare_tensor("out_ptr0", expected, actual) is not None
    assert compare_tensor("out_ptr0", expected, actual, Tolerance(rtol=0.1, atol=0.0)) is None


def test_float8_outputs_compare_after_upcast() -> None:
    expected = torch.tensor([1.0, 2.0, 4.0]).to(torch.float8_e4m3fn)
    assert compare_tensor("out_ptr0", expected, expected.clone()) is None
    actual = torch.tensor([1.0, 3.0, 4.0]).to(torch.float8_e4m3fn)
    reason = compare_tensor("out_ptr0", expected, actual)
    assert reason is not None and "index (1,)" in reason


def test_complex_outputs() -> None:
    expected = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex64)
    assert compare_tensor("out_ptr0", expected, expected.clone()) is None
    actual = torch.tensor([1 + 1j, 2 - 0.5j], dtype=torch.complex64)
    reason = compare_tensor("out_ptr0", expected, actual)
    assert reason is not None and "index (1,)" in reason


# --------------------------------------------------------------------------- NaN and Inf


def test_unwritten_last_quarter_shows_as_nan_sentinel() -> None:
    expected = _randn(64, 16)
    actual = expected.clone()
    actual[48:] = NAN  # the candidate never wrote the last quarter of a NaN-filled buffer
    reason = compare_tensor("out_ptr0", expected, actual)
    assert reason == (
        "out_ptr0: 256 of 1024 elements NaN where the original wrote finite values "
        "(unwritten output?); first at index (48, 0)"
    )


def test_sentinel_fill_then_partial_write_is_caught() -> None:
    expected = _randn(1000)
    out = nan_fill_(torch.empty(1000))
    out[:750] = expected[:750]  # a "kernel" that stops at three quarters
    reason = compare_tensor("out_ptr0", expected, out)
    assert reason is not None and "250 of 1000 elements NaN" in reason and "index (750,)" in reason


def test_finite_where_the_original_has_nan() -> None:
    expected = torch.tensor([1.0, NAN, 3.0, NAN])
    actual = torch.tensor([1.0, 0.0, 3.0, NAN])
    assert compare_tensor("out_ptr0", expected, actual) == (
        "out_ptr0: 1 of 4 elements finite where the original has NaN; first at index (1,)"
    )


def test_nan_at_the_same_positions_matches() -> None:
    expected = torch.tensor([1.0, NAN, -INF, INF])
    assert compare_tensor("out_ptr0", expected, expected.clone()) is None


def test_inf_sign_mismatch() -> None:
    expected = torch.tensor([1.0, INF, 2.0])
    actual = torch.tensor([1.0, -INF, 2.0])
    assert compare_tensor("out_ptr0", expected, actual) == (
        "out_ptr0: 1 of 3 elements disagree with the original on Inf/NaN; "
        "first at index (1,): original inf, candidate -inf"
    )


def test_inf_where_the_original_is_finite_and_the_reverse() -> None:
    expected = torch.tensor([1.0, 2.0])
    assert "Inf/NaN" in (compare_tensor("o", expected, torch.tensor([1.0, INF])) or "")
    assert "Inf/NaN" in (compare_tensor("o", torch.tensor([1.0, INF]), expected) or "")
    assert "Inf/NaN" in (compare_tensor("o", torch.tensor([NAN]), torch.tensor([INF])) or "")


def test_inf_does_not_inflate_the_absolute_tolerance() -> None:
    expected = torch.tensor([INF, 0.0])
    actual = torch.tensor([INF, 1e-3])  # max finite |original| is 0 -> atol stays 1e-5
    assert compare_tensor("out_ptr0", expected, actual) is not None


# --------------------------------------------------------------------------- layout


def test_shape_mismatch() -> None:
    assert compare_tensor("out_ptr0", torch.zeros(4, 8), torch.zeros(4, 16)) == (
        "out_ptr0: shape (4, 16) differs from the original's (4, 8)"
    )


def test_dtype_mismatch() -> None:
    assert compare_tensor("out_ptr0", torch.zeros(4), torch.zeros(4, dtype=torch.float16)) == (
        "out_ptr0: dtype torch.float16 differs from the original's torch.float32"
    )


def test_stride_mismatch() -> None:
    expected = torch.zeros(4, 8)
    actual = torch.zeros(8, 4).t()
    assert compare_tensor("out_ptr0", expected, actual) == (
        "out_ptr0: strides (1, 4) differ from the original's (8, 1)"
    )


def test_strides_of_size_one_dims_do_not_matter() -> None:
    expected = torch.zeros(1, 8)
    actual = torch.zeros(100).as_strided((1, 8), (100, 1))
    assert compare_tensor("out_ptr0", expected, actual) is None


def test_non_contiguous_outputs_compare_with_matching_strides() -> None:
    base = _randn(8, 6)
    expected = base.t()
    actual = base.clone().t()
    actual[5, 7] += 1.0
    reason = compare_tensor("out_ptr0", expected, actual)
    assert reason is not None and "index (5, 7)" in reason


# --------------------------------------------------------------------------- integers and bool


def test_integers_are_compared_exactly() -> None:
    expected = torch.arange(10, dtype=torch.int32)
    assert compare_tensor("out_ptr0", expected, expected.clone()) is None
    actual = expected.clone()
    actual[4] = 5
    assert compare_tensor("out_ptr0", expected, actual) == (
        "out_ptr0: 1 of 10 elements differ (exact comparison for torch.int32); "
        "max abs err 1 at index (4,) (original 4, candidate 5)"
    )


def test_large_int64_values_differing_by_one_are_caught() -> None:
    expected = torch.tensor([2**62, 7], dtype=torch.int64)
    actual = torch.tensor([2**62 + 1, 7], dtype=torch.int64)  # equal once rounded to float64
    reason = compare_tensor("out_ptr0", expected, actual)
    assert reason is not None and "1 of 2 elements" in reason


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.uint32, torch.uint64])
def test_exact_dtypes(dtype: torch.dtype) -> None:
    expected = torch.tensor([1, 0, 1, 1]).to(dtype)
    actual = torch.tensor([1, 0, 0, 1]).to(dtype)
    reason = compare_tensor("out_ptr0", expected, actual)
    assert reason is not None and "1 of 4 elements differ" in reason and "index (2,)" in reason
    assert compare_tensor("out_ptr0", expected, expected.clone()) is None


# --------------------------------------------------------------------------- sizes and chunks


def test_zero_dim_tensors() -> None:
    assert compare_tensor("out_ptr0", torch.tensor(1.5), torch.tensor(1.5)) is None
    reason = compare_tensor("out_ptr0", torch.tensor(1.5), torch.tensor(2.5))
    assert reason is not None and "1 of 1 elements" in reason and "index ()" in reason
    reason = compare_tensor("out_ptr0", torch.tensor(1.5), torch.tensor(NAN))
    assert reason is not None and "NaN where the original wrote finite values" in reason
    assert compare_tensor("out_ptr0", torch.tensor(3), torch.tensor(4)) is not None


def test_empty_tensors() -> None:
    assert compare_tensor("out_ptr0", torch.zeros(0, 5), torch.zeros(0, 5)) is None
    assert compare_tensor("out_ptr0", torch.zeros(0, dtype=torch.int32), torch.zeros(0, dtype=torch.int32)) is None
    assert compare_tensor("out_ptr0", torch.zeros(0, 5), torch.zeros(0, 6)) is not None
    diff = diff_tensor("out_ptr0", torch.zeros(3, 0, 2), torch.zeros(3, 0, 2))
    assert diff.matched and diff.numel == 0


@pytest.mark.parametrize("chunk", [1, 7, 16, 1000, 1 << 22])
def test_chunked_comparison_gives_the_same_answer(chunk: int) -> None:
    expected = _randn(6, 5, 4)
    expected[0, 0, 0] = 50.0  # scales atol: the first pass must see it whatever the chunking
    actual = expected.clone()
    actual[3, 2, 1] += 0.1
    actual[4, 4, 3] += 0.5
    actual[5, 1:, :] = NAN
    diff = diff_tensor("out_ptr0", expected, actual, chunk_elements=chunk)
    assert diff.reason == (
        "out_ptr0: 16 of 120 elements NaN where the original wrote finite values "
        "(unwritten output?); first at index (5, 1, 0)"
    )
    assert diff.mismatched == 18
    assert diff.max_abs_err == pytest.approx(0.5, rel=1e-6)
    actual[5] = expected[5]
    diff = diff_tensor("out_ptr0", expected, actual, chunk_elements=chunk)
    assert diff.reason is not None and "2 of 120" in diff.reason and "index (4, 4, 3)" in diff.reason


def test_block_size_follows_free_device_memory() -> None:
    from kernelopt.verify._chunks import CHUNK_ELEMENTS, MAX_CHUNK_ELEMENTS, chunk_elements_for, chunk_elements_for_free

    # an eighth of the free memory for temporaries of ~16 float64 per element: free / 1024 elements
    assert chunk_elements_for_free(4 << 30) == 1 << 22  # 4 GiB free: 4 Mi elements
    assert chunk_elements_for_free((4 << 30) - 1) == 1 << 21  # a power of two, rounded down
    assert chunk_elements_for_free(100 << 30) == MAX_CHUNK_ELEMENTS == 1 << 24  # capped: 128 MiB as float64
    assert chunk_elements_for_free(64 << 20) == CHUNK_ELEMENTS == 1 << 20  # floor, even when memory is short
    assert chunk_elements_for_free(0) == CHUNK_ELEMENTS
    assert chunk_elements_for(torch.zeros(3)) == CHUNK_ELEMENTS  # off the GPU: the fixed block


def test_chunked_non_contiguous_tensors() -> None:
    expected = _randn(9, 11).t()
    actual = expected.clone().t().contiguous().t()  # same strides as expected
    actual[10, 8] = NAN
    diff = diff_tensor("out_ptr0", expected, actual, chunk_elements=4)
    assert diff.reason is not None and "first at index (10, 8)" in diff.reason


def test_diff_reports_errors_for_the_details() -> None:
    expected = torch.tensor([1.0, 2.0, 4.0])
    actual = torch.tensor([1.0, 2.0001, 4.0])
    diff = diff_tensor("out_ptr0", expected, actual)
    assert diff.matched
    assert diff.max_abs_err == pytest.approx(1e-4, rel=1e-2)
    assert diff.max_rel_err == pytest.approx(5e-5, rel=1e-2)
    assert diff.to_dict() == {
        "numel": 3,
        "mismatched": 0,
        "max_abs_err": diff.max_abs_err,
        "max_rel_err": diff.max_rel_err,
    }


# --------------------------------------------------------------------------- sentinels


def test_nan_fill_floating() -> None:
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.float8_e4m3fn, torch.complex64):
        t = torch.zeros(5, dtype=dtype)
        assert nan_fill_(t) is t
        assert torch.isnan(t.to(torch.complex128 if dtype.is_complex else torch.float64)).all()
        nan_fill_(t, alternate=True)
        assert torch.isnan(t.to(torch.complex128 if dtype.is_complex else torch.float64)).all()


def test_nan_fill_integers_and_bool() -> None:
    assert (nan_fill_(torch.zeros(3, dtype=torch.int32)) == -(2**31)).all()
    assert (nan_fill_(torch.zeros(3, dtype=torch.int32), alternate=True) == 2**31 - 1).all()
    assert (nan_fill_(torch.zeros(3, dtype=torch.uint8)) == 255).all()
    assert (nan_fill_(torch.zeros(3, dtype=torch.uint8), alternate=True) == 128).all()
    assert nan_fill_(torch.zeros(3, dtype=torch.bool)).all()
    assert not nan_fill_(torch.ones(3, dtype=torch.bool), alternate=True).any()


def test_nan_fill_non_contiguous_view_fills_only_the_view() -> None:
    base = torch.zeros(4, 4)
    nan_fill_(base[:, 1])
    assert torch.isnan(base[:, 1]).all() and (base[:, 0] == 0).all()


# --------------------------------------------------------------------------- bitwise


def test_bitwise_changes_counts_and_locates() -> None:
    before = _randn(32, 16)
    after = before.clone()
    after[3, 4] = 0.0
    after[20, 0] += 1
    assert bitwise_changes("in_ptr0", before, after) == (2, (3, 4))
    assert bitwise_changes("in_ptr0", before, after, chunk_elements=5) == (2, (3, 4))
    assert bitwise_changes("in_ptr0", before, before.clone()) == (0, None)


def test_bitwise_treats_equal_nans_as_equal_and_signed_zeros_as_different() -> None:
    a = torch.tensor([NAN, 0.0])
    assert bitwise_changes("x", a, a.clone()) == (0, None)
    assert bitwise_changes("x", a, torch.tensor([NAN, -0.0])) == (1, (1,))


def test_bitwise_complex_bool_empty_and_zero_dim() -> None:
    c = torch.tensor([1 + 2j, 3 + 4j], dtype=torch.complex64)
    assert bitwise_changes("x", c, torch.tensor([1 + 2j, 3 + 5j], dtype=torch.complex64)) == (1, (1,))
    b = torch.tensor([True, False])
    assert bitwise_changes("x", b, torch.tensor([True, True])) == (1, (1,))
    assert bitwise_changes("x", torch.zeros(0), torch.zeros(0)) == (0, None)
    assert bitwise_changes("x", torch.tensor(1.0), torch.tensor(2.0)) == (1, ())


def test_bitwise_mismatched_buffers_are_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="same buffer"):
        bitwise_changes("in_ptr0", torch.zeros(4), torch.zeros(5))


# --------------------------------------------------------------------------- one case


def _outputs(seed: int = 0) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    out = _randn(16, 32, seed=seed)
    return {"out_ptr0": (out, out.clone())}


def _inputs() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    x = _randn(16, 32, seed=7)
    return {"in_ptr0": (x, x.clone())}


def test_check_case_passes_when_everything_matches() -> None:
    rerun = {"out_ptr0": (torch.ones(3), torch.ones(3))}
    verdict = check_case("seed 2, distribution x3", _outputs(), _inputs(), rerun)
    assert isinstance(verdict, Verdict)
    assert verdict.gate == "correctness" and verdict.passed
    assert verdict.reason == "seed 2, distribution x3: 1 output(s) matched the original kernel"
    assert verdict.details["outputs"]["out_ptr0"]["max_abs_err"] == 0.0
    assert verdict.details["inputs_checked"] == ["in_ptr0"]
    assert verdict.details["rerun_checked"] == ["out_ptr0"]
    assert verdict.details["failures"] == []


def test_check_case_output_failure_is_prefixed_with_the_case() -> None:
    expected = _randn(64, 16)
    actual = expected.clone()
    actual[48:] = NAN
    verdict = check_case("seed 2, distribution x3", {"out_ptr0": (expected, actual)}, {}, None)
    assert not verdict.passed
    assert verdict.reason.startswith(
        "seed 2, distribution x3: out_ptr0: 256 of 1024 elements NaN where the original wrote finite values"
    )
    assert verdict.details["rerun_checked"] is None
    assert verdict.details["outputs"]["out_ptr0"]["mismatched"] == 256


def test_check_case_detects_input_mutation() -> None:
    x = _randn(1024, seed=3)
    after = x.clone()
    after[512:] = 0.0
    verdict = check_case("snapshot", _outputs(), {"in_ptr0": (x, x.clone()), "in_ptr1": (x, after)}, None)
    assert not verdict.passed
    assert verdict.reason == (
        "snapshot: in_ptr1 was modified by the candidate (input mutation): 512 elements changed, first at index (512,)"
    )


def test_input_mutation_is_reported_before_output_mismatches() -> None:
    expected = torch.ones(4)
    x = torch.zeros(4)
    verdict = check_case("snapshot", {"out_ptr0": (expected, expected * 2)}, {"in_ptr0": (x, x + 1)}, None)
    assert "input mutation" in verdict.reason
    assert len(verdict.details["failures"]) == 2
    assert all(f.startswith("snapshot: ") for f in verdict.details["failures"])


def test_check_case_detects_a_nondeterministic_rerun() -> None:
    first = _randn(100, seed=4)
    second = first.clone()
    second[17] = NAN  # read memory it never wrote: the sentinel shows in one run only
    verdict = check_case("seed 0, distribution randn", _outputs(), _inputs(), {"out_ptr0": (first, second)})
    assert not verdict.passed
    assert verdict.reason == (
        "seed 0, distribution randn: out_ptr0 differs between two runs on the same inputs "
        "(non-deterministic or reads uninitialised memory): 1 of 100 elements, first at index (17,)"
    )


def test_rerun_with_identical_nan_positions_passes() -> None:
    run = torch.tensor([1.0, NAN, 3.0])
    verdict = check_case("snapshot", {"out_ptr0": (run, run.clone())}, {}, {"out_ptr0": (run, run.clone())})
    assert verdict.passed


def test_check_case_without_outputs_fails() -> None:
    verdict = check_case("snapshot", {}, _inputs(), None)
    assert not verdict.passed and "no outputs were compared" in verdict.reason


def test_check_case_details_are_json_serializable() -> None:
    import json

    expected = _randn(8)
    verdict = check_case("snapshot", {"out_ptr0": (expected, expected.half())}, {}, None)
    assert not verdict.passed and "dtype" in verdict.reason
    json.dumps(verdict.to_dict(), allow_nan=False)


# --------------------------------------------------------------------------- all cases


def _case(label: str, passed: bool, err: float = 0.0) -> Verdict:
    details = {"case": label, "outputs": {"out_ptr0": {"max_abs_err": err, "max_rel_err": err / 2}}}
    reason = f"{label}: 1 output(s) matched the original kernel" if passed else f"{label}: out_ptr0: bad"
    return Verdict("correctness", passed, reason, details)


def test_combine_cases_all_pass() -> None:
    verdict = combine_cases([_case("snapshot", True, 1e-6), _case("seed 0", True, 3e-6), _case("seed 1", True)])
    assert verdict.passed and verdict.gate == "correctness"
    assert verdict.reason == "3 cases (snapshot + seeds x distributions) matched the original kernel"
    assert verdict.details["n_cases"] == 3 and verdict.details["n_failed"] == 0
    assert verdict.details["max_abs_err"] == {"out_ptr0": 3e-6}
    assert verdict.details["max_rel_err"] == {"out_ptr0": 1.5e-6}


def test_combine_cases_reports_the_first_failure_and_counts() -> None:
    verdicts = [
        _case("snapshot", True),
        _case("seed 0, distribution randn", False),
        _case("seed 1, distribution randn", True),
        _case("seed 2, distribution x3", False),
        _case("seed 2, distribution x-1", True),
    ]
    verdict = combine_cases(verdicts)
    assert not verdict.passed
    assert verdict.reason == "seed 0, distribution randn: out_ptr0: bad (2 of 5 cases failed)"
    assert [c["passed"] for c in verdict.details["cases"]] == [True, False, True, False, True]


def test_combine_no_cases_fails() -> None:
    assert not combine_cases([]).passed


def test_end_to_end_cases_from_real_comparisons() -> None:
    good = check_case("seed 0", _outputs(0), _inputs(), None)
    expected = _randn(16, 32, seed=1)
    bad = check_case("seed 1", {"out_ptr0": (expected, expected + 1)}, _inputs(), None)
    verdict = combine_cases([good, bad])
    assert not verdict.passed
    assert verdict.reason.startswith("seed 1: out_ptr0: 512 of 512 elements differ beyond rtol=1e-4")
    assert verdict.reason.endswith("(1 of 2 cases failed)")
    assert verdict.details["max_abs_err"]["out_ptr0"] == pytest.approx(1.0)
