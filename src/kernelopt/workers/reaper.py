"""End every process a worker left behind, whatever session it moved to.

A worker runs in its own process group, and killing that group ends the worker
and the children that stayed in it. A child started in a new session
(``setsid``, ``start_new_session=True``, a daemon) is in neither, and used to
outlive the run.

First, by ancestry: every worker adopts its orphans
(:func:`kernelopt.workers.hardening.adopt_orphans`), so while it lives all it
started descends from it, and :func:`kill_tree` stops the worker and every
descendant (SIGSTOP, again until no new one appears: a stopped process cannot
fork) before it kills them all. The parent does this before it ends a worker,
and a worker does it to its own tree before it exits. What that misses is a
descendant orphaned when the worker itself died first (a crash, or a candidate
that kills its own process), which init adopts.

Then, by marks: every worker's environment names its private directory
(``KERNELOPT_WORKER_DIR``, set by :func:`kernelopt.workers.environment.worker_env`),
and every process it starts inherits it unless it clears its environment on
purpose; so stopping a worker also kills every process whose environment names
that directory or one inside it (a nested worker's), or whose working directory
lies there. Linux only (``/proc``); elsewhere nothing more than the group is ended.

Why not a PID namespace, which would contain every descendant for free: the judge lends
its buffers to candidate workers by CUDA IPC, and legacy CUDA IPC handles do not open
across PID namespaces (openucx/ucx#11513; vllm-project/vllm#55906 measured the fallback),
just as they do not across users (``benchmarks/h200-2026-12-01-gate-memory``). A cgroup
would need a delegated hierarchy, which containers (where kernelopt runs as root most
often) rarely give. So processes are tracked and killed, by ancestry and by marks.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

WORKER_DIR_VARIABLE = "KERNELOPT_WORKER_DIR"
MAX_FREEZE_ROUNDS = 1000  # each round stops every process found; only a fork bomb needs more than a few


def _parents() -> dict[int, int]:
    """Every process's parent, read from ``/proc/<pid>/stat`` (the field after the command's ``)``)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            pass  # ended while we looked
    return parents


def descendants(pid: int) -> list[int]:
    """Every living descendant of ``pid`` (not ``pid`` itself), at any depth."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def kill_tree(pid: int, include_root: bool = True) -> list[int]:
    """Stop ``pid`` (unless ``include_root`` is False: a process ending its own tree) and all its
    descendants, until a fresh look finds no new one, then SIGKILL them all; their pids.

    ``pid`` must not have been reaped yet (a live process or a zombie), or it could name a
    stranger that took the number. Linux only (``/proc``); elsewhere nothing is done."""
    if not Path("/proc").is_dir():
        return []
    stopped: list[int] = []
    if include_root:
        _signal(pid, signal.SIGSTOP)
    for _ in range(MAX_FREEZE_ROUNDS):
        new = [child for child in descendants(pid) if child not in stopped and child != os.getpid()]
        if not new:
            break
        for child in new:
            _signal(child, signal.SIGSTOP)
        stopped.extend(new)
    for child in stopped:
        _signal(child, signal.SIGKILL)
    if include_root:
        _signal(pid, signal.SIGKILL)
    return stopped


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


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
