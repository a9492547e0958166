"""A compile under kernelopt's own compile options stopped on purpose where their rewrites change
nothing (a graph variant that would compile the graph as it already is), and the probes that tell
beforehand: a compile in a :func:`probing` context hands each graph's post-grad form, copied, to every
probe, so that what a later compile under an option would change is known from the capture itself. The
mechanism only: the rewrites themselves live in :mod:`kernelopt.capture.rewrites`, and
:func:`~kernelopt.capture.compat.post_grad_pass` calls :func:`check_rewritten` after them."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)


class NothingRewritten(Exception):
    """A compile under kernelopt's own options whose rewrites found nothing to change in a graph,
    stopped before Inductor's scheduling, code generation and autotuning: it would have compiled the
    graph as it already is."""


STOPPED = "found nothing to rewrite"  # in the reason of every compile stopped here
Probe = Callable[[torch.fx.Graph], int]  # how many places of a graph an option could change


@dataclass(frozen=True)
class _Stop:
    probe: Probe | None


_STOP: ContextVar[_Stop | None] = ContextVar("kernelopt_stop_unchanged", default=None)


@contextlib.contextmanager
def stop_where_unchanged(probe: Probe | None = None) -> Iterator[None]:
    """In this context a compile whose rewrites change nothing in a graph of operations raises
    :class:`NothingRewritten` from the post-grad pass (a graph variant of a one-graph model: under
    max-autotune the compile it saves took about 35 s on the H200). ``probe``: for an option Inductor
    applies later, in its own scheduling (the row split's cooperative reductions), how many places of
    the post-grad graph it could change; it runs beside the rewrites and counts as theirs."""
    token = _STOP.set(_Stop(probe))
    try:
        yield
    finally:
        _STOP.reset(token)


def stop_probe() -> Probe | None:
    """The probe of the :func:`stop_where_unchanged` context this compile runs in, if any."""
    stop = _STOP.get()
    return stop.probe if stop is not None else None


def check_rewritten(graph: torch.fx.Graph, changed: int, names: str) -> None:
    """Raise :class:`NothingRewritten` in a :func:`stop_where_unchanged` context where ``changed``
    (the rewrites' count) is 0 for a graph that computes anything."""
    if _STOP.get() is not None and not changed and any(n.op == "call_function" for n in graph.nodes):
        raise NothingRewritten(f"{names} {STOPPED}: Inductor would compile the graph as it is")


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


@dataclass(frozen=True)
class _Probing:
    probes: Mapping[str, Probe]
    counts: list[dict[str, int | None]]


_PROBING: ContextVar[_Probing | None] = ContextVar("kernelopt_probing", default=None)


@contextlib.contextmanager
def probing(probes: Mapping[str, Probe]) -> Iterator[list[dict[str, int | None]]]:
    """In this context a compile also hands each graph's post-grad form (after the compile's own
    rewrites) to every probe, each on a copy: the compile itself is unchanged. Yields, per graph in the
    order compiled, what each probe counted (None: it failed). A graph stage can then leave out a
    variant whose options would change no graph without compiling it, whatever the number of graphs."""
    token = _PROBING.set(_Probing(dict(probes), []))
    try:
        yield _PROBING.get().counts  # type: ignore[union-attr]
    finally:
        _PROBING.reset(token)


def probing_now() -> bool:
    """Whether this compile runs in a :func:`probing` context."""
    return _PROBING.get() is not None


def probe_graph(graph: torch.fx.Graph) -> int:
    """The post-grad pass of a :func:`probing` context: every probe on its own copy of ``graph``, the
    counts recorded; changes nothing (0)."""
    state = _PROBING.get()
    if state is None:
        return 0
    row: dict[str, int | None] = {}
    for name, probe in state.probes.items():
        try:
            row[name] = int(probe(copied(graph)))
        except Exception as exc:  # a rewrite that cannot run here (no nvcc, another torch): unknown, so compiled
            log.warning(
                "probe %s failed on graph %d, so its variant is compiled: %s: %s",
                name,
                len(state.counts),
                type(exc).__name__,
                (str(exc).splitlines() or [""])[0][:300],
            )
            row[name] = None
    state.counts.append(row)
    return 0


def copied(graph: torch.fx.Graph) -> torch.fx.Graph:
    """A copy of ``graph`` a rewrite may change: its own nodes, each with a copy of the original's meta."""
    new = torch.fx.Graph()
    out = new.graph_copy(graph, {})
    new.output(out)
    return new
