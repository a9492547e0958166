"""The cluster-softmax compile option (kernelopt.capture.rewrites.cluster_softmax) and its op
(kernelopt.capture.rewrites.row_softmax_op). CPU: which softmaxes the rewrite hands to the op, with what scale
and casts, the values (the op computes by torch off a Hopper GPU), a training step, gate 1 on the call
sequence Inductor writes around the op. The CUDA kernel itself is the GPU test's."""

from __future__ import annotations

import shutil
from collections import Counter
from types import SimpleNamespace

import pytest
import torch
from conftest import captured_under

from kernelopt.capture import compat, cuda_toolchain
from kernelopt.capture.rewrites import cluster_softmax, row_softmax_kernel, row_softmax_op
from kernelopt.capture.rewrites.cluster_softmax import CLUSTER_SOFTMAX_OPTION

OPTION = {CLUSTER_SOFTMAX_OPTION: True}
CALL = "torch.ops.kernelopt.row_softmax.default("


class Softmax(torch.nn.Module):
    def __init__(self, form: str) -> None:
        super().__init__()
        self.form = form

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.form == "softmax":
            return torch.softmax(x, dim=1)
        if self.form == "temperature":
            return torch.log_softmax(x / 0.7, dim=-1)
        if self.form == "upcast":
            return torch.log_softmax(x.float(), dim=-1)
        if self.form == "round_trip":
            return torch.softmax(x.float() * 0.5, dim=-1).to(x.dtype)
        if self.form == "first_dim":
            return torch.softmax(x, dim=0)
        if self.form == "shared":
            e = torch.exp(x - x.amax(dim=-1, keepdim=True))
            return e / e.sum(dim=-1, keepdim=True) + e
        if self.form == "logsumexp":  # logits normalised by their logsumexp (token log-probabilities)
            y = x.float()
            return y - torch.logsumexp(y, dim=-1, keepdim=True)
        if self.form == "logsumexp_temperature":
            y = x / 0.7
            return y - torch.logsumexp(y, dim=-1, keepdim=True)
        if self.form == "logsumexp_kept":  # the logsumexp itself is an output too
            y = x / 0.7
            lse = torch.logsumexp(y, dim=-1, keepdim=True)
            return y - lse, lse
        raise AssertionError(self.form)


def _compiled(model: torch.nn.Module, x: torch.Tensor, options: dict | None = None):
    return captured_under(model, x, OPTION if options is None else options)


@pytest.mark.parametrize(
    ("form", "dtype", "arguments"),
    [
        ("softmax", torch.float32, "(arg0_1, 1.0, False, False)"),
        ("temperature", torch.float32, "(arg0_1, 1.4285714285714286, True, False)"),
        ("upcast", torch.bfloat16, "(arg0_1, 1.0, True, True)"),  # reads bf16, writes float32
        ("round_trip", torch.bfloat16, "(arg0_1, 0.5, False, False)"),  # reads and writes bf16
        ("logsumexp", torch.bfloat16, "(arg0_1, 1.0, True, True, True)"),  # y - logsumexp(y), float32 out
        ("logsumexp_temperature", torch.float32, "(arg0_1, 1.4285714285714286, True, False, True)"),
    ],
)
def test_each_softmax_form_becomes_one_call_that_takes_in_its_scale_and_casts(
    hopper: None, form: str, dtype: torch.dtype, arguments: str
) -> None:
    torch.manual_seed(0)
    x = (torch.randn(4, 8192) * 3).to(dtype)
    artifact = _compiled(Softmax(form), x)
    (graph,) = artifact.graphs
    assert graph.source_code.count(CALL) == 1
    assert CALL + arguments.lstrip("(") in graph.source_code, graph.source_code
    assert "amax" not in graph.source_code and "exp" not in graph.source_code  # no softmax kernel is left
    assert artifact.options == OPTION
    got, want = artifact.compiled(x), Softmax(form)(x)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    ("form", "dtype", "arguments"),
    [
        ("temperature", torch.float32, "(arg0_1, 1.4285714285714286, True, False, False, True)"),
        ("logsumexp", torch.bfloat16, "(arg0_1, 1.0, True, True, True, True)"),
    ],
)
def test_the_bulk_option_asks_the_op_for_its_shared_memory_form(
    hopper: None, form: str, dtype: torch.dtype, arguments: str
) -> None:
    """``kernelopt.cluster_softmax_bulk``: the same rewrite, the op's last argument asking for each block's
    part in shared memory; the values are torch's (the op computes CPU tensors by torch)."""
    from kernelopt.capture.call_sequence import call_source_of
    from kernelopt.capture.rewrites.cluster_softmax import CLUSTER_SOFTMAX_BULK_OPTION
    from kernelopt.verify.static_wrapper import check_static_wrapper

    x = (torch.randn(4, 8192) * 3).to(dtype)
    artifact = _compiled(Softmax(form), x, {CLUSTER_SOFTMAX_BULK_OPTION: True})
    (graph,) = artifact.graphs
    assert graph.source_code.count(CALL) == 1 and CALL + arguments.lstrip("(") in graph.source_code, graph.source_code
    torch.testing.assert_close(artifact.compiled(x), Softmax(form)(x))
    (original,) = _compiled(Softmax(form), x, {}).graphs  # gate 1 reads the six-argument call as the others
    verdict = check_static_wrapper(call_source_of(graph.source_code), original_source=original.source_code)
    assert verdict.passed, verdict.details.get("violations")


def test_the_shared_memory_form_takes_the_fewest_blocks_whose_parts_leave_an_sm_two() -> None:
    """A block's part of the row at most BULK_PART_BYTES (112 KB: two blocks an SM), as the row is stored."""
    assert row_softmax_op.bulk_blocks(16384, 4) == 1  # 64 KB: no cluster at all
    assert row_softmax_op.bulk_blocks(50257, 4) == 2  # 196 KB in two parts of 98 KB
    assert row_softmax_op.bulk_blocks(128256, 2) == 4  # token log-probs from bf16: four parts of 63 KB
    assert row_softmax_op.bulk_blocks(131072, 4) == 8 and row_softmax_op.bulk_blocks(262144, 4) is None
    wide = torch.empty(2, 262144)
    assert row_softmax_op.blocks_for(wide, True) is None and row_softmax_op.blocks_for(wide.bfloat16(), True) == 8


def test_the_joint_graph_form_of_a_temperature_is_taken_in_whole(hopper: None) -> None:
    """torch 2.11 leaves ``log_softmax(x / 0.7)`` as ``(x*1 - max(x*1)) * c`` minus its log-sum: the
    online-softmax rewrite writes it as ``y - max(y)``, ``y = (x*1)*c``, and the op must take the input
    itself with the product of the scales, or a kernel writes ``x*1`` out for it (on the H200 that kept
    the variant at 1.006x)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from kernelopt.capture.rewrites.cluster_softmax import rewrite_for_cluster_softmax

    def joint_graph_form(x: torch.Tensor) -> torch.Tensor:
        x1 = x * 1
        stable = (x1 - torch.amax(x1, dim=-1, keepdim=True)) * 1.4285714285714286
        return stable - torch.log(torch.exp(stable).sum(dim=-1, keepdim=True))

    gm = make_fx(joint_graph_form, tracing_mode="fake")(torch.randn(4, 8192))
    assert rewrite_for_cluster_softmax(gm.graph) == 1
    gm.recompile()
    (call,) = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert call.target is torch.ops.kernelopt.row_softmax.default
    assert call.args[0].op == "placeholder" and call.args[1:] == (1.4285714285714286, True, False)
    x = torch.randn(4, 8192)
    torch.testing.assert_close(gm(x), torch.log_softmax(x / 0.7, dim=-1))


@pytest.mark.parametrize(
    ("form", "columns"),
    [
        ("softmax", row_softmax_op.MIN_COLUMNS - 1),  # one program's registers hold the row already
        ("softmax", row_softmax_op.MAX_COLUMNS + 1),  # more than a cluster holds
        ("first_dim", 8192),  # not over the last dimension
        ("shared", 8192),  # its exponentials are read besides the softmax
        ("logsumexp_kept", 8192),  # its logsumexp is read besides the normalised logits
    ],
)
def test_softmaxes_the_kernel_does_not_compute_are_left_to_inductor(hopper: None, form: str, columns: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, columns) if form != "first_dim" else torch.randn(columns, 3)
    artifact = _compiled(Softmax(form), x)
    assert all(CALL not in g.source_code for g in artifact.graphs)
    # Inductor's own CPU code, whose vectorised exp differs from eager's by up to about 1e-4 (CI read
    # 1.5e-4 relative on the shared exponentials of one random draw)
    torch.testing.assert_close(artifact.compiled(x), Softmax(form)(x), rtol=1e-3, atol=1e-4)
    if form == "logsumexp_kept":
        assert all("row_softmax" not in g.source_code for g in artifact.graphs)


def test_a_machine_that_cannot_build_the_op_refuses_the_rewrite_at_the_compile(hopper: None, monkeypatch) -> None:
    """pip's PyTorch on a GPU machine without the CUDA toolkit: the op could never build its kernel, so a
    graph the rewrite would change fails to compile with what to install (a graph variant then says so,
    and no candidate process is spent on it); a graph with nothing to rewrite compiles as it is."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from kernelopt.capture.rewrites.cluster_softmax import rewrite_for_cluster_softmax
    from kernelopt.errors import UnsupportedEnvironment

    no_nvcc = "no nvcc at /opt/cuda/bin/nvcc (PyTorch's CUDA_HOME is /opt/cuda): install the CUDA toolkit there or set CUDA_HOME"
    monkeypatch.setattr(cuda_toolchain, "nvcc_missing", lambda: no_nvcc)
    monkeypatch.setattr(row_softmax_kernel, "prebuilt", lambda i, o, arch: False)  # and no build in place

    def softmax(x: torch.Tensor) -> torch.Tensor:  # as the post-grad graph writes it
        e = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)

    gm = make_fx(softmax, tracing_mode="fake")(torch.randn(4, 8192))
    with pytest.raises(UnsupportedEnvironment) as refused:
        rewrite_for_cluster_softmax(gm.graph)
    assert str(refused.value) == (
        f"kernelopt.cluster_softmax: kernelopt's row softmax is built with nvcc at its first call, and {no_nvcc}; "
        "or build it where nvcc is (kernelopt build-op) into this machine's KERNELOPT_CUDA_BUILD_DIR; "
        "or leave the option out"
    )
    # a build of that dtype pair for this GPU already in place (kernelopt build-op, elsewhere): rewritten
    monkeypatch.setattr(row_softmax_kernel, "prebuilt", lambda i, o, arch: (i, o, arch) == (torch.float32, torch.float32, (9, 0)))
    assert rewrite_for_cluster_softmax(make_fx(softmax, tracing_mode="fake")(torch.randn(4, 8192)).graph) == 1
    monkeypatch.setattr(row_softmax_kernel, "prebuilt", lambda i, o, arch: False)
    narrow = make_fx(softmax, tracing_mode="fake")(torch.randn(4, 64))
    assert rewrite_for_cluster_softmax(narrow.graph) == 0  # nothing the op would take: nothing refused
    with pytest.raises(Exception, match="install the CUDA toolkit"):  # through Inductor's compile, as a variant's
        _compiled(Softmax("softmax"), torch.randn(4, 8192))
    # the op builds with nvcc alone: a machine without ninja (which only load_inline's candidates need) rewrites
    monkeypatch.setattr(cuda_toolchain, "nvcc_missing", lambda: None)
    monkeypatch.setattr(cuda_toolchain, "missing", lambda: "no ninja (PyTorch's extensions build with it): pip install ninja")
    assert rewrite_for_cluster_softmax(make_fx(softmax, tracing_mode="fake")(torch.randn(4, 8192)).graph) == 1


def test_without_a_gpu_that_has_clusters_nothing_is_rewritten() -> None:
    x = torch.randn(4, 8192)
    assert not cluster_softmax.on_cluster_gpu(torch.empty(1))
    assert all(CALL not in g.source_code for g in _compiled(Softmax("softmax"), x).graphs)


def test_a_training_step_keeps_its_values_and_gradients(hopper: None) -> None:
    """A training graph's forward saves the log-softmax's max and log-sum for the backward (AOTAutograd's
    partitioner): the rewrite leaves such a softmax alone, and the loss and gradients stay eager's."""
    from conftest import compiled_and_eager_step

    from kernelopt.capture.rewrites.cluster_softmax import rewrite_for_cluster_softmax

    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 8192)
    target = torch.randint(0, 8192, (4,))

    def step(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.nll_loss(torch.log_softmax(linear(x) / 0.7, dim=-1), target)

    got, grad, ref, ref_grad, seen = compiled_and_eager_step(step, torch.randn(4, 16), linear, rewrite_for_cluster_softmax)
    assert seen[0] == 0  # the forward's log-softmax: its statistics are saved
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-5)


def test_the_op_computes_what_torch_does_on_every_row_and_checks_as_an_op() -> None:
    x = torch.randn(6, 5000) * 4
    x[0, 3] = float("-inf")
    x[1, :] = float("-inf")
    x[2, 5] = float("inf")
    x[3, 7] = float("nan")
    for log in (False, True):
        got = torch.ops.kernelopt.row_softmax(x, 0.5, log, False)
        want = torch.log_softmax(x * 0.5, -1) if log else torch.softmax(x * 0.5, -1)
        torch.testing.assert_close(got, want, equal_nan=True)
    low = x.to(torch.bfloat16)
    assert torch.ops.kernelopt.row_softmax(low, 1.0, True, True).dtype == torch.float32
    assert torch.ops.kernelopt.row_softmax(low, 1.0, True, False).dtype == torch.bfloat16
    torch.library.opcheck(torch.ops.kernelopt.row_softmax.default, (torch.randn(3, 64), 0.5, True, False))
    torch.library.opcheck(torch.ops.kernelopt.row_softmax.default, (torch.randn(3, 64), 0.5, True, False, True))
    assert not row_softmax_op.supports(x, False)  # CPU tensors: torch computes them


def test_the_ops_refuse_an_input_autograd_would_differentiate_through_them() -> None:
    x = torch.randn(3, 64, requires_grad=True)
    with pytest.raises(RuntimeError, match="kernelopt.row_softmax has no backward: call it under torch.no_grad"):
        torch.ops.kernelopt.row_softmax(x, 0.5, True, False)
    with pytest.raises(RuntimeError, match="kernelopt.row_l2_normalize has no backward"):
        torch.ops.kernelopt.row_l2_normalize(x, 0.0)
    with torch.no_grad():  # a compiled graph's forward runs so: computed, nothing to differentiate
        assert not torch.ops.kernelopt.row_softmax(x, 0.5, True, False).requires_grad


def test_a_launch_makes_its_tensor_s_device_current_only_where_it_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    entered: list[int] = []

    class Guard:
        def __init__(self, device: int) -> None:
            self.device = device

        def __enter__(self) -> None:
            entered.append(self.device)

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", Guard)
    monkeypatch.setattr(compat, "raw_stream", lambda device: 1000 + device)
    on_device_1 = SimpleNamespace(device=SimpleNamespace(index=1))
    on_device_0 = SimpleNamespace(device=SimpleNamespace(index=0))
    assert row_softmax_kernel._on_device(on_device_0, lambda stream: stream) == 1000  # type: ignore[arg-type]
    assert entered == []  # already current: no guard on the launch's host path
    assert row_softmax_kernel._on_device(on_device_1, lambda stream: stream) == 1001  # type: ignore[arg-type]
    assert entered == [1]  # another device's tensor: launched on its own device and stream


def test_a_cuda_input_the_kernel_does_not_take_is_named_with_its_reason(monkeypatch) -> None:
    """On a CUDA tensor torch's computation is a slow path the rewrite never asks for: the op says why,
    once per reason, instead of falling back in silence."""
    monkeypatch.setattr(row_softmax_op, "capability", lambda device: (9, 0))
    meta = torch.empty(4, 50257, device="meta")  # a tensor of no data: only its dtype and shape are read
    assert row_softmax_op.unsupported(meta, False) is None
    assert row_softmax_op.unsupported(meta.to(torch.float64), False) == "no build for torch.float64"
    assert row_softmax_op.unsupported(meta, True) == "a float32 input asked for a float32 upcast"
    assert row_softmax_op.unsupported(torch.empty(2, 262144, device="meta"), False) == (
        "rows of 262144 elements, wider than a cluster holds (131072)"
    )
    assert row_softmax_op.unsupported(torch.empty(0, 8192, device="meta"), False) == "an empty or zero-dimensional tensor"
    monkeypatch.setattr(row_softmax_op, "capability", lambda device: (8, 0))
    assert row_softmax_op.unsupported(meta, False) == "no thread-block clusters on a GPU of compute capability (8, 0)"
    row_softmax_op._warn_fallback.cache_clear()
    with pytest.warns(UserWarning, match="computed by torch on a CUDA tensor, not by its kernel: no thread-block"):
        row_softmax_op._warn_fallback("no thread-block clusters on a GPU of compute capability (8, 0)")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same reason again: said once already
        row_softmax_op._warn_fallback("no thread-block clusters on a GPU of compute capability (8, 0)")
    # every fallback is counted, so a candidate's process can report those of its first run
    before = Counter(row_softmax_op.FALLBACKS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row_softmax_op.count_fallback("no build for torch.float64")
        row_softmax_op.count_fallback("no build for torch.float64")
    assert row_softmax_op.fallbacks_since(before) == ["2 call(s) computed by torch, not the kernel: kernelopt.row_softmax: no build for torch.float64"]
    assert row_softmax_op.fallbacks_since(Counter(row_softmax_op.FALLBACKS)) == []


def test_logits_less_their_logsumexp_keep_torch_s_values_on_rows_with_an_infinite_max() -> None:
    """``y - logsumexp(y)`` is a log-softmax except where a row's max is infinite: torch's logsumexp is
    then that max, so a row holding +inf is -inf where finite (a log-softmax is NaN there), and the op's
    ``lse`` form keeps that."""
    x = torch.randn(6, 5000) * 4
    x[0, 3] = float("-inf")
    x[1, :] = float("-inf")
    x[2, 5] = float("inf")
    x[3, 7] = float("nan")
    x[4, 9] = float("inf")
    x[4, 11] = float("nan")
    y = x * 0.5
    got = torch.ops.kernelopt.row_softmax(x, 0.5, True, False, True)
    torch.testing.assert_close(got, y - torch.logsumexp(y, dim=-1, keepdim=True), equal_nan=True)
    assert torch.isneginf(got[2, :5]).all() and torch.isnan(got[2, 5])  # a log-softmax: NaN everywhere
    assert torch.isnan(got[1]).all() and torch.isnan(got[3]).all() and torch.isnan(got[4]).all()
    assert torch.isnan(torch.ops.kernelopt.row_softmax(x, 0.5, True, False)[2]).all()


@pytest.mark.parametrize("name", ["26_token_log_probs", "28_token_log_probs_256k"])
def test_the_token_log_probs_problem_is_one_call_of_the_op(hopper: None, name: str) -> None:
    """examples/problems/level1/26_token_log_probs.py and its 256000-vocabulary sibling (bf16 logits,
    float32 log-probabilities), the vocabulary at 8192 so the op takes it: the bf16 logits are read by
    the op, no kernel is left."""
    from conftest import EXAMPLES

    from kernelopt.problem import load_problem

    problem = load_problem(str(EXAMPLES / f"level1/{name}.py")).with_sizes(batch_size=4, vocab=8192)
    model, inputs = problem.build_model(0, torch.device("cpu")), problem.make_inputs(0, torch.device("cpu"))
    artifact = _compiled(model, inputs[0])
    (graph,) = artifact.graphs
    assert CALL + "arg0_1, 1.0, True, True, True)" in graph.source_code, graph.source_code
    assert "triton" not in graph.source_code and "cpp_fused" not in graph.source_code
    torch.testing.assert_close(artifact.compiled(*inputs), model(*inputs))
    # gate 1 reads the op's five-argument call as it reads the four-argument one
    from kernelopt.capture.call_sequence import call_source_of
    from kernelopt.verify.static_wrapper import check_static_wrapper

    (original,) = _compiled(model, inputs[0], {}).graphs
    verdict = check_static_wrapper(call_source_of(graph.source_code), original_source=original.source_code)
    assert verdict.passed, verdict.details.get("violations")


@pytest.mark.parametrize(
    ("form", "dtype", "columns", "bulk", "taken"),
    [
        ("logsumexp", torch.bfloat16, 256000, True, True),  # a 256000 vocabulary's log-probs, from bf16
        ("logsumexp", torch.bfloat16, 256000, False, False),  # wider than the registers hold
        ("logsumexp", torch.bfloat16, 458688, True, True),  # the widest 16-bit row: eight parts of 112 KB
        ("logsumexp", torch.bfloat16, 458689, True, False),
        ("softmax", torch.float32, 229344, True, True),  # the widest float32 row
        ("softmax", torch.float32, 229345, True, False),
        ("upcast", torch.float32, 229345, True, False),  # a float32 row read as it is stored: no wider
    ],
)
def test_the_shared_memory_form_takes_rows_as_wide_as_its_parts_hold_as_stored(
    hopper: None, form: str, dtype: torch.dtype, columns: int, bulk: bool, taken: bool
) -> None:
    """The register form holds 131072 elements a row whatever their dtype; the shared-memory form holds a
    cluster's parts of BULK_PART_BYTES as the row is stored, so a 16-bit row twice as wide as a float32 one
    (a 256000 vocabulary in bf16 fits). The rewrite takes exactly what the op's kernel takes."""
    from kernelopt.capture.rewrites.cluster_softmax import CLUSTER_SOFTMAX_BULK_OPTION

    assert row_softmax_op.max_columns(True, 4) == 229344 and row_softmax_op.max_columns(True, 2) == 458688
    assert row_softmax_op.max_columns(False, 2) == row_softmax_op.MAX_COLUMNS
    x = torch.randn(2, columns).to(dtype)
    option = CLUSTER_SOFTMAX_BULK_OPTION if bulk else CLUSTER_SOFTMAX_OPTION
    (graph,) = _compiled(Softmax(form), x, {option: True}).graphs
    assert (CALL in graph.source_code) == taken
    assert (row_softmax_op.blocks_for(x, bulk) is not None) == taken
    if not taken:
        assert row_softmax_op.unsupported(x.to("meta"), form != "softmax" and dtype != torch.float32, bulk) == (
            f"rows of {columns} elements, wider than a cluster holds ({row_softmax_op.max_columns(bulk, x.element_size())})"
        )


def test_a_row_is_split_among_the_fewest_blocks_that_hold_it() -> None:
    per_block = row_softmax_kernel.THREADS * row_softmax_kernel.ITEMS
    assert row_softmax_op.cluster_blocks(per_block) == 1
    assert row_softmax_op.cluster_blocks(per_block + 1) == 2
    assert row_softmax_op.cluster_blocks(50257) == 4
    assert row_softmax_op.cluster_blocks(row_softmax_op.MAX_COLUMNS) == row_softmax_op.MAX_CLUSTER
    assert row_softmax_op.cluster_blocks(row_softmax_op.MAX_COLUMNS + 1) is None


def test_gate_1_takes_the_call_sequence_around_the_op_and_no_other_op_of_kernelopts(hopper: None) -> None:
    from kernelopt.capture.call_sequence import call_source_of
    from kernelopt.verify.static_wrapper import check_static_wrapper

    x = torch.randn(4, 8192)
    (original,) = _compiled(Softmax("temperature"), x, {}).graphs
    (variant,) = _compiled(Softmax("temperature"), x).graphs
    honest = call_source_of(variant.source_code)
    verdict = check_static_wrapper(honest, original_source=original.source_code)
    assert verdict.passed, verdict.details.get("violations")
    for cheat in (
        honest.replace("row_softmax.default(", "row_softmax_cached.default("),  # not an op of ours
        honest.replace("torch.ops.kernelopt.row_softmax.default(", "torch.ops.aten._softmax.default("),
        honest.replace("    return (", "    buf99 = torch.ops.kernelopt.row_softmax.default(arg0_1, 1.0, True, False) * 2\n    return ("),
    ):
        refused = check_static_wrapper(cheat, original_source=original.source_code)
        assert not refused.passed and refused.details["rule"] == "torch_op", refused.reason


def test_the_options_are_compile_options_and_the_shared_memory_form_a_graph_variant_where_rows_are_reread() -> None:
    """Both forms are compile options (and knobs); only the shared-memory form, the faster, is a graph
    variant, early where rows are read twice."""
    from kernelopt.capture.rewrites.cluster_softmax import CLUSTER_SOFTMAX_BULK_OPTION
    from kernelopt.capture.rewrites.passes import is_compile_option
    from kernelopt.search.graph_variants import option_sets
    from kernelopt.search.knobs import KNOBS

    assert is_compile_option(CLUSTER_SOFTMAX_OPTION) and is_compile_option(CLUSTER_SOFTMAX_BULK_OPTION)
    assert (CLUSTER_SOFTMAX_OPTION, True) in KNOBS
    first = option_sets(copies_first=False, rereads_first=True)
    assert {CLUSTER_SOFTMAX_BULK_OPTION: True} in first[:2]
    assert {CLUSTER_SOFTMAX_BULK_OPTION: True} in option_sets(copies_first=False)
    assert OPTION not in first


TEMPERATURE_PROBLEM = """
import torch


class Model(torch.nn.Module):
    def forward(self, logits):
        return torch.log_softmax(logits / 0.7, dim=-1)


def get_inputs():
    return [torch.randn(4, 8192)]


def get_init_inputs():
    return []
"""


def test_the_variant_passes_the_gates_in_a_candidate_process_of_its_own(hopper: None, worker_tmp) -> None:
    """The graph candidate the option writes, judged as the graph stage judges it: gate 1 on its call
    sequence, then the candidate's own process (which names the op, registered on import) against the
    float64 reference through the model gate."""
    from conftest import graph_variant_judged

    candidate, result = graph_variant_judged(worker_tmp / "temperature.py", TEMPERATURE_PROBLEM, OPTION)
    assert candidate is not None and CALL in candidate.call_source and not candidate.kernels
    gates = {v["gate"]: v["passed"] for v in result["verdicts"]}
    assert gates["static"] and gates["correctness"] and gates["model"], result["verdicts"]
    # the first run that stitches it in (where a GPU builds the op: about a minute of nvcc on a fresh H200)
    # is a stage of its own, not part of the screen's or the model gate's seconds
    assert {"compile", "install", "model"} <= set(result["timings"]), result["timings"]


C_NAMES = {torch.float32: "float", torch.bfloat16: "__nv_bfloat16", torch.float16: "__half"}


def _built_for_sm_90(folder, source: str):
    """``source`` through nvcc and ptxas for sm_90 (no GPU needed), ptxas's report of each kernel in the
    result's stderr; a build that fails fails the test with nvcc's own words."""
    import subprocess

    (folder / "k.cu").write_text(source)
    built = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-O3", "-c", "k.cu", "-o", "k.o", "-Xptxas", "-v"],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    return built


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit), not a GPU")
@pytest.mark.parametrize(
    ("dtype_in", "dtype_out"),
    [(torch.float32, torch.float32), (torch.bfloat16, torch.float32), (torch.bfloat16, torch.bfloat16),
     (torch.float16, torch.float16)],
)  # fmt: skip
def test_the_kernel_compiles_for_sm_90_within_its_register_budget(tmp_path, dtype_in, dtype_out) -> None:
    """The op's whole source, as built for each dtype pair, through nvcc and ptxas for sm_90 without a GPU
    (it needs no PyTorch header): a build fault shows here, not in a lent GPU's first call.
    ``__launch_bounds__(THREADS, MIN_BLOCKS)`` keeps a thread within 64 registers; more spilled to local
    memory than the 8 bytes the float32 one-float-a-load form spills would be a slower kernel (2026-12-04:
    64 registers, 8 bytes)."""
    import re
    import subprocess

    device = row_softmax_kernel.source_for(dtype_in, dtype_out)
    assert "#include <torch" not in device and "at::" not in device  # nothing of PyTorch's: seconds of nvcc
    assert f"launch_vec<{C_NAMES[dtype_in]}, {C_NAMES[dtype_out]}, false>" in device
    k = row_softmax_kernel
    fast, streaming = str(k.BULK_FAST_EXP).lower(), str(k.BULK_STREAMING).lower()
    bulk_form = f"row_softmax_bulk<{C_NAMES[dtype_in]}, {C_NAMES[dtype_out]}, THREADS, NORM, {k.BULK_PIECES}, {fast}, {streaming}>"
    assert bulk_form in device
    built = _built_for_sm_90(tmp_path, device)
    kernels = re.findall(
        r"entry function '_Z\d+(row_softmax_\w+?)I.*?(\d+) bytes spill stores.*?Used (\d+) registers", built.stderr, re.S
    )
    held = [(int(spills), int(registers)) for name, spills, registers in kernels if name == "row_softmax_kernel"]
    bulk = [(int(spills), int(registers)) for name, spills, registers in kernels if name == "row_softmax_bulk"]
    # 16-byte and one-element loads; 256 and 512 threads; each as a softmax and as an L2 norm (NORM)
    assert len(held) == 4 and len(bulk) == 4, built.stderr
    assert max(r for _, r in held) <= 65536 // (row_softmax_kernel.THREADS * row_softmax_kernel.MIN_BLOCKS), built.stderr
    assert max(s for s, _ in held) <= 8, built.stderr
    # the shared-memory form keeps nothing of the row in registers: no spills, and registers for four
    # 512-thread blocks an SM (its shared memory, not its registers, bounds the blocks an SM holds)
    assert all(s == 0 and r <= 32 for s, r in bulk), built.stderr

    # The NaN-keeping max costs what fmaxf costs: one instruction. Written as compares and a select it
    # ran the kernel 2x slower on the H200 (benchmarks/h200-2026-12-04-cluster-softmax, section 6).
    fmax = device.replace(row_softmax_kernel.NAN_MAX_BODY, "return fmaxf(a, b);")
    assert fmax != device
    counts = []
    for name, text in (("nan.cu", device), ("fmax.cu", fmax)):
        (tmp_path / name).write_text(text)
        ptx = subprocess.run(
            ["nvcc", "-std=c++17", "-arch=sm_90", "-O3", "-ptx", name, "-o", "-"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert ptx.returncode == 0, ptx.stderr[-3000:]
        counts.append(sum(1 for line in ptx.stdout.splitlines() if line.strip().endswith(";")))
    assert counts[0] == counts[1], counts


def test_the_shared_memory_forms_build_options_are_in_its_source_and_a_bad_piece_count_is_refused() -> None:
    """The probe builds the shared-memory form's other variants from ``source_for``'s options: each option
    reaches the kernel's instantiation, and a part in no pieces is refused in one line."""
    default = row_softmax_kernel.source_for(torch.float32, torch.float32)
    other = row_softmax_kernel.source_for(torch.float32, torch.float32, pieces=3, fast_exp=False, streaming=False)
    assert "row_softmax_bulk<float, float, THREADS, NORM, 3, false, false>" in other
    assert "row_softmax_bulk<float, float, THREADS, NORM, 3, false, false>" not in default
    assert "__BULK_" not in default and "__BULK_" not in other  # every placeholder filled
    with pytest.raises(ValueError, match="pieces must be 1 or more"):
        row_softmax_kernel.source_for(torch.float32, torch.float32, pieces=0)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit), not a GPU")
@pytest.mark.parametrize(("pieces", "fast_exp", "streaming"), [(1, False, False), (4, True, False)])
def test_the_probes_other_variants_of_the_shared_memory_form_compile_for_sm_90(tmp_path, pieces, fast_exp, streaming):
    """The variants the probe times beside the op's own build through nvcc and ptxas for sm_90, without
    spills (a probe call on a lent GPU is not where a build fault should first show)."""
    import re

    source = row_softmax_kernel.source_for(torch.bfloat16, torch.float32, pieces, fast_exp, streaming)
    built = _built_for_sm_90(tmp_path, source)
    spills = re.findall(r"entry function '_Z\d+row_softmax_bulk.*?(\d+) bytes spill stores", built.stderr, re.S)
    assert len(spills) == 4 and set(spills) == {"0"}, built.stderr
