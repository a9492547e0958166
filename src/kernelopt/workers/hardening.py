"""Keep the parent's secrets out of reach of the worker processes it starts, and
never let a worker outlive its parent.

A worker's own environment is built from an allow-list, but a process of the
same user can read its parent's environment from ``/proc/<ppid>/environ``. Marking
the parent non-dumpable makes the kernel refuse that (and ptrace) to other
processes of the same user. Root is not stopped by it (CAP_SYS_PTRACE overrides
it): as root, workers run as a user of their own (:mod:`kernelopt.workers.identity`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
_done = False


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def protect_parent_environment() -> bool:
    """Mark this process non-dumpable (Linux); returns whether it now is. Idempotent."""
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux"):
        return False
    libc = _libc()
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return False
    _done = libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    return _done


def die_with_parent(expected_parent: int | None = None) -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); returns whether set.

    Workers run in their own session, so killing a parent's process group (a bench
    problem that timed out) does not reach the workers it started; without this,
    those would live on holding GPU memory. If the parent is already gone
    (``os.getppid() != expected_parent``), exit at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = _libc()
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        return False
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)  # orphaned before the request took effect
    return True


def no_new_privileges() -> bool:
    """Forbid this process and everything it execs from gaining privileges (Linux); returns whether set.

    Called first thing in a worker, before any code we did not write: a worker that dropped to an
    unprivileged user (:mod:`kernelopt.workers.identity`) cannot get root back through a setuid
    program (``su``, ``sudo``). Set in the worker rather than in a ``preexec_fn``, which is unsafe
    when the parent has threads; nothing untrusted has run before it."""
    if not sys.platform.startswith("linux"):
        return False
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1


def adopt_orphans() -> bool:
    """Become the reaper of this process's orphaned descendants (Linux); returns whether set.

    A daemon a worker starts (``setsid``, a double fork) is orphaned when its parent exits;
    without this it is re-parented to init and its ancestry is lost. With it, it is
    re-parented to the worker, so while the worker lives every process it started, at any
    depth, whatever its session, environment or directory, descends from it and
    :func:`kernelopt.workers.reaper.kill_tree` finds it."""
    if not sys.platform.startswith("linux"):
        return False
    return _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def die_with_parent_from_env() -> bool:
    """``die_with_parent`` for a worker started with ``KERNELOPT_PARENT_PID`` in its environment."""
    parent = os.environ.get("KERNELOPT_PARENT_PID")
    return die_with_parent(int(parent) if parent and parent.isdigit() else None)
