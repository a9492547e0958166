"""A search whose candidates are Inductor options for a whole target (the model, or one graph),
each judged end to end: the engine's set-up both the compiler-knob and the graph stages share."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kernelopt.pipeline.run_context import RunContext
from kernelopt.search.candidate import Candidate, EvaluationResult
from kernelopt.search.engine import SearchEngine, SearchOutcome
from kernelopt.search.nodes import Node, NodeStore
from kernelopt.search.operators import Operator, SearchContext
from kernelopt.search.termination import Budget

Evaluate = Callable[[Node], EvaluationResult]


@dataclass
class OptionsSearch:
    """What the search found: the engine's outcome, the nodes it evaluated (not the root) and the
    winner, a passed node faster than the root (None: the root stays)."""

    outcome: SearchOutcome
    evaluated: list[Node]
    winner: Node | None


def search_options(
    run: RunContext,
    nodes: NodeStore,
    target: str,
    ops: Sequence[Operator],
    budget: Budget,
    evaluate: Evaluate,
    facts: dict[str, Any],
) -> OptionsSearch:
    """Search ``target`` from the root (no options) with ``ops``, each candidate through ``evaluate``."""

    def evaluate_batch(batch: Iterable[Node]) -> Iterator[tuple[Node, EvaluationResult]]:
        for node in batch:
            yield node, evaluate(node)

    def context(history: list[Node]) -> SearchContext:
        return SearchContext(target=target, nodes=history, rng=random.Random(run.seed), facts=facts)

    outcome = SearchEngine(
        nodes,
        target,
        Candidate(target, "root", options={}),
        list(ops),
        run.selection,
        budget,
        evaluate_batch,
        context,
        on_event=lambda kind, data: run.emit(kind, {**data, "kernel": target}),
        seed=run.seed,
    ).run()
    best = outcome.best
    evaluated = [n for n in nodes.evaluated(target) if n.operator != "root"]
    won = best is not None and best.operator != "root" and best.result is not None and (best.fitness or 0.0) > 1.0
    return OptionsSearch(outcome, evaluated, best if won else None)
