"""A child a worker starts in a new session does not outlive the worker (issue 15, item 4)."""

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
