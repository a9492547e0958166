"""The cluster-norm compile option (kernelopt.capture.rewrites.cluster_norm) and its op,
``torch.ops.kernelopt.row_l2_normalize`` (kernelopt.capture.rewrites.row_softmax_op). CPU: which row L2
normalisations the rewrite hands to the op, with what eps, the values (the op computes by torch off a
Hopper GPU), gate 1 on the call sequence Inductor writes around it. The CUDA kernel itself is the GPU
test's (tests/test_gpu_cluster_softmax.py)."""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from conftest import EXAMPLES, captured_under

from kernelopt.capture import cuda_toolchain
from kernelopt.capture.rewrites import row_softmax_kernel, row_softmax_op
from kernelopt.capture.rewrites.cluster_norm import (
    CLUSTER_NORM_BULK_OPTION,
    CLUSTER_NORM_OPTION,
    rewrite_for_cluster_norm,
)

OPTION = {CLUSTER_NORM_OPTION: True}
CALL = "torch.ops.kernelopt.row_l2_normalize.default("


class Norm(torch.nn.Module):
    def __init__(self, form: str) -> None:
        super().__init__()
        self.form = form

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if self.form == "norm":  # the suite's row-L2
            return x / torch.norm(x, p=2, dim=1, keepdim=True)
        if self.form == "vector_norm":
            return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        if self.form == "normalize":  # the norm clamped to 1e-12 and expanded
            return F.normalize(x, dim=-1)
        if self.form == "rsqrt":
            return x * torch.rsqrt((x * x).sum(-1, keepdim=True))
        if self.form == "sqrt":
            return x / (x * x).sum(-1, keepdim=True).sqrt()
        if self.form == "first_dim":
            return x / torch.norm(x, p=2, dim=0, keepdim=True)
        if self.form == "kept":  # the norm itself is an output too
            norm = torch.norm(x, p=2, dim=-1, keepdim=True)
            return x / norm, norm
        if self.form == "other":  # another tensor's norm
            return x / torch.norm(x + 1, p=2, dim=-1, keepdim=True)
        if self.form == "cube":
            return x / (x**3).sum(-1, keepdim=True).sqrt()
        if self.form == "mixed":  # a bf16 x divided by its norm rounded to float16
            return x / torch.norm(x.float(), p=2, dim=-1, keepdim=True).half()
        raise AssertionError(self.form)


def _compiled(model: torch.nn.Module, x: torch.Tensor, options: dict | None = None):
    return captured_under(model, x, OPTION if options is None else options)


@pytest.mark.parametrize(
    ("form", "arguments"),
    [
        ("norm", "(arg0_1, 0.0)"),
        ("vector_norm", "(arg0_1, 0.0)"),
        ("normalize", "(arg0_1, 1e-12)"),  # F.normalize's eps
        ("rsqrt", "(arg0_1, 0.0)"),
        ("sqrt", "(arg0_1, 0.0)"),
    ],
)
def test_each_row_normalisation_becomes_one_call_of_the_op(hopper: None, form: str, arguments: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 8192) * 3
    artifact = _compiled(Norm(form), x)
    (graph,) = artifact.graphs
    assert graph.source_code.count(CALL) == 1 and CALL + arguments.lstrip("(") in graph.source_code, graph.source_code
    assert "sqrt" not in graph.source_code and "pow" not in graph.source_code  # no norm kernel is left
    torch.testing.assert_close(artifact.compiled(x), Norm(form)(x))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    ("form", "arguments"),
    [("norm", "(arg0_1, 0.0)"), ("normalize", "(arg0_1, 1e-12)"), ("vector_norm", "(arg0_1, 0.0)")],
)
def test_a_16_bit_normalisation_is_one_call_on_its_own_rows_and_at_least_as_close(
    hopper: None, dtype: torch.dtype, form: str, arguments: str
) -> None:
    """In bf16 or fp16 Inductor's decompositions sum the squares of ``x`` cast to float32 and cast the root
    back: the op takes ``x`` itself (no float32 copy of it is written) and rounds once, so its rows are at
    least as close to the float64 ones as torch's."""
    torch.manual_seed(0)
    x = (torch.randn(4, 8192) * 3).to(dtype)
    artifact = _compiled(Norm(form), x)
    (graph,) = artifact.graphs
    assert graph.source_code.count(CALL) == 1 and CALL + arguments.lstrip("(") in graph.source_code, graph.source_code
    assert "sqrt" not in graph.source_code and "pow" not in graph.source_code
    got, torch_own = artifact.compiled(x), Norm(form)(x)
    assert got.dtype == dtype
    exact = Norm(form)(x.double())
    assert (got.double() - exact).abs().max() <= (torch_own.double() - exact).abs().max()
    torch.testing.assert_close(got, torch_own)


def test_the_suite_s_bf16_embeddings_problem_is_one_call_of_the_op(hopper: None) -> None:
    """level1/27 (bf16 ``F.normalize`` over 16384-wide rows) is the suite's row for the 16-bit form: its
    graph, at its full width, becomes one call of the op under the option."""
    from kernelopt.problem import load_problem

    problem = load_problem(EXAMPLES / "level1" / "27_normalize_embeddings_bf16.py", overrides={"batch_size": 4})
    model, inputs = problem.build_model(0, "cpu"), problem.make_inputs(0, "cpu")
    assert inputs[0].dtype == torch.bfloat16 and inputs[0].shape == (4, 16384)
    (graph,) = _compiled(model, inputs[0]).graphs
    assert graph.source_code.count(CALL) == 1 and CALL + "arg0_1, 1e-12)" in graph.source_code, graph.source_code


@pytest.mark.parametrize(
    ("form", "shape", "dtype"),
    [
        ("first_dim", (8192, 4), torch.float32),  # not over the row
        ("kept", (4, 8192), torch.float32),  # its norm read by something else
        ("other", (4, 8192), torch.float32),  # the norm of another tensor
        ("cube", (4, 8192), torch.float32),  # not a sum of squares
        ("norm", (4, 64), torch.float32),  # one program holds the row already
        ("norm", (2, 262144), torch.float32),  # wider than a cluster holds
        ("mixed", (4, 8192), torch.bfloat16),  # its norm rounded to another dtype than its own
        ("sqrt", (4, 8192), torch.float16),  # squares summed in 16 bits: rounded (in fp16, past 65504: inf)
        ("rsqrt", (4, 8192), torch.bfloat16),
    ],
)
def test_normalisations_the_kernel_does_not_compute_are_left_to_inductor(
    hopper: None, form: str, shape: tuple[int, int], dtype: torch.dtype
) -> None:
    x = torch.randn(*shape).to(dtype)
    artifact = _compiled(Norm(form), x)
    assert all(CALL not in g.source_code for g in artifact.graphs)


def test_the_bulk_option_asks_for_the_shared_memory_form_and_gate_1_takes_the_call(hopper: None) -> None:
    """``kernelopt.cluster_norm_bulk``: the op's last argument asks for each block's part in shared memory;
    gate 1 reads the call sequence around the op, and refuses it doctored."""
    from kernelopt.capture.call_sequence import call_source_of
    from kernelopt.verify.static_wrapper import check_static_wrapper

    x = torch.randn(4, 8192)
    (graph,) = _compiled(Norm("normalize"), x, {CLUSTER_NORM_BULK_OPTION: True}).graphs
    assert CALL + "arg0_1, 1e-12, True)" in graph.source_code, graph.source_code
    (original,) = _compiled(Norm("normalize"), x, {}).graphs
    honest = call_source_of(graph.source_code)
    verdict = check_static_wrapper(honest, original_source=original.source_code)
    assert verdict.passed, verdict.details.get("violations")
    for cheat in (
        honest.replace("row_l2_normalize.default(", "row_l2_normalize_cached.default("),  # not an op of ours
        honest.replace("    return (", "    buf99 = torch.ops.kernelopt.row_l2_normalize.default(arg0_1, 0.0) * 2\n    return ("),
    ):
        refused = check_static_wrapper(cheat, original_source=original.source_code)
        assert not refused.passed and refused.details["rule"] == "torch_op", refused.reason


def test_the_op_computes_what_torch_does_on_every_row_and_checks_as_an_op() -> None:
    """``x / max(||x||, eps)`` in float32, in the input's dtype: a zero row is NaN without eps and zero with
    it, a NaN stays NaN (the clamp keeps it, as torch's clamp_min does), an infinite element makes its row
    zero and itself NaN."""
    x = torch.randn(5, 5000) * 4
    x[1, :] = 0.0
    x[2, 7] = float("nan")
    x[3, 5] = float("inf")
    got = torch.ops.kernelopt.row_l2_normalize(x, 0.0)
    torch.testing.assert_close(got, x / torch.norm(x, p=2, dim=-1, keepdim=True), equal_nan=True)
    assert got[1].isnan().all() and got[2].isnan().all() and got[3, 5].isnan() and (got[3, :5] == 0).all()
    clamped = torch.ops.kernelopt.row_l2_normalize(x, 1e-12)
    torch.testing.assert_close(clamped, F.normalize(x, dim=-1), equal_nan=True)
    assert (clamped[1] == 0).all() and clamped[2].isnan().all()
    low = x.to(torch.bfloat16)
    assert torch.ops.kernelopt.row_l2_normalize(low, 0.0).dtype == torch.bfloat16
    torch.library.opcheck(torch.ops.kernelopt.row_l2_normalize.default, (torch.randn(3, 64), 0.0))
    torch.library.opcheck(torch.ops.kernelopt.row_l2_normalize.default, (torch.randn(3, 64), 1e-12, True))


def test_a_cuda_input_the_kernel_does_not_take_is_counted_under_the_op_s_name(monkeypatch) -> None:
    """The norm's fallbacks are told apart from the softmax's: counted and said with the op's name."""
    row_softmax_op._warn_fallback.cache_clear()
    before = Counter(row_softmax_op.FALLBACKS)
    with pytest.warns(UserWarning, match="kernelopt.row_l2_normalize computed by torch on a CUDA tensor, not by its kernel"):
        row_softmax_op.count_fallback("no build for torch.float64", "kernelopt.row_l2_normalize")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row_softmax_op.count_fallback("no build for torch.float64")
    assert sorted(row_softmax_op.fallbacks_since(before)) == [
        "1 call(s) computed by torch, not the kernel: kernelopt.row_l2_normalize: no build for torch.float64",
        "1 call(s) computed by torch, not the kernel: kernelopt.row_softmax: no build for torch.float64",
    ]


def test_a_machine_that_cannot_build_the_op_refuses_the_rewrite_naming_its_option(hopper: None, monkeypatch) -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from kernelopt.errors import UnsupportedEnvironment

    def norm(x: torch.Tensor) -> torch.Tensor:  # as the post-grad graph writes torch.norm's
        return x / x.pow(2).sum(-1, keepdim=True).pow(0.5)

    monkeypatch.setattr(cuda_toolchain, "nvcc_missing", lambda: "no nvcc here")
    monkeypatch.setattr(row_softmax_kernel, "prebuilt", lambda i, o, arch: False)
    traced = make_fx(norm, tracing_mode="fake")(torch.randn(4, 8192))
    with pytest.raises(UnsupportedEnvironment, match=r"^kernelopt\.cluster_norm: kernelopt's row softmax is built"):
        rewrite_for_cluster_norm(traced.graph)
    monkeypatch.setattr(row_softmax_kernel, "prebuilt", lambda i, o, arch: (i, o) == (torch.float32, torch.float32))
    assert rewrite_for_cluster_norm(make_fx(norm, tracing_mode="fake")(torch.randn(4, 8192)).graph) == 1


def test_the_options_are_compile_options_graph_variants_where_rows_are_reread_and_knobs() -> None:
    from kernelopt.capture.rewrites.passes import OWN_OPS, is_compile_option
    from kernelopt.search.graph_variants import option_sets
    from kernelopt.search.knobs import KNOBS

    for option in (CLUSTER_NORM_OPTION, CLUSTER_NORM_BULK_OPTION):
        assert is_compile_option(option) and (option, True) in KNOBS
    first = option_sets(copies_first=False, rereads_first=True)
    assert {CLUSTER_NORM_BULK_OPTION: True} in first[:5]  # the shared-memory form only: the faster
    assert {CLUSTER_NORM_OPTION: True} not in first
    assert row_softmax_op.NORM_OP_NAME in OWN_OPS


NORM_PROBLEM = """
import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def forward(self, x):
        return F.normalize(x, dim=-1) * 2.0


def get_inputs():
    return [torch.randn(4, 8192)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_variant_passes_the_gates_in_a_candidate_process_of_its_own(hopper: None, worker_tmp, dtype: str) -> None:
    """The graph candidate the option writes, judged as the graph stage judges it: gate 1 on its call
    sequence (the op's call and Inductor's kernel for what follows it), then the candidate's own process
    (which names the op, registered on import) against the float64 reference through the model gate; in
    bf16 too, where the op takes the rows without their float32 copy."""
    from conftest import graph_variant_judged

    source = NORM_PROBLEM.replace("torch.randn(4, 8192)", f"torch.randn(4, 8192, dtype=torch.{dtype})")
    candidate, result = graph_variant_judged(worker_tmp / "normalize.py", source, OPTION)
    assert candidate is not None and CALL + "arg0_1, 1e-12)" in candidate.call_source, candidate
    gates = {v["gate"]: v["passed"] for v in result["verdicts"]}
    assert gates["static"] and gates["correctness"] and gates["model"], result["verdicts"]
