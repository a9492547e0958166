"""Worker directories a killed run left behind are swept; a live run's never are (issue 15, item 4)."""

from __future__ import annotations

import os
import subprocess
import sys

from kernelopt.workers.workdirs import OWNER_FILE, make_workdir, sweep_stale


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
    assert (directory / OWNER_FILE).read_text() == str(os.getpid())
