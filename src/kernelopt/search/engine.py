"""The search loop of one target: select parents, propose, persist, evaluate, repeat.

The engine knows nothing of how a candidate is evaluated: it is handed an
``evaluate`` callback (the GPU evaluator in production, a fake in the tests)
and a ``context`` callback that builds what operators may know. What it owns
is the order of operations that makes a run killable at any moment:

1. The root (the compiler's own kernel) is inserted once and recorded with
   fitness 1.0 without being evaluated: it *is* the baseline every speedup is
   measured against.
2. On start, nodes left pending by a killed run are evaluated first.
3. Each round, the policy picks parents among evaluated nodes, every operator
   proposes candidates per parent, duplicates (by key, against the whole run
   and within the round) are dropped, and all new nodes are persisted as
   pending, in one transaction, *before* any is evaluated.
4. Each result is recorded the moment the evaluator yields it, so a kill loses
   at most the evaluations in flight, and those are pending rows a resume
   picks up. A budget stop mid-batch still records the results the evaluator
   already holds (its ``ready()``): finished work is never discarded.

A resumed run continues the same search: evaluations, GPU time, rounds and
patience are recomputed from the store, and the random generators are seeded
per round from ``(seed, target, round)``, so with deterministic operators a
killed-and-resumed run evaluates the same candidates as an uninterrupted one.
Wall time is the exception: it counts this process's time only (a run that
sat killed for a night should not find its wall budget spent); bound a
resumed run with the evaluation or GPU-time budget instead.

A stop in the middle of a round (a budget, the roofline) leaves that round's
remaining nodes pending; a resume with budget left evaluates them first.
The evaluation budget never does: a round is cut to the evaluations left
before it is persisted.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kernelopt.errors import KerneloptError
from kernelopt.search.candidate import Candidate, EvaluationResult
from kernelopt.search.nodes import PENDING, ROOT_OPERATOR, Node, NodeStore
from kernelopt.search.operators import Operator, SearchContext
from kernelopt.search.policy import SelectionPolicy
from kernelopt.search.termination import IMPROVEMENT_EPSILON, Budget, SearchState, stop_reason

Evaluate = Callable[[list[Node]], Iterable[tuple[Node, EvaluationResult]]]
"""Evaluates a batch of pending nodes, yielding ``(node, result)`` as each finishes, in any order.

An evaluator that finishes several nodes at once (one call to a worker for a chunk) may
return an iterable with a ``ready()`` method giving the results it already holds without
doing more work: when a budget stops the search mid-batch, the engine records those too,
so no evaluation that was paid for is thrown away."""
ContextFactory = Callable[[list[Node]], SearchContext]
"""Builds the operators' context from the target's history (every node so far)."""
EventSink = Callable[[str, dict[str, Any]], None]
"""Progress events: ``round``, ``evaluated``, ``stopped``, each with a dict of plain data."""

ROOT_RESULT = EvaluationResult(
    passed=True,
    fitness=1.0,
    failed_gate=None,
    reason="baseline: the original (the compiler's kernel or the user's file), not evaluated",
)
EXHAUSTED = "search space exhausted: round {round} produced no new candidate"


@dataclass
class SearchOutcome:
    """How one target's search ended.

    ``best``: the passed node of highest fitness (the root when nothing beat it).
    ``pending``: nodes a mid-round stop left unevaluated (a resume evaluates them first).
    """

    best: Node | None
    stop_reason: str
    evaluations: int
    rounds: int
    failures_by_gate: dict[str, int] = field(default_factory=dict)
    pending: int = 0


def round_rng(seed: int, target: str, round: int, purpose: str) -> random.Random:
    """A generator that depends only on its arguments, so a resumed round draws what the original would have."""
    return random.Random(f"{seed}:{target}:{round}:{purpose}")


class SearchEngine:
    """Searches one target's candidate graph until a stop reason holds.

    ``candidates_per_parent`` is what each operator is asked for per parent;
    ``parents_per_round`` what the policy is asked for. ``clock`` is injectable
    so tests can drive the wall-time budget. ``seed`` seeds the per-round
    generators handed to the policy and (as ``ctx.rng``) to the operators,
    replacing whatever generator the context callback put there.
    """

    def __init__(
        self,
        nodes: NodeStore,
        target: str,
        root: Candidate,
        operators: list[Operator],
        policy: SelectionPolicy,
        budget: Budget,
        evaluate: Evaluate,
        context: ContextFactory,
        candidates_per_parent: int = 4,
        parents_per_round: int = 4,
        on_event: EventSink | None = None,
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
    ) -> None:
        if root.target != target:
            raise ValueError(f"the root candidate is for {root.target!r}, not the target {target!r}")
        if candidates_per_parent < 1 or parents_per_round < 1:
            raise ValueError("candidates_per_parent and parents_per_round must be >= 1")
        self.nodes = nodes
        self.target = target
        self.root = root if root.operator == ROOT_OPERATOR else dataclasses.replace(root, operator=ROOT_OPERATOR)
        self.operators = list(operators)
        self.policy = policy
        self.budget = budget
        self._evaluate = evaluate
        self._context = context
        self.candidates_per_parent = candidates_per_parent
        self.parents_per_round = parents_per_round
        self._on_event = on_event
        self._clock = clock
        self.seed = seed
        self.state = SearchState()
        self._facts: dict[str, Any] = {}
        self._started = 0.0

    # -- the loop --------------------------------------------------------------------

    def run(self) -> SearchOutcome:
        """Search until a stop reason holds; safe to call again on the same run after a kill."""
        self._started = self._clock()
        self._ensure_root()
        self._restore_state()

        reason = self._check()
        pending = self.nodes.pending(self.target)
        if reason is None and pending:
            self._emit("round", {"round": self.state.rounds, "resumed": True, "parents": [], "new": len(pending)})
            reason = self._evaluate_batch(self._within_budget(pending))
            if reason is None:
                self._restore_state()  # the interrupted round is complete: patience counts it now
                reason = self._check()
        while reason is None:
            reason = self._round()

        best = self.nodes.best(self.target)
        failures = self.nodes.failures_by_gate(self.target)
        left = len(self.nodes.pending(self.target))
        self._emit(
            "stopped",
            {
                "reason": reason,
                "evaluations": self.state.evaluations,
                "rounds": self.state.rounds,
                "best_fitness": self.state.best_fitness,
                "best_node_id": best.id if best else None,
                "failures_by_gate": failures,
                "pending": left,
            },
        )
        return SearchOutcome(best, reason, self.state.evaluations, self.state.rounds, failures, left)

    def _round(self) -> str | None:
        """One round: select, propose, persist, evaluate. Returns a stop reason or None."""
        round_ = self.state.rounds + 1
        self.state.rounds = round_
        history = self.nodes.nodes(self.target)
        evaluated = [n for n in history if n.status != PENDING]
        ctx = self._make_context(history, round_)
        parents = self.policy.select(
            evaluated, self.parents_per_round, round_rng(self.seed, self.target, round_, "policy")
        )

        proposals, proposed, duplicates = self._propose(parents, ctx, {n.key for n in history})
        kept = self._within_budget(proposals)
        added = self.nodes.add_many([(cand, parent.id) for cand, parent in kept], round_) if kept else []
        self._emit(
            "round",
            {
                "round": round_,
                "resumed": False,
                "parents": [p.id for p in parents],
                "proposed": proposed,
                "duplicates": duplicates,
                "over_budget": len(proposals) - len(kept),
                "new": len(added),
            },
        )
        if not added:
            return EXHAUSTED.format(round=round_)

        best_before = self.state.best_fitness
        reason = self._evaluate_batch(added)
        if reason is not None:
            return reason
        if self.state.best_fitness > best_before + IMPROVEMENT_EPSILON:
            self.state.rounds_without_improvement = 0
        else:
            self.state.rounds_without_improvement += 1
        return self._check()

    def _propose(
        self, parents: list[Node], ctx: SearchContext, known: set[str]
    ) -> tuple[list[tuple[Candidate, Node]], int, int]:
        """New (candidate, parent) pairs in proposal order, the number proposed and the duplicates dropped."""
        fresh: list[tuple[Candidate, Node]] = []
        seen = set(known)
        proposed = 0
        for parent in parents:
            for op in self.operators:
                for cand in op.propose(parent, ctx, self.candidates_per_parent):
                    if cand.target != self.target:
                        raise ValueError(
                            f"operator {op.name!r} proposed a candidate for {cand.target!r} while searching {self.target!r}"
                        )
                    proposed += 1
                    key = cand.key()
                    if key in seen:
                        continue
                    seen.add(key)
                    fresh.append((cand, parent))
        return fresh, proposed, proposed - len(fresh)

    def _evaluate_batch(self, batch: list[Node]) -> str | None:
        """Evaluate ``batch``, recording each result as it arrives; a stop reason as soon as one holds."""
        if not batch:
            return None
        waiting = {n.id: n for n in batch}
        results = self._evaluate(list(batch))
        try:
            for node, result in results:
                self._record(node, result, waiting)
                reason = self._check()
                if reason is not None:
                    ready = getattr(results, "ready", None)  # after a stop: what is finished, no new work
                    for node, result in ready() if callable(ready) else ():
                        self._record(node, result, waiting)
                    return reason
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()  # a generator still holding work in flight gets to clean up
        if waiting:
            raise RuntimeError(
                f"the evaluator finished without results for nodes {sorted(waiting)}; "
                "an evaluator must turn every failure into an EvaluationResult"
            )
        return None

    def _record(self, node: Node, result: EvaluationResult, waiting: dict[int, Node]) -> None:
        if waiting.pop(node.id, None) is None:
            raise ValueError(f"the evaluator returned node {node.id}, which is not in its batch or came back twice")
        self._account(self.nodes.record(node.id, result), result)

    # -- state -----------------------------------------------------------------------

    def _ensure_root(self) -> Node:
        key = self.root.key()
        node = self.nodes.root(self.target)
        if node is not None and node.key != key:
            raise KerneloptError(
                f"run {self.nodes.run_id} searched a different original kernel for {self.target} "
                "(the problem or its compilation changed since the run started); start a new run"
            )
        if node is None:
            node = self.nodes.add(self.root, parent_id=None, round=0)
            if node is None:
                raise KerneloptError(
                    f"run {self.nodes.run_id} already holds the original of {self.target} as a non-root node"
                )
        if node.status == PENDING:  # killed between inserting and recording the root
            node = self.nodes.record(node.id, ROOT_RESULT)
        return node

    def _restore_state(self) -> None:
        """Recompute everything but wall time from the store (a fresh start or a resume alike)."""
        history = self.nodes.nodes(self.target)
        evaluated = [n for n in history if n.status != PENDING]
        self._facts = dict(self._make_context(history, 0).facts)
        state = self.state
        state.evaluations = sum(1 for n in evaluated if not n.is_root)
        state.gpu_s = sum(_gpu_s(n.result) for n in evaluated if not n.is_root)
        state.rounds = max((n.round for n in history), default=0)
        # A round with pending nodes (cut short by a kill or a stop) is not over: patience skips it.
        complete = state.rounds - 1 if len(evaluated) < len(history) else state.rounds
        state.rounds_without_improvement = _rounds_without_improvement(evaluated, complete)
        state.best_fitness = 0.0
        state.best_time_us = None
        best = self.nodes.best(self.target)
        if best is not None:
            state.best_fitness = best.fitness or 0.0
            state.best_time_us = self._time_us(best)
        state.min_time_us = _positive(self._facts.get("min_time_us"))
        state.wall_s = self._clock() - self._started

    def _account(self, node: Node, result: EvaluationResult) -> None:
        state = self.state
        state.evaluations += 1
        state.gpu_s += _gpu_s(result)
        if result.passed and result.fitness > state.best_fitness:
            state.best_fitness = result.fitness
            state.best_time_us = self._time_us(node)
        self._emit(
            "evaluated",
            {
                "round": node.round,
                "node_id": node.id,
                "parent_id": node.parent_id,
                "operator": node.operator,
                "key": node.key,
                "passed": result.passed,
                "fitness": result.fitness,
                "failed_gate": result.failed_gate,
                "reason": result.reason,
                "worker_status": result.worker_status,
                "evaluations": state.evaluations,
                "best_fitness": state.best_fitness,
                "gpu_s": state.gpu_s,
            },
        )

    def _check(self) -> str | None:
        self.state.wall_s = self._clock() - self._started
        return stop_reason(self.budget, self.state)

    def _within_budget(self, items: list[Any]) -> list[Any]:
        """The first items the evaluation budget still allows."""
        if self.budget.max_evaluations is None:
            return items
        return items[: max(0, self.budget.max_evaluations - self.state.evaluations)]

    def _make_context(self, history: list[Node], round_: int) -> SearchContext:
        ctx = self._context(history)
        if ctx.target != self.target:
            raise ValueError(f"the context callback built a context for {ctx.target!r}, not {self.target!r}")
        ctx = dataclasses.replace(ctx, rng=round_rng(self.seed, self.target, round_, "operators"), round=round_)
        if ctx.facts.get("min_time_us") is not None:
            self.state.min_time_us = _positive(ctx.facts["min_time_us"])
        return ctx

    def _time_us(self, node: Node) -> float | None:
        """A passed node's kernel time; the root's comes from the target's facts (it is never timed here)."""
        if node.result is not None and node.result.measurements.get("kernel_time_us") is not None:
            return _positive(node.result.measurements["kernel_time_us"])
        if node.is_root:
            return _positive(self._facts.get("time_us"))
        return None

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        if self._on_event is not None:
            self._on_event(kind, {"target": self.target, **data})


def _gpu_s(result: EvaluationResult | None) -> float:
    if result is None:
        return 0.0
    value = result.measurements.get("gpu_s")
    return float(value) if value is not None else 0.0


def _positive(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if value > 0 else None


def _rounds_without_improvement(evaluated: list[Node], last_round: int) -> int:
    """Rounds in a row, up to ``last_round``, that did not raise the best fitness: patience from the history alone."""
    best_in_round: dict[int, float] = {}
    for node in evaluated:
        if node.passed:
            best_in_round[node.round] = max(best_in_round.get(node.round, 0.0), node.fitness or 0.0)
    best = best_in_round.get(0, 0.0)
    streak = 0
    for round_ in range(1, last_round + 1):
        found = best_in_round.get(round_, 0.0)
        streak = 0 if found > best + IMPROVEMENT_EPSILON else streak + 1
        best = max(best, found)  # as the live loop does: a sub-epsilon gain moves the best, not the streak
    return streak
