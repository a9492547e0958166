"""Operators: what proposes candidates, and the registry they plug into.

An operator turns one parent node into new candidates. The LLM-free operators
(launch-config tuning, compiler-knob search) and, later, the LLM agents all
implement the same small protocol, so the engine, the policy and the store
never learn which kind of proposer they are talking to.

Writing an operator
-------------------

.. code-block:: python

    from kernelopt.search import Candidate, register_operator

    @register_operator("double-xblock")
    class DoubleXBlock:
        name = "double-xblock"

        def propose(self, parent, ctx, n):
            config = dict(parent.candidate.config or ctx.root_config or {})
            config["XBLOCK"] = 2 * config.get("XBLOCK", 64)
            return [Candidate(ctx.target, self.name, source=parent.candidate.source, config=config)]

The contract:

* ``propose(parent, ctx, n)`` returns *at most* ``n`` candidates for
  ``ctx.target`` (fewer, or none, is fine: an operator that has nothing new to
  say returns ``[]``). Each candidate's ``operator`` names the proposer.
* Duplicates are never evaluated: the engine deduplicates by
  :meth:`Candidate.key` against the whole run. But a round in which no
  operator proposes anything new ends the search ("search space exhausted"),
  so an operator sampling from a space larger than ``n`` should skip the keys
  ``ctx.nodes`` already holds rather than re-draw them.
* Randomness comes from ``ctx.rng`` only. The engine seeds it per round, so a
  run resumed after a kill proposes exactly what the uninterrupted run would
  have; an operator with its own unseeded randomness breaks that.
* ``ctx.nodes`` is the whole history of the target (pending and evaluated, with
  each failure's gate and reason): an LLM agent reads it for feedback, e.g. the
  last correctness failure to repair. ``ctx.facts`` carries measured facts
  about the target (``time_us``, ``min_time_us``, ``peak_gbps``, ...).
* An operator does not evaluate anything and needs no GPU: proposals are made
  on the CPU while the GPU benchmarks. An exception it raises stops the run,
  so an operator that calls a network service (an LLM) handles its own
  retries and returns ``[]`` rather than raising on a transient failure.

Registering makes an operator selectable by name (``--operators``). The
factory is called once per search, so an operator may keep state across
rounds of one target (a conversation, a queue of configs still to try).
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from kernelopt.errors import KerneloptError
from kernelopt.search.candidate import Candidate
from kernelopt.search.nodes import Node

if TYPE_CHECKING:  # importing the capture package pulls in torch; the search core does not need it
    from kernelopt.capture.output_code import KernelDef


@dataclass
class SearchContext:
    """What an operator may know when it proposes: the target, its original kernel, the history.

    ``kernel``: the original generated kernel (None for the model target).
    ``root_source`` / ``root_config``: the original source and the launch config
    Inductor chose, the starting point every lineage descends from.
    ``nodes``: every node of the target so far, in creation order.
    ``rng``: the only source of randomness an operator should use (seeded per round).
    ``facts``: measured facts about the target, e.g. ``time_us``, ``min_time_us``, ``peak_gbps``.
    ``round``: the round being proposed for (set by the engine).
    """

    target: str
    kernel: KernelDef | None = None
    root_source: str | None = None
    root_config: dict[str, Any] | None = None
    nodes: list[Node] = field(default_factory=list)
    rng: random.Random = field(default_factory=random.Random)
    facts: dict[str, Any] = field(default_factory=dict)
    round: int = 0


@runtime_checkable
class Operator(Protocol):
    """Proposes candidates from a parent node. See the module docstring for the contract."""

    name: str

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]: ...


OperatorFactory = Callable[[], Operator]
F = TypeVar("F", bound=Callable[[], Any])

_REGISTRY: dict[str, OperatorFactory] = {}

DEFAULT_OPERATORS: tuple[str, ...] = ("launch-config", "eviction-policy")
"""What ``optimize`` and ``bench`` search with unless told otherwise: the LLM-free kernel operators."""

BUILTIN_OPERATOR_MODULES: tuple[str, ...] = (
    "kernelopt.search.builtin_operators",
    "kernelopt.search.knobs",
    "kernelopt.search.structural",
    "kernelopt.search.graph_variants",
)
"""Modules whose import registers the built-in operators; imported on the first registry lookup,
so ``available_operators()`` lists them without every caller importing each module first."""

_builtins_loaded = False


def _load_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    for module in BUILTIN_OPERATOR_MODULES:
        importlib.import_module(module)
    _builtins_loaded = True


def register_operator(name: str) -> Callable[[F], F]:
    """Register a factory (a class, or a function returning an operator) under ``name``."""
    if not name or name != name.strip() or "," in name:
        raise ValueError(f"operator name {name!r} must be non-empty, without commas or surrounding spaces")

    def decorator(factory: F) -> F:
        existing = _REGISTRY.get(name)
        if existing is not None and getattr(existing, "__qualname__", None) != getattr(factory, "__qualname__", None):
            raise ValueError(f"operator {name!r} is already registered by {existing!r}")
        _REGISTRY[name] = factory  # the same factory again (a module reload) replaces itself
        return factory

    return decorator


def unregister_operator(name: str) -> None:
    """Remove ``name`` from the registry (tests register throwaway operators)."""
    _REGISTRY.pop(name, None)


def available_operators() -> list[str]:
    """The registered operator names, sorted."""
    _load_builtins()
    return sorted(_REGISTRY)


def make_operators(names: list[str]) -> list[Operator]:
    """One fresh operator per name, in order; an unknown name is a :class:`KerneloptError` listing the known ones."""
    _load_builtins()
    unknown = [n for n in names if n not in _REGISTRY]
    if unknown:
        known = ", ".join(available_operators()) or "none registered"
        plural = "s" if len(unknown) > 1 else ""
        raise KerneloptError(f"unknown operator{plural} {', '.join(unknown)}; available: {known}")
    operators = []
    for name in names:
        op = _REGISTRY[name]()
        if not isinstance(op, Operator):
            raise TypeError(f"operator factory {name!r} returned {op!r}, which has no name and propose()")
        operators.append(op)
    return operators
