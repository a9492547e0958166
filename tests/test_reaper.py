"""A child a worker starts in a new session does not outlive the worker (issue 15, item 4), not even one that
clears its environment and leaves the worker's folder, which the reaper's marks cannot find."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from kernelopt.workers import run_isolated
from kernelopt.workers.persistent import PersistentWorker

TESTS = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper reads /proc")


def running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie waiting for its reaper counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def gone_soon(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not running(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_one_shot_workers_daemon_child_ends_with_it() -> None:
    outcome = run_isolated("worker_targets:start_daemon", timeout_s=60, extra_path=[TESTS])
    assert outcome.ok, outcome.reason
    pid = outcome.value
    assert gone_soon(pid), f"process {pid} outlived its worker"


def test_a_persistent_workers_daemon_child_ends_when_it_stops() -> None:
    worker = PersistentWorker(extra_path=[TESTS])
    try:
        outcome = worker.call("worker_targets:start_daemon", timeout_s=60)
        assert outcome.ok, outcome.reason
        pid = outcome.value
        assert running(pid)  # it lives as long as the worker does ...
    finally:
        worker.close()
    assert gone_soon(pid), f"process {pid} outlived its worker"  # ... and not longer
    assert pid != os.getpid()


def _an_escapee(pid: int) -> bool:
    """Whether ``pid`` is in a session of its own, with no environment, outside any worker's folder."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[3]) == pid and Path(f"/proc/{pid}/environ").read_bytes() == b"" and os.readlink(f"/proc/{pid}/cwd") == "/"


def test_an_escapee_ends_with_its_one_shot_worker() -> None:
    outcome = run_isolated("worker_targets:start_escapee", timeout_s=60, extra_path=[TESTS])
    assert outcome.ok, outcome.reason
    assert outcome.value["escaped"], "the daemon never cleared its environment and left the folder"
    assert gone_soon(outcome.value["pid"]), f"process {outcome.value['pid']} outlived its worker"


def test_an_escapee_ends_with_its_timed_out_one_shot_worker() -> None:
    outcome = run_isolated("worker_targets:start_escapee", True, timeout_s=5, extra_path=[TESTS])
    assert outcome.status == "timeout", outcome.reason
    words = next(line for line in outcome.stderr_tail.splitlines() if line.startswith("escapee ")).split()
    assert words[2] == "True", "the daemon never cleared its environment and left the folder"
    assert gone_soon(int(words[1])), f"process {words[1]} outlived its worker"


def test_an_escapee_ends_when_its_persistent_worker_stops() -> None:
    from kernelopt.workers.reaper import _belongs

    worker = PersistentWorker(extra_path=[TESTS])
    try:
        outcome = worker.call("worker_targets:start_escapee", timeout_s=60)
        assert outcome.ok, outcome.reason
        pid = outcome.value["pid"]
        assert running(pid) and _an_escapee(pid)
        assert worker._dir is not None and not _belongs(pid, str(worker._dir))  # the marks miss it
    finally:
        worker.close()
    assert gone_soon(pid), f"process {pid} outlived its worker"


def test_kill_tree_stops_and_ends_a_process_and_every_descendant() -> None:
    import subprocess

    from kernelopt.workers.reaper import descendants, kill_tree

    root = subprocess.Popen(["sh", "-c", "sh -c 'sleep 300 & sleep 300 & wait' & sleep 300 & wait"])
    deadline = time.monotonic() + 10
    while len(tree := descendants(root.pid)) < 4 and time.monotonic() < deadline:  # sh, 2 sleeps below it, 1 sleep
        time.sleep(0.02)
    assert len(tree) == 4, tree
    assert sorted(kill_tree(root.pid)) == sorted(tree)
    assert root.wait(timeout=10) == -9
    assert all(gone_soon(pid) for pid in tree)
