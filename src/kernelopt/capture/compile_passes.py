"""kernelopt's own compile options: each a post-grad rewrite that
:func:`~kernelopt.capture.compat.compile_fx_with_inner_hook` runs where the options hold it (True)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import torch

from kernelopt.capture.cluster_norm import (
    CLUSTER_NORM_BULK_OPTION,
    CLUSTER_NORM_OPTION,
    rewrite_for_cluster_norm,
    rewrite_for_cluster_norm_bulk,
)
from kernelopt.capture.cluster_softmax import (
    CLUSTER_SOFTMAX_BULK_OPTION,
    CLUSTER_SOFTMAX_OPTION,
    rewrite_for_cluster_softmax,
    rewrite_for_cluster_softmax_bulk,
)
from kernelopt.capture.online_softmax import ONLINE_SOFTMAX_OPTION, rewrite_for_online_softmax
from kernelopt.capture.row_softmax_op import NORM_OP_NAME as ROW_NORM_OP
from kernelopt.capture.row_softmax_op import OP_NAME as ROW_SOFTMAX_OP

COMPILE_PASSES: dict[str, Callable[[torch.fx.Graph], int]] = {  # each returns how many changes it made
    ONLINE_SOFTMAX_OPTION: rewrite_for_online_softmax,
    CLUSTER_SOFTMAX_OPTION: rewrite_for_cluster_softmax,
    CLUSTER_SOFTMAX_BULK_OPTION: rewrite_for_cluster_softmax_bulk,
    CLUSTER_NORM_OPTION: rewrite_for_cluster_norm,
    CLUSTER_NORM_BULK_OPTION: rewrite_for_cluster_norm_bulk,
}
# The ops of kernelopt's own those rewrites put in a graph, as Inductor's wrapper calls them: what gate 1
# accepts in a graph candidate's call sequence besides the original's own calls.
OWN_OPS = frozenset({ROW_SOFTMAX_OP, ROW_NORM_OP})


class NothingRewritten(Exception):
    """A compile under kernelopt's own options whose rewrites found nothing to change in a graph,
    stopped before Inductor's scheduling, code generation and autotuning: it would have compiled the
    graph as it already is."""


_STOP_UNCHANGED: ContextVar[bool] = ContextVar("kernelopt_stop_unchanged", default=False)


@contextlib.contextmanager
def stop_where_unchanged() -> Iterator[None]:
    """In this context a compile whose rewrites change nothing in a graph of operations raises
    :class:`NothingRewritten` from the post-grad pass (a graph variant of a one-graph model: under
    max-autotune the compile it saves took about 35 s on the H200)."""
    token = _STOP_UNCHANGED.set(True)
    try:
        yield
    finally:
        _STOP_UNCHANGED.reset(token)


def check_rewritten(graph: torch.fx.Graph, changed: int, names: str) -> None:
    """Raise :class:`NothingRewritten` in a :func:`stop_where_unchanged` context where ``changed``
    (the rewrites' count) is 0 for a graph that computes anything."""
    if _STOP_UNCHANGED.get() and not changed and any(n.op == "call_function" for n in graph.nodes):
        raise NothingRewritten(f"{names} found nothing to rewrite: Inductor would compile the graph as it is")


def rewritten_nothing(exc: BaseException) -> NothingRewritten | None:
    """The :class:`NothingRewritten` a compile's error was raised for (Dynamo wraps a backend's error)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, NothingRewritten):
            return e
        pending += [e.__cause__, e.__context__, getattr(e, "inner_exception", None)]
    return None
