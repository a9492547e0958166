"""A kernelopt parent whose *initial* environment holds the keys: ``python identity_parent.py KIND KEY_FILE``.

Started by ``test_worker_identity`` with ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY`` in its
environment from birth, so they are in its ``/proc/<pid>/environ`` (a key set later through
``os.environ`` is not). It also holds ``KEY_FILE`` open on an inheritable descriptor, as a
careless parent holding a key file would. It then starts one worker of ``KIND`` (``isolated``,
``persistent``, ``nested``: a persistent worker started by a worker kept at our user, as a
bench problem starts its evaluation worker, or ``nested_isolated``: a one-shot worker started
that way, as a bench problem times each stock mode) and prints, as JSON, who its workers run as and
what the worker could read.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent


def main(kind: str, key_file: str) -> dict[str, Any]:
    from kernelopt.workers import run_isolated
    from kernelopt.workers.identity import decide
    from kernelopt.workers.persistent import PersistentWorker

    leaked = os.open(key_file, os.O_RDONLY)
    os.set_inheritable(leaked, True)
    decision = decide()
    target = "worker_targets:what_a_worker_can_read"
    if kind == "isolated":
        outcome = run_isolated(target, key_file, timeout_s=120, extra_path=[TESTS])
    elif kind == "persistent":
        with PersistentWorker(extra_path=[TESTS]) as worker:
            outcome = worker.call(target, key_file, timeout_s=120)
    elif kind in ("nested", "nested_isolated"):
        outcome = run_isolated(
            f"worker_targets:read_from_a_{kind}_worker",
            key_file,
            str(TESTS),
            timeout_s=180,
            extra_path=[TESTS],
            drop_identity=False,
        )
    else:
        raise SystemExit(f"unknown kind {kind!r}: isolated, persistent, nested or nested_isolated")
    return {
        "identity": decision.identity.user if decision.identity else None,
        "reason": decision.reason,
        "pid": os.getpid(),
        "ok": outcome.ok,
        "status": f"{outcome.status}: {outcome.reason}",
        "value": outcome.value,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
