"""The online-softmax rewrite (kernelopt.capture.rewrites.online_softmax): the graph option that gives a
temperature- or scale-softmax and a logsumexp back to Inductor's online softmax. CPU: the rewrite's
graphs and values (Inductor only writes the online kernel for Triton, so the kernel itself is the GPU
test's)."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernelopt.capture import compat
from kernelopt.capture.rewrites.online_softmax import rewrite_for_online_softmax

aten = torch.ops.aten


def stable_log_softmax(x: torch.Tensor) -> torch.Tensor:
    """The form older torch's joint-graph pass leaves of ``log_softmax(x / 0.7)``: the max of ``x``
    subtracted before the scale, which the online-softmax pattern does not match."""
    m = torch.amax(x, dim=-1, keepdim=True)
    stable = (x - m) * 1.4285714285714286
    return stable - torch.log(torch.exp(stable).sum(dim=-1, keepdim=True))


def online_pattern(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """Each ``exp(y - amax(y, dims, keepdim=True))`` of ``graph``: what Inductor's post-grad
    ``prepare_softmax_pattern`` turns into an online softmax."""
    found = []
    for node in graph.nodes:
        if node.target is aten.exp.default:
            sub = node.args[0]
            if getattr(sub, "target", None) is aten.sub.Tensor:
                y, amax = sub.args
                if getattr(amax, "target", None) is aten.amax.default and amax.args[0] is y and amax.args[2]:
                    found.append(node)
    return found


def rows() -> torch.Tensor:
    torch.manual_seed(0)
    x = torch.randn(6, 67) * 4
    x[0, 3] = float("-inf")  # a masked position
    x[1, :] = float("-inf")  # a row masked whole: NaN, as eager gives
    x[2, 5] = float("inf")
    x[3, 7] = float("nan")
    return x


def test_the_bare_stable_form_is_written_as_the_online_softmax_pattern_with_the_same_values() -> None:
    gm = make_fx(stable_log_softmax)(torch.randn(4, 67))
    assert online_pattern(gm.graph) == []
    x = rows()
    before = gm(x)

    assert rewrite_for_online_softmax(gm.graph) == 1
    gm.recompile()
    (exp,) = online_pattern(gm.graph)
    scaled = exp.args[0].args[0]
    assert scaled.target is aten.mul.Tensor and scaled.args[1] == 1.4285714285714286
    after = gm(x)
    torch.testing.assert_close(after, before, equal_nan=True, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(after, torch.log_softmax(x / 0.7, dim=-1), equal_nan=True, rtol=1e-5, atol=1e-5)
    # the stable form's nodes are gone, and the output still reads the rewritten node
    assert not [n for n in gm.graph.nodes if n.target is aten.sub.Tensor and n.args[0].op == "placeholder"]


def test_a_negative_or_tensor_scale_and_a_softmax_of_another_shape_are_left_alone() -> None:
    def negative(x: torch.Tensor) -> torch.Tensor:
        return torch.exp((x - torch.amax(x, dim=-1, keepdim=True)) * -2.0)

    def tensor_scale(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return torch.exp((x - torch.amax(x, dim=-1, keepdim=True)) * t)

    def no_keepdim(x: torch.Tensor) -> torch.Tensor:
        return torch.exp((x - torch.amax(x, dim=-1).unsqueeze(-1)) * 2.0)

    def other_max(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.exp((x - torch.amax(y, dim=-1, keepdim=True)) * 2.0)

    x = torch.randn(4, 8)
    for fn, args in (
        (negative, (x,)),
        (tensor_scale, (x, torch.tensor(2.0))),
        (no_keepdim, (x,)),
        (other_max, (x, x.clone())),
    ):
        gm = make_fx(fn)(*args)
        before = [str(n) for n in gm.graph.nodes]
        assert rewrite_for_online_softmax(gm.graph) == 0, fn.__name__
        assert [str(n) for n in gm.graph.nodes] == before


def test_under_inductor_the_rewrite_runs_before_its_patterns_and_keeps_eager_values() -> None:
    """Through compat.post_grad_pass, as a graph variant compiles: whatever form this torch's
    joint-graph pass leaves (bare, or guarded by a test for infinities), the post-grad graph Inductor
    lowers holds the online-softmax pattern, and the compiled model gives eager's values."""
    seen: list[torch.fx.Graph] = []

    def watched(graph: torch.fx.Graph) -> None:
        rewrite_for_online_softmax(graph)
        seen.append(graph)

    def model(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        low = x.to(torch.bfloat16)  # logits in bf16: the scale in bf16, or the softmax asked in float32
        return (
            torch.log_softmax(x / 0.7, dim=-1),
            torch.softmax(torch.bmm(a, b) * 0.125, dim=-1),
            torch.softmax(low * 0.5, dim=-1),
            torch.softmax(low / 0.7, dim=-1, dtype=torch.float32),
        )

    x, a, b = rows(), torch.randn(2, 8, 16), torch.randn(2, 16, 32)
    torch._dynamo.reset()
    with compat.fresh_compile(), compat.post_grad_pass(watched):
        got = torch.compile(model)(x, a, b)
    torch._dynamo.reset()
    with compat.fresh_compile():
        compiled = torch.compile(model)(x, a, b)
    torch._dynamo.reset()
    assert seen and len(online_pattern(seen[-1])) == 4
    assert not [n for n in seen[-1].nodes if n.target is aten.where.self]
    # the values Inductor gives without the rewrite (which keeps a bf16 product in float32 where eager
    # rounds it), and eager's where the input is float32
    for out, same in zip(got, compiled):
        torch.testing.assert_close(out, same, equal_nan=True, rtol=1e-5, atol=1e-5)
    for out, ref in zip(got[:2], model(x, a, b)[:2]):
        torch.testing.assert_close(out, ref, equal_nan=True, rtol=1e-5, atol=1e-5)


def test_the_pass_hook_refuses_to_replace_a_users_own_pass() -> None:
    import pytest
    import torch._inductor.config as inductor_config

    from kernelopt.errors import UnsupportedEnvironment

    with (
        inductor_config.patch({"post_grad_custom_pre_pass": lambda graph: None}),
        pytest.raises(UnsupportedEnvironment, match="post_grad_custom_pre_pass is already set"),
        compat.post_grad_pass(rewrite_for_online_softmax),
    ):
        pass
    assert inductor_config.post_grad_custom_pre_pass is None


def test_a_where_is_rewritten_only_where_its_branches_are_one_softmax_in_two_forms() -> None:
    """Newer torch guards the stable form with ``where(all finite, stable, y - max(y))``: the rewrite
    keeps the second branch only where the first is that very softmax's stable form (another scale,
    another tensor, another reduced dim: left alone)."""

    def guarded(x: torch.Tensor, scale: float, plain_of: torch.Tensor) -> torch.Tensor:
        signed = x * 1
        stable = (signed - torch.amax(signed, dim=-1, keepdim=True)) / 0.7
        y = plain_of / scale
        plain = y - torch.amax(y, dim=-1, keepdim=True)
        finite = torch.isfinite(x).all(dim=-1, keepdim=True)
        return torch.exp(torch.where(finite, stable, plain))

    x = rows()
    gm = make_fx(lambda x: guarded(x, 0.7, x))(x)
    before = gm(x)
    assert rewrite_for_online_softmax(gm.graph) == 1
    gm.recompile()
    assert len(online_pattern(gm.graph)) == 1 and not [n for n in gm.graph.nodes if n.target is aten.where.self]
    torch.testing.assert_close(gm(x), before, equal_nan=True)

    for other in (lambda x: guarded(x, 0.5, x), lambda x: guarded(x, 0.7, x + 1)):  # another scale, tensor
        gm = make_fx(other)(x)
        assert rewrite_for_online_softmax(gm.graph) == 0


def test_a_softmax_scaled_by_a_one_element_tensor_is_given_back_to_the_online_softmax() -> None:
    """A temperature or scale held in a buffer or parameter: the joint-graph pass writes it with its sign,
    ``(x*s - max(x*s)) op (s*t)``, s = where(t >= 0, 1, -1), guarded by a test for infinities. Rewritten
    to ``y - max(y)``, y = x op t, for a positive and a negative scale, with eager's values on every row."""
    seen: list[torch.fx.Graph] = []

    def watched(graph: torch.fx.Graph) -> int:
        changed = rewrite_for_online_softmax(graph)
        seen.append(graph)
        return changed

    class Scaled(torch.nn.Module):
        def __init__(self, t: float) -> None:
            super().__init__()
            self.register_buffer("t", torch.tensor(t))
            self.scale = torch.nn.Parameter(torch.tensor(t), requires_grad=False)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.log_softmax(x / self.t, dim=-1), torch.softmax(x * self.scale, dim=-1)

    x = rows()
    for t in (0.7, -1.3):
        model = Scaled(t)
        seen.clear()
        torch._dynamo.reset()
        with compat.fresh_compile(), compat.post_grad_pass(watched):
            got = torch.compile(model)(x)
        torch._dynamo.reset()
        assert seen and len(online_pattern(seen[-1])) == 2, t
        assert not [n for n in seen[-1].nodes if n.target is aten.where.self and n.args[0].target is not aten.ge.Scalar]
        for out, ref in zip(got, model(x)):
            torch.testing.assert_close(out, ref, equal_nan=True, rtol=1e-5, atol=1e-5)


def test_a_guarded_tensor_scaled_form_is_rewritten_only_where_both_branches_are_one_softmax() -> None:
    """The sign must be the scale's own, the scale one element for the whole row, and the plain branch
    the same tensor over the same scale: anything else in a where is left alone."""

    def guarded(x: torch.Tensor, t: torch.Tensor, sign_of: torch.Tensor, plain_t: torch.Tensor) -> torch.Tensor:
        one = torch.ops.aten.scalar_tensor.default(1, dtype=x.dtype)
        sign = torch.where(sign_of >= 0, one, -one)
        signed = x * sign
        stable = (signed - torch.amax(signed, dim=-1, keepdim=True)) / (sign * t)
        y = x / plain_t
        plain = y - torch.amax(y, dim=-1, keepdim=True)
        finite = torch.isfinite(y).all(dim=-1, keepdim=True)
        return torch.exp(torch.where(finite, stable, plain))

    x, t = rows(), torch.tensor(0.7)
    gm = make_fx(lambda x, t: guarded(x, t, t, t))(x, t)
    before = gm(x, t)
    assert rewrite_for_online_softmax(gm.graph) == 1
    gm.recompile()
    assert len(online_pattern(gm.graph)) == 1
    torch.testing.assert_close(gm(x, t), before, equal_nan=True)
    per_column = torch.rand(67) + 0.5  # one scale a column: not a scaled softmax of the row
    for fn, args in (
        (lambda x, t, u: guarded(x, t, u, t), (x, t, torch.tensor(-2.0))),  # the sign of another tensor
        (lambda x, t, u: guarded(x, t, t, u), (x, t, torch.tensor(0.5))),  # the plain branch over another scale
        (lambda x, t: guarded(x, t, t, t), (x, per_column)),
    ):
        gm = make_fx(fn)(*args)
        assert rewrite_for_online_softmax(gm.graph) == 0


def lse_form(x: torch.Tensor, keepdim: bool, tail: str = "log") -> torch.Tensor:
    """torch's logsumexp decomposition, written out: the max with infinities masked to zero."""
    m = torch.amax(x, dim=-1, keepdim=True)
    masked = torch.where(torch.abs(m) == float("inf"), torch.full((), 0.0, dtype=x.dtype), m)
    total = torch.exp(x - masked).sum(dim=-1, keepdim=keepdim)
    shift = masked if keepdim else masked.squeeze(-1)
    return (torch.log(total) if tail == "log" else torch.sqrt(total)) + shift


def test_a_logsumexp_is_written_as_the_online_softmax_pattern_with_its_values_for_every_row() -> None:
    """``where(isinf(m), m, log(sum(exp(y - m))) + m)``: the same value as torch's form for rows all
    ``-inf``, with an ``inf``, with a NaN, with ``inf`` and ``-inf`` together; kept or squeezed."""
    x = rows()
    x[4, 1], x[4, 2] = float("inf"), float("-inf")
    for keepdim in (True, False):
        gm = make_fx(lambda t: lse_form(t, keepdim))(torch.randn(6, 67))  # noqa: B023
        assert online_pattern(gm.graph) == []
        assert rewrite_for_online_softmax(gm.graph) == 1
        gm.recompile()
        (exp,) = online_pattern(gm.graph)
        (total,) = exp.users
        assert total.target is aten.sum.dim_IntList and total.args[2] is True
        torch.testing.assert_close(gm(x), torch.logsumexp(x, dim=-1, keepdim=keepdim), equal_nan=True)
        assert not [n for n in gm.graph.nodes if n.target is aten.full.default]  # the masked max is gone


def test_a_masked_max_that_is_no_logsumexp_is_left_alone() -> None:
    x = torch.randn(4, 8)
    for fn in (
        lambda t: lse_form(t, True, tail="sqrt"),  # not a log of the sum
        lambda t: (
            torch.exp(t - torch.where(torch.abs(m := t.amax(-1, keepdim=True)) == 1.0, torch.full((), 0.0), m))
            .sum(-1)
            .log()
        ),  # a test for one, not for an infinity
    ):
        gm = make_fx(fn)(x)
        before = [str(n) for n in gm.graph.nodes]
        assert rewrite_for_online_softmax(gm.graph) == 0
        assert [str(n) for n in gm.graph.nodes] == before


def test_under_inductor_a_logsumexp_and_normalised_logits_keep_eager_values() -> None:
    """Through Inductor's own decomposition (a Categorical's logits: ``x - logsumexp(x)``)."""
    seen: list[torch.fx.Graph] = []

    def watched(graph: torch.fx.Graph) -> None:
        rewrite_for_online_softmax(graph)
        seen.append(graph)

    def model(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.logsumexp(x / 0.7, dim=-1), x - x.logsumexp(dim=-1, keepdim=True)

    x = rows()
    torch._dynamo.reset()
    with compat.fresh_compile(), compat.post_grad_pass(watched):
        got = torch.compile(model)(x)
    torch._dynamo.reset()
    assert seen and len(online_pattern(seen[-1])) == 2
    for out, ref in zip(got, model(x)):
        torch.testing.assert_close(out, ref, equal_nan=True, rtol=1e-5, atol=1e-5)


def test_a_capture_with_the_option_runs_the_rewrite_and_keeps_the_option(monkeypatch) -> None:
    """``kernelopt.online_softmax`` is a compile option of kernelopt's own: every compile of kernelopt's
    (capture, the export's rebuild, the backend) runs the rewrite where the options hold it, and Inductor
    never sees the name; a compile without it runs none."""
    from kernelopt.capture import capture
    from kernelopt.capture.rewrites import online_softmax as module
    from kernelopt.capture.rewrites import passes

    calls: list[int] = []

    def counted(graph: torch.fx.Graph) -> int:
        calls.append(rewrite_for_online_softmax(graph))
        return calls[-1]

    counted.__module__ = module.__name__  # its cache identity: the module's source
    monkeypatch.setitem(passes.COMPILE_PASSES, module.ONLINE_SOFTMAX_OPTION, counted)

    class Temperature(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.log_softmax(x / 0.7, dim=-1)

    x = torch.randn(4, 67)
    with compat.fresh_compile():  # a cached compile of the same graph (an earlier test's) runs no pass
        artifact = capture(Temperature(), [x], {module.ONLINE_SOFTMAX_OPTION: True})
    assert calls and set(calls) == {1}  # each compile of the graph rewrote its one softmax
    assert artifact.options == {module.ONLINE_SOFTMAX_OPTION: True}
    compiles = len(calls)
    with torch.no_grad():  # as the capture ran it: with grad enabled Dynamo compiles again (a guard on grad
        # mode), which under a cold Inductor cache runs the pass once more (CI on a fresh machine)
        torch.testing.assert_close(artifact.compiled(x), torch.log_softmax(x / 0.7, dim=-1))
    with compat.fresh_compile():
        capture(Temperature(), [x], {})
    assert len(calls) == compiles


def test_the_token_log_probs_problem_is_rewritten_where_its_logits_are_upcast(monkeypatch) -> None:
    """examples/problems/level1/26_token_log_probs.py (bf16 logits, float32 log-probabilities over a
    vocabulary) at its small sizes: its logsumexp is found through the cast, and the values stay."""
    from conftest import EXAMPLES

    from kernelopt.capture import capture
    from kernelopt.capture.rewrites import online_softmax as module
    from kernelopt.capture.rewrites import passes
    from kernelopt.problem import load_problem

    problem = load_problem(EXAMPLES / "level1/26_token_log_probs.py").small()
    model, inputs = problem.build_model(0, "cpu"), problem.make_inputs(0, "cpu")
    calls: list[int] = []

    def counted(graph: torch.fx.Graph) -> int:
        calls.append(rewrite_for_online_softmax(graph))
        return calls[-1]

    counted.__module__ = module.__name__
    monkeypatch.setitem(passes.COMPILE_PASSES, module.ONLINE_SOFTMAX_OPTION, counted)
    with compat.fresh_compile():  # a cached compile of the same graph (an earlier test's) runs no pass
        artifact = capture(model, inputs, {module.ONLINE_SOFTMAX_OPTION: True})
    assert calls and set(calls) == {1}
    torch.testing.assert_close(artifact.compiled(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)


def test_a_training_step_keeps_its_values_and_gradients() -> None:
    """In a training graph the rewritten nodes are also what the backward saves: the forward's value
    and the gradients stay eager's (the forward held a scaled log-softmax and a scaled logsumexp)."""
    from conftest import compiled_and_eager_step

    torch.manual_seed(0)
    linear = torch.nn.Linear(32, 300)

    def step(x: torch.Tensor) -> torch.Tensor:
        logits = linear(x)
        return torch.log_softmax(logits / 0.7, dim=-1)[:, :5].sum() + torch.logsumexp(logits * 2.0, dim=-1).sum()

    got, grad, ref, ref_grad, seen = compiled_and_eager_step(step, torch.randn(8, 32), linear, rewrite_for_online_softmax)
    assert seen[0] == 2  # the forward graph's two; the backward's has none
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-5)
