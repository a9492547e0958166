"""A toy search problem for the engine tests: integers instead of kernels.

A candidate's source is ``"x=N"``. The step operator proposes integers near the
parent's; the fake evaluator scores them on a known landscape with a single
peak at x = 20 (fitness 2.0), where some candidates fail a gate:

* x < 0 fails ``static``;
* x % 7 == 3 fails ``correctness``;
* a speedup not above 1.03 fails ``performance`` (like the real gate's margin).

The kernel time is 100 us / fitness, so with ``min_time_us`` = 50 the peak is
at the roofline. Nothing here imports torch, so the resume test's subprocesses
start fast.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kernelopt.search import (
    BeamPolicy,
    Budget,
    Candidate,
    EvaluationResult,
    Node,
    NodeStore,
    SearchContext,
    SearchEngine,
)

TARGET = "triton_poi_fused_toy_0"
PEAK = 20


def x_of(source: str | None) -> int:
    assert source is not None and source.startswith("x=")
    return int(source.split("=", 1)[1].split("#")[0])


def root_candidate(target: str = TARGET) -> Candidate:
    return Candidate(target, "root", source="x=0")


def landscape(x: int) -> EvaluationResult:
    """The known fitness of x, with gate failures."""
    measurements: dict[str, Any] = {"gpu_s": 0.5}
    if x < 0:
        return EvaluationResult.failure("static", f"x={x} is negative", measurements=measurements)
    if x % 7 == 3:
        return EvaluationResult.failure("correctness", f"x={x}: max abs error 1e-1 at seed 1", measurements=measurements)
    speedup = max(0.0, 2.0 - abs(x - PEAK) / 20)
    if speedup <= 1.03:
        return EvaluationResult.failure("performance", f"x={x}: speedup {speedup:.3f}x", measurements=measurements)
    return EvaluationResult(
        passed=True,
        fitness=speedup,
        failed_gate=None,
        reason=f"speedup {speedup:.3f}x",
        measurements={**measurements, "kernel_time_us": 100.0 / speedup},
    )


class StepOperator:
    """Proposes up to n untried points parent x + d, d drawn (without replacement) from ``steps``."""

    def __init__(self, name: str = "step", steps: tuple[int, ...] = (-3, -2, -1, 1, 2, 3), limit: int | None = None) -> None:
        self.name = name
        self.steps = steps
        self.limit = limit  # proposals stay within [0, limit] when set: a finite search space

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        x = x_of(parent.candidate.source)
        steps = list(self.steps)
        ctx.rng.shuffle(steps)
        known = {node.key for node in ctx.nodes}
        out = []
        for d in steps:
            y = x + d
            if self.limit is not None and not 0 <= y <= self.limit:
                continue
            cand = Candidate(ctx.target, self.name, source=f"x={y}", note=f"{x}{d:+d}")
            if cand.key() not in known:  # spend the n proposals on points not tried yet
                out.append(cand)
            if len(out) == n:
                break
        return out


class FakeEvaluator:
    """Scores nodes on :func:`landscape`; counts calls per key; optionally sleeps and logs start/end."""

    def __init__(
        self,
        score: Callable[[int], EvaluationResult] = landscape,
        sleep_s: float = 0.0,
        log: Path | None = None,
        on_each: Callable[[], None] | None = None,
    ) -> None:
        self.score = score
        self.sleep_s = sleep_s
        self.log = log
        self.on_each = on_each
        self.calls: Counter[str] = Counter()
        self.batches: list[list[int]] = []

    def _log(self, line: str) -> None:
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())

    def __call__(self, batch: list[Node]) -> Iterator[tuple[Node, EvaluationResult]]:
        self.batches.append([n.id for n in batch])
        for node in batch:
            self._log(f"start {node.key}")
            self.calls[node.key] += 1
            if self.sleep_s:
                time.sleep(self.sleep_s)
            result = self.score(x_of(node.candidate.source))
            if self.on_each is not None:
                self.on_each()
            self._log(f"end {node.key}")
            yield node, result


def context_factory(target: str = TARGET, facts: dict[str, Any] | None = None) -> Callable[[list[Node]], SearchContext]:
    def build(history: list[Node]) -> SearchContext:
        return SearchContext(
            target=target,
            kernel=None,
            root_source="x=0",
            root_config=None,
            nodes=history,
            rng=random.Random(),  # replaced by the engine's per-round generator
            facts=dict(facts or {}),
        )

    return build


def make_engine(
    nodes: NodeStore,
    evaluator: FakeEvaluator,
    budget: Budget,
    operators: list | None = None,
    policy: Any = None,
    facts: dict[str, Any] | None = None,
    events: list | None = None,
    clock: Callable[[], float] = time.monotonic,
    seed: int = 0,
    target: str = TARGET,
    root: Candidate | None = None,
) -> SearchEngine:
    return SearchEngine(
        nodes=nodes,
        target=target,
        root=root or root_candidate(target),
        operators=operators if operators is not None else [StepOperator()],
        policy=policy or BeamPolicy(width=4),
        budget=budget,
        evaluate=evaluator,
        context=context_factory(target, facts),
        candidates_per_parent=3,
        parents_per_round=4,
        on_event=(lambda kind, data: events.append((kind, data))) if events is not None else None,
        clock=clock,
        seed=seed,
    )


RESUME_BUDGET = Budget(max_evaluations=24, patience=3, roofline_fraction=2.0)
"""The resume test's budget: the roofline stop is off (fraction 2), so the run is long enough to kill twice."""
