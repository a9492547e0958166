"""Run a command where every user can reach this Python: ``unshare --mount python open_home.py CMD...``.

Test machinery for the worker-identity tests. Where the interpreter lives under a private
home (pyenv or conda in ``/root``, mode 700), a worker that drops to ``nobody`` cannot even
start, so kernelopt keeps workers root there and the tests could prove nothing. Inside a
private mount namespace (``unshare --mount``, root only) this script covers each such folder
with a tmpfs of mode 755 and binds every entry of the folder back into it: the same files at
the same paths, the folder itself now searchable by all. Nothing outside the namespace
changes, and the namespace ends with the command.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path


def closed_folders(paths: list[str]) -> list[Path]:
    """The folders above ``paths`` that other users may not search, outermost first."""
    found: set[Path] = set()
    for path in filter(os.path.exists, paths):
        for folder in Path(os.path.realpath(path)).parents:
            if not folder.stat().st_mode & stat.S_IXOTH:
                found.add(folder)
    return sorted(found, key=lambda p: len(p.parts))


def open_up(folder: Path) -> None:
    staging = tempfile.mkdtemp(prefix="open-home-")
    subprocess.run(["mount", "--bind", str(folder), staging], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(folder)], check=True)
    for name in os.listdir(staging):
        source, target = os.path.join(staging, name), folder / name
        if os.path.islink(source):
            os.symlink(os.readlink(source), target)
            continue
        if os.path.isdir(source):
            target.mkdir()
        else:
            target.touch()
        subprocess.run(["mount", "--bind", source, str(target)], check=True)


def main(argv: list[str]) -> None:
    for folder in closed_folders([sys.executable, sys.base_prefix + "/lib", *sys.path[1:]]):
        open_up(folder)
    os.execvp(argv[1], argv[1:])


if __name__ == "__main__":
    main(sys.argv)
