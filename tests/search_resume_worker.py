"""Runs the toy search on a store until it stops; the resume test kills and restarts it.

Usage: python search_resume_worker.py STORE RUN_ID LOG SLEEP_S
Prints the outcome as one JSON line. Each process marks its start in LOG, then
the fake evaluator writes ``start KEY`` / ``end KEY`` around every evaluation.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_toys import RESUME_BUDGET, FakeEvaluator, make_engine

from kernelopt.search import NodeStore
from kernelopt.store import Store


def main() -> None:
    store_path, run_id, log, sleep_s = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
    with open(log, "a") as f:
        f.write(f"process {os.getpid()}\n")
    with Store(store_path) as store:
        engine = make_engine(NodeStore(store, run_id), FakeEvaluator(sleep_s=sleep_s, log=log), RESUME_BUDGET)
        outcome = engine.run()
    print(json.dumps({"stop_reason": outcome.stop_reason, "evaluations": outcome.evaluations, "rounds": outcome.rounds}))


if __name__ == "__main__":
    main()
