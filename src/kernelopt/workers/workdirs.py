"""Private working directories for worker processes, and the sweep of those a killed run left behind.

Every worker gets a fresh directory as its home, temp and working directory. A
run killed with ``kill -9`` never removes its own, so each directory records
the process that made it (``owner.pid``: its number, its start time and the
machine boot and pid namespace the number belongs to), and every new one first
removes the directories whose owner is gone. A directory without that record,
whose owner still runs, or whose owner lives on another machine or in another
pid namespace sharing the temp folder (where its number says nothing here) is
never touched: the sweep cannot remove a live run's files. A number that now
names another process (its start time differs) is an owner gone.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

PREFIXES = ("kernelopt-worker-", "kernelopt-pworker-", "kernelopt-memcheck-", "kernelopt-compiles-")
OWNER_FILE = "owner.pid"


@functools.cache
def _machine() -> str | None:
    """This boot of this machine and this pid namespace, where Linux says (None elsewhere): a process
    number means something only within them."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}:{namespace}".replace(" ", "")


def _started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/<pid>/stat`` field 22), None where
    unknown: with the number it names one process, not whichever holds the number now."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces: fields 3 on
    return fields[19] if len(fields) > 19 else None


def owner_record(pid: int | None = None) -> str:
    """The owner line for a directory made by ``pid`` (this process): number, start time, machine."""
    pid = os.getpid() if pid is None else pid
    return f"{pid} {_started(pid) or '-'} {_machine() or '-'}"


def _owner_gone(record: str) -> bool:
    """Whether the process an owner line names has ended (a line of another machine or namespace, or of
    this process, never has)."""
    number, started, machine = [*record.split(), "-", "-", "-"][:3]
    pid = int(number)
    if machine != "-" and machine != (_machine() or "-"):
        return False
    if pid == os.getpid() or pid <= 0:
        return False
    if not _alive(pid):
        return True
    now = _started(pid)
    return started != "-" and now is not None and now != started


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
            gone = _owner_gone((entry / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if gone:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def make_workdir(prefix: str) -> Path:
    """A fresh private directory owned by this process (stale ones from dead runs are swept first)."""
    sweep_stale()
    directory = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    (directory / OWNER_FILE).write_text(owner_record())
    return directory
