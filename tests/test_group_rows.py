"""A group norm's weight, bias and what follows them moved into its groups' shape
(``kernelopt.capture.rewrites.group_rows``): the same values, the view back after them, and every other
graph left alone. Traced on CPU in the form torch decomposes ``native_group_norm`` into on a GPU."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernelopt.capture import compat
from kernelopt.capture.rewrites.group_rows import GROUP_ROWS_OPTION, rewrite_for_group_rows

_aten = torch.ops.aten
N, C, H, W, G = 2, 8, 4, 6, 4


def gpu_group_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None) -> torch.Tensor:
    """``torch._refs.native_group_norm`` as it runs for a CUDA tensor: the groups normalised in their own
    shape, viewed back, then the weight and bias by channel; 16-bit inputs computed in float32."""
    xr = x.float().reshape(x.shape[0], G, x.shape[1] // G, -1)
    var, mean = torch.var_mean(xr, dim=[2, 3], unbiased=False, keepdim=True)
    out = ((xr - mean) * torch.rsqrt(var + 1e-5)).view(x.shape)
    by_channel = (1, -1) + (1,) * (x.dim() - 2)
    if weight is not None:
        out = out * weight.view(by_channel)
    if bias is not None:
        out = out + bias.view(by_channel)
    return out.to(x.dtype)


def _inputs(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(N, C, H, W, generator=g) * 3 + 1).to(dtype)
    return x, torch.rand(C, generator=g) + 0.5, torch.randn(C, generator=g)


def _rewritten(fn, *args):
    gm = make_fx(fn, tracing_mode="fake")(*args)
    count = rewrite_for_group_rows(gm.graph)
    gm.recompile()
    return gm, count


def _shapes(gm: torch.fx.GraphModule, target) -> list[tuple[int, ...]]:
    return [tuple(n.meta["val"].shape) for n in gm.graph.nodes if n.op == "call_function" and n.target == target]


def test_the_weight_bias_and_a_silu_move_into_the_groups_shape_with_the_same_values() -> None:
    def norm_silu(x, w, b):
        y = gpu_group_norm(x, w, b)
        return y * torch.sigmoid(y)

    args = _inputs()
    gm, count = _rewritten(norm_silu, *args)
    assert count == 1
    grouped = (N, G, C // G, H * W)
    assert _shapes(gm, _aten.mul.Tensor) == [grouped] * 3  # the normalisation, the weight, the SiLU's product
    assert _shapes(gm, _aten.add.Tensor)[-1] == grouped and _shapes(gm, _aten.sigmoid.default) == [grouped]
    last = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    (out,) = last if isinstance(last, (list, tuple)) else (last,)
    assert out.target is _aten.reshape.default and out.args[0].target is _aten.mul.Tensor  # the view back: last
    assert torch.equal(gm(*args), norm_silu(*args))  # the same ops on the same elements


def test_a_16_bit_group_norm_moves_with_its_cast_back() -> None:
    args = _inputs(torch.bfloat16)
    gm, count = _rewritten(gpu_group_norm, *args)
    assert count == 1
    cast = [n for n in gm.graph.nodes if n.target is _aten._to_copy.default]  # Inductor's: convert_element_type
    assert cast and tuple(cast[-1].meta["val"].shape) == (N, G, C // G, H * W)
    assert gm(*args).dtype == torch.bfloat16 and torch.equal(gm(*args), gpu_group_norm(*args))


def test_a_residual_and_a_time_embedding_s_scale_move_and_a_partial_broadcast_stays() -> None:
    """A residual (``N, C, H, W``) and a diffusion block's scale and shift by sample and channel (``N, C, 1,
    1``) take the groups' shape too; an operand broadcast along part of the spatial dimensions cannot, so
    it stays after the view, and a view read elsewhere (a sum of the output) is kept for that reader."""
    x, w, b = _inputs()
    g = torch.Generator().manual_seed(2)
    scale, shift = torch.randn(N, C, 1, 1, generator=g), torch.randn(N, C, 1, 1, generator=g)
    rows = torch.randn(1, 1, H, 1, generator=g)

    def conditioned(x, w, b, scale, shift, rows):
        y = gpu_group_norm(x, w, b) * (1 + scale) + shift + x
        return y * rows, y.sum()

    args = (x, w, b, scale, shift, rows)
    gm, count = _rewritten(conditioned, *args)
    assert count == 1
    grouped = (N, G, C // G, H * W)
    assert _shapes(gm, _aten.add.Tensor)[-2:] == [grouped, grouped]  # the shift, then the residual
    assert _shapes(gm, _aten.mul.Tensor)[-1] == (N, C, H, W)  # the partial broadcast, after the view
    for got, want in zip(gm(*args), conditioned(*args)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_graphs_without_a_group_norm_s_weight_are_left_alone() -> None:
    args = _inputs()

    def no_affine(x, w, b):
        return gpu_group_norm(x, None, None) * 2.0

    def plain_views(x, w, b):  # views and a channel weight, but no statistics of the groups
        return x.reshape(N, G, C // G, H * W).exp().view(N, C, H, W) * w[None, :, None, None]

    def other_stats(x, w, b):  # a mean over the rows of each group's channels, not the whole group
        xr = x.reshape(N, G, C // G, H * W)
        var, mean = torch.var_mean(xr, dim=[3], unbiased=False, keepdim=True)
        return ((xr - mean) * torch.rsqrt(var + 1e-5)).view(N, C, H, W) * w[None, :, None, None]

    for fn in (no_affine, plain_views, other_stats):
        gm, count = _rewritten(fn, *args)
        assert count == 0, fn.__name__
        assert _shapes(gm, _aten.mul.Tensor)[-1] == (N, C, H, W)
        torch.testing.assert_close(gm(*args), fn(*args), rtol=0, atol=0)


def test_under_inductor_the_option_runs_the_rewrite_and_keeps_eager_values(monkeypatch) -> None:
    """``kernelopt.group_rows`` is a compile option of kernelopt's own: every compile of kernelopt's runs
    the rewrite where the options hold it. The model is written in the GPU's form (on CPU torch
    decomposes ``nn.GroupNorm`` otherwise)."""
    from kernelopt.capture import capture
    from kernelopt.capture.rewrites import group_rows as module
    from kernelopt.capture.rewrites import passes

    calls: list[int] = []

    def counted(graph: torch.fx.Graph) -> int:
        calls.append(rewrite_for_group_rows(graph))
        return calls[-1]

    counted.__module__ = module.__name__  # its cache identity: the module's source
    monkeypatch.setitem(passes.COMPILE_PASSES, GROUP_ROWS_OPTION, counted)

    class NormSilu(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            _, w, b = _inputs()
            self.w, self.b = torch.nn.Parameter(w), torch.nn.Parameter(b)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = gpu_group_norm(x, self.w, self.b)
            return torch.nn.functional.silu(y)

    model, (x, _, _) = NormSilu().eval(), _inputs()
    with compat.fresh_compile():
        artifact = capture(model, [x], {GROUP_ROWS_OPTION: True})
    assert calls and set(calls) == {1}
    assert artifact.options == {GROUP_ROWS_OPTION: True}
    with torch.no_grad():
        torch.testing.assert_close(artifact.compiled(x), model(x), rtol=1e-5, atol=1e-5)


def test_a_volume_s_group_norm_and_a_one_element_scale_of_its_rank_keep_their_shape() -> None:
    """``N, C, D, H, W``: the groups' shape is still ``N, G, C/G, D*H*W``; a one-element tensor of the
    volume's rank is viewed as one of the groups' rank, so the result is not broadcast wider."""
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(2, 8, 3, 4, 5, generator=g), torch.rand(8, generator=g) + 0.5, torch.randn(8, generator=g)
    scale = torch.full((1, 1, 1, 1, 1), 0.5)

    def fn(x, w, b, scale):
        return gpu_group_norm(x, w, b) * scale

    gm, count = _rewritten(fn, x, w, b, scale)
    assert count == 1
    assert _shapes(gm, _aten.mul.Tensor)[-2:] == [(2, G, 2, 60)] * 2  # the weight, then the scale: groups' rank
    got = gm(x, w, b, scale)
    assert got.shape == (2, 8, 3, 4, 5) and torch.equal(got, fn(x, w, b, scale))


def _meta_traced(name: str) -> torch.fx.GraphModule:
    """An example problem at its small sizes, traced to ATen on the meta device with torch's own group
    norm decomposition, whose form off the CPU (any other device) is the GPU's."""
    from conftest import EXAMPLES

    from kernelopt.problem import load_problem

    problem = load_problem(EXAMPLES / f"{name}.py").small()
    with torch.device("meta"):
        model = problem.model_class(*problem.init_inputs(0)).eval()
    inputs = problem.raw_inputs(0, "meta")
    table = {_aten.native_group_norm.default: torch._refs.native_group_norm}
    with torch.no_grad():
        return make_fx(model, decomposition_table=table)(*inputs)  # meta tensors: nothing computed


def test_the_suite_s_group_norms_in_torch_s_own_gpu_decomposition_are_rewritten() -> None:
    """The form the rewrite matches is torch's, pinned: a torch that decomposes group norm otherwise fails
    here. The view back to ``N, C, H, W`` ends up after every elementwise op."""
    for name in ("level1/16_groupnorm", "level2/09_conv2d_groupnorm", "level2/13_groupnorm_scale_shift_silu"):
        gm = _meta_traced(name)
        assert rewrite_for_group_rows(gm.graph) == 1, name
        returned = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
        (out,) = returned if isinstance(returned, (list, tuple)) else (returned,)
        assert out.target is _aten.reshape.default, (name, out.target)
