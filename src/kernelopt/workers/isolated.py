"""Run one function in a fresh, isolated Python process.

A candidate kernel is untrusted code: it may raise, segfault, hang, exhaust memory
or spawn processes of its own. ``run_isolated`` runs it in a new
``python -m kernelopt.workers.entry`` process in its own session, with a scrubbed
environment (see :mod:`kernelopt.workers.environment`), as a user of its own when
we are root (see :mod:`kernelopt.workers.identity`), with no descriptor of ours
but its output file, and a fresh temporary directory as its home and working
directory. Whatever happens costs one
:class:`WorkerResult`, never the caller. Arguments and the return value travel by
pickle through files; the return value is unpickled through an allow-list
(:mod:`kernelopt.workers.safe_pickle`).

POSIX only: it relies on process groups and ``os.killpg``.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from kernelopt.workers.environment import worker_env
from kernelopt.workers.hardening import protect_parent_environment
from kernelopt.workers.identity import WorkerIdentity, can_reach, hand_over, worker_identity
from kernelopt.workers.protocol import CALL_FILE, ENTRY_MODULE, OUTPUT_FILE, RESULT_FILE
from kernelopt.workers.reaper import kill_left_behind, kill_tree
from kernelopt.workers.safe_pickle import safe_loads
from kernelopt.workers.workdirs import make_workdir

WorkerStatus = Literal["ok", "error", "crash", "timeout", "oom", "cancelled"]

REAP_TIMEOUT_S = 30.0  # a process in uninterruptible sleep (a GPU driver call) may take a while
STDERR_TAIL_CHARS = 2000
_OOM_PATTERN = re.compile(r"MemoryError|out of memory|cannot allocate memory|std::bad_alloc", re.IGNORECASE)


@dataclass(frozen=True)
class WorkerResult:
    """How one isolated call ended.

    ``status`` is ``"ok"`` (``value`` holds the return value), ``"error"`` (the
    target raised, or could not be loaded), ``"crash"`` (the process died without
    reporting), ``"timeout"`` or ``"oom"``. ``reason`` is one line for a person.
    """

    status: WorkerStatus
    value: Any
    reason: str
    traceback: str | None
    duration_s: float
    stderr_tail: str  # the worker's stderr, with its stdout merged in

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def origin(self) -> str | None:
        """Where the target raised (``file:line in function`` of the innermost frame), or None."""
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', self.traceback or "")
        if not frames:
            return None
        path, line, function = frames[-1]
        return f"{path}:{line} in {function}"

    def to_dict(self) -> dict[str, Any]:
        """All fields plus ``ok``; ``value`` is included as it is, not converted."""
        return {**asdict(self), "ok": self.ok}


def run_isolated(
    target: str,
    *args: Any,
    kwargs: Mapping[str, Any] | None = None,
    timeout_s: float = 300,
    memory_limit_bytes: int | None = None,
    gpu: int | None = None,
    env: Mapping[str, str] | None = None,
    workdir: str | Path | None = None,
    extra_path: Sequence[str | Path] = (),
    cancel: threading.Event | None = None,
    drop_identity: bool = True,
) -> WorkerResult:
    """Call ``target`` (``"package.module:function"``) with ``args``/``kwargs`` in a worker process.

    ``timeout_s`` bounds the whole process, start-up included; on expiry the whole
    process group is terminated. ``memory_limit_bytes`` caps the worker's address
    space with RLIMIT_AS; leave it ``None`` for workers that use CUDA, whose
    context alone reserves more virtual memory than any useful limit, and rely on
    CUDA's out-of-memory errors instead. ``gpu`` pins the worker to one of the GPUs
    this process sees. ``env`` adds variables (secret-looking names raise
    ValueError). ``workdir`` is used instead of a fresh temporary directory and is
    then kept; ``extra_path`` entries go first on the worker's ``sys.path``. Setting
    ``cancel`` (from another thread) ends the worker's group at once: status ``cancelled``.
    ``drop_identity=False`` keeps this process's user even as root: only for kernelopt's own
    orchestration that must write the caller's files (a bench problem writes the store), never
    for a worker that builds or runs a candidate. Such a worker keeps this process's temp directory, so
    the workers it starts in turn (which do drop) can reach their folders.

    Mistakes of the caller (a malformed target, unpicklable arguments, a secret
    in ``env``) raise; everything the target does is reported in the result.
    """
    module_name, colon, function_name = target.partition(":")
    if not (colon and module_name and function_name):
        raise ValueError(f"target must look like 'package.module:function', got {target!r}")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    protect_parent_environment()
    call = pickle.dumps(
        {"target": target, "args": args, "kwargs": dict(kwargs or {})},
        protocol=pickle.HIGHEST_PROTOCOL,
    )
    identity = worker_identity() if drop_identity else None
    keep = workdir is not None
    directory = Path(workdir) if workdir is not None else make_workdir("kernelopt-worker-")
    try:
        directory = directory.resolve()
        directory.mkdir(parents=True, exist_ok=True)
        if identity is not None and not can_reach(directory.parent, identity):
            raise ValueError(
                f"workdir {directory}: {identity.user}, the user workers run as, cannot reach it; "
                f"choose a folder under {tempfile.gettempdir()} or one every user may enter"
            )
        hand_over(directory, identity)
        if not drop_identity:  # our own orchestration: the workers it starts, which do drop, make their
            # folders beside this one's, where their user can reach them (its own folder is private)
            env = {"TMPDIR": tempfile.gettempdir(), **(env or {})}
        child_env = worker_env(directory, gpu=gpu, env=env, extra_path=extra_path, other_user=identity is not None)
        for stale in (CALL_FILE, RESULT_FILE, OUTPUT_FILE):  # never follow a planted link
            (directory / stale).unlink(missing_ok=True)
        (directory / CALL_FILE).write_bytes(call)
        command = [sys.executable, "-m", ENTRY_MODULE, str(directory)]
        if memory_limit_bytes is not None:
            command.append(str(int(memory_limit_bytes)))
        try:
            returncode, timed_out, duration_s = run_in_session(
                command, directory, child_env, timeout_s, directory / OUTPUT_FILE, cancel, identity
            )
        finally:
            kill_left_behind(directory)  # children it started in a session of their own
        if cancel is not None and cancel.is_set() and not timed_out:
            return WorkerResult(
                "cancelled", None, "cancelled by the caller", None, duration_s, _read_tail(directory / OUTPUT_FILE)
            )
        return _classify(directory, returncode, timed_out, duration_s, timeout_s, memory_limit_bytes)
    finally:
        if not keep:
            _remove_tree(directory)


def run_in_session(
    command: Sequence[str],
    cwd: str | Path,
    env: Mapping[str, str],
    timeout_s: float,
    output_path: str | Path,
    cancel: threading.Event | None = None,
    identity: WorkerIdentity | None = None,
) -> tuple[int | None, bool, float]:
    """Run ``command`` in its own session, stdout and stderr into ``output_path``; wait at most
    ``timeout_s``, then stop and kill it and every descendant (:func:`~kernelopt.workers.reaper.kill_tree`),
    and leave nothing of its group alive.
    Returns (exit code or None, timed out, seconds). Output goes to a file, not a pipe, so a
    grandchild holding the pipe open cannot block the wait. ``identity``: the user it runs as
    (None: ours). It inherits no descriptor of ours but its output (``close_fds``). The one
    process runner of workers, memcheck and whoever else runs code we did not write."""
    with open(output_path, "wb") as output:
        start = time.monotonic()
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            close_fds=True,  # the default, said: no descriptor of ours (a key file, a socket) reaches it
            start_new_session=True,  # its own process group, apart from our terminal's
            **(identity.popen_kwargs() if identity is not None else {}),
        )
    timed_out = False
    try:
        if not _wait_exited(process, start + timeout_s, cancel):
            timed_out = cancel is None or not cancel.is_set()
        duration_s = time.monotonic() - start
    finally:
        # Always, even after a clean exit: grandchildren it left behind go too. The
        # worker is not reaped yet, so its pid (the group id) cannot have been reused.
        # Its tree first, while the process lives: it has adopted its orphans (entry, serve).
        kill_tree(process.pid)
        _signal_group(process.pid, signal.SIGKILL)
        try:
            returncode: int | None = process.wait(timeout=REAP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            returncode = None
    return returncode, timed_out, duration_s


def _wait_exited(process: subprocess.Popen[bytes], deadline: float, cancel: threading.Event | None = None) -> bool:
    """Wait until the process has exited, ``deadline`` passed or ``cancel`` is set, without reaping it."""
    interval = 0.001
    while True:
        try:
            if os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                return True
        except ChildProcessError:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0 or (cancel is not None and cancel.is_set()):
            return False
        time.sleep(min(interval, remaining))
        interval = min(interval * 2, 0.05)


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _classify(
    directory: Path,
    returncode: int | None,
    timed_out: bool,
    duration_s: float,
    timeout_s: float,
    memory_limit_bytes: int | None,
) -> WorkerResult:
    """Turn what the worker left behind into a WorkerResult; a written result wins."""
    tail = _read_tail(directory / OUTPUT_FILE)

    def result(status: WorkerStatus, reason: str, value: Any = None, tb: str | None = None) -> WorkerResult:
        return WorkerResult(status, value, reason, tb, duration_s, tail)

    try:
        payload = _read_payload(directory / RESULT_FILE)
    except Exception as exc:
        return result("error", f"worker result refused: {type(exc).__name__}: {exc}")
    if payload is not None:
        status = payload.get("status")
        if status == "ok":
            return result("ok", "ok", value=payload.get("value"))
        if status in ("error", "oom"):
            reason = str(payload.get("summary", ""))
            if status == "oom":
                reason = f"out of memory: {payload.get('message') or reason}"
                reason += _limit_note(memory_limit_bytes)
            return result(status, reason, tb=str(payload.get("traceback", "")) or None)
        return result("error", f"worker result refused: unknown status {status!r}")
    if timed_out:
        return result("timeout", f"timed out after {timeout_s:.1f} s")
    if returncode is None:
        return result("crash", f"worker did not exit within {REAP_TIMEOUT_S:.0f} s of SIGKILL")
    if returncode < 0:
        signum = -returncode
        if signum == signal.SIGKILL:
            return result("oom", "killed by SIGKILL without a timeout (most likely the out-of-memory killer)")
        if _OOM_PATTERN.search(tail):  # e.g. std::bad_alloc -> abort under RLIMIT_AS
            reason = f"out of memory: {_describe_signal(signum)}"
            return result("oom", reason + _limit_note(memory_limit_bytes))
        return result("crash", _describe_signal(signum))
    if _OOM_PATTERN.search(tail):
        return result("oom", f"out of memory: exited with code {returncode}" + _limit_note(memory_limit_bytes))
    return result("crash", f"worker exited with code {returncode} before reporting a result")


def _describe_signal(signum: int) -> str:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return f"killed by signal {signum}"
    description = signal.strsignal(signum)
    return f"killed by {name} ({description.lower()})" if description else f"killed by {name}"


def _limit_note(memory_limit_bytes: int | None) -> str:
    if memory_limit_bytes is None:
        return ""
    return f" (memory limit {memory_limit_bytes / 2**20:.0f} MiB)"


def _open_regular(path: Path) -> int | None:
    """Open a file the worker wrote, refusing links and devices (a link to /dev/zero never ends)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path.name} is not a regular file")
    return fd


def _read_payload(path: Path) -> dict[str, Any] | None:
    fd = _open_regular(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as file:
        payload = safe_loads(file.read())
    if not isinstance(payload, dict):
        raise pickle.UnpicklingError(f"expected a dict, got {type(payload).__name__}")
    return payload


def _read_tail(path: Path) -> str:
    try:
        fd = _open_regular(path)
    except OSError as exc:
        return f"<worker output unreadable: {exc}>"
    if fd is None:
        return ""
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        file.seek(max(0, size - 4 * STDERR_TAIL_CHARS))
        text = file.read().decode("utf-8", errors="replace")
    return text[-STDERR_TAIL_CHARS:]


def _remove_tree(directory: Path) -> None:
    """Delete the worker's directory, even parts the worker made unreadable or read-only."""
    try:
        shutil.rmtree(directory)
    except FileNotFoundError:
        pass
    except OSError:
        _make_writable(directory)
        shutil.rmtree(directory, ignore_errors=True)


def _make_writable(path: Path) -> None:
    try:
        if path.is_symlink() or not path.is_dir():
            return
        path.chmod(stat.S_IRWXU)
        for child in path.iterdir():
            _make_writable(child)
    except OSError:
        pass
