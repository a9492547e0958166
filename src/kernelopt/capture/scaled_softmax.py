"""A scaled softmax given back to Inductor's online softmax: one pass over each row fewer.

Inductor's joint-graph pass writes ``softmax(x * c)`` and ``log_softmax(x / t)`` (a temperature, an
attention scale) as ``exp((x - max(x)) * c)``, so as not to write ``x * c`` out; its post-grad
pattern for the online softmax (max and sum of exponentials in one loop) only knows
``exp(y - max(y))``, and no longer matches. A row too wide for one program's registers is then read
three times: once for its max, once for its sum, once for the output (log-softmax over a 50257-wide
vocabulary on the H200: 0.42 ms, four passes of traffic). Under this graph option the graph stage
writes the scaled form back as ``y - max(y)`` with ``y = x * c`` (the same values for a positive
``c``, infinities and NaNs included), before Inductor's own patterns run: it then writes the online
softmax, and the row is read twice.

Torch versions differ in what the joint-graph pass leaves: older ones the bare stable form, newer ones
``where(all finite, stable form, y - max(y))``; both are recognised. Nothing else in a graph changes.
"""

from __future__ import annotations

from typing import Any

import torch

SCALED_SOFTMAX_OPTION = "kernelopt.scaled_softmax"  # a graph option of kernelopt's own: True

_aten = torch.ops.aten


def _is(node: Any, *targets: Any) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _max_subtracted(node: Any) -> tuple[torch.fx.Node, Any] | None:
    """``(y, dims)`` where ``node`` is ``y - amax(y, dims, keepdim=True)``, else None."""
    if not _is(node, _aten.sub.Tensor) or len(node.args) != 2 or node.kwargs.get("alpha", 1) != 1:
        return None
    y, amax = node.args
    if not _is(amax, _aten.amax.default) or amax.args[0] is not y:
        return None
    dims = amax.args[1] if len(amax.args) > 1 else amax.kwargs.get("dim")
    keepdim = amax.args[2] if len(amax.args) > 2 else amax.kwargs.get("keepdim", False)
    return (y, dims) if keepdim and dims is not None else None


def _positive_scale(node: Any) -> tuple[Any, Any, float] | None:
    """``(op, stable, c)`` where ``node`` is ``stable * c`` or ``stable / c`` for a positive number
    ``c``, else None (a tensor scale's sign is not known when the graph is written)."""
    if not _is(node, _aten.mul.Tensor, _aten.div.Tensor, _aten.mul.Scalar, _aten.div.Scalar) or len(node.args) != 2:
        return None
    stable, c = node.args
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0:
        return None
    return node.target, stable, float(c)


def _plain_form(scaled: torch.fx.Node, graph: torch.fx.Graph) -> torch.fx.Node | None:
    """The node ``y - max(y)`` that stands for ``scaled`` (a joint-graph stable form), made in front
    of ``scaled`` where the graph does not hold it already; None where ``scaled`` is not one."""
    if _is(scaled, _aten.where.self) and len(scaled.args) == 3:
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
        y = graph.call_function(op, (x, c))
        amax = graph.call_function(_aten.amax.default, (y, dims, True))
        plain = graph.call_function(_aten.sub.Tensor, (y, amax))
    for made in (y, amax, plain):
        made.meta.update({k: v for k, v in scaled.meta.items() if k in ("stack_trace", "nn_module_stack")})
    _copy_val(y, scaled)
    _copy_val(plain, scaled)
    if "val" in stable.args[1].meta:
        amax.meta["val"] = stable.args[1].meta["val"]
    return plain


def _stable_form_of(stable: Any, plain: Any) -> bool:
    """Whether ``stable`` is ``(x - max(x)) op c`` and ``plain`` is ``y - max(y)`` for ``y = x op c``
    over the same dims, where ``x`` and ``y``'s operand are one tensor up to the sign the joint-graph
    pass multiplies by (one) and a cast to the softmax's dtype (a bf16 input, a ``dtype=`` argument)."""
    scale, plain_parts = _positive_scale(stable), _max_subtracted(plain)
    if scale is None or plain_parts is None:
        return False
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


def _unsigned(node: Any) -> Any:
    """``x`` for ``x * 1`` (the joint-graph pass's sign of a positive scale), else ``node``."""
    return node.args[0] if _is(node, _aten.mul.Tensor) and len(node.args) == 2 and node.args[1] == 1 else node


def _uncast(node: Any) -> Any:
    """``x`` for a cast of ``x`` to another dtype, else ``node``."""
    cast = torch.ops.prims.convert_element_type.default
    return node.args[0] if _is(node, cast, _aten._to_copy.default) else node


def _copy_val(to: torch.fx.Node, like: torch.fx.Node) -> None:
    if "val" in like.meta:
        to.meta["val"] = like.meta["val"]


def rewrite_scaled_softmax(graph: torch.fx.Graph) -> int:
    """Write every scaled softmax of ``graph`` (a post-grad ATen graph) that feeds an ``exp`` as
    ``y - max(y)``; how many were rewritten. The nodes left without users are removed."""
    count = 0
    for node in list(graph.nodes):
        if not _is(node, _aten.exp.default):
            continue
        scaled = node.args[0]
        if not isinstance(scaled, torch.fx.Node) or not scaled.users:
            continue
        plain = _plain_form(scaled, graph)
        if plain is None or plain is scaled:
            continue
        scaled.replace_all_uses_with(plain)
        _erase_orphans(graph, scaled)
        count += 1
    if count:
        graph.lint()
    return count


def _erase_orphans(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
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
