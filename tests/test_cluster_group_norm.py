"""The cluster group-norm compile option (kernelopt.capture.rewrites.cluster_group_norm) and its op,
``torch.ops.kernelopt.group_norm`` (kernelopt.capture.rewrites.group_norm_op). CPU: which group norms the
rewrite hands to the op, traced from torch's own decomposition as it runs for a CUDA input (a meta tensor
takes that branch), the values (the op computes by torch off a Hopper GPU), the op's launch shapes, the
compile through Inductor and gate 1 on the call sequence it writes. The CUDA kernel itself is the GPU
test's (tests/test_gpu_group_norm.py)."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from conftest import captured_under
from torch.fx.experimental.proxy_tensor import make_fx

from kernelopt.capture import cuda_toolchain
from kernelopt.capture.rewrites import group_norm_kernel, group_norm_op
from kernelopt.capture.rewrites.cluster_group_norm import CLUSTER_GROUP_NORM_OPTION, rewrite_for_cluster_group_norm
from kernelopt.capture.rewrites.passes import OWN_OPS, split_options
from kernelopt.errors import UnsupportedEnvironment

OP = torch.ops.kernelopt.group_norm.default
EPS = 1e-5


def _decomposed(shape, groups: int, dtype=torch.float32, weight: bool = True, bias: bool = True, outputs: str = "out"):
    """torch's own decomposition of ``native_group_norm`` as it runs for a CUDA input (a meta input takes
    that branch), traced, dead code removed as Inductor's post-grad graph has it."""

    def group_norm(x, w, b):
        out, mean, rstd = torch._refs.native_group_norm(x, w, b, x.shape[0], x.shape[1], x[0, 0].numel(), groups, EPS)
        return (out, mean, rstd) if outputs == "all" else out

    channels = shape[1]
    x = torch.empty(shape, device="meta", dtype=dtype)
    w = torch.empty(channels, device="meta", dtype=dtype) if weight else None
    b = torch.empty(channels, device="meta", dtype=dtype) if bias else None
    gm = make_fx(group_norm)(x, w, b)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _calls(gm: torch.fx.GraphModule, target) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is target]


def _root(node):
    """The tensor ``node`` views (through unsqueezes and views), None for None."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        node = node.args[0]
    return node


def _values(shape, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype)
    return x, (torch.rand(shape[1], generator=g) + 0.5).to(dtype), torch.randn(shape[1], generator=g).to(dtype)


@pytest.mark.parametrize(
    ("dtype", "weight", "bias"),
    [
        (torch.float32, True, True),
        (torch.bfloat16, True, True),
        (torch.float16, True, False),
        (torch.float32, False, False),
    ],
)
def test_torchs_cuda_decomposition_becomes_one_call_with_the_same_values(
    hopper: None, dtype: torch.dtype, weight: bool, bias: bool
) -> None:
    shape, groups = (2, 8, 64, 64), 4  # groups of 2 x 4096
    gm = _decomposed(shape, groups, dtype, weight, bias)
    assert rewrite_for_cluster_group_norm(gm.graph) == 1
    gm.recompile()
    (call,) = _calls(gm, OP)
    x, w, b = (n for n in gm.graph.nodes if n.op == "placeholder")
    assert call.args[0] is x and call.args[3:] == (groups, EPS, None, None, 0.0, False)  # no epilogue
    # the weight and bias as the graph broadcast them by channel (the op reads them flat)
    assert _root(call.args[1]) is (w if weight else None) and _root(call.args[2]) is (b if bias else None)
    assert not _calls(gm, torch.ops.aten.var_mean.correction)  # the statistics are the op's
    assert list(gm.graph.nodes)[-1].args[0] is call  # the output is the op's, in the input's dtype
    xv, wv, bv = _values(shape, dtype)
    got = gm(xv, wv, bv)
    expected = F.group_norm(xv.float(), groups, wv.float() if weight else None, bv.float() if bias else None, EPS)
    assert got.dtype == dtype
    torch.testing.assert_close(got, expected.to(dtype))


def test_what_follows_the_group_norm_but_its_epilogue_stays_inductors(hopper: None) -> None:
    """A GELU is no epilogue of the op's: the op writes the group norm, Inductor what reads it."""
    shape, groups = (2, 8, 64, 64), 4

    def norm_gelu(x, w, b):
        out = torch._refs.native_group_norm(x, w, b, 2, 8, 4096, groups, EPS)[0]
        return out * torch.erf(out)

    args = [torch.empty(s, device="meta") for s in (shape, (8,), (8,))]
    gm = make_fx(norm_gelu)(*args)
    gm.graph.eliminate_dead_code()
    assert rewrite_for_cluster_group_norm(gm.graph) == 1
    gm.recompile()
    (call,) = _calls(gm, OP)
    assert {u.target for u in call.users} == {torch.ops.aten.mul.Tensor, torch.ops.aten.erf.default}
    assert call.args[5:] == (None, None, 0.0, False)
    xv, wv, bv = _values(shape, torch.float32)
    out = F.group_norm(xv, groups, wv, bv, EPS)
    torch.testing.assert_close(gm(xv, wv, bv), out * torch.erf(out))


@pytest.mark.parametrize(
    ("case", "shape", "groups", "layout"),
    [
        ("statistics read too (a training graph saves them)", (2, 8, 64, 64), 4, "all"),
        ("groups narrower than 4096", (2, 8, 16, 16), 4, "out"),
        ("groups wider than the reread form's 4 MB", (1, 32, 256, 256), 1, "out"),  # 2097152 float32
        ("groups wider than a cluster holds, not whole packs", (1, 3, 301, 301), 1, "out"),  # 271803 float32
        ("channels-last input, 8 bytes of its group a pixel", (2, 8, 64, 64), 4, "channels_last"),
    ],
)
def test_group_norms_the_op_does_not_take_are_left_alone(
    hopper: None, case: str, shape, groups: int, layout: str
) -> None:
    gm = _decomposed(shape, groups, outputs="all" if layout == "all" else "out")
    if layout == "channels_last":
        x = next(n for n in gm.graph.nodes if n.op == "placeholder")
        x.meta["val"] = torch.empty(shape, device="meta").to(memory_format=torch.channels_last)
    before = str(gm.graph)
    assert rewrite_for_cluster_group_norm(gm.graph) == 0, case
    assert str(gm.graph) == before


def test_groups_wider_than_a_cluster_holds_go_to_the_op_s_reread_form(hopper: None) -> None:
    """level1/16's groups (8 x 256 x 256 float32, 2 MB) are wider than a cluster's shared memory holds; the
    op's reread form takes them (each part read a second time from L2), so the rewrite hands them over."""
    shape, groups = (1, 8, 256, 256), 1
    gm = _decomposed(shape, groups, outputs="out")
    assert rewrite_for_cluster_group_norm(gm.graph) == 1
    gm.recompile()
    (call,) = _calls(gm, OP)
    xv, wv, bv = _values(shape, torch.float32)
    torch.testing.assert_close(gm(xv, wv, bv), F.group_norm(xv, groups, wv, bv, EPS))


def test_a_channels_last_input_of_whole_packs_a_pixel_is_handed_over_in_its_layout(hopper: None) -> None:
    """A traced channels-last input whose group is 16 bytes at each pixel (4 float32 channels) is the op's:
    its channels-last kernel reads it in place."""
    shape = (2, 32, 64, 64)
    gm = _decomposed(shape, 8, outputs="out")
    x = next(n for n in gm.graph.nodes if n.op == "placeholder")
    x.meta["val"] = torch.empty(shape, device="meta").to(memory_format=torch.channels_last)
    assert rewrite_for_cluster_group_norm(gm.graph) == 1
    (call,) = _calls(gm, OP)
    assert call.args[0] is x


def _conv_group_norm(read_twice: bool = False) -> tuple[torch.fx.GraphModule, tuple[int, ...]]:
    """A convolution with a bias, then torch's CUDA decomposition of a group norm of its output (level2/09's
    shape, small), traced on meta tensors; ``read_twice``: the convolution's output is returned as well."""
    shape = (2, 32, 64, 64)

    def conv_norm(x, w, cb):
        y = torch.ops.aten.convolution.default(x, w, cb, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        out = torch._refs.native_group_norm(y, None, None, shape[0], shape[1], 64 * 64, 8, EPS)[0]
        return (out, y) if read_twice else out

    args = (
        torch.empty(2, 4, 64, 64, device="meta"),
        torch.empty(32, 4, 3, 3, device="meta"),
        torch.empty(32, device="meta"),
    )
    gm = make_fx(conv_norm)(*args)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm, shape


def test_a_convolutions_bias_is_added_by_the_op_as_it_reads(hopper: None) -> None:
    """Inductor peels a convolution's bias off into an add of its own on the GPU, which stays a kernel of
    its own before an extern op: where the op alone reads the convolution, the bias is the op's
    ``input_bias`` and the convolution has none; the values are the same."""
    gm, _ = _conv_group_norm()
    assert rewrite_for_cluster_group_norm(gm.graph) == 1
    gm.recompile()
    (conv,) = _calls(gm, torch.ops.aten.convolution.default)
    (call,) = _calls(gm, OP)
    cb = [n for n in gm.graph.nodes if n.op == "placeholder"][2]
    assert conv.args[2] is None and call.args[0] is conv and call.args[9] is cb
    g = torch.Generator().manual_seed(0)
    x, w, bias = (
        torch.randn(2, 4, 64, 64, generator=g),
        torch.randn(32, 4, 3, 3, generator=g),
        torch.randn(32, generator=g) * 3,
    )
    want = F.group_norm(F.conv2d(x, w, bias, padding=1), 8, eps=EPS)
    torch.testing.assert_close(gm(x, w, bias), want, atol=1e-4, rtol=1e-4)


def test_a_convolution_read_by_more_than_the_group_norm_keeps_its_bias(hopper: None) -> None:
    gm, _ = _conv_group_norm(read_twice=True)
    assert rewrite_for_cluster_group_norm(gm.graph) == 1
    (conv,) = _calls(gm, torch.ops.aten.convolution.default)
    (call,) = _calls(gm, OP)
    assert conv.args[2] is not None and len(call.args) == 9


def test_the_op_adds_its_input_bias_and_checks_its_shape_on_cpu() -> None:
    x, w, b = _values((2, 8, 16, 16), torch.float32)
    input_bias = torch.linspace(-3, 3, 8)
    got = OP(x, w, b, 4, EPS, None, None, 0.0, True, input_bias)
    torch.testing.assert_close(got, F.silu(F.group_norm(x + input_bias[:, None, None], 4, w, b, EPS)))
    with pytest.raises(ValueError, match=r"input_bias of shape \(8, 1\); pass it as \(8,\)"):
        OP(x, w, b, 4, EPS, None, None, 0.0, False, input_bias[:, None])


def test_a_16_bit_group_norm_not_cast_back_is_left_alone(hopper: None) -> None:
    """A bfloat16 input normalised in float32 and read as float32 (not torch's group norm): the op's output
    is the input's dtype, so it is not the op's."""

    def float_out(x):
        xr = x.float().reshape(2, 4, 2, 4096)
        var, mean = torch.var_mean(xr, dim=[2, 3], correction=0, keepdim=True)
        return ((xr - mean) * torch.rsqrt(var + EPS)).view(2, 8, 64, 64)

    gm = make_fx(float_out)(torch.empty(2, 8, 64, 64, device="meta", dtype=torch.bfloat16))
    assert rewrite_for_cluster_group_norm(gm.graph) == 0


def test_a_layer_norm_over_the_same_shape_is_not_a_group_norm(hopper: None) -> None:
    def layer_norm_like(x):
        xr = x.reshape(2, 4, 2, 4096)
        var, mean = torch.var_mean(xr, dim=[3], correction=0, keepdim=True)  # per channel, not per group
        return ((xr - mean) * torch.rsqrt(var + EPS)).view(2, 8, 64, 64)

    gm = make_fx(layer_norm_like)(torch.empty(2, 8, 64, 64, device="meta"))
    assert rewrite_for_cluster_group_norm(gm.graph) == 0


def test_off_a_cluster_gpu_nothing_changes() -> None:
    gm = _decomposed((2, 8, 64, 64), 4)
    assert rewrite_for_cluster_group_norm(gm.graph) == 0  # a meta tensor is no sm_90 GPU


def test_without_nvcc_or_a_build_in_place_the_compile_stops_in_one_line(
    hopper: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cuda_toolchain, "nvcc_missing", lambda: "no nvcc on PATH")
    monkeypatch.setattr(group_norm_kernel, "prebuilt", lambda dtype, arch: False)
    gm = _decomposed((2, 8, 64, 64), 4)
    with pytest.raises(UnsupportedEnvironment, match=r"kernelopt.cluster_group_norm: .*no nvcc on PATH.*build-op"):
        rewrite_for_cluster_group_norm(gm.graph)
    monkeypatch.setattr(group_norm_kernel, "prebuilt", lambda dtype, arch: True)  # a build in place is enough
    assert rewrite_for_cluster_group_norm(_decomposed((2, 8, 64, 64), 4).graph) == 1


def test_launch_shapes_follow_the_probed_rule() -> None:
    """Parts of at most 65 KB (three blocks an SM), the fewest blocks that hold the group so: the suite's
    group norms' shapes as the H100 probe ran fastest (group_norm_op.PART_BYTES)."""
    assert group_norm_op.cluster_blocks(262144, 4) == 16  # level2/09: 16 x 64 KB
    assert group_norm_op.cluster_blocks(40960, 2) == 2  # level2/13 in bfloat16: 2 x 40 KB
    assert group_norm_op.cluster_blocks(524288, 4) is None  # level1/16: the reread form's (0.71x at 16 x 128 KB)
    assert group_norm_op.cluster_blocks(524288, 4, group_norm_kernel.PART_BYTES_LIMIT) == 16  # the probe's
    widest = group_norm_op.max_columns(4)
    assert group_norm_op.cluster_blocks(widest, 4) == 16 and group_norm_op.cluster_blocks(widest + 1, 4) is None
    assert group_norm_op.unsupported_shape((2, 8, 64, 64), 4, 3) == "8 channels in 3 groups"
    assert group_norm_op.unsupported_shape((2, 8, 2), 4, 4) == "2 elements a channel, fewer than a 16-byte pack"
    assert group_norm_op.unsupported_shape((1, 8, 256, 256), 4, 1) is None  # level1/16's 2 MB: the reread form's
    why = str(group_norm_op.unsupported_shape((1, 32, 256, 256), 4, 1))  # 8 MB
    assert "wider than a cluster holds (266176) and not whole 16-byte packs of at most 1048576" in why
    assert group_norm_op.unsupported_shape((1, 3, 301, 301), 4, 1) is not None  # 271803: not whole packs


def test_the_reread_form_runs_as_many_groups_at_once_as_half_of_l2_holds() -> None:
    """Each block of the reread form reads its part a second time after the cluster's barrier: the groups
    read at once must stay in L2 until then, so the op runs as many clusters at once as half the L2 holds
    groups, at least one block an SM, never more than there are groups."""
    mb = 1024 * 1024
    assert group_norm_op.reread_in_flight(512, 2 * mb, 50 * mb, 132) == 12  # level1/16 on an H100 or H200
    assert group_norm_op.reread_in_flight(512, 4 * mb, 50 * mb, 132) == 9  # 6 groups fit; 9 x 16 blocks cover 132 SMs
    assert group_norm_op.reread_in_flight(512, 4 * mb, 50 * mb, 132, blocks=8) == 17
    assert group_norm_op.reread_in_flight(5, 2 * mb, 50 * mb, 132) == 5  # every group at once
    assert group_norm_op.reread_in_flight(512, 64 * 1024, 50 * mb, 132) == 400  # narrow groups: L2 is no limit
    assert group_norm_op.reread_takes(524288, 4) and group_norm_op.reread_takes(1048576, 4)
    assert not group_norm_op.reread_takes(1048580, 4) and not group_norm_op.reread_takes(524290, 4)
    assert group_norm_op.reread_takes(524296, 2) and not group_norm_op.reread_takes(524292, 2)  # 8-element packs


def test_the_op_on_cpu_is_torchs_group_norm_and_refuses_autograd() -> None:
    x, w, b = _values((2, 8, 16, 16), torch.float32)
    torch.testing.assert_close(OP(x, w, b, 4, EPS), F.group_norm(x, 4, w, b, EPS))
    with pytest.raises(RuntimeError, match="no backward"):
        OP(x.requires_grad_(), w, b, 4, EPS)


def test_a_compile_under_the_option_calls_the_op_and_gate_1_takes_it(hopper: None) -> None:
    """An nn.GroupNorm without affine (on the CPU torch decomposes it as for a CUDA input only then)
    compiled by Inductor under the option: one call of the op, the same values, and gate 1 accepts the
    call among kernelopt's own ops."""
    torch.manual_seed(0)
    model = torch.nn.GroupNorm(4, 8, affine=False).eval()
    x = torch.randn(2, 8, 64, 64)
    artifact = captured_under(model, x, {CLUSTER_GROUP_NORM_OPTION: True})
    (graph,) = artifact.graphs
    assert graph.source_code.count("torch.ops.kernelopt.group_norm.default(") == 1, graph.source_code
    torch.testing.assert_close(artifact.compiled(x), model(x))
    assert group_norm_op.OP_NAME in OWN_OPS
    assert split_options({CLUSTER_GROUP_NORM_OPTION: True})[1]  # a rewrite of kernelopt's own


def test_a_compiled_convolution_and_group_norm_hand_the_convolutions_bias_to_the_op(hopper: None) -> None:
    """A convolution with a bias and a group norm compiled by Inductor under the option: the convolution
    runs without its bias, the op adds it, and the values are the model's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 32, 3, padding=1), torch.nn.GroupNorm(8, 32, affine=False))
    model = model.eval()
    x = torch.randn(2, 4, 64, 64)
    artifact = captured_under(model, x, {CLUSTER_GROUP_NORM_OPTION: True})
    (graph,) = artifact.graphs
    call = graph.source_code.split("torch.ops.kernelopt.group_norm.default(")[1].split("\n")[0]
    assert len(call.rstrip(")").split(", ")) == 10, call  # the input's bias its last argument
    with torch.no_grad():
        torch.testing.assert_close(artifact.compiled(x), model(x), atol=1e-4, rtol=1e-4)


def test_gate_1_refuses_the_call_sequence_doctored_around_the_op(hopper: None) -> None:
    from kernelopt.capture.call_sequence import call_source_of
    from kernelopt.verify.static_wrapper import check_static_wrapper

    model = torch.nn.GroupNorm(4, 8, affine=False).eval()
    x = torch.randn(2, 8, 64, 64)
    (graph,) = captured_under(model, x, {CLUSTER_GROUP_NORM_OPTION: True}).graphs
    (original,) = captured_under(model, x, {}).graphs
    honest = call_source_of(graph.source_code)
    verdict = check_static_wrapper(honest, original_source=original.source_code)
    assert verdict.passed, verdict.details.get("violations")
    for cheat in (
        honest.replace("group_norm.default(", "group_norm_cached.default("),  # not an op of ours
        honest.replace(
            "    return (",
            "    buf99 = torch.ops.kernelopt.group_norm.default(arg0_1, None, None, 4, 1e-05) * 2\n    return (",
        ),
    ):
        refused = check_static_wrapper(cheat, original_source=original.source_code)
        assert not refused.passed and refused.details["rule"] == "torch_op", refused.reason


GROUP_NORM_PROBLEM = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.GroupNorm(4, 8, affine=False)

    def forward(self, x):
        return torch.relu(self.norm(x))


def get_inputs():
    return [torch.randn(2, 8, 64, 64)]


def get_init_inputs():
    return []
"""


def test_the_variant_passes_the_gates_in_a_candidate_process_of_its_own(hopper: None, worker_tmp) -> None:
    """The graph candidate the option writes, judged as the graph stage judges it: gate 1 on its call
    sequence, then the candidate's own process (which must know the op) against the float64 reference
    through the model gate."""
    from conftest import graph_variant_judged

    candidate, result = graph_variant_judged(
        worker_tmp / "group_norm.py", GROUP_NORM_PROBLEM, {CLUSTER_GROUP_NORM_OPTION: True}
    )
    assert candidate is not None and "torch.ops.kernelopt.group_norm.default(" in candidate.call_source, candidate
    gates = {v["gate"]: v["passed"] for v in result["verdicts"]}
    assert gates["static"] and gates["correctness"] and gates["model"], result["verdicts"]


def test_the_option_is_a_compile_option_a_reread_variant_and_a_knob() -> None:
    from kernelopt.capture.rewrites.passes import is_compile_option
    from kernelopt.search.graph_variants import option_sets
    from kernelopt.search.knobs import KNOBS

    assert is_compile_option(CLUSTER_GROUP_NORM_OPTION) and (CLUSTER_GROUP_NORM_OPTION, True) in KNOBS
    assert {CLUSTER_GROUP_NORM_OPTION: True} in option_sets(copies_first=False, rereads_first=True)[:5]


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="needs nvcc (the CUDA toolkit), not a GPU")
@pytest.mark.parametrize("dtype", group_norm_kernel.DTYPES)
def test_the_kernel_builds_for_sm_90_without_spilling(tmp_path, dtype) -> None:
    """Each dtype's source compiles for Hopper, each form's registers few enough for the blocks an SM its
    parts are sized for (five in shared memory alone, held or one-pass, as level2/13's 40 KB parts fit, two
    where a part is partly in registers), and
    nothing spilled to local memory: both forms with parameters in float32 and, for a 16-bit input, in its
    own dtype."""
    import re
    import subprocess

    (tmp_path / "group_norm.cu").write_text(group_norm_kernel.source_for(dtype))
    built = subprocess.run(
        ["nvcc", "-O3", "-std=c++17", "-cubin", "-gencode=arch=compute_90,code=sm_90", "-Xptxas", "-v",
         "group_norm.cu", "-o", "group_norm.cubin"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    forms = re.findall(r"group_norm_bulk\S*?Li(\d+)ELb([01])EEv.*?Used (\d+) registers", built.stderr, re.S)
    kinds = 1 if dtype == torch.float32 else 2  # the parameters' dtypes
    held, one_pass, wide = (0, "0"), (0, "1"), (group_norm_kernel.REGS_WIDE, "0")
    assert sorted((int(regs), once) for regs, once, _ in forms) == sorted([held, one_pass, wide] * kinds), built.stderr
    for regs, _, registers in forms:
        assert int(registers) * group_norm_kernel.THREADS * (2 if int(regs) else 5) <= 65536, built.stderr
    # the channels-last kernel: three blocks an SM (its 64 KB parts)
    channels_last = re.findall(r"group_norm_channels_last\S*?EEv.*?Used (\d+) registers", built.stderr, re.S)
    assert len(channels_last) == kinds, built.stderr
    assert all(int(registers) * group_norm_kernel.THREADS * 3 <= 65536 for registers in channels_last), built.stderr
    # the reread form: two blocks an SM (its UNROLL packs a thread in flight in each pass)
    reread = re.findall(r"group_norm_reread\S*?EEv.*?Used (\d+) registers", built.stderr, re.S)
    assert len(reread) == kinds, built.stderr
    assert all(int(registers) * group_norm_kernel.THREADS * 2 <= 65536 for registers in reread), built.stderr
    assert re.search(r"[1-9]\d* bytes spill stores", built.stderr) is None, built.stderr


def test_the_op_takes_its_input_in_inductors_layout_and_returns_a_contiguous_output() -> None:
    """A convolution's output that Inductor lays out channels-last reaches the op so (flexible_layout: no
    copy into the traced layout, which would cost the pass the op saves in level2/09), and what the op
    returns is contiguous whatever the input's, as its fake says: an output laid out as the input failed
    Inductor's check of its strides on the H100."""
    assert torch.Tag.flexible_layout in OP.tags
    assert torch.Tag.needs_fixed_stride_order not in OP.tags
    x, w, b = _values((2, 8, 16, 16), torch.float32)
    out = OP(x.to(memory_format=torch.channels_last), w, b, 4, EPS)
    assert out.is_contiguous()
    torch.testing.assert_close(out, F.group_norm(x, 4, w, b, EPS))
    fake = group_norm_op._group_norm_fake(x.to(memory_format=torch.channels_last), w, b, 4, EPS)
    assert fake.is_contiguous()


@pytest.mark.parametrize(
    ("shape", "groups", "dtype", "why"),
    [
        ((64, 128, 128, 128), 8, torch.float32, None),  # level2/09: 16 channels a group, 64 bytes a pixel
        ((2, 64, 32, 32), 8, torch.bfloat16, None),  # 8 bfloat16 channels: one pack a pixel
        ((2, 8, 64, 64), 4, torch.float32, "not whole 16-byte packs"),  # 2 float32 channels: 8 bytes a pixel
        ((2, 40, 32, 32), 4, torch.bfloat16, "not whole 16-byte packs"),  # 10 bfloat16 channels: 20 bytes
        ((1, 64, 512, 512), 1, torch.float32, "wider than a cluster holds channels-last"),
    ],
)
def test_the_channels_last_kernel_takes_whole_packs_a_pixel_and_groups_a_cluster_holds(
    shape, groups: int, dtype: torch.dtype, why: str | None
) -> None:
    itemsize = torch.empty((), dtype=dtype).element_size()
    reason = group_norm_op.channels_last_unsupported(shape, itemsize, groups)
    assert (reason is None) if why is None else (why in reason), reason
    if why is None:
        hw, per_group = shape[2] * shape[3], shape[1] // groups
        blocks = group_norm_op.channels_last_blocks(hw, per_group, itemsize)
        part = group_norm_op.channels_last_part(hw, per_group, itemsize, blocks)
        assert part <= group_norm_op.PART_BYTES  # the fewest blocks whose parts fit
        assert (
            blocks == 1
            or group_norm_op.channels_last_part(hw, per_group, itemsize, blocks // 2) > group_norm_op.PART_BYTES
        )


def test_a_form_is_asked_by_name_and_an_unknown_one_is_refused_in_one_line() -> None:
    """The op and the C entry name the kernel's form ("held", "wide", "reread", "one-pass"; the C entry by its
    index in ``FORMS``, which the source's switch is written from), not a register count that also meant a
    form."""
    x, w, b = _values((2, 8, 16, 16), torch.float32)
    for form in ("", *group_norm_kernel.FORMS):  # on CPU every form is torch's group norm
        torch.testing.assert_close(OP(x, w, b, 4, EPS, form=form), F.group_norm(x, 4, w, b, EPS))
    with pytest.raises(ValueError, match="form 'regs'; pass one of held, wide, reread, one-pass, or '' for the op's"):
        OP(x, w, b, 4, EPS, form="regs")
    library = group_norm_kernel.Library.__new__(group_norm_kernel.Library)  # no build: refused before the launch
    with pytest.raises(ValueError, match="form 'auto'; pass one of held, wide, reread, one-pass"):
        library.run(x, torch.empty_like(x), group_norm_kernel.Epilogue(), 4, 2, EPS, "auto")
    source = group_norm_kernel.source_for(torch.float32)
    assert "__FORM_" not in source
    launches = {
        "held": "launch<P, 0, false>",
        "wide": f"launch<P, {group_norm_kernel.REGS_WIDE}, false>",
        "reread": "launch_reread<P>",
        "one-pass": "launch<P, 0, true>",
    }
    assert set(launches) == set(group_norm_kernel.FORMS)
    for index, form in enumerate(group_norm_kernel.FORMS):
        assert re.search(rf"case {index}:\s*return {re.escape(launches[form])}\(", source), form


def test_the_kernel_library_knows_channels_last_from_any_other_layout() -> None:
    x = torch.empty(2, 16, 8, 8)
    assert group_norm_kernel.is_channels_last(x.to(memory_format=torch.channels_last))
    assert not group_norm_kernel.is_channels_last(x)
    assert not group_norm_kernel.is_channels_last(x.transpose(2, 3))  # strided otherwise: the op copies it
    assert group_norm_kernel.is_channels_last(torch.empty(2, 16, 4, 4, 4).to(memory_format=torch.channels_last_3d))


def _modulated(dtype: torch.dtype, silu: str = "sigmoid", offset: bool = True):
    """A diffusion block's normalisation as level2/13 writes it (group norm, ``* (1 + scale) + shift`` by
    sample and channel from one linear layer's output, a SiLU), traced as the group norm decomposes for a
    CUDA input; ``silu``: ``sigmoid`` (``h * sigmoid(h)``), ``decomposed`` (``F.silu`` as torch decomposes
    it for Inductor, a 16-bit ``h`` in float32) or ``none``."""
    n, c, groups = 2, 8, 4

    def block(x, w, b, emb, proj):
        out = torch._refs.native_group_norm(x, w, b, n, c, 4096, groups, EPS)[0]
        if dtype != torch.float32:
            out = out.to(dtype)
        scale, shift = (emb @ proj).chunk(2, dim=1)
        h = out * ((1 + scale[:, :, None, None]) if offset else scale[:, :, None, None]) + shift[:, :, None, None]
        if silu == "sigmoid":
            return h * torch.sigmoid(h)
        if silu == "decomposed":
            h32 = h.float() if dtype != torch.float32 else h
            out = h32 / (torch.exp(-h32) + 1)
            return out.to(dtype) if dtype != torch.float32 else out
        return h

    def reference(x, w, b, emb, proj):  # in float32
        scale, shift = (emb.float() @ proj.float()).chunk(2, dim=1)
        h = F.group_norm(x.float(), groups, w.float(), b.float(), EPS)
        h = h * ((1 + scale) if offset else scale)[:, :, None, None] + shift[:, :, None, None]
        return h if silu == "none" else F.silu(h)

    shapes = [(n, c, 64, 64), (c,), (c,), (n, 16), (16, 2 * c)]
    gm = make_fx(block)(*(torch.empty(s, device="meta", dtype=dtype) for s in shapes))
    gm.graph.eliminate_dead_code()
    gm.recompile()
    g = torch.Generator().manual_seed(1)
    values = [(torch.randn(s, generator=g) * (2 if i == 0 else 0.5)).to(dtype) for i, s in enumerate(shapes)]
    return gm, reference, values


@pytest.mark.parametrize(
    ("dtype", "silu", "offset"),
    [
        (torch.bfloat16, "sigmoid", True),  # level2/13
        (torch.float32, "sigmoid", False),
        (torch.bfloat16, "decomposed", True),
        (torch.float32, "decomposed", True),
        (torch.float16, "none", True),
    ],
)
def test_a_scale_shift_and_silu_after_the_group_norm_are_the_ops_epilogue(
    hopper: None, dtype: torch.dtype, silu: str, offset: bool
) -> None:
    """What a diffusion block does after its group norm is the op's too: one call, the ``1 +`` of the
    scale its offset, the scale and shift the linear layer's own output (read in place, no kernel of
    their own), nothing of the epilogue left in the graph, and the values of the traced function."""
    gm, reference, values = _modulated(dtype, silu, offset)
    assert rewrite_for_cluster_group_norm(gm.graph) == 1
    gm.recompile()
    (call,) = _calls(gm, OP)
    scale, shift, scale_offset, act = call.args[5:]
    assert (scale_offset, act) == ((1.0 if offset else 0.0), silu != "none")
    for by_sample in (scale, shift):  # views of the linear layer's output, the 1 + not computed apart
        assert by_sample.target is torch.ops.aten.unsqueeze.default and by_sample.meta["val"].shape == (2, 8, 1, 1)
    left = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    for gone in (torch.ops.aten.sigmoid.default, torch.ops.aten.exp.default, torch.ops.aten.div.Tensor):
        assert gone not in left
    assert list(gm.graph.nodes)[-1].args[0] is call  # the op's output is the graph's
    got, expected = gm(*values), reference(*values)
    assert got.dtype == dtype
    torch.testing.assert_close(
        got.float(), expected, **({} if dtype == torch.float32 else {"atol": 3e-2, "rtol": 2e-2})
    )


def test_an_epilogue_the_op_does_not_compute_stays_inductors(hopper: None) -> None:
    """Left to Inductor: a scale by channel alone (a second affine, not a modulation), a step whose value
    something else reads too, and a step that promotes the dtype; the group norm is still the op's."""
    shape, groups = (2, 8, 64, 64), 4

    def cases(x, w, b, by_channel, by_sample, wide):
        out = torch._refs.native_group_norm(x, w, b, 2, 8, 4096, groups, EPS)[0]
        per_channel = out * by_channel[:, None, None]  # not by sample: stays
        h = out + by_sample  # read twice below: the SiLU stays
        return per_channel, h * torch.sigmoid(h), h.sum(), (out * wide)

    args = [torch.empty(s, device="meta") for s in (shape, (8,), (8,), (8,), (2, 8, 1, 1), (2, 8, 1, 1))]
    args[-1] = args[-1].double()  # float64: the product is promoted
    gm = make_fx(cases)(*args)
    gm.graph.eliminate_dead_code()
    assert rewrite_for_cluster_group_norm(gm.graph) == 1
    (call,) = _calls(gm, OP)
    assert call.args[5:] == (None, None, 0.0, False)  # no epilogue: the output has four readers


def test_a_compiled_block_writes_the_group_norm_and_its_epilogue_as_one_call(hopper: None) -> None:
    """Through Inductor (float32 on the CPU, a group norm without affine, as the CPU decomposes one for a
    CUDA input only then): the modulation and SiLU are arguments of the one call, not a kernel of their
    own, and the compiled block computes what the module does."""

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.GroupNorm(4, 8, affine=False)

        def forward(self, x, emb):
            scale, shift = emb.chunk(2, dim=1)
            h = self.norm(x) * (1 + scale[:, :, None, None]) + shift[:, :, None, None]
            return torch.nn.functional.silu(h)

    torch.manual_seed(0)
    model, x, emb = Block().eval(), torch.randn(2, 8, 64, 64), torch.randn(2, 16)
    from kernelopt.capture import capture, compat

    with compat.fresh_compile():
        artifact = capture(model, [x, emb], {CLUSTER_GROUP_NORM_OPTION: True})
    (graph,) = artifact.graphs
    source = graph.source_code
    assert source.count("torch.ops.kernelopt.group_norm.default(") == 1, source
    call = source[source.index("torch.ops.kernelopt.group_norm.default(") :].split("\n")[0]
    assert call.rstrip(")").endswith("1.0, True"), call  # scale_offset 1, SiLU
    assert "sigmoid" not in source and "exp(" not in source, source
    torch.testing.assert_close(artifact.compiled(x, emb), model(x, emb))


def test_the_op_checks_its_epilogue_and_computes_it_on_cpu() -> None:
    x, w, b = _values((2, 8, 16, 16), torch.float32)
    g = torch.Generator().manual_seed(3)
    linear = torch.randn(2, 16, generator=g)
    scale, shift = linear[:, :8, None, None], linear[:, 8:, None, None]  # strided views, as the graph's
    expected = F.silu(F.group_norm(x, 4, w, b, EPS) * (1 + scale) + shift)
    torch.testing.assert_close(OP(x, w, b, 4, EPS, scale, shift, 1.0, True), expected)
    with pytest.raises(ValueError, match=r"scale of shape \(8, 1, 1\); pass it as \(2, 8, 1, 1\)"):
        OP(x, w, b, 4, EPS, scale[0], None, 1.0, False)
    with pytest.raises(ValueError, match="a scale_offset without a scale"):
        OP(x, w, b, 4, EPS, None, shift, 1.0, False)


def test_a_scale_computed_from_the_group_norm_itself_stays_inductors(hopper: None) -> None:
    """A gate from the normalised output's own channel means (squeeze-and-excitation after a group norm)
    reads the output twice, so it is no epilogue: the op computes the group norm alone, before the gate
    that reads it (each epilogue step is read by the next alone, so no argument of the op can come from
    its own output)."""

    def gated(x, w, b):
        out = torch._refs.native_group_norm(x, w, b, 2, 8, 4096, 4, EPS)[0]
        return out * torch.sigmoid(out.mean((2, 3), keepdim=True))

    gm = make_fx(gated)(*(torch.empty(s, device="meta") for s in ((2, 8, 64, 64), (8,), (8,))))
    gm.graph.eliminate_dead_code()
    assert rewrite_for_cluster_group_norm(gm.graph) == 1
    gm.graph.lint()
    gm.recompile()
    (call,) = _calls(gm, OP)
    assert call.args[5:] == (None, None, 0.0, False)
    xv, wv, bv = _values((2, 8, 64, 64), torch.float32)
    out = F.group_norm(xv, 4, wv, bv, EPS)
    torch.testing.assert_close(gm(xv, wv, bv), out * torch.sigmoid(out.mean((2, 3), keepdim=True)))


@pytest.fixture
def planned_on_cpu(monkeypatch):
    """The op's CUDA path (:func:`group_norm_op.planned`) on CPU tensors, on an sm_90 GPU as far as it asks:
    the built kernel's checks (``Library.shape``) are the real ones, its launches are recorded; so are the
    plans made."""
    from kernelopt.capture.rewrites import row_softmax_op

    monkeypatch.setattr(row_softmax_op, "capability", lambda device: (9, 0))
    monkeypatch.setattr(group_norm_op, "l2_and_sms", lambda device: (50 * 2**20, 132))
    # asked of an input as the launch has it: the reread form's on a 16-byte boundary (else CUDA's error)
    monkeypatch.setattr(group_norm_op, "_resident", lambda x, groups, blocks: 14 if x.data_ptr() % 16 == 0 else 1 / 0)
    monkeypatch.setattr(group_norm_op, "_PLANS", {})
    monkeypatch.setattr(group_norm_op, "_HOST_UNUSED", "no C++ host path on CPU tensors")  # (its own tests')
    library = group_norm_kernel.Library.__new__(group_norm_kernel.Library)
    launches: list[tuple] = []
    library.launch = lambda x, y, params, shape, offset, silu, eps: launches.append((x, params, shape, offset, silu, eps))
    monkeypatch.setattr(group_norm_op, "launcher", lambda dtype, arch: library)
    plans: list[tuple] = []
    plan = group_norm_op.plan
    monkeypatch.setattr(group_norm_op, "plan", lambda *args: (plans.append(args), plan(*args))[1])
    return launches, plans


def _call(x, w, b, groups=4, eps=EPS, scale=None, shift=None, offset=0.0, silu=False, input_bias=None, form=""):
    return group_norm_op.planned(x, w, b, groups, eps, scale, shift, offset, silu, input_bias, 0, form, 0)


def test_a_signature_is_planned_once_and_each_call_launches_with_its_own_pointers(planned_on_cpu) -> None:
    """The op's host path is paid at every call of a compiled graph (55-90 µs on the H100 at level2/13
    before plans, against Inductor's two launches): its checks and choices are made once a signature of the
    arguments, and a call of that signature hands the kernel its own tensors, eps, offset and SiLU."""
    launches, plans = planned_on_cpu
    x, w, b = _values((2, 8, 16, 16), torch.float32)
    scale, shift = torch.randn(2, 16).chunk(2, dim=1)
    scale, shift = scale[:, :, None, None], shift[:, :, None, None]
    _call(x, w, b)
    _call(x.clone(), w, b, eps=1e-3, silu=True)
    assert len(plans) == 1 and len(launches) == 2
    (x0, _, shape0, *_), (x1, _, shape1, off1, silu1, eps1) = launches
    assert x0.data_ptr() != x1.data_ptr() and shape1 is shape0 and (off1, silu1, eps1) == (0.0, True, 1e-3)
    assert (shape0.rows, shape0.cols, shape0.hw, shape0.per_group, shape0.channels_last) == (8, 512, 256, 2, 0)
    assert shape0.form == group_norm_kernel.FORMS.index("held") and shape0.clusters == 1
    # a layout, a dtype or an epilogue of its own is a signature of its own; an offset's value is not
    _call(x.to(memory_format=torch.channels_last), w, b)  # 2 channels a group: 8 bytes a pixel, copied
    assert len(plans) == 2 and launches[-1][2].channels_last == 0 and list(group_norm_op._PLANS.values())[-1].copy
    x16, w16, b16 = _values((2, 16, 16, 16), torch.float32)  # 4 channels a group: 16 bytes a pixel, read in place
    _call(x16.to(memory_format=torch.channels_last), w16, b16)
    assert len(plans) == 3 and launches[-1][2].channels_last == 1 and not list(group_norm_op._PLANS.values())[-1].copy
    _call(x, w, b, scale=scale, shift=shift, offset=1.0)
    _call(x, w, b, scale=scale, shift=shift, offset=2.0)
    assert len(plans) == 4 and launches[-1][3] == 2.0
    assert list(launches[-1][2].strides) == [16, 1, 16, 1]  # the linear layer's output read in place
    _call(x.to(torch.bfloat16), w, b)  # float32 parameters of a bfloat16 input: read as float32
    assert len(plans) == 5 and launches[-1][2].params_float == 1


def test_what_a_signature_does_not_decide_is_asked_at_every_call(planned_on_cpu) -> None:
    """A bad call is refused at every call (nothing is planned for it); a signature torch computes is
    counted at every call, so a gate still sees each fallback; an input off a 16-byte boundary is a
    signature of its own (the reread form clones it)."""
    from collections import Counter

    from kernelopt.capture.rewrites import row_softmax_op

    launches, plans = planned_on_cpu
    x, w, b = _values((2, 8, 16, 16), torch.float32)
    for _ in range(2):
        with pytest.raises(ValueError, match="scale of shape"):
            _call(x, w, b, scale=torch.ones(2, 8), offset=1.0)
    assert len(plans) == 2 and not group_norm_op._PLANS
    before = Counter(row_softmax_op.FALLBACKS)
    for _ in range(3):
        got = _call(x.double(), w.double(), b.double())
        torch.testing.assert_close(got, F.group_norm(x, 4, w, b, EPS).double())  # torch's, in float32
    assert row_softmax_op.fallbacks_since(before) == [
        "3 call(s) computed by torch, not the kernel: kernelopt.group_norm: no build for torch.float64"
    ]
    assert len(plans) == 3 and not launches
    wide = torch.randn(1, 8, 256, 256)  # one 2 MB group: the reread form
    storage = torch.randn(wide.numel() + 1)
    off = storage[1:].view(wide.shape)  # 4 bytes past a 16-byte boundary
    _call(wide, None, None, groups=1)
    _call(off, None, None, groups=1)
    assert len(plans) == 5
    plan_aligned, plan_off = list(group_norm_op._PLANS.values())[-2:]
    assert (plan_aligned.clone, plan_off.clone) == (False, True)
    assert launches[-1][0].data_ptr() % 16 == 0 and launches[-1][2].form == group_norm_kernel.FORMS.index("reread")
    assert launches[-1][2].in_flight == 1  # one group, whatever L2 holds


def test_the_plans_kept_are_bounded(planned_on_cpu, monkeypatch) -> None:
    """A process that meets ever new shapes (a dynamic-shape caller) keeps at most ``PLANS_KEPT`` plans."""
    monkeypatch.setattr(group_norm_op, "PLANS_KEPT", 3)
    _, plans = planned_on_cpu
    for size in range(4, 12):
        x, w, b = _values((2, 8, size, 16), torch.float32)
        _call(x, w, b)
    assert len(plans) == 8 and len(group_norm_op._PLANS) <= 3


def test_parameters_already_as_the_kernel_reads_them_are_handed_over_as_they_are() -> None:
    """No call of torch's for a flat contiguous weight in the kernel's dtype, nor a scale already in it (host
    time at every call); a broadcast or other-dtype one is made so."""
    w = torch.randn(8)
    scale = torch.randn(2, 16)[:, :8, None, None]
    assert group_norm_op._flat(w, torch.float32) is w and group_norm_op._cast(scale, torch.float32) is scale
    assert group_norm_op._flat(None, torch.float32) is None and group_norm_op._cast(None, torch.float32) is None
    flat = group_norm_op._flat(w.reshape(1, 8, 1, 1), torch.bfloat16)
    assert flat is not None and flat.shape == (8,) and flat.dtype == torch.bfloat16
    view = group_norm_op._flat(w.reshape(1, 8, 1, 1), torch.float32)  # as Inductor hands it over: a view of w
    assert view is not None and view.shape == (8,) and view.data_ptr() == w.data_ptr()
    strided = group_norm_op._flat(torch.randn(16)[::2], torch.float32)  # one with gaps: made contiguous
    assert strided is not None and strided.is_contiguous() and strided.shape == (8,)
    cast = group_norm_op._cast(scale, torch.bfloat16)
    assert cast is not None and cast.dtype == torch.bfloat16
