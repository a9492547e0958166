"""A wide ``var_mean`` as two sums (``kernelopt.capture.rewrites.var_sums``): the values of torch's own
within float rounding, every form of its arguments the rewrite takes, what it leaves alone, and its order
after ``group_rows`` (which finds a group norm by its ``var_mean``)."""

from __future__ import annotations

import operator

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernelopt.capture.rewrites import passes
from kernelopt.capture.rewrites.group_rows import GROUP_ROWS_OPTION, rewrite_for_group_rows
from kernelopt.capture.rewrites.var_sums import VAR_SUMS_OPTION, WIDE, rewrite_for_var_sums
from kernelopt.capture.row_split import WIDE as ROW_SPLIT_WIDE

_aten = torch.ops.aten


def _rewritten(fn, *args):
    gm = make_fx(fn, tracing_mode="fake")(*args)
    count = rewrite_for_var_sums(gm.graph)
    gm.recompile()
    return gm, count


def _calls(gm: torch.fx.GraphModule, target) -> int:
    return sum(n.op == "call_function" and n.target == target for n in gm.graph.nodes)


def test_the_threshold_is_the_row_split_s() -> None:
    assert WIDE == ROW_SPLIT_WIDE


@pytest.mark.parametrize(
    ("shape", "dims", "correction", "keepdim"),
    [
        ((2, 3, 64, 96), [2, 3], 0, True),
        ((2, 3, 8192), [-1], 1, False),
        ((2, 3, 64, 96), None, 0, False),
        ((2, 4096, 3), [1], None, True),
        ((2, 4096, 3), 1, 3, False),
    ],
)
def test_each_form_gives_torch_s_values_and_leaves_no_var_mean(shape, dims, correction, keepdim) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g, dtype=torch.float64) * 5 + 100  # a large mean: Welford's case

    def fn(x):
        var, mean = torch.var_mean(x, dim=dims, correction=correction, keepdim=keepdim)
        return var * 2, mean + 1

    gm, count = _rewritten(fn, x)
    assert count == 1
    assert _calls(gm, _aten.var_mean.correction) == 0 and _calls(gm, _aten.sum.dim_IntList) == 2
    assert _calls(gm, operator.getitem) == 0
    for got, want in zip(gm(x), fn(x)):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-9)


def test_float32_deviations_are_taken_from_the_mean_not_squares_summed() -> None:
    """float32 values whose mean is 1e5 times their spread: the two-pass variance (deviations from the
    rounded mean, an error of about that rounding squared) stays within 1e-3 of float64's, where the
    sum of squares less the squared mean would have lost every digit."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 8 * 4096, generator=g) * 0.01 + 1000.0

    def fn(x):
        return torch.var_mean(x, dim=[1], correction=0, keepdim=True)

    gm, count = _rewritten(fn, x)
    assert count == 1
    (var, mean), (exact_var, exact_mean) = gm(x), torch.var_mean(x.double(), dim=[1], correction=0, keepdim=True)
    assert ((var.double() - exact_var).abs() / exact_var).max() < 1e-3
    assert ((mean.double() - exact_mean).abs() / exact_mean).max() < 1e-6
    naive = (x * x).mean(1, keepdim=True) - x.mean(1, keepdim=True) ** 2
    assert ((naive.double() - exact_var).abs() / exact_var).max() > 1e-1  # what the test would catch


def test_narrow_16_bit_and_symbolic_var_means_are_left_alone() -> None:
    narrow = torch.randn(8, WIDE - 1)
    half = torch.randn(2, WIDE, dtype=torch.bfloat16)
    for x in (narrow, half):
        gm, count = _rewritten(lambda x: torch.var_mean(x, dim=[1], correction=0), x)
        assert count == 0 and _calls(gm, _aten.var_mean.correction) == 1
    gm = make_fx(lambda x: torch.var_mean(x, dim=[1], correction=0), tracing_mode="symbolic")(torch.randn(2, WIDE))
    assert rewrite_for_var_sums(gm.graph) == 0


def test_group_rows_runs_first_whatever_the_options_order() -> None:
    """group_rows finds a group norm by its var_mean: the passes run in COMPILE_PASSES' order, so both
    change the group norm whichever option the caller named first."""
    names = list(passes.COMPILE_PASSES)
    assert names.index(GROUP_ROWS_OPTION) < names.index(VAR_SUMS_OPTION)
    _, rewrites = passes.split_options({VAR_SUMS_OPTION: True, "max_fusion_size": 8, GROUP_ROWS_OPTION: True})
    assert rewrites == [rewrite_for_group_rows, rewrite_for_var_sums]
    _, none = passes.split_options({VAR_SUMS_OPTION: False})
    assert none == []


def test_a_group_norm_in_its_groups_shape_is_one_kernel_of_two_sums() -> None:
    """Both rewrites on the GPU's group norm (the test module of group_rows): the view back after the
    weight and bias, the statistics as two sums, and the values of the graph within float rounding."""
    from test_group_rows import gpu_group_norm

    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 16, 32, 32, generator=g) * 3 + 1
    w, b = torch.rand(16, generator=g) + 0.5, torch.randn(16, generator=g)

    def fn(x, w, b):
        return gpu_group_norm(x, w, b)

    gm = make_fx(fn, tracing_mode="fake")(x, w, b)
    assert rewrite_for_group_rows(gm.graph) == 1 and rewrite_for_var_sums(gm.graph) == 1
    gm.recompile()
    assert _calls(gm, _aten.var_mean.correction) == 0
    torch.testing.assert_close(gm(x, w, b), fn(x, w, b), rtol=1e-5, atol=1e-5)
