"""Functions the worker tests run in isolated processes.

Importable by the worker because the tests pass this directory as ``extra_path``.
Nothing here imports torch at module level, so the memory-limit test stays small.
"""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MIB = 2**20


def add(a: int, b: int, *, scale: int = 1) -> dict[str, Any]:
    return {"sum": (a + b) * scale, "items": [a, b], "pair": (a, b)}


def raise_value_error(message: str) -> None:
    raise ValueError(message)


def segfault() -> None:
    ctypes.string_at(0)


def exit_without_result(code: int) -> None:
    os._exit(code)


def hang_with_grandchild(pid_file: str) -> None:
    """Start a grandchild that sleeps, record its pid, then hang."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(pid_file).write_text(str(child.pid))
    while True:
        time.sleep(1)


def exhaust_memory(chunk_mib: int = 64, max_chunks: int = 64) -> str:
    """Allocate until MemoryError; stops at ``max_chunks`` so a missing limit spares the host."""
    chunks = []
    for _ in range(max_chunks):
        chunks.append(bytearray(chunk_mib * MIB))
    return f"allocated {len(chunks) * chunk_mib} MiB without running out"


def environment() -> dict[str, Any]:
    return {"environ": dict(os.environ), "cwd": os.getcwd(), "sys_path": list(sys.path)}


class _RunsCommandWhenUnpickled:
    """Its pickle tells the unpickler to call os.system: a result that attacks the parent."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def malicious_result(marker: str) -> Any:
    return _RunsCommandWhenUnpickled(marker)


def tensors() -> dict[str, Any]:
    import numpy as np
    import torch

    return {
        "tensor": torch.arange(6, dtype=torch.float64).reshape(2, 3).t(),
        "dtype": torch.bfloat16,
        "size": torch.Size([2, 3]),
        "array": np.arange(4, dtype=np.float32),
        "scalar": np.float64(1.5),
    }


_COUNTER = {"n": 0}


def count() -> int:
    """Module state survives between calls in a persistent worker."""
    _COUNTER["n"] += 1
    return _COUNTER["n"]


def version_object() -> Any:
    """A value the parent must refuse to unpickle (not on the allow-list)."""
    import torch

    return torch.__version__


# -- compile-pool stand-ins: (source, name) -> seconds, like warm_triton_cache ---------


def warm_meet(directory: str, name: str) -> float:
    """Check in, then wait for the other jobs of the batch: only finishes if they run at once."""
    path = Path(directory)
    (path / f"{name}.{os.getpid()}").touch()
    expected = int((path / "expected").read_text())
    deadline = time.monotonic() + 30
    while len([p for p in path.iterdir() if p.name != "expected"]) < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(list(path.iterdir())) - 1} of {expected} jobs ran at once")
        time.sleep(0.01)
    return 0.0


def warm_reject(source: str, name: str) -> float:
    raise SyntaxError(f"candidate {name} does not compile\nsecond line")


def warm_die(source: str, name: str) -> float:
    os._exit(3)


def write_pid(path: str) -> int:
    Path(path).write_text(str(os.getpid()))
    return os.getpid()


def write_pid_and_sleep(path: str) -> None:
    write_pid(path)
    time.sleep(600)


def start_persistent_worker_and_hang(pid_file: str, tests_dir: str) -> None:
    """A nested persistent worker busy in a long call (as a bench problem's optimize is) when this one dies."""
    from kernelopt.workers.persistent import PersistentWorker

    worker = PersistentWorker(extra_path=[tests_dir])
    worker.call("worker_targets:write_pid_and_sleep", pid_file, timeout_s=900)


def warm_hold(directory: str, name: str) -> float:
    """Hold the pool's only process until the test writes ``release``."""
    path = Path(directory)
    (path / f"started.{name}").touch()
    deadline = time.monotonic() + 30
    while not (path / "release").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.01)
    return 0.0


def warm_quick(source: str, name: str) -> float:
    return 0.0


def start_daemon(seconds: int = 60) -> int:
    """Start a child in a session of its own (it would outlive the worker's process group); its pid."""
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return child.pid


def what_a_worker_can_read(key_file: str) -> dict[str, Any]:
    """Everything a worker can read that might hold its parent's keys, by where it came from: its
    environment, its parent's ``/proc`` files and descriptors, every process's environ and cmdline,
    every descriptor it inherited (read through the descriptor itself, so a leaked one counts even
    where the file's mode would refuse a fresh open), and ``key_file`` by its path. What was
    refused is listed too, with the error's name."""
    limit = 1 << 16
    found: dict[str, str] = {"os.environ": repr(dict(os.environ))}
    refused: dict[str, str] = {}

    def grab(label: str, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                found[label] = os.read(fd, limit).decode(errors="replace")
            finally:
                os.close(fd)
        except OSError as exc:
            refused[label] = type(exc).__name__

    parent = os.getppid()
    grab("parent environ", f"/proc/{parent}/environ")
    grab("parent cmdline", f"/proc/{parent}/cmdline")
    try:
        for fd in os.listdir(f"/proc/{parent}/fd"):
            grab(f"parent fd {fd}", f"/proc/{parent}/fd/{fd}")
    except OSError as exc:
        refused["parent fd listing"] = type(exc).__name__
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            grab(f"/proc/{entry}/environ", f"/proc/{entry}/environ")
            grab(f"/proc/{entry}/cmdline", f"/proc/{entry}/cmdline")
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
            if stat.S_ISREG(os.fstat(fd).st_mode):  # never a pipe: a read would take the worker's own frames
                found[f"fd {fd} ({target})"] = os.pread(fd, limit, 0).decode(errors="replace")
        except OSError as exc:
            refused[f"fd {fd}"] = type(exc).__name__
    grab("key file", key_file)
    status = Path("/proc/self/status").read_text()
    no_new_privs = next((line.split()[1] for line in status.splitlines() if line.startswith("NoNewPrivs:")), None)
    return {
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "no_new_privs": no_new_privs,
        "parent": parent,
        "found": found,
        "refused": refused,
    }


def read_from_a_nested_worker(key_file: str, tests_dir: str) -> dict[str, Any]:
    """:func:`what_a_worker_can_read` from a persistent worker this worker starts (as a bench problem starts its
    evaluation worker), with this worker's own uid beside it."""
    from kernelopt.workers.persistent import PersistentWorker

    with PersistentWorker(extra_path=[tests_dir]) as worker:
        outcome = worker.call("worker_targets:what_a_worker_can_read", key_file, timeout_s=120)
    if not outcome.ok:
        raise RuntimeError(f"the nested worker failed: {outcome.status}: {outcome.reason}")
    return {**outcome.value, "outer_uid": os.getuid()}


def read_from_a_nested_isolated_worker(key_file: str, tests_dir: str) -> dict[str, Any]:
    """:func:`what_a_worker_can_read` from a one-shot worker this worker starts (as a bench problem times
    each stock mode in a process of its own), with this worker's own uid beside it."""
    from kernelopt.workers import run_isolated

    outcome = run_isolated("worker_targets:what_a_worker_can_read", key_file, timeout_s=120, extra_path=[tests_dir])
    if not outcome.ok:
        raise RuntimeError(f"the nested worker failed: {outcome.status}: {outcome.reason}")
    return {**outcome.value, "outer_uid": os.getuid()}


ESCAPEE = "cd /; exec env -i sleep 300"  # a daemon that clears its environment and leaves the worker's folder


def start_escapee(then_hang: bool = False) -> dict[str, Any]:
    """Start :data:`ESCAPEE` in a session of its own, through a shell that exits at once (so it is
    orphaned, as a double-forked daemon is): its pid, and whether it was seen to clear its
    environment and leave the folder. ``then_hang``: print the pid, then wait to be killed."""
    started = subprocess.run(
        ["sh", "-c", f"setsid sh -c '{ESCAPEE}' </dev/null >/dev/null 2>&1 & echo $!"],
        capture_output=True, text=True, check=True,
    )
    pid = int(started.stdout.strip())
    escaped = False
    deadline = time.monotonic() + 10
    while not escaped and time.monotonic() < deadline:
        try:
            escaped = os.readlink(f"/proc/{pid}/cwd") == "/" and Path(f"/proc/{pid}/environ").read_bytes() == b""
        except OSError:
            pass
        time.sleep(0.01)
    if then_hang:
        print(f"escapee {pid} {escaped}", flush=True)
        while True:
            time.sleep(1)
    return {"pid": pid, "escaped": escaped}
