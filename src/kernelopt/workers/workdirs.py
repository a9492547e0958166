"""Private working directories for worker processes, and the sweep of those a killed run left behind.

Every worker gets a fresh directory as its home, temp and working directory. A
run killed with ``kill -9`` never removes its own, so each directory records
the process that made it (``owner.pid``), and every new one first removes the
directories whose owner is gone. A directory without that record, or whose
owner still runs, is never touched: the sweep cannot remove a live run's files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

PREFIXES = ("kernelopt-worker-", "kernelopt-pworker-", "kernelopt-memcheck-", "kernelopt-compiles-")
OWNER_FILE = "owner.pid"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def sweep_stale(root: str | Path | None = None) -> list[Path]:
    """Remove worker directories under ``root`` (the temp directory) whose owning process has ended."""
    removed: list[Path] = []
    base = Path(root or tempfile.gettempdir())
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIXES) or not entry.is_dir():
            continue
        try:
            pid = int((entry / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue
        if pid != os.getpid() and not _alive(pid):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def make_workdir(prefix: str) -> Path:
    """A fresh private directory owned by this process (stale ones from dead runs are swept first)."""
    sweep_stale()
    directory = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    (directory / OWNER_FILE).write_text(str(os.getpid()))
    return directory
