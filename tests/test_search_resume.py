"""kill -9 in the middle of a search, resume, repeat: nothing finished is lost or evaluated again.

The search runs in a subprocess (``search_resume_worker.py``) whose fake
evaluator takes 0.15 s per candidate and logs ``start KEY`` / ``end KEY``. We
SIGKILL it twice mid-run, each time after a few more evaluations ended, and
resume it on the same store and run until it stops by itself. The final graph
must equal the one an uninterrupted run builds (same operator, same seeds).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from search_toys import RESUME_BUDGET, TARGET, FakeEvaluator, make_engine

from kernelopt.search import NodeStore
from kernelopt.store import Store

HERE = Path(__file__).resolve().parent
WORKER = HERE / "search_resume_worker.py"
SLEEP_S = 0.15
ENDS_BEFORE_KILL = 5


def _start(store: Path, run_id: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(store), str(run_id), str(log), str(SLEEP_S)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ends(log: Path) -> int:
    return log.read_text().count("\nend ") if log.exists() else 0


def _kill_after_more_ends(proc: subprocess.Popen, log: Path, more: int) -> None:
    target = _ends(log) + more
    deadline = time.monotonic() + 20
    while _ends(log) < target:
        assert proc.poll() is None, f"the search finished before it could be killed: {proc.communicate()}"
        assert time.monotonic() < deadline, "the search made no progress"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def _evaluated_keys(store_path: Path, run_id: int) -> set[str]:
    with Store(store_path) as store:
        return {n.key for n in NodeStore(store, run_id).evaluated(TARGET) if not n.is_root}


def _segments(log: Path) -> list[list[str]]:
    """The keys each process started evaluating, one list per process."""
    segments: list[list[str]] = []
    for line in log.read_text().splitlines():
        word, _, rest = line.partition(" ")
        if word == "process":
            segments.append([])
        elif word == "start":
            segments[-1].append(rest)
    return segments


def test_resume_after_sigkill_loses_and_repeats_nothing(tmp_path: Path) -> None:
    # The uninterrupted reference, in this process and without sleeping: only the keys matter.
    with Store(tmp_path / "reference.db") as store:
        run_id = store.start_run("optimize", "toy", "cpu", {})
        reference_nodes = NodeStore(store, run_id)
        reference = make_engine(reference_nodes, FakeEvaluator(), RESUME_BUDGET).run()
        expected = {n.key for n in reference_nodes.evaluated(TARGET) if not n.is_root}
    assert reference.evaluations == len(expected) >= 3 * ENDS_BEFORE_KILL  # long enough to kill twice

    store_path, log = tmp_path / "killed.db", tmp_path / "evaluations.log"
    with Store(store_path) as store:
        run_id = store.start_run("optimize", "toy", "cpu", {})

    recorded_before_kill: list[set[str]] = []
    for _ in range(2):
        _kill_after_more_ends(_start(store_path, run_id, log), log, ENDS_BEFORE_KILL)
        recorded_before_kill.append(_evaluated_keys(store_path, run_id))
    assert 0 < len(recorded_before_kill[0]) < len(recorded_before_kill[1]) < len(expected)

    final = _start(store_path, run_id, log)
    stdout, stderr = final.communicate(timeout=60)
    assert final.returncode == 0, stderr
    outcome = json.loads(stdout.strip().splitlines()[-1])

    segments = _segments(log)
    assert len(segments) == 3
    for i, recorded in enumerate(recorded_before_kill):
        later = {key for segment in segments[i + 1 :] for key in segment}
        assert not recorded & later, "an evaluation recorded before a kill was run again after it"
    for segment in segments:
        assert len(segment) == len(set(segment)), "a process evaluated a key twice"
    started = [key for segment in segments for key in segment]
    assert len(started) - len(set(started)) <= 2  # at most the one in flight at each kill is redone

    with Store(store_path) as store:
        nodes = NodeStore(store, run_id)
        assert not nodes.pending(TARGET)
        assert {n.key for n in nodes.evaluated(TARGET) if not n.is_root} == expected
        assert set(started) == expected
    assert outcome == {
        "stop_reason": reference.stop_reason,
        "evaluations": reference.evaluations,
        "rounds": reference.rounds,
    }
