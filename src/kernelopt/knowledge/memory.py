"""Experience memory: what each strategy did to which kind of kernel, across runs.

Every judged attempt becomes one row of the store's ``experiences`` table: the
strategy, the kernel's bottleneck class and kind, the verified speedup (None when
a gate failed before timing), whether it was verified faster, and the judge's
record (what worked, why, when to apply it, when not). The planner reads it back
as success rates per strategy and a list of strategies to avoid, so a run
starts from what earlier runs learned instead of repeating their failures.

Strategy names are normalised (lower case, words joined by '-') so that
"Eviction policy", "eviction_policy" and "eviction-policy" count as one.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelopt.store import Store

_NON_WORD_RE = re.compile(r"[^a-z0-9.]+")


def normalize_strategy(name: str) -> str:
    """The key a strategy is counted under: lower case, runs of other characters as one '-'."""
    key = _NON_WORD_RE.sub("-", name.strip().lower()).strip("-")
    if not key:
        raise ValueError(f"a strategy needs a name, got {name!r}")
    return key


@dataclass(frozen=True)
class StrategyStats:
    strategy: str
    tries: int
    successes: int
    success_rate: float  # successes / tries
    best_speedup: float | None  # the largest verified speedup; None if it never verified faster


@dataclass(frozen=True)
class ExperienceRow:
    id: int
    run_id: int | None
    strategy: str
    bottleneck: str
    kernel_kind: str
    speedup: float | None
    success: bool
    record: dict[str, Any]
    created_at: float


def record(
    store: Store,
    run_id: int | None,
    strategy: str,
    bottleneck: str,
    kernel_kind: str,
    speedup: float | None,
    success: bool,
    record: Mapping[str, Any],
) -> int:
    """Append one experience; returns its id. ``success`` means verified faster by every gate."""
    if not bottleneck.strip() or not kernel_kind.strip():
        raise ValueError("an experience needs a bottleneck class and a kernel kind")
    if speedup is not None and not (speedup >= 0 and speedup != float("inf")):
        raise ValueError(f"speedup must be a finite non-negative ratio or None, got {speedup}")
    try:
        payload = json.dumps(dict(record), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the experience record must be JSON-serializable ({exc})") from None
    cur = store.connection.execute(
        "INSERT INTO experiences(run_id, strategy, bottleneck, kernel_kind, speedup, success, record, created_at) "
        "VALUES (?,?,?,?,?,?,?,?)",
        (
            run_id,
            normalize_strategy(strategy),
            bottleneck.strip().lower(),
            kernel_kind.strip().lower(),
            None if speedup is None else float(speedup),
            1 if success else 0,
            payload,
            time.time(),
        ),
    )
    assert cur.lastrowid is not None  # an INSERT always sets it
    return int(cur.lastrowid)


def _where(bottleneck: str | None, kernel_kind: str | None) -> tuple[str, tuple[str, ...]]:
    clauses, params = [], []
    if bottleneck is not None:
        clauses.append("bottleneck = ?")
        params.append(bottleneck.strip().lower())
    if kernel_kind is not None:
        clauses.append("kernel_kind = ?")
        params.append(kernel_kind.strip().lower())
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), tuple(params)


def stats(store: Store, bottleneck: str | None, kernel_kind: str | None) -> list[StrategyStats]:
    """Per-strategy tries, successes and best speedup for this bottleneck and kernel kind (None: all).

    Only verified speedups count towards ``best_speedup``: a number that did not pass
    every gate is not a speedup. Sorted best first: success rate, then best speedup,
    then number of tries.
    """
    where, params = _where(bottleneck, kernel_kind)
    rows = store.connection.execute(
        "SELECT strategy, COUNT(*), SUM(success), MAX(CASE WHEN success = 1 THEN speedup END) "
        f"FROM experiences{where} GROUP BY strategy",
        params,
    ).fetchall()
    result = [
        StrategyStats(
            strategy=name,
            tries=int(tries),
            successes=int(successes or 0),
            success_rate=int(successes or 0) / int(tries),
            best_speedup=None if best is None else float(best),
        )
        for name, tries, successes, best in rows
    ]
    result.sort(key=lambda s: (-s.success_rate, -(s.best_speedup or 0.0), -s.tries, s.strategy))
    return result


def to_avoid(store: Store, bottleneck: str | None, kernel_kind: str | None, min_tries: int = 2) -> list[str]:
    """Strategies tried at least ``min_tries`` times here that never verified faster, sorted by name."""
    return sorted(
        s.strategy for s in stats(store, bottleneck, kernel_kind) if s.tries >= min_tries and s.successes == 0
    )


def recent(store: Store, n: int, bottleneck: str | None = None, kernel_kind: str | None = None) -> list[ExperienceRow]:
    """The ``n`` latest experiences (optionally for one bottleneck and kernel kind), newest first."""
    if n <= 0:
        return []
    where, params = _where(bottleneck, kernel_kind)
    rows = store.connection.execute(
        "SELECT id, run_id, strategy, bottleneck, kernel_kind, speedup, success, record, created_at "
        f"FROM experiences{where} ORDER BY id DESC LIMIT ?",
        (*params, n),
    )
    return [
        ExperienceRow(id_, run_id, strategy, bn, kind, speedup, bool(success), json.loads(rec), created)
        for id_, run_id, strategy, bn, kind, speedup, success, rec, created in rows
    ]
