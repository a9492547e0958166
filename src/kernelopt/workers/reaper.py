"""End every process a worker left behind, whatever session it moved to.

A worker runs in its own process group, and killing that group ends the worker
and the children that stayed in it. A child started in a new session
(``setsid``, ``start_new_session=True``, a daemon) is in neither, and used to
outlive the run. Every worker's environment names its private directory
(``KERNELOPT_WORKER_DIR``, set by :func:`kernelopt.workers.environment.worker_env`),
and every process it starts inherits it unless it clears its environment on
purpose; so stopping a worker also kills every process whose environment names
that directory or one inside it (a nested worker's), or whose working directory
lies there. Linux only (``/proc``); elsewhere nothing more than the group is ended.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

WORKER_DIR_VARIABLE = "KERNELOPT_WORKER_DIR"


def _belongs(pid: int, root: str) -> bool:
    proc = Path("/proc") / str(pid)
    try:
        environ = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        environ = []
    marker = f"{WORKER_DIR_VARIABLE}=".encode()
    for item in environ:
        if item.startswith(marker):
            value = item[len(marker) :].decode(errors="replace")
            if value == root or value.startswith(root + os.sep):
                return True
    try:
        cwd = os.readlink(proc / "cwd")
    except OSError:
        return False
    return cwd == root or cwd.startswith(root + os.sep)


def kill_left_behind(workdir: str | Path) -> list[int]:
    """SIGKILL every process (but this one) that descends from the worker of ``workdir``; their pids."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    root = str(Path(workdir).resolve())
    killed = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == os.getpid() or not _belongs(pid, root):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed
