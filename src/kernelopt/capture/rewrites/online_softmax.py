"""Softmax statistics given back to Inductor's online softmax: one pass over each row fewer.

Inductor's post-grad pattern for the online softmax (a row's max and sum of exponentials in one loop)
only knows ``exp(y - max(y))`` summed with ``keepdim``; two common forms reach it otherwise, and a row
too wide for one program's registers is then read once more than it needs:

- **A scaled softmax.** Inductor's joint-graph pass writes ``softmax(x * c)`` and ``log_softmax(x / t)``
  (a temperature, an attention scale) as ``exp((x - max(x)) * c)``, so as not to write ``x * c`` out
  (a scale held in a one-element tensor, as ``exp((x*s - max(x*s)) * (s*t))`` with ``s`` its sign).
  The max and the sum become two loops: a log-softmax reads its row three times (log-softmax over a
  50257-wide vocabulary on the H200: 0.45 ms, four passes of traffic). It is written back as
  ``y - max(y)`` with ``y = x * c`` (the same values for a positive ``c``, infinities and NaNs
  included). Torch versions differ in what the joint-graph pass leaves: older ones the bare stable
  form, newer ones ``where(all finite, stable form, y - max(y))``, whose second branch is kept.
- **A logsumexp** (``torch.logsumexp``, a ``Categorical``'s normalised logits): its decomposition
  subtracts the max with infinities masked to zero, ``log(sum(exp(y - where(isinf(m), 0, m)))) + ...``,
  which the pattern does not match either. It is written as ``where(isinf(m), m, log(sum(exp(y - m))) + m)``,
  the same value for every row (all ``-inf``: ``-inf``; an ``inf``: ``inf``; a NaN: NaN).

The rewrite runs before Inductor's own patterns wherever the compile options hold
``kernelopt.online_softmax`` (a graph variant of the graph stage, a knob of the compiler-knob search,
an export verified under it): Inductor then writes its online softmax. Nothing else in a graph changes.
"""

from __future__ import annotations

from typing import Any

import torch

ONLINE_SOFTMAX_OPTION = "kernelopt.online_softmax"  # a compile option of kernelopt's own: True

_aten = torch.ops.aten


def is_call(node: Any, *targets: Any) -> bool:
    """Whether ``node`` is a graph node calling one of ``targets``."""
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _max_subtracted(node: Any) -> tuple[torch.fx.Node, Any] | None:
    """``(y, dims)`` where ``node`` is ``y - amax(y, dims, keepdim=True)``, else None."""
    if not is_call(node, _aten.sub.Tensor) or len(node.args) != 2 or node.kwargs.get("alpha", 1) != 1:
        return None
    y, amax = node.args
    dims = _amax_dims(amax, y)
    return (y, dims) if dims is not None else None


def _positive_scale(node: Any) -> tuple[Any, Any, float] | None:
    """``(op, stable, c)`` where ``node`` is ``stable * c`` or ``stable / c`` for a positive number
    ``c``, else None (a tensor scale's sign is not known when the graph is written)."""
    if not is_call(node, _aten.mul.Tensor, _aten.div.Tensor, _aten.mul.Scalar, _aten.div.Scalar) or len(node.args) != 2:
        return None
    stable, c = node.args
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0:
        return None
    return node.target, stable, float(c)


def _plain_form(scaled: torch.fx.Node, graph: torch.fx.Graph) -> torch.fx.Node | None:
    """The node ``y - max(y)`` that stands for ``scaled`` (a joint-graph stable form), made in front
    of ``scaled`` where the graph does not hold it already; None where ``scaled`` is not one."""
    if is_call(scaled, _aten.where.self) and len(scaled.args) == 3:
        stable, plain = scaled.args[1], scaled.args[2]
        # the branch taken when a row holds an infinity: the softmax as written, where the other is
        # its stable form (anything else in a where is left alone)
        return plain if isinstance(plain, torch.fx.Node) and _stable_form_of(stable, plain) else None
    found = _positive_scale(scaled)
    if found is None:
        return None
    op, stable, c = found
    parts = _max_subtracted(stable)
    if parts is None:
        return None
    x, dims = parts
    with graph.inserting_before(scaled):
        y = _call(graph, op, x, c, like=scaled)
        return _call(
            graph, _aten.sub.Tensor, y, _call(graph, _aten.amax.default, y, dims, True, like=scaled), like=scaled
        )


def _call(graph: torch.fx.Graph, op: Any, *args: Any, like: Any, kwargs: dict[str, Any] | None = None) -> torch.fx.Node:
    """A new node ``op(*args, **kwargs)`` at the graph's insertion point, with ``like``'s source location
    and its value's shape and dtype (``op`` run on the arguments' fake tensors), as Inductor's lowering
    wants."""
    kwargs = kwargs or {}
    node = graph.call_function(op, tuple(args), kwargs)
    node.meta.update({k: v for k, v in like.meta.items() if k in ("stack_trace", "nn_module_stack")})
    vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in args]
    named = {k: v.meta.get("val") if isinstance(v, torch.fx.Node) else v for k, v in kwargs.items()}
    known = [*vals, *named.values()]
    modes = {id(getattr(v, "fake_mode", None)) for v in known if isinstance(v, torch.Tensor)}
    if all(v is not None for v in known) and len(modes) == 1:  # one graph's values (a traced graph may mix)
        node.meta["val"] = op(*vals, **named)
    return node


def _stable_form_of(stable: Any, plain: Any) -> bool:
    """Whether ``stable`` is ``(x - max(x)) op c`` and ``plain`` is ``y - max(y)`` for ``y = x op c``
    over the same dims, where ``x`` and ``y``'s operand are one tensor up to the sign the joint-graph
    pass multiplies by (one) and a cast to the softmax's dtype (a bf16 input, a ``dtype=`` argument);
    or the same with a one-element tensor ``t`` for ``c`` (a temperature kept in a buffer or parameter:
    :func:`_tensor_stable_form_of`)."""
    scale, plain_parts = _positive_scale(stable), _max_subtracted(plain)
    if plain_parts is None:
        return False
    if scale is None:
        return _tensor_stable_form_of(stable, plain_parts)
    op, inner, c = scale
    stable_parts = _max_subtracted(inner)
    y, dims = plain_parts
    if stable_parts is None or stable_parts[1] != dims:
        return False
    y_scale = _positive_scale(_uncast(y))
    if y_scale is None:
        return False
    y_op, base, y_c = y_scale
    x = _unsigned(stable_parts[0])
    return y_op == op and y_c == c and (base is x or base is _uncast(x))


def _tensor_stable_form_of(stable: Any, plain_parts: tuple[torch.fx.Node, Any]) -> bool:
    """Whether ``stable`` is the joint-graph pass's form of a softmax scaled by a one-element tensor ``t``,
    ``(x*s - max(x*s)) op (s*t)`` with ``s = where(t >= 0, 1, -1)``, and ``plain_parts`` (``y`` and its
    dims) the plain form's ``y = x op t``. The two are equal wherever ``t`` is finite and not zero (``s*t``
    is ``|t|``, which passes through the max), and where it is not, the pass's own test takes the plain
    form anyway."""
    if not is_call(stable, _aten.mul.Tensor, _aten.div.Tensor) or len(stable.args) != 2:
        return False
    inner, denominator = stable.args
    if not is_call(denominator, _aten.mul.Tensor) or len(denominator.args) != 2:
        return False
    sign, t = denominator.args
    if not _sign_of(sign, t) or not _one_element(t):
        return False
    stable_parts = _max_subtracted(inner)
    y, dims = plain_parts
    if stable_parts is None or stable_parts[1] != dims:
        return False
    signed = stable_parts[0]
    if not is_call(signed, _aten.mul.Tensor) or len(signed.args) != 2 or signed.args[1] is not sign:
        return False
    x = signed.args[0]
    scaled = _uncast(y)
    if not is_call(scaled, stable.target) or len(scaled.args) != 2 or scaled.args[1] is not t:
        return False
    return scaled.args[0] is x or scaled.args[0] is _uncast(x)


def _sign_of(node: Any, t: Any) -> bool:
    """Whether ``node`` is ``where(t >= 0, 1, -1)``, the joint-graph pass's sign of a tensor scale."""
    if not is_call(node, _aten.where.self) or len(node.args) != 3:
        return False
    test, one, minus_one = node.args
    if not is_call(test, _aten.ge.Scalar) or test.args[0] is not t or test.args[1] != 0:
        return False
    is_one = (is_call(one, _aten.scalar_tensor.default) and one.args[0] == 1) or (
        is_call(one, _aten.full.default) and list(one.args[0]) == [] and one.args[1] == 1
    )
    return is_one and is_call(minus_one, _aten.neg.default) and minus_one.args[0] is one


def _one_element(node: Any) -> bool:
    """Whether ``node``'s value holds one element (a scale for the whole row, not one per column)."""
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(value, torch.Tensor) and value.numel() == 1


def _unsigned(node: Any) -> Any:
    """``x`` for ``x * 1`` (the joint-graph pass's sign of a positive scale), else ``node``."""
    return node.args[0] if is_call(node, _aten.mul.Tensor) and len(node.args) == 2 and node.args[1] == 1 else node


def _uncast(node: Any) -> Any:
    """``x`` for a cast of ``x`` to another dtype, else ``node``."""
    cast = torch.ops.prims.convert_element_type.default
    return node.args[0] if is_call(node, cast, _aten._to_copy.default) else node


def rewrite_for_online_softmax(graph: torch.fx.Graph) -> int:
    """Write every scaled softmax and logsumexp of ``graph`` (a post-grad ATen graph) in the form
    Inductor's online-softmax pattern matches; how many were rewritten. The nodes left without users
    are removed."""
    count = 0
    for node in list(graph.nodes):
        if not is_call(node, _aten.exp.default) or not node.users:
            continue  # (a node erased by an earlier rewrite has no users)
        scaled = node.args[0]
        if not isinstance(scaled, torch.fx.Node):
            continue
        plain = _plain_form(scaled, graph)
        if plain is not None and plain is not scaled:
            scaled.replace_all_uses_with(plain)
            erase_orphans(graph, scaled)
            count += 1
        elif _logsumexp(node, graph):
            count += 1
    if count:
        graph.lint()
    return count


def _logsumexp(exp: torch.fx.Node, graph: torch.fx.Graph) -> bool:
    """Rewrite the logsumexp whose ``exp`` this is (``log(sum(exp(y - w), dims)) + w'`` with
    ``w = where(|m| == inf, 0, m)``, ``m = amax(y, dims, keepdim=True)`` and ``w'`` it or it squeezed)
    as ``where(|m| == inf, m, log(sum(exp(y - m), dims, keepdim=True)) + m)``, squeezed as the sum was;
    whether it was one."""
    sub: Any = exp.args[0]
    if not is_call(sub, _aten.sub.Tensor) or len(sub.args) != 2 or len(exp.users) != 1:
        return False
    y, masked = sub.args
    if not is_call(masked, _aten.where.self) or len(masked.args) != 3:
        return False
    is_inf, zero, amax = masked.args
    dims = _amax_dims(amax, y)
    if dims is None or not is_inf_test(is_inf, amax) or not _is_zero(zero):
        return False
    total: Any = next(iter(exp.users))
    if not is_call(total, _aten.sum.dim_IntList) or total.args[0] is not exp or list(total.args[1]) != list(dims):
        return False
    keepdim = bool(total.args[2] if len(total.args) > 2 else total.kwargs.get("keepdim", False))
    if len(total.users) != 1 or total.kwargs.get("dtype") is not None:
        return False
    (log,) = total.users
    if not is_call(log, _aten.log.default) or len(log.users) != 1:
        return False
    out: Any = next(iter(log.users))
    shift = masked if keepdim else None
    if not keepdim:
        squeezed = [a for a in out.args if is_call(a, _aten.squeeze.dims, _aten.squeeze.dim) and a.args[0] is masked]
        shift = squeezed[0] if squeezed else None
    if (
        not is_call(out, _aten.add.Tensor)
        or out.kwargs.get("alpha", 1) != 1
        or shift is None
        or set(out.args) != {log, shift}
    ):
        return False
    with graph.inserting_before(out):
        plain = _call(graph, _aten.sub.Tensor, y, amax, like=sub)
        sums = _call(
            graph, _aten.sum.dim_IntList, _call(graph, _aten.exp.default, plain, like=exp), dims, True, like=total
        )
        value = _call(graph, _aten.add.Tensor, _call(graph, _aten.log.default, sums, like=log), amax, like=out)
        result = _call(graph, _aten.where.self, is_inf, amax, value, like=out)
        if not keepdim:
            result = _call(graph, _aten.squeeze.dims, result, list(dims), like=out)
    out.replace_all_uses_with(result)
    erase_orphans(graph, out)
    return True


def _amax_dims(amax: Any, of: Any) -> Any:
    """The dims of ``amax`` where it is ``amax(of, dims, keepdim=True)``, else None."""
    if not is_call(amax, _aten.amax.default) or amax.args[0] is not of:
        return None
    dims = amax.args[1] if len(amax.args) > 1 else amax.kwargs.get("dim")
    keepdim = amax.args[2] if len(amax.args) > 2 else amax.kwargs.get("keepdim", False)
    return dims if keepdim and dims is not None else None


def is_inf_test(node: Any, of: torch.fx.Node) -> bool:
    """Whether ``node`` is ``|of| == inf`` (torch's logsumexp masks infinite maxima so)."""
    if not is_call(node, _aten.eq.Scalar) or node.args[1] != float("inf"):
        return False
    return is_call(node.args[0], _aten.abs.default) and node.args[0].args[0] is of


def _is_zero(node: Any) -> bool:
    """Whether ``node`` is the number zero, or a zero-dimensional tensor full of it."""
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return node == 0
    return is_call(node, _aten.full.default) and list(node.args[0]) == [] and node.args[1] == 0


def erase_orphans(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """``node`` and what only it used, once nothing uses them (the stable form and, where the graph
    has one, its test for infinities): no other node of the graph is touched."""
    pending, erased = [node], set()
    while pending:
        n = pending.pop()
        if n in erased or n.op != "call_function" or n.users:
            continue
        inputs = list(n.all_input_nodes)
        graph.erase_node(n)
        erased.add(n)
        pending.extend(inputs)
