"""The search graph of a run, persisted in the store's ``nodes`` table.

Every candidate becomes a node (parent edge, operator, round) *before* it is
evaluated, with status ``pending``; its result is written the moment its
evaluation finishes, status ``evaluated``. That order is what makes a run
resumable after ``kill -9``: a finished evaluation is on disk, an unfinished
one is a pending row to evaluate again, and nothing else exists.

Deduplication is the table's ``UNIQUE(run_id, target, key)``: a candidate whose
key is already in the run is refused by SQLite itself, so no code path (and no
second process) can evaluate the same candidate twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kernelopt.errors import StoreError
from kernelopt.search.candidate import Candidate, EvaluationResult
from kernelopt.store import Store

PENDING = "pending"
EVALUATED = "evaluated"
ROOT_OPERATOR = "root"
WORKER_FAILURE = "worker"
"""The ``failures_by_gate`` bucket of evaluations no gate answered (the worker crashed or timed out)."""

_COLUMNS = "id, run_id, target, parent_id, operator, key, payload, round, status, fitness, failed_gate, reason, result"


@dataclass
class Node:
    """One candidate of the search graph and, once evaluated, its result."""

    id: int
    run_id: int
    target: str
    parent_id: int | None
    operator: str
    key: str
    candidate: Candidate
    round: int
    status: str  # "pending" | "evaluated"
    fitness: float | None
    failed_gate: str | None
    reason: str | None
    result: EvaluationResult | None

    @property
    def passed(self) -> bool:
        """Evaluated and through every gate."""
        return self.result is not None and self.result.passed

    @property
    def is_root(self) -> bool:
        return self.parent_id is None


def _node_from_row(row: tuple) -> Node:
    id_, run_id, target, parent_id, operator, key, payload, round_, status, fitness, failed_gate, reason, result = row
    return Node(
        id=id_,
        run_id=run_id,
        target=target,
        parent_id=parent_id,
        operator=operator,
        key=key,
        candidate=Candidate.from_payload(json.loads(payload)),
        round=round_,
        status=status,
        fitness=fitness,
        failed_gate=failed_gate,
        reason=reason,
        result=EvaluationResult.from_dict(json.loads(result)) if result is not None else None,
    )


class NodeStore:
    """The nodes of one run, all targets, on top of a :class:`~kernelopt.store.Store`."""

    def __init__(self, store: Store, run_id: int) -> None:
        self.store = store
        self.run_id = run_id
        self._conn = store.connection

    # -- writing ---------------------------------------------------------------------

    def add(self, candidate: Candidate, parent_id: int | None, round: int) -> Node | None:
        """Persist ``candidate`` as a pending node; None when its key is already in this run and target."""
        cur = self._conn.execute(
            "INSERT INTO nodes(run_id, target, parent_id, operator, key, payload, round, status, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(run_id, target, key) DO NOTHING",
            (
                self.run_id,
                candidate.target,
                parent_id,
                candidate.operator,
                candidate.key(),
                json.dumps(candidate.to_payload(), sort_keys=True),
                round,
                PENDING,
                time.time(),
            ),
        )
        if cur.rowcount == 0 or cur.lastrowid is None:
            return None
        return self.get(int(cur.lastrowid))

    def add_many(self, proposals: Sequence[tuple[Candidate, int | None]], round: int) -> list[Node]:
        """Persist a round's proposals (candidate, parent id) in one transaction; the new nodes, duplicates skipped.

        One transaction, so a kill in the middle leaves either the whole round or
        none of it: a resumed run then re-proposes the round rather than continuing
        from a half-written one it could not reproduce.
        """
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            added = [node for cand, parent in proposals if (node := self.add(cand, parent, round)) is not None]
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        return added

    def record(self, node_id: int, result: EvaluationResult) -> Node:
        """Write the result of a pending node's evaluation; refuses to overwrite an evaluated one."""
        cur = self._conn.execute(
            "UPDATE nodes SET status=?, fitness=?, failed_gate=?, reason=?, result=?, finished_at=? "
            "WHERE id=? AND run_id=? AND status=?",
            (
                EVALUATED,
                result.fitness,
                result.failed_gate,
                result.reason,
                json.dumps(result.to_dict(), sort_keys=True),
                time.time(),
                node_id,
                self.run_id,
                PENDING,
            ),
        )
        if cur.rowcount == 0:
            row = self._conn.execute(
                "SELECT status FROM nodes WHERE id=? AND run_id=?", (node_id, self.run_id)
            ).fetchone()
            if row is None:
                raise StoreError(f"no node {node_id} in run {self.run_id}")
            raise StoreError(
                f"node {node_id} of run {self.run_id} is already evaluated; refusing to overwrite it "
                "(is another process resuming the same run?)"
            )
        return self.get(node_id)

    # -- reading ---------------------------------------------------------------------

    def _select(self, where: str, params: Iterable[object]) -> list[Node]:
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM nodes WHERE run_id=? AND {where} ORDER BY id", (self.run_id, *params)
        )
        return [_node_from_row(r) for r in rows]

    def get(self, node_id: int) -> Node:
        found = self._select("id=?", (node_id,))
        if not found:
            raise StoreError(f"no node {node_id} in run {self.run_id}")
        return found[0]

    def find(self, target: str, key: str) -> Node | None:
        """The node of ``target`` with ``key``, if any."""
        found = self._select("target=? AND key=?", (target, key))
        return found[0] if found else None

    def nodes(self, target: str) -> list[Node]:
        """Every node of ``target``, in creation order."""
        return self._select("target=?", (target,))

    def pending(self, target: str) -> list[Node]:
        return self._select("target=? AND status=?", (target, PENDING))

    def evaluated(self, target: str) -> list[Node]:
        return self._select("target=? AND status=?", (target, EVALUATED))

    def root(self, target: str) -> Node | None:
        found = self._select("target=? AND parent_id IS NULL", (target,))
        return found[0] if found else None

    def best(self, target: str) -> Node | None:
        """The passed node with the highest fitness (the earliest on a tie), or None."""
        passed = [n for n in self.evaluated(target) if n.passed]
        return max(passed, key=lambda n: (n.fitness or 0.0, -n.id)) if passed else None

    def failures_by_gate(self, target: str) -> dict[str, int]:
        """Failed evaluations per gate; those no gate answered count under ``"worker"``."""
        counts: dict[str, int] = {}
        for node in self.evaluated(target):
            if not node.passed:
                gate = node.failed_gate or WORKER_FAILURE
                counts[gate] = counts.get(gate, 0) + 1
        return counts

    def targets(self) -> list[str]:
        """The targets of this run, in the order they were first searched."""
        rows = self._conn.execute(
            "SELECT target FROM nodes WHERE run_id=? GROUP BY target ORDER BY MIN(id)", (self.run_id,)
        )
        return [r[0] for r in rows]


__all__ = ["EVALUATED", "PENDING", "ROOT_OPERATOR", "WORKER_FAILURE", "Node", "NodeStore"]
