"""Gate 1 for a wrapper-level candidate (a changed call sequence of one graph), on a real capture:
Inductor's own call passes, each cheat is refused by its rule, and new kernels only when named."""

from __future__ import annotations

import ast

import pytest
from conftest import FIXTURES
from static_cheats import assert_refused

from kernelopt.verify.static_wrapper import WRAPPER_RULES, check_static_wrapper, wrapper_facts

ORIGINAL = (FIXTURES / "inductor" / "03_transformer_block.graph0.py").read_text()


def _call_source() -> str:
    tree = ast.parse(ORIGINAL)
    runner = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Runner")
    call = next(n for n in runner.body if isinstance(n, ast.FunctionDef) and n.name == "call")
    lines = ORIGINAL.splitlines()[call.lineno - 1 : call.end_lineno]
    return "\n".join(line[4:] for line in lines) + "\n"  # dedented out of the class


HONEST = _call_source()
GELU = "        triton_poi_fused_addmm_gelu_view_7.run(buf20, arg10_1, 4096, stream=stream0)\n"
RETURN = "    return (buf22, )\n"


def _verdict(source: str, kernels=()):
    return check_static_wrapper(source, original_source=ORIGINAL, candidate_kernels=kernels)


def test_the_original_call_sequence_passes_and_its_facts_are_read() -> None:
    facts = wrapper_facts(ORIGINAL)
    assert facts.params == ("self", "args") and facts.outputs == 1
    assert facts.vendor_ops == {"mm", "bmm"} and len(facts.kernels) == 9
    verdict = _verdict(HONEST)
    assert verdict.passed, verdict.details.get("violations")


def test_a_new_kernel_runs_only_when_the_candidate_names_it() -> None:
    fused = HONEST.replace(GELU, GELU.replace("triton_poi_fused_addmm_gelu_view_7", "triton_cand_fused_gelu_0"))
    assert _verdict(fused, kernels=["triton_cand_fused_gelu_0"]).passed
    refused = _verdict(fused)
    assert not refused.passed and refused.details["rule"] == "kernel"


CHEATS = {
    # work hidden in the call sequence instead of a kernel
    "aten_call": ("torch_op", GELU, "        buf20 = torch.ops.aten.gelu(buf20)\n"),
    "tensor_arithmetic": ("torch_op", GELU, "        buf20 = buf20 * 0.5\n"),
    "in_place_method": ("torch_op", GELU, "        buf20.copy_(arg10_1)\n"),
    "indexing": ("torch_op", GELU, "        buf23 = buf20[0]\n" + GELU),
    # a cached result kept outside the call
    "global_result": ("name", RETURN, "    return (CACHED, )\n"),
    "module_attribute": ("name", GELU, "        buf20 = torch.cached_gelu\n"),
    # launches the original never makes
    "vendor_call": ("vendor", GELU, "        extern_kernels.addmm(arg10_1, buf20, buf20, out=buf20)\n"),
    "foreign_stream": ("statement", GELU, GELU.replace("stream=stream0", "stream=torch.cuda.current_stream()")),
    # statements no wrapper is made of
    "loop": ("statement", GELU, "        for _ in range(2):\n    " + GELU),
    "branch": ("statement", GELU, "        if arg10_1 is None:\n    " + GELU),
    # a launch recorded into a CUDA graph but skipped when called (or the reverse)
    "capture_branch": ("statement", GELU, "        if not torch.cuda.is_current_stream_capturing():\n    " + GELU),
    "import": ("statement", GELU, "        import os\n" + GELU),
    "global_state": ("statement", GELU, "        torch.backends.cudnn.benchmark = True\n" + GELU),
    "computed_layout": ("statement", "buf19 = empty_strided_cuda((32, 128)", "buf19 = empty_strided_cuda((32, 64 * 2)"),
    # a trusted name bound to a tensor: extern_kernels.mm(...) would then be that tensor's own mm
    "shadowed_vendor": ("statement", GELU, "        extern_kernels = buf20\n" + GELU),
    "shadowed_input": ("statement", "def call(self, args):\n    arg0_1,", "def call(self, args):\n    extern_kernels,"),
    "shadowed_kernel": ("statement", GELU, "        triton_poi_fused_addmm_gelu_view_7 = buf20\n" + GELU),
    # the graph's contract
    "extra_output": ("return", RETURN, "    return (buf22, arg2_1)\n"),
    "other_parameters": ("shape", "def call(self, args):", "def call(self, args, cache):"),
    "second_function": ("shape", "def call(self, args):", "def helper():\n    pass\ndef call(self, args):"),
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_each_cheat_is_refused_by_its_rule(name: str) -> None:
    assert_refused(_verdict, HONEST, CHEATS[name], WRAPPER_RULES)


def test_every_rule_has_a_cheat_and_bad_text_is_refused_not_raised() -> None:
    assert {rule for rule, _, _ in CHEATS.values()} | {"size", "syntax", "kernel"} == set(WRAPPER_RULES)
    assert _verdict("def call(self, args:\n").details["rule"] == "syntax"
    assert _verdict("x" * 2_000_000).details["rule"] == "size"
    with pytest.raises(ValueError, match="defines no call function"):
        check_static_wrapper(HONEST, original_source="x = 1\n")


CONV = (FIXTURES / "inductor" / "07_conv2d_bn_relu.graph0.py").read_text()
CONV_CALL = "buf2 = extern_kernels.convolution(buf0, buf1, stride=(1, 1), padding=(1, 1), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1, bias=None)"


def _conv_call() -> str:
    tree = ast.parse(CONV)
    runner = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Runner")
    call = next(n for n in runner.body if isinstance(n, ast.FunctionDef) and n.name == "call")
    return "\n".join(line[4:] for line in CONV.splitlines()[call.lineno - 1 : call.end_lineno]) + "\n"


def test_a_convolution_assigned_to_a_local_passes_as_inductor_writes_it() -> None:
    """Inductor assigns a convolution's result (``bufN = extern_kernels.convolution(..., stride=(1, 1),
    bias=None)``); gate 1 refused every graph candidate of a convolutional model before it read that form."""
    honest = _conv_call()
    assert CONV_CALL in honest
    verdict = check_static_wrapper(honest, original_source=CONV)
    assert verdict.passed, verdict.details.get("violations")
    deleted = honest.replace("buf2 = extern_kernels.convolution(buf0, buf1,", "buf2 = extern_kernels.convolution(arg2_1, buf1,")
    assert check_static_wrapper(deleted, original_source=CONV).details["rule"] == "name"  # arg2_1 was deleted above


@pytest.mark.parametrize(
    ("rule", "edit"),
    [
        ("vendor", CONV_CALL.replace("extern_kernels.convolution(", "extern_kernels.addmm(")),
        ("torch_op", CONV_CALL.replace("buf2 = extern_kernels.convolution(", "buf2 = torch.ops.aten.convolution(")),
        ("torch_op", CONV_CALL.replace("bias=None", "bias=torch.ops.aten.relu(buf1)")),
        ("torch_op", CONV_CALL.replace("stride=(1, 1)", "stride=(1, 1 * 2)")),
        ("name", CONV_CALL.replace("bias=None", "bias=CACHED_BIAS")),
    ],
)
def test_work_hidden_in_an_assigned_vendor_call_is_refused(rule: str, edit: str) -> None:
    verdict = check_static_wrapper(_conv_call().replace(CONV_CALL, edit), original_source=CONV)
    assert not verdict.passed and verdict.details["rule"] == rule, verdict.reason


@pytest.fixture(scope="module")
def attention() -> str:
    """The output module of our self-attention example as Inductor compiles it for CPU tensors: attention
    is an ATen fallback (``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default``, on the
    GPU the flash or efficient kernel) whose first output is taken as ``buf5 = buf4[0]``."""
    import torch
    from conftest import EXAMPLES

    from kernelopt.capture import capture
    from kernelopt.problem import load_problem

    small = load_problem(EXAMPLES / "level3" / "02_self_attention.py").small()
    model, inputs = small.build_model(0, torch.device("cpu")), small.make_inputs(0, torch.device("cpu"))
    return capture(model, inputs, {}).graphs[0].source_code


def test_an_attention_graph_passes_with_the_aten_fallback_it_already_calls(attention: str) -> None:
    """Gate 1 refused every graph candidate of an attention model before it read the fallback."""
    from kernelopt.capture.call_sequence import call_source_of

    facts = wrapper_facts(attention)
    (sdpa,) = facts.fallback_ops
    assert sdpa.startswith("torch.ops.aten._scaled_dot_product") and sdpa.endswith(".default")
    verdict = check_static_wrapper(call_source_of(attention), original_source=attention)
    assert verdict.passed, verdict.details.get("violations")


@pytest.mark.parametrize(
    ("rule", "old", "new"),
    [
        # an ATen op the original never calls, hidden among its fallbacks
        ("torch_op", "    buf5 = buf4[0]\n", "    buf5 = torch.ops.aten.gelu.default(buf4[0])\n"),
        # arithmetic in a fallback's argument
        ("torch_op", "scale=0.3535533905932738)", "scale=0.3535533905932738 * 2)"),
        # indexing of a buffer that is no fallback's outputs: a slice of a tensor, not an output taken
        ("torch_op", "    buf5 = buf4[0]\n", "    buf5 = buf4[0]\n    buf6 = buf3[0]\n"),
        # an output taken by a computed index
        ("torch_op", "    buf5 = buf4[0]\n", "    buf5 = buf4[len(buf4) - 3]\n"),
        # a cached result passed to the fallback
        ("name", "(buf1, buf2, buf3, scale=", "(buf1, CACHED_KEYS, buf3, scale="),
    ],
)
def test_work_hidden_around_an_aten_fallback_is_refused(attention: str, rule: str, old: str, new: str) -> None:
    from kernelopt.capture.call_sequence import call_source_of

    honest = call_source_of(attention)
    assert old in honest, honest
    verdict = check_static_wrapper(honest.replace(old, new, 1), original_source=attention)
    assert not verdict.passed and verdict.details["rule"] == rule, verdict.reason


@pytest.mark.parametrize(
    ("problem", "train"),
    [
        ("level2/07_conv2d_bn_relu.py", True),  # backward: convolution_backward's int[] and bool[] arguments
        ("level2/11_conv_transpose2d_bias_relu.py", False),  # an assigned convolution after a layout copy
        ("level3/03_transformer_block.py", True),  # attention forward and backward fallbacks
        ("level1/25_concat_rmsnorm.py", False),  # the inputs as views into the concatenated buffer
    ],
)
def test_inductors_own_call_sequences_pass_gate_1(problem: str, train: bool) -> None:
    """Every graph of the compiled model, forward and backward: what Inductor writes must pass the rules
    meant to hold its variants (the convolutions and the attention were refused before 2026-12-02)."""
    import torch
    from conftest import EXAMPLES

    from kernelopt.capture import capture
    from kernelopt.capture.call_sequence import call_source_of
    from kernelopt.problem import load_problem

    small = load_problem(EXAMPLES / problem, train=train).small()
    model, inputs = small.build_model(0, torch.device("cpu")), small.make_inputs(0, torch.device("cpu"))
    graphs = capture(model, inputs, {}).graphs
    assert len(graphs) == (2 if train else 1)
    for graph in graphs:
        verdict = check_static_wrapper(call_source_of(graph.source_code), original_source=graph.source_code)
        assert verdict.passed, (graph.index, verdict.details.get("violations"))


def test_fallbacks_through_the_aten_alias_and_their_outputs_pass_and_new_ones_do_not() -> None:
    """Sort, cumsum and a dropout's seed (``aten.randint.low_out(..., out=buf)``, through the module's
    ``aten = torch.ops.aten``) stay ATen fallbacks: Inductor's own call passes; an ATen op it never calls
    does not, however it is spelt."""
    import torch

    from kernelopt.capture import capture
    from kernelopt.capture.call_sequence import call_source_of

    class Fallbacks(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            values, order = torch.sort(x, dim=-1)
            return values * 2, order, x.cumsum(0), torch.nn.functional.dropout(x, 0.5, training=True)

    (graph,) = capture(Fallbacks(), [torch.randn(8, 16)], {}).graphs
    source = graph.source_code
    assert {"torch.ops.aten.sort.stable", "torch.ops.aten.randint.low_out"} <= wrapper_facts(source).fallback_ops
    honest = call_source_of(source)
    assert "    aten.randint.low_out(" in honest
    verdict = check_static_wrapper(honest, original_source=source)
    assert verdict.passed, verdict.details.get("violations")
    for spelt in ("aten.gelu.default", "torch.ops.aten.gelu.default"):
        cheat = honest.replace("    return (", f"    buf99 = {spelt}(buf2)\n    return (", 1)
        refused = check_static_wrapper(cheat, original_source=source)
        assert not refused.passed and refused.details["rule"] == "torch_op", refused.reason


SEMAPHORES = (
    "        semaphores_cuda_0 = empty_strided_cuda((2049, ), (1, ), torch.uint32)\n"
    "        semaphores_cuda_0.zero_()\n"
)


def test_a_cooperative_reductions_semaphores_may_be_zeroed_and_nothing_else() -> None:
    # Inductor zeroes the uint32 semaphores a cooperative reduction's programs meet at before its
    # launch: the only in-place call a call sequence may make, and only on such a buffer it allocated.
    assert _verdict(HONEST.replace(GELU, SEMAPHORES + GELU)).passed
    for cheat in (
        SEMAPHORES.replace("torch.uint32", "torch.float32"),  # an output zeroed outside any kernel
        "        buf20.zero_()\n",  # a buffer the call did not allocate as semaphores
        SEMAPHORES + "        semaphores_cuda_0 = buf20\n        semaphores_cuda_0.zero_()\n",  # rebound
        SEMAPHORES.replace(".zero_()", ".zero_(1)"),
    ):
        verdict = _verdict(HONEST.replace(GELU, cheat + GELU))
        assert not verdict.passed and verdict.details["rule"] == "torch_op", cheat
