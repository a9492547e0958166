"""Worker directories a killed run left behind are swept; a live run's never are (issue 15, item 4)."""

from __future__ import annotations

import os
import subprocess
import sys

from kernelopt.workers import workdirs
from kernelopt.workers.workdirs import OWNER_FILE, make_workdir, owner_record, sweep_stale


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_dead_owners_directory_is_swept_and_a_live_ones_kept(tmp_path) -> None:
    stale = tmp_path / "kernelopt-worker-stale"
    stale.mkdir()
    (stale / OWNER_FILE).write_text(str(dead_pid()))
    (stale / "result.pkl").write_bytes(b"x")
    live = tmp_path / "kernelopt-pworker-live"
    live.mkdir()
    (live / OWNER_FILE).write_text(str(os.getppid()))
    unknown = tmp_path / "kernelopt-worker-unknown"  # no owner record: never touched
    unknown.mkdir()
    other = tmp_path / "someone-elses"
    other.mkdir()
    (other / OWNER_FILE).write_text(str(dead_pid()))
    assert sweep_stale(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and unknown.exists() and other.exists()


def test_a_new_workdir_records_its_owner(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    directory = make_workdir("kernelopt-worker-")
    assert directory.parent == tmp_path.resolve()
    number, started, machine = (directory / OWNER_FILE).read_text().split()
    assert number == str(os.getpid()) and started.isdigit() and machine.count(":") >= 1


def test_an_owner_of_another_machine_or_pid_namespace_is_never_judged_here(tmp_path) -> None:
    """A temp folder shared across hosts or containers: a number that has ended here may run there."""
    number, started, _ = owner_record(dead_pid()).split()
    elsewhere = tmp_path / "kernelopt-worker-elsewhere"
    elsewhere.mkdir()
    (elsewhere / OWNER_FILE).write_text(f"{number} {started} 0f00-other-boot:pid:[4026531836]")
    here = tmp_path / "kernelopt-worker-here"
    here.mkdir()
    (here / OWNER_FILE).write_text(owner_record(dead_pid()))
    assert sweep_stale(tmp_path) == [here]
    assert elsewhere.exists()


def test_a_number_that_now_names_another_process_is_an_owner_gone(tmp_path) -> None:
    parent = os.getppid()  # alive, but not the process that made the folder: its start time differs
    number, started, machine = owner_record(parent).split()
    reused = tmp_path / "kernelopt-pworker-reused"
    reused.mkdir()
    (reused / OWNER_FILE).write_text(f"{number} {int(started) + 1} {machine}")
    live = tmp_path / "kernelopt-pworker-live"
    live.mkdir()
    (live / OWNER_FILE).write_text(owner_record(parent))
    mine = tmp_path / "kernelopt-compiles-mine"
    mine.mkdir()
    (mine / OWNER_FILE).write_text(owner_record())
    assert sweep_stale(tmp_path) == [reused]
    assert live.exists() and mine.exists()


def test_an_owner_line_without_a_start_time_or_machine_is_judged_by_its_number(tmp_path, monkeypatch) -> None:
    """Where /proc says nothing (or a line an earlier version wrote) the number alone decides."""
    monkeypatch.setattr(workdirs, "_machine", lambda: None)
    monkeypatch.setattr(workdirs, "_started", lambda pid: None)
    assert owner_record(123).split() == ["123", "-", "-"]
    stale = tmp_path / "kernelopt-memcheck-stale"
    stale.mkdir()
    (stale / OWNER_FILE).write_text(owner_record(dead_pid()))
    kept = tmp_path / "kernelopt-memcheck-kept"
    kept.mkdir()
    (kept / OWNER_FILE).write_text(f"{os.getppid()} - -")
    empty = tmp_path / "kernelopt-memcheck-empty"  # an unreadable record: never touched
    empty.mkdir()
    (empty / OWNER_FILE).write_text("")
    assert sweep_stale(tmp_path) == [stale]
    assert kept.exists() and empty.exists()
