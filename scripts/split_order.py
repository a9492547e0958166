"""Each two-process comparison in a store, its readings split by the side that ran just before.

    python3 scripts/split_order.py STORE.db

A comparison whose rounds alternated AB / BA (kernelopt before 32de715) ran each side after itself
in every other round: baseline readings 1, 3, 5 ... followed the candidate, 2, 4, 6 ... the baseline;
candidate readings 0, 2, 4 ... followed the baseline, 1, 3, 5 ... the candidate. One line per
comparison: the medians in ms of each side after itself and after the other, and their ratio (1.0:
no order effect). Under A B A B every reading follows the other side, and the split says nothing.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
from collections.abc import Iterator
from typing import Any


def comparisons(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if isinstance(value.get("baseline"), dict) and "samples_ms" in value["baseline"] and "candidate" in value:
            yield value
        for item in value.values():
            yield from comparisons(item)
    elif isinstance(value, list):
        for item in value:
            yield from comparisons(item)


def main() -> None:
    store = sqlite3.connect(sys.argv[1])
    rows = store.execute("select id, target, operator, payload, result from nodes where result is not null")
    for node, target, operator, payload, result in rows:
        options = json.loads(payload or "{}").get("options")
        seen: set[tuple[float, ...]] = set()
        for comparison in comparisons(json.loads(result)):
            base, cand = comparison["baseline"]["samples_ms"], comparison["candidate"]["samples_ms"]
            if len(base) < 8 or tuple(base) in seen:  # a verdict may hold the same comparison twice
                continue
            seen.add(tuple(base))
            b_self, b_other = statistics.median(base[2::2]), statistics.median(base[1::2])
            c_self, c_other = statistics.median(cand[1::2]), statistics.median(cand[0::2])
            print(
                json.dumps(
                    {
                        "node": node,
                        "target": target,
                        "operator": operator,
                        "options": options,
                        "baseline_after_itself_ms": round(b_self, 4),
                        "baseline_after_other_ms": round(b_other, 4),
                        "candidate_after_itself_ms": round(c_self, 4),
                        "candidate_after_other_ms": round(c_other, 4),
                        "baseline_self_over_other": round(b_self / b_other, 3),
                        "candidate_self_over_other": round(c_self / c_other, 3),
                        "speedup_reported": round(comparison.get("speedup", float("nan")), 3),
                        "speedup_after_other": round(b_other / c_other, 3),
                    }
                )
            )


if __name__ == "__main__":
    main()
