"""The persistent worker: state between calls, and a crash, hang or error costs one call."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kernelopt.workers.persistent import PersistentWorker

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def worker():
    w = PersistentWorker(extra_path=[TESTS])
    yield w
    w.close()


def test_state_survives_between_calls(worker: PersistentWorker) -> None:
    assert [worker.call("worker_targets:count").value for _ in range(3)] == [1, 2, 3]
    assert worker.starts == 1


def test_error_keeps_the_worker(worker: PersistentWorker) -> None:
    worker.call("worker_targets:count")
    bad = worker.call("worker_targets:raise_value_error", "boom")
    assert bad.status == "error" and "ValueError" in bad.reason
    assert worker.call("worker_targets:count").value == 2 and worker.starts == 1


def test_crash_costs_one_call_and_restarts(worker: PersistentWorker) -> None:
    worker.call("worker_targets:count")
    crashed = worker.call("worker_targets:segfault")
    assert crashed.status == "crash" and "SIGSEGV" in crashed.reason
    assert worker.call("worker_targets:count").value == 1  # a fresh process: fresh state
    assert worker.starts == 2


def test_hang_times_out_and_restarts(worker: PersistentWorker, worker_tmp: Path) -> None:
    start = time.monotonic()
    hung = worker.call("worker_targets:hang_with_grandchild", str(worker_tmp / "pid"), timeout_s=2)
    assert hung.status == "timeout" and time.monotonic() - start < 10
    assert worker.call("worker_targets:count").value == 1


def test_no_secrets_and_private_home(worker: PersistentWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    worker.close()
    info = worker.call("worker_targets:environment").value
    assert "OPENAI_API_KEY" not in info["environ"]
    assert info["environ"]["HOME"] == info["cwd"] != os.environ.get("HOME")


def test_refused_result_is_an_error_not_an_exception(worker: PersistentWorker) -> None:
    refused = worker.call("worker_targets:version_object")
    assert refused.status == "error" and "refused" in refused.reason
    assert worker.call("worker_targets:count").value == 1


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in state  # dead, waiting for init to reap it


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc")
def test_a_nested_worker_dies_with_its_parent(worker_tmp: Path) -> None:
    """A bench problem that times out takes its optimize's evaluation worker with it (no GPU memory left held)."""
    from kernelopt.workers import run_isolated

    pid_file = worker_tmp / "inner.pid"
    outer = run_isolated("worker_targets:start_persistent_worker_and_hang", str(pid_file), str(TESTS),
                         timeout_s=20, extra_path=[TESTS])
    assert outer.status == "timeout"
    inner = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while not _gone(inner) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(inner), f"nested worker {inner} outlived its parent"


def test_a_crash_seen_before_the_process_is_reaped_is_not_a_timeout(
    worker: PersistentWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process killed by a signal closes its pipes before it can be reaped: right after
    # the EOF it may still look alive. That race made a SIGSEGV read as a timeout under load.
    worker.call("worker_targets:count")
    monkeypatch.setattr(PersistentWorker, "alive", property(lambda self: self._process is not None))
    crashed = worker.call("worker_targets:segfault", timeout_s=60)
    monkeypatch.undo()
    assert crashed.status == "crash" and "SIGSEGV" in crashed.reason, crashed
    assert crashed.duration_s < 30
