"""Keep the parent's secrets out of reach of the worker processes it starts.

A worker's own environment is built from an allow-list, but a process of the
same user can read its parent's environment from ``/proc/<ppid>/environ``. Marking
the parent non-dumpable makes the kernel refuse that (and ptrace) to other
processes of the same user. Root is not stopped by it: run kernelopt as an
ordinary user where API keys are in the environment.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3
_done = False


def protect_parent_environment() -> bool:
    """Mark this process non-dumpable (Linux); returns whether it now is. Idempotent."""
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return False
    _done = libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    return _done
