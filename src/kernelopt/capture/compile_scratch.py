"""A folder of this process's own for the code and kernels of kernelopt's uncached compiles.

With its caches off (:func:`~kernelopt.capture.compat.fresh_compile`, so every compile runs kernelopt's
hook), Inductor writes each compile's output code and kernels to a new temporary folder that it never
removes: the compiled graph reads from it after the compile. Left where Inductor puts them, they
accumulate in the user's Inductor cache folder with every capture, graph variant and worker (thousands of
folders, gigabytes, over a test suite). kernelopt puts them in a folder of this process's instead,
removed when the process exits, and, for a process that was killed, by the next kernelopt process of
the same user on the same host that makes one.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
from pathlib import Path

from kernelopt.errors import UnsupportedEnvironment

_made: dict[int, Path] = {}  # pid -> its folder (a forked child makes its own)


def scratch_root() -> Path:
    """Where every process of this user keeps its folder."""
    return Path(tempfile.gettempdir()) / f"kernelopt-compiles-{os.getuid()}"


def scratch_dir() -> Path:
    """This process's folder, made (and the folders of this host's exited processes removed) at its
    first use."""
    pid = os.getpid()
    folder = _made.get(pid)
    if folder is None or not folder.is_dir():
        root = scratch_root()
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check_private(root)
        sweep(root)
        folder = Path(tempfile.mkdtemp(prefix=f"{_host()}-{pid}-", dir=root))
        _made[pid] = folder
        atexit.register(_remove, folder, pid)
    return folder


def sweep(root: Path) -> list[Path]:
    """Remove the folders under ``root`` of this host's processes that are no longer running (a killed
    worker's); which were removed. Another host's folders (a shared temporary folder) are left."""
    removed = []
    for folder in root.iterdir():
        parts = folder.name.split("-")  # host-pid-random (mkdtemp's random part has no "-")
        if len(parts) != 3 or parts[0] != _host() or not parts[1].isdigit() or _running(int(parts[1])):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _check_private(root: Path) -> None:
    """Refuse a folder another user owns or may write: code compiled there is imported."""
    info = root.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise UnsupportedEnvironment(
            f"{root} belongs to another user or others may write to it, and kernelopt imports the code it "
            f"compiles there: remove it (or set TMPDIR to a folder of your own)"
        )


def _host() -> str:
    return socket.gethostname().replace("-", "_") or "host"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process holds the number
    return True


def _remove(folder: Path, pid: int) -> None:
    if os.getpid() == pid:  # a forked child inherits the handler, not the folder
        shutil.rmtree(folder, ignore_errors=True)
