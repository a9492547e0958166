"""A folder of this process's own for the code and kernels of kernelopt's uncached compiles.

With its caches off (:func:`~kernelopt.capture.compat.fresh_compile`, so every compile runs kernelopt's
hook), Inductor writes each compile's output code and kernels to a new temporary folder that it never
removes: the compiled graph reads from it after the compile. Left where Inductor puts them, they
accumulate in the user's Inductor cache folder with every capture, graph variant and worker (thousands of
folders, gigabytes, over a test suite). kernelopt puts them in a private working folder of this
process's (:func:`~kernelopt.workers.workdirs.make_workdir`), removed when the process exits and, for a
process that was killed, by the next sweep of stale working folders.
"""

from __future__ import annotations

import atexit
import os
import shutil
from pathlib import Path

from kernelopt.workers.workdirs import make_workdir

PREFIX = "kernelopt-compiles-"
_made: dict[int, Path] = {}  # pid -> its folder (a forked child makes its own)


def scratch_dir() -> Path:
    """This process's folder, made at its first use (stale ones of ended processes swept first)."""
    pid = os.getpid()
    folder = _made.get(pid)
    if folder is None or not folder.is_dir():
        folder = make_workdir(PREFIX)
        _made[pid] = folder
        atexit.register(_remove, folder, pid)
    return folder


def _remove(folder: Path, pid: int) -> None:
    if os.getpid() == pid:  # a forked child inherits the handler, not the folder
        shutil.rmtree(folder, ignore_errors=True)
