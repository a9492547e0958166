"""The user a worker process runs as, and what the parent hands that user so the worker still works.

Why a user of its own: a worker's environment is allow-listed (:mod:`.environment`) and the
parent is non-dumpable (:mod:`.hardening`), yet neither stops root. The kernel lets a process
read another's ``/proc/<pid>/environ`` only if both have the same uid and the target is
dumpable, or if the reader has CAP_SYS_PTRACE; a root worker has that capability, so it can read
the environment kernelopt started with and that of the shell that launched it, API keys
included. Popping the key from ``os.environ`` would not hide it (the file shows the environment
block a process started with), so kernelopt leaves ``os.environ`` alone (through the Python API
it is the user's own process) and relies on the uid: when kernelopt runs as root (GPU servers,
containers), every worker drops to an unprivileged user before it execs: the ``worker_user`` setting
(``KERNELOPT_WORKER_USER``, ``nobody`` by default). :mod:`subprocess` does it in the child
(``extra_groups=[]``, ``group=``, ``user=``: setgroups, setgid, setuid, in that order, safe with
threads where a ``preexec_fn`` is not); the worker then sets no_new_privs on itself
(:func:`.hardening.no_new_privileges`), so no setuid program gives it root back. A different
uid without CAP_SYS_PTRACE is refused every root process's environ, descriptors and memory;
``/proc/<pid>/cmdline`` stays readable to all, and no key is ever on a command line.

What the dropped user must reach, and how it gets it:

- the interpreter, the standard library, torch and kernelopt: read-only, and not ours to change.
  Probed once per process by starting Python as that user (:func:`decide`); where it cannot
  (a pyenv or conda under a private ``/root``), workers stay root and ``kernelopt doctor`` says
  so, unless the user was named explicitly, which then fails with one line.
- its private directory, made by the parent: handed over (:func:`hand_over`).
- the Triton cache kept across runs: :func:`worker_cache`.
- shared-memory files of tensors a root process lends it: :func:`lend`.
- a file the parent wrote where that user cannot look (an export in a bench problem's private
  folder, or under root's home) that a worker must load: a copy for the time (:func:`lent_copy`).
- GPUs: ``/dev/nvidia*`` are normally mode 666, open to every user; nothing to hand over.
- CUDA buffers: none. The NVIDIA driver refuses CUDA IPC between processes of different users
  (measured on the H200: every handle a root process made failed to open as ``nobody`` with
  "mapping of buffer object failed", and opened as root), so a root process never lends CUDA
  memory to a dropped worker: the judge itself runs in a worker (kernelopt's commands and
  :func:`kernelopt.optimize` do), and its workers are of its own user.
  :func:`check_cuda_lending` says so in one line to code that builds a judge in a root process.

Not root: workers run as kernelopt's own user; the non-dumpable parent refuses them its
environ, but a shell of the same user that holds a key stays readable (README, Security).
Linux only; elsewhere workers run as this user.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelopt.errors import KerneloptError

PROBE_TIMEOUT_S = 60.0
PROBED_MODULES = ("kernelopt", "torch", "triton")
# Run as the worker user: finds each module where the parent finds it, and reads its first file.
_PROBE = """
import importlib.util, json, os, sys
for name, origin in json.loads(sys.argv[1]).items():
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or os.path.realpath(spec.origin) != origin:
        sys.exit(f"cannot import {name} from {origin}")
    open(origin, "rb").close()
"""


@dataclass(frozen=True)
class WorkerIdentity:
    """An unprivileged user (and its primary group) that workers run as."""

    user: str
    uid: int
    gid: int

    def popen_kwargs(self) -> dict[str, Any]:
        """What :class:`subprocess.Popen` takes to start a process as this user, with no extra groups."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


@dataclass(frozen=True)
class Decision:
    """Who workers run as (None: this process's user), in one line for ``kernelopt doctor``;
    ``problem`` when that line belongs among doctor's problems (keys within a worker's reach)."""

    identity: WorkerIdentity | None
    reason: str
    problem: bool = False


_decided: dict[tuple[str, str], Decision] = {}


def decide() -> Decision:
    """Who this process's workers run as, probed once per setting value (a probe starts Python)."""
    if not sys.platform.startswith("linux"):
        return Decision(None, "workers run as this user: a user of their own is implemented on Linux only")
    if os.geteuid() != 0:
        return Decision(None, f"workers run as {_user_name(os.geteuid())}, kernelopt's own user (not root)")
    from kernelopt.config import load_settings

    settings = load_settings()
    key = (settings.worker_user, settings.sources.get("worker_user", "default"))
    if key not in _decided:
        _decided[key] = _decide_as_root(*key)
    return _decided[key]


def worker_identity() -> WorkerIdentity | None:
    """The user this process's workers run as; None: they run as this process's user."""
    return decide().identity


def _decide_as_root(user: str, source: str) -> Decision:
    explicit = source != "default"
    where = f"worker_user={user!r} ({source})"
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        if explicit:
            raise KerneloptError(
                f"{where}: no such user; name an existing unprivileged user (nobody) or root to keep workers root"
            ) from None
        return Decision(
            None,
            f"workers run as root: there is no user {user} to drop to, so a candidate can read your API keys; "
            "set KERNELOPT_WORKER_USER to an unprivileged user",
            problem=True,
        )
    if entry.pw_uid == 0:
        return Decision(None, f"workers run as root ({where}): a candidate can read the API keys of this machine")
    identity = WorkerIdentity(user, entry.pw_uid, entry.pw_gid)
    failure = f"{user}'s primary group is root's (gid 0)" if entry.pw_gid == 0 else _probe(identity)
    if failure is not None:
        fix = "set KERNELOPT_WORKER_USER to another unprivileged user"
        if entry.pw_gid != 0:
            fix = f"make this Python readable to {user}, or {fix}"
        if explicit:
            raise KerneloptError(f"{where}: {failure}; {fix}")
        return Decision(
            None, f"workers run as root, so a candidate can read your API keys: {failure}; {fix}", problem=True
        )
    return Decision(identity, f"workers run as {user} (uid {entry.pw_uid}): no root process's keys are within reach")


def _probe(identity: WorkerIdentity) -> str | None:
    """Why ``identity`` cannot run a worker here (interpreter, modules, temp directory), or None."""
    from kernelopt.workers.environment import worker_env
    from kernelopt.workers.workdirs import make_workdir

    modules = {}
    for name in PROBED_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            modules[name] = os.path.realpath(spec.origin)
    directory = make_workdir("kernelopt-worker-")
    try:
        hand_over(directory, identity)
        probe = subprocess.run(
            [sys.executable, "-c", _PROBE, json.dumps(modules)],
            cwd=directory,
            env=worker_env(directory, other_user=True),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            **identity.popen_kwargs(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{identity.user} cannot start {sys.executable} ({exc})"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if probe.returncode != 0:
        lines = (probe.stderr or probe.stdout).strip().splitlines() or [f"exit code {probe.returncode}"]
        return f"{identity.user} cannot run a worker with {sys.executable} ({lines[-1]})"
    return None


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def hand_over(path: str | Path, identity: WorkerIdentity | None) -> None:
    """Make ``identity`` the owner of ``path``, a directory the parent just made for its worker (no link followed)."""
    if identity is not None:
        os.chown(path, identity.uid, identity.gid, follow_symlinks=False)


def can_reach(path: str | Path, identity: WorkerIdentity) -> bool:
    """Whether ``identity`` may search every folder down to ``path`` and ``path`` itself (mode bits;
    no ACLs): what a worker needs to open something inside a folder the parent chose."""
    current = Path(path).resolve()
    for folder in [*reversed(current.parents), current]:
        try:
            info = folder.stat()
        except OSError:
            return False
        if not _permits(info, identity, stat.S_IXUSR):
            return False
    return True


def can_read(path: str | Path, identity: WorkerIdentity) -> bool:
    """Whether ``identity`` may open ``path`` for reading (a folder: list and enter it), by mode bits."""
    path = Path(path).resolve()
    try:
        info = path.stat()
    except OSError:
        return False
    if not can_reach(path.parent, identity) or not _permits(info, identity, stat.S_IRUSR):
        return False
    return not stat.S_ISDIR(info.st_mode) or _permits(info, identity, stat.S_IXUSR)


def require_readable(path: str | Path, what: str) -> None:
    """One clear line, before any worker starts, when the user workers run as cannot read ``path``
    (the problem file, the suite), rather than a PermissionError inside every worker."""
    identity = worker_identity()
    if identity is None or not Path(path).exists() or can_read(path, identity):
        return  # a missing path is the caller's own error to report
    raise KerneloptError(
        f"{path}: {identity.user}, the user kernelopt's workers run as (kernelopt runs as root), cannot read "
        f"{what}; move it under a folder every user may enter, or set KERNELOPT_WORKER_USER=root "
        "(a candidate can then read your API keys)"
    )


def _permits(info: os.stat_result, identity: WorkerIdentity, user_bit: int) -> bool:
    """Whether the owner, group or other class that applies to ``identity`` has ``user_bit`` (shifted)."""
    if info.st_uid == identity.uid:
        return bool(info.st_mode & user_bit)
    if info.st_gid == identity.gid:
        return bool(info.st_mode & (user_bit >> 3))
    return bool(info.st_mode & (user_bit >> 6))


def _own_folder(path: Path, mode: int, owners: tuple[int, ...], what: str) -> None:
    """Make ``path`` (``mode``), or accept the one there only as a real folder owned by one of ``owners``:
    a link or someone else's folder in a shared temp directory could hand workers another's files."""
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in owners:
            raise KerneloptError(f"{path}: not a folder kernelopt made for {what}; remove it and run again") from None


def worker_cache(path: str | Path, identity: WorkerIdentity | None) -> Path:
    """The folder workers of ``identity`` keep a cache in, for the cache folder ``path`` of this process.

    Workers of this process's user share ``path``. Another user gets a folder of its own that it
    owns (never files root made, which it could not update): ``path`` with ``-<user>`` appended
    where that user can reach ``path``'s parent, else ``kernelopt-<name>-<user>`` in the temp
    directory (the default cache lies under root's private home). A folder of that name that is
    a link, or is owned by anyone but that user or this one, is refused: it could feed the
    workers kernels someone else compiled."""
    path = Path(path)
    if identity is None:
        path.mkdir(parents=True, exist_ok=True)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if can_reach(path.parent, identity):
        own = path.with_name(f"{path.name}-{identity.user}")
    else:
        own = Path(tempfile.gettempdir()) / f"kernelopt-{path.name}-{identity.user}"
    _own_folder(own, 0o700, (identity.uid, os.geteuid()), f"{identity.user}'s cache")
    hand_over(own, identity)
    return own


def readable_root(path: str | Path, identity: WorkerIdentity | None) -> Path:
    """A folder, for this process's folder ``path``, where it writes files its workers of ``identity``
    must read (a saved model): ``path`` itself where that user can reach it, else
    ``kernelopt-<name>-for-<user>`` in the temp directory, this process's, open to that user's group
    alone (mode 750: a user's weights are not for everyone on the machine). A folder of that name
    that is a link or not this process's own is refused: it could hand the workers someone else's model."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if identity is None or can_reach(path, identity):
        return path
    own = Path(tempfile.gettempdir()) / f"kernelopt-{path.name}-for-{identity.user}"
    _own_folder(own, 0o750, (os.geteuid(),), identity.user)
    os.chown(own, -1, identity.gid, follow_symlinks=False)
    os.chmod(own, 0o750)
    return own


def require_reachable_folder(path: str | Path, what: str) -> None:
    """One line, before anything is written there, when the user workers run as cannot enter ``path``,
    a folder the caller named for files those workers must read."""
    identity = worker_identity()
    if identity is None or can_read(path, identity):
        return
    raise KerneloptError(
        f"{path}: {identity.user}, the user kernelopt's workers run as (kernelopt runs as root), cannot enter "
        f"{what}; name a folder under one every user may enter (not a private home or pytest's tmp_path), "
        "or leave it out for kernelopt's own, or set KERNELOPT_WORKER_USER=root (a candidate can then read your API keys)"
    )


def check_cuda_lending(identity: WorkerIdentity | None) -> None:
    """Refuse, in one line, to lend CUDA memory from this process to workers of ``identity`` when the
    driver will not let them open it (a root lender, a worker of another user)."""
    if identity is None or os.geteuid() != 0 or identity.uid == os.geteuid():
        return
    raise KerneloptError(
        f"this root process cannot lend CUDA buffers to workers running as {identity.user!r}: the NVIDIA "
        "driver refuses CUDA IPC between users; build the judge inside a worker (kernelopt's commands and "
        "kernelopt.optimize do) or set KERNELOPT_WORKER_USER=root to run candidates as root"
    )


def lend(files: Iterable[str], sockets: Iterable[str], identity: WorkerIdentity | None) -> None:
    """Let ``identity``'s group read and write ``files`` and connect to ``sockets`` (and search their
    folders): what a worker needs to open shared memory a root process lends it. Files stay the
    lender's; only the worker's group gains access."""
    if identity is None:
        return
    for name in files:
        _grant_group(name, identity.gid, stat.S_IRGRP | stat.S_IWGRP)
    for name in sockets:
        _grant_group(os.path.dirname(name), identity.gid, stat.S_IXGRP)
        _grant_group(name, identity.gid, stat.S_IRGRP | stat.S_IWGRP)


@contextmanager
def lent_copy(path: str | Path, identity: WorkerIdentity | None) -> Iterator[Path]:
    """``path`` itself where ``identity`` can read it; else, while the block runs, a copy of it in a
    fresh folder of the temp directory that only that user's group may enter, removed afterwards. On
    the H200 a bench problem's export lay in its own private folder, so every stock mode's timing
    against it failed and the scoreboard fell back to ratios of times from different processes."""
    path = Path(path)
    if identity is None or can_read(path, identity):
        yield path
        return
    folder = Path(tempfile.mkdtemp(prefix="kernelopt-lent-"))
    try:
        copy = folder / path.name
        shutil.copyfile(path, copy)
        for item, mode in ((copy, 0o640), (folder, 0o750)):
            os.chown(item, -1, identity.gid, follow_symlinks=False)
            os.chmod(item, mode)
        if not can_read(copy, identity):
            raise KerneloptError(
                f"{folder}: {identity.user}, the user kernelopt's workers run as, cannot enter the temp "
                f"directory to read a copy of {path}; set TMPDIR to a folder every user may enter"
            )
        yield copy
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _grant_group(path: str, gid: int, bits: int) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise OSError(f"{path} is a link; refusing to lend it")
    if info.st_gid != gid:
        os.chown(path, -1, gid, follow_symlinks=False)
    if stat.S_IMODE(info.st_mode) & bits != bits:
        os.chmod(path, stat.S_IMODE(info.st_mode) | bits)
