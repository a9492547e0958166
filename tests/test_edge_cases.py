"""Gate 2's edge cases: each distribution has the property it claims, in every layout, and
gate 2 with them rejects kernels wrong only at the edges (CPU stand-ins for the kernels)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from kernelopt.capture.output_code import triton_kernel_def
from kernelopt.errors import KerneloptError
from kernelopt.problem.edges import EDGE_DISTRIBUTIONS, edge_like_layout, row_dim
from kernelopt.verify import subkernel
from kernelopt.verify._chunks import as_bits
from kernelopt.verify.cases import EDGE_CASES, kernel_cases
from kernelopt.verify.correctness import combine_cases, diff_tensor
from kernelopt.verify.verdict import Verdict

FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)

LAYOUTS: dict[str, Callable[[torch.dtype], torch.Tensor]] = {
    "contiguous": lambda d: torch.empty(6, 33, dtype=d),
    "transposed": lambda d: torch.empty(33, 6, dtype=d).t(),
    "gapped": lambda d: torch.empty(6, 40, dtype=d)[:, :33],
    "broadcast rows": lambda d: torch.empty(1, 33, dtype=d).expand(6, 33),
    "3-d permuted": lambda d: torch.empty(2, 33, 3, dtype=d).permute(0, 2, 1),
}


def _edge(t: torch.Tensor, name: str, seed: int = 1) -> torch.Tensor:
    return edge_like_layout(t, name, torch.Generator().manual_seed(seed))


def _rows(v: torch.Tensor) -> torch.Tensor:
    """``v``'s rows (the module's definition) as a 2-D tensor, one row per line."""
    dim = row_dim(v)
    if dim is None:
        return v.reshape(1, -1)
    order = [d for d in range(v.dim()) if d != dim] + [dim]
    return v.permute(order).reshape(-1, v.shape[dim])


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.equal(as_bits(a.reshape(-1)), as_bits(b.reshape(-1))))


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", EDGE_DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_layout_is_kept_exactly(dtype: torch.dtype, name: str, layout: str) -> None:
    t = LAYOUTS[layout](dtype)
    v = _edge(t, name)
    assert (v.shape, v.stride(), v.dtype, v.device, v.storage_offset()) == (
        t.shape, t.stride(), t.dtype, t.device, 0
    )


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_large_overflows_exp_in_every_row_with_mixed_signs(dtype: torch.dtype, layout: str) -> None:
    v = _edge(LAYOUTS[layout](dtype), "large")
    assert torch.isfinite(v).all()
    assert torch.isinf(torch.exp(v)).any()  # in the dtype itself
    compute = torch.float32 if dtype.itemsize < 4 else dtype  # Inductor upcasts 16-bit floats
    assert torch.isinf(torch.exp(_rows(v).to(compute))).any(dim=1).all()
    assert (v < 0).any() and (v > 0).any()
    assert v.abs().min() > 0.85 * math.log(torch.finfo(dtype).max)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_one_signed_distributions_are_strictly_one_signed_with_varied_magnitudes(
    dtype: torch.dtype, layout: str
) -> None:
    negative = _edge(LAYOUTS[layout](dtype), "all_negative")
    positive = _edge(LAYOUTS[layout](dtype), "all_positive")
    assert (negative < 0).all() and (positive > 0).all()
    for v in (negative, positive):
        rows = _rows(v).to(torch.float64).abs()
        assert (rows.amax(dim=1) > rows.amin(dim=1)).all()  # varied within each row
        if layout != "broadcast rows":  # there every row is the same memory
            assert v.abs().max() / v.abs().min() > 100  # and across rows, over decades


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nonfinite_has_a_nan_row_and_nan_plus_and_minus_inf_among_finite_values(
    dtype: torch.dtype, layout: str
) -> None:
    v = _edge(LAYOUTS[layout](dtype), "nonfinite")
    rows = _rows(v)
    if layout == "broadcast rows":  # one row in memory: its first half is the NaN run
        assert torch.isnan(rows[:, :17]).all() and not torch.isnan(rows[:, 17:]).all()
    else:
        assert torch.isnan(rows).all(dim=1).any()  # a whole NaN row
    assert torch.isnan(v).any() and torch.isposinf(v).any() and torch.isneginf(v).any()
    assert torch.isfinite(v).any()


def test_nonfinite_positions_are_the_documented_ones() -> None:
    v = _edge(torch.empty(5, 7), "nonfinite").view(-1)
    assert torch.isnan(v[:7]).all()
    step = min(7 + 1, (35 - 7) // 3)
    special = torch.arange(7, 35, step)
    assert torch.isnan(v[special[0::3]]).all()
    assert torch.isposinf(v[special[1::3]]).all() and torch.isneginf(v[special[2::3]]).all()
    others = torch.ones(35, dtype=torch.bool)
    others[:7] = False
    others[special] = False
    assert torch.isfinite(v[others]).all()


def test_nonfinite_on_a_single_row_keeps_all_three_kinds() -> None:
    v = _edge(torch.empty(8), "nonfinite")
    assert torch.isnan(v[:4]).all()
    assert torch.isposinf(v).any() and torch.isneginf(v).any()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_tiny_has_subnormals_and_both_signed_zeros_only(dtype: torch.dtype, layout: str) -> None:
    v = _edge(LAYOUTS[layout](dtype), "tiny")
    smallest_normal = torch.finfo(dtype).tiny
    zero = v == 0
    assert (zero & ~torch.signbit(v)).any() and (zero & torch.signbit(v)).any()
    subnormal = ~zero & (v.abs() < smallest_normal)
    assert subnormal.any() and (subnormal & torch.signbit(v)).any() and (subnormal & ~torch.signbit(v)).any()
    assert (v.abs() <= smallest_normal).all()
    assert (v.to(torch.float64).abs() == smallest_normal * torch.finfo(dtype).eps).any()  # the smallest subnormal


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_constant_rows_have_zero_variance_and_differ_between_rows(dtype: torch.dtype, layout: str) -> None:
    t = LAYOUTS[layout](dtype)
    rows = _rows(_edge(t, "constant")).to(torch.float64)
    assert (rows == rows[:, :1]).all()
    assert (rows.var(dim=1, correction=0) == 0).all()
    if layout != "broadcast rows":  # there every row is the same memory
        assert rows[:, 0].unique().numel() > 1


@pytest.mark.parametrize("name", EDGE_DISTRIBUTIONS)
def test_one_seed_fixes_every_bit_and_another_seed_changes_them(name: str) -> None:
    t = torch.empty(6, 40)[:, :33]
    a, b, c = _edge(t, name, 1), _edge(t, name, 1), _edge(t, name, 2)
    span = (6 - 1) * 40 + 33
    flat = [torch.as_strided(x, (span,), (1,), 0) for x in (a, b, c)]
    assert _same_bits(flat[0], flat[1])  # gaps included
    assert not _same_bits(flat[0], flat[2])


@pytest.mark.parametrize("dtype", (torch.int64, torch.int32, torch.uint8, torch.int16), ids=str)
@pytest.mark.parametrize("name", EDGE_DISTRIBUTIONS)
def test_integers_stay_within_the_snapshots_range_and_reach_both_ends(dtype: torch.dtype, name: str) -> None:
    recorded = torch.randint(3, 10, (6, 40), generator=torch.Generator().manual_seed(0)).to(dtype)[:, :33]
    v = _edge(recorded, name)
    assert (v.shape, v.stride(), v.dtype) == (recorded.shape, recorded.stride(), dtype)
    lo, hi = int(recorded.min()), int(recorded.max())
    span = torch.as_strided(v, ((6 - 1) * 40 + 33,), (1,), 0)
    assert int(span.min()) >= lo and int(span.max()) <= hi  # the gaps hold valid indices too
    assert int(v.min()) == lo and int(v.max()) == hi
    assert torch.unique(v).numel() > 2


def test_integers_at_the_dtype_limits_do_not_overflow() -> None:
    info = torch.iinfo(torch.int64)
    recorded = torch.tensor([info.min, 0, info.max])
    v = _edge(recorded, "large")
    assert int(v[0]) == info.min and int(v[-1]) == info.max
    constant = _edge(torch.full((4,), 7, dtype=torch.int32), "tiny")
    assert (constant == 7).all()


def test_bool_inputs_are_random_and_complex_inputs_keep_their_values() -> None:
    v = _edge(torch.zeros(64, dtype=torch.bool), "large")
    assert v.dtype == torch.bool and v.any() and not v.all()
    z = torch.randn(4, 3, dtype=torch.complex64)
    assert torch.equal(_edge(z, "nonfinite"), z)


def test_empty_and_one_element_tensors() -> None:
    empty = _edge(torch.empty(0, 5), "large")
    assert empty.shape == (0, 5)
    scalar = _edge(torch.tensor(1.0), "all_negative")
    assert scalar.shape == () and float(scalar) < 0


def test_an_unknown_name_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(KerneloptError, match="unknown edge-case distribution 'huge'; choose from large, "):
        _edge(torch.empty(3), "huge")


# --------------------------------------------------------------------------- the cases

REDUCE = """
@triton_heuristics.persistent_reduction(size_hints={'x': 8, 'r0_': 32}, filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_per_NAME_0', 'mutated_arg_names': []})
@triton.jit
def triton_per_NAME_0(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    pass
"""
ROWS, COLS = 8, 32


def _kernel(name: str):
    return triton_kernel_def(f"triton_per_{name}_0", REDUCE.replace("NAME", name))


@pytest.fixture(autouse=True)
def cpu_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subkernel, "launch", lambda kernel, args: kernel(args))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)


def _gate(kernel, original: Any, candidate: Any, snapshot: list[Any], edges=EDGE_CASES, seeds=(1, 2)) -> Verdict:
    """Gate 2 over every case, edges included, through the runner's own run_case."""
    cases = kernel_cases(kernel, [snapshot], seeds, edges=edges)
    return combine_cases([
        subkernel.run_case(kernel, original, candidate, label, args, alternate=i % 2 == 1)
        for i, (label, args) in enumerate(cases)
    ])


def _failed(verdict: Verdict) -> list[str]:
    return [c["case"] for c in verdict.details["cases"] if not c["passed"]]


def test_kernel_cases_keep_the_old_cases_and_add_edges_only_when_asked() -> None:
    kernel = _kernel("softmax")
    snapshot = [torch.randn(ROWS, COLS), torch.empty(ROWS, COLS), ROWS, COLS]
    plain = [label for label, _ in kernel_cases(kernel, [snapshot], (1, 2))]
    randoms = [f"seed {s}, distribution {d}" for s in (1, 2) for d in ("given", "x3", "x0.01", "neg")]
    assert plain == ["snapshot"] + randoms
    with_edges = [label for label, _ in kernel_cases(kernel, [snapshot], (1, 2), edges=EDGE_CASES)]
    assert with_edges == plain + [f"edge {e}, seed 1" for e in EDGE_CASES]
    assert EDGE_CASES == ("large", "all_negative", "all_positive", "nonfinite", "tiny", "constant")
    two = [label for label, _ in kernel_cases(kernel, [snapshot], (1,), ("neg",), edges=("large",), edge_seeds=(4, 5))]
    assert two == ["snapshot", "seed 1, distribution neg", "edge large, seed 4", "edge large, seed 5"]


def test_edge_cases_refresh_what_the_kernel_reads_and_lend_the_write_only_layout() -> None:
    """A write-only output is the snapshot's own tensor in every generated case (only its layout
    matters: the runner poisons copies), so a gigabyte output is not copied once per case."""
    kernel = _kernel("softmax")
    out = torch.full((ROWS, COLS), 5.0)
    snapshot = [torch.randn(ROWS, COLS), out, ROWS, COLS]
    cases = [c for c in kernel_cases(kernel, [snapshot], (1,), edges=("all_negative",))]
    (label, args), = [c for c in cases if "edge" in c[0]]
    assert label == "edge all_negative, seed 1"
    assert (args[0] < 0).all()
    assert args[1] is out and args[2:] == [ROWS, COLS]
    assert all(case_args[1] is out for _, case_args in cases[1:])  # the seeded cases too
    verdict = subkernel.run_subkernel_gate(kernel, softmax_stable, softmax_stable, [snapshot], (1,), edges=("all_negative",))
    assert verdict.passed and torch.equal(out, torch.full((ROWS, COLS), 5.0))  # never written


def test_an_unknown_edge_name_fails_before_any_case_is_built() -> None:
    with pytest.raises(KerneloptError, match="choose from large, all_negative"):
        kernel_cases(_kernel("softmax"), [], edges=("large", "inf"))


# --------------------------------------------------------------------------- non-finite references


def _pointwise(args) -> None:
    x, out, *_ = args
    out.copy_(x * 2)


def test_where_the_original_is_non_finite_the_candidate_must_be_non_finite_in_the_same_places() -> None:
    kernel = _kernel("double")
    snapshot = [torch.randn(ROWS, COLS), torch.empty(ROWS, COLS), ROWS, COLS]
    (label, args), = list(kernel_cases(kernel, [snapshot], (), edges=("nonfinite",)))[1:]
    reference = subkernel._prepared(kernel, args)
    _pointwise(reference)
    expected = reference[1]
    assert torch.isnan(expected).any() and torch.isposinf(expected).any() and torch.isneginf(expected).any()

    def honest(a) -> None:
        a[1].copy_(a[0] + a[0])

    def drops_nan(a) -> None:
        a[1].copy_((a[0] * 2).nan_to_num(nan=0.0, posinf=math.inf, neginf=-math.inf))

    def clamps_inf(a) -> None:
        a[1].copy_((a[0] * 2).clamp(-1e30, 1e30))

    def flips_inf(a) -> None:
        y = a[0] * 2
        a[1].copy_(torch.where(torch.isinf(y), -y, y))

    assert subkernel.run_case(kernel, _pointwise, honest, label, args).passed
    reasons = {f.__name__: subkernel.run_case(kernel, _pointwise, f, label, args).reason
               for f in (drops_nan, clamps_inf, flips_inf)}
    assert "finite where the original has NaN" in reasons["drops_nan"]
    assert "disagree with the original on Inf/NaN" in reasons["clamps_inf"]
    assert "disagree with the original on Inf/NaN" in reasons["flips_inf"]
    # the comparison itself, on the reference alone: NaN equals NaN, inf equals the same inf
    assert diff_tensor("out_ptr0", expected, expected.clone()).matched


# --------------------------------------------------------------------------- kernels wrong at the edges


def softmax(args) -> None:
    x, out, *_ = args
    out.copy_(torch.softmax(x.float(), dim=-1))


def softmax_stable(args) -> None:
    x, out, *_ = args
    x = x.float()  # 16-bit inputs are computed in float32, as Inductor does
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    out.copy_(e / e.sum(dim=-1, keepdim=True))


def softmax_without_max(args) -> None:
    x, out, *_ = args
    e = torch.exp(x.float())
    out.copy_(e / e.sum(dim=-1, keepdim=True))


def row_max(args) -> None:
    x, out, *_ = args
    out.copy_(x.amax(dim=-1))


def _running_max(x: torch.Tensor, init: float) -> torch.Tensor:
    """A max written as a kernel's loop would: ``m = where(v > m, v, m)``, which drops NaN."""
    m = torch.full(x.shape[:-1], init, dtype=x.dtype)
    for j in range(x.shape[-1]):
        m = torch.where(x[..., j] > m, x[..., j], m)
    return m


def row_max_honest_loop(args) -> None:
    x, out, *_ = args
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    for j in range(x.shape[-1]):
        v = x[..., j]
        m = torch.where((v > m) | torch.isnan(v), v, m)  # triton_helpers.maximum propagates NaN
    out.copy_(m)


def row_max_drops_nan(args) -> None:
    x, out, *_ = args
    out.copy_(_running_max(x, -math.inf))


def row_max_from_zero(args) -> None:
    x, out, *_ = args
    out.copy_(_running_max(x, 0.0))


def _snapshot(dtype: torch.dtype, *out_shape: int) -> list[Any]:
    x = torch.randn(ROWS, COLS, generator=torch.Generator().manual_seed(0)).to(dtype)
    return [x, torch.empty(*out_shape, dtype=dtype), ROWS, COLS]


def _softmax_snapshot(dtype: torch.dtype) -> list[Any]:
    return _snapshot(dtype, ROWS, COLS)


def _max_snapshot(dtype: torch.dtype) -> list[Any]:
    return _snapshot(dtype, ROWS)


GATE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@pytest.mark.parametrize("dtype", GATE_DTYPES, ids=str)
def test_honest_stand_ins_pass_every_edge_case(dtype: torch.dtype) -> None:
    softmax_verdict = _gate(_kernel("softmax"), softmax, softmax_stable, _softmax_snapshot(dtype))
    assert softmax_verdict.passed, softmax_verdict.reason
    max_verdict = _gate(_kernel("max"), row_max, row_max_honest_loop, _max_snapshot(dtype))
    assert max_verdict.passed, max_verdict.reason
    assert softmax_verdict.details["n_cases"] == max_verdict.details["n_cases"] == 1 + 2 * 4 + len(EDGE_CASES)


@pytest.mark.parametrize(
    ("kernel", "original", "candidate", "snapshot", "caught_by"),
    [
        ("softmax", softmax, softmax_without_max, _softmax_snapshot, "edge large, seed 1"),
        ("max", row_max, row_max_drops_nan, _max_snapshot, "edge nonfinite, seed 1"),
        ("max", row_max, row_max_from_zero, _max_snapshot, "edge all_negative, seed 1"),
    ],
    ids=["softmax without max subtraction", "max dropping NaN", "max initialised at 0"],
)
@pytest.mark.parametrize("dtype", GATE_DTYPES, ids=str)
def test_gate_two_with_edges_rejects_kernels_wrong_only_at_the_edges(
    kernel: str, original: Any, candidate: Any, snapshot: Callable[[torch.dtype], list[Any]], caught_by: str,
    dtype: torch.dtype,
) -> None:
    k = _kernel(kernel)
    without_edges = _gate(k, original, candidate, snapshot(dtype), edges=())
    assert without_edges.passed  # the snapshot and the random cases never see the edge
    verdict = _gate(k, original, candidate, snapshot(dtype))
    assert not verdict.passed
    failed = _failed(verdict)
    assert caught_by in failed and all(case.startswith("edge ") for case in failed)
    assert "out_ptr0" in verdict.reason


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_on_cuda_the_same_properties_hold_and_a_seed_fixes_the_bits(dtype: torch.dtype) -> None:
    t = torch.empty(6, 40, dtype=dtype, device="cuda")[:, :33]

    def edge(name: str, seed: int = 1) -> torch.Tensor:
        return edge_like_layout(t, name, torch.Generator(device="cuda").manual_seed(seed))

    for name in EDGE_DISTRIBUTIONS:
        v = edge(name)
        assert (v.shape, v.stride(), v.dtype, v.device.type) == (t.shape, t.stride(), dtype, "cuda")
        assert _same_bits(v, edge(name))
    assert torch.isinf(torch.exp(_rows(edge("large")).float())).any(dim=1).all()
    assert (edge("all_negative") < 0).all() and (edge("all_positive") > 0).all()
    nonfinite = edge("nonfinite")
    assert torch.isnan(_rows(nonfinite)).all(dim=1).any()
    assert torch.isposinf(nonfinite).any() and torch.isneginf(nonfinite).any()
    tiny = edge("tiny")
    assert (~(tiny == 0) & (tiny.abs() < torch.finfo(dtype).tiny)).any()  # subnormals survive on the device
    assert ((tiny == 0) & torch.signbit(tiny)).any()
    rows = _rows(edge("constant")).double()
    assert (rows.var(dim=1, correction=0) == 0).all()
    ints = edge_like_layout(torch.randint(3, 10, (6, 33), device="cuda"), "large",
                            torch.Generator(device="cuda").manual_seed(1))
    assert int(ints.min()) == 3 and int(ints.max()) == 9
