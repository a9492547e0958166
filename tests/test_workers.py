"""The isolated worker: every way a candidate can end costs one result, never the caller."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kernelopt.workers import WorkerResult, run_isolated, worker_env
from kernelopt.workers.environment import visible_device
from kernelopt.workers.identity import worker_identity

TESTS_DIR = Path(__file__).resolve().parent
TARGETS = "worker_targets"
TIMEOUT_S = 30.0  # generous: a loaded 2-core CI machine starts Python slowly
SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "MY_SECRET")


def run(function: str, *args: object, **options: object) -> WorkerResult:
    options.setdefault("timeout_s", TIMEOUT_S)
    return run_isolated(f"{TARGETS}:{function}", *args, extra_path=[TESTS_DIR], **options)


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting for init to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def test_value_round_trips() -> None:
    result = run("add", 2, 3, kwargs={"scale": 10})
    assert result.ok, result
    assert result.status == "ok"
    assert result.value == {"sum": 50, "items": [2, 3], "pair": (2, 3)}
    assert result.duration_s > 0
    assert result.traceback is None
    assert result.to_dict()["ok"] is True


def test_exception_is_an_error_with_traceback() -> None:
    result = run("raise_value_error", "bad tile size")
    assert result.status == "error"
    assert result.reason == "ValueError: bad tile size"
    assert result.traceback is not None and "raise_value_error" in result.traceback
    assert not result.ok
    assert result.origin is not None and result.origin.endswith(" in raise_value_error")  # the innermost frame
    assert run("add", 1, 2).origin is None


def test_segfault_is_a_crash_naming_the_signal() -> None:
    result = run("segfault")
    assert result.status == "crash"
    assert "SIGSEGV" in result.reason and "segmentation fault" in result.reason
    assert "Fatal Python error" in result.stderr_tail  # faulthandler's traceback


def test_exit_without_result_is_a_crash() -> None:
    result = run("exit_without_result", 3)
    assert result.status == "crash"
    assert "exited with code 3" in result.reason


def test_hang_times_out_and_kills_grandchildren(worker_tmp: Path) -> None:
    pid_file = worker_tmp / "grandchild.pid"
    start = time.monotonic()
    result = run("hang_with_grandchild", str(pid_file), timeout_s=2)
    elapsed = time.monotonic() - start
    assert result.status == "timeout"
    assert result.reason == "timed out after 2.0 s"
    assert elapsed < 6, elapsed
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while not _dead(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _dead(grandchild):
        os.kill(grandchild, signal.SIGKILL)
        pytest.fail(f"grandchild {grandchild} survived the timeout")


def test_memory_exhaustion_is_oom() -> None:
    result = run("exhaust_memory", memory_limit_bytes=512 * 2**20)
    assert result.status == "oom", result
    assert result.reason.startswith("out of memory")
    assert "512 MiB" in result.reason


def test_secrets_do_not_reach_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SECRETS:
        monkeypatch.setenv(name, "sk-do-not-leak")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/triton-cache")
    monkeypatch.setenv("KERNELOPT_CUDA_BUILD_DIR", "/tmp/cuda-builds")
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    monkeypatch.setenv("TRITON_AUTH_HEADER", "Bearer sk-do-not-leak")
    monkeypatch.setenv("SOME_UNLISTED_VARIABLE", "x")
    result = run("environment")
    assert result.ok, result
    environ, cwd = result.value["environ"], result.value["cwd"]
    for name in (*SECRETS, "TRITON_AUTH_HEADER", "SOME_UNLISTED_VARIABLE"):
        assert name not in environ
    assert "sk-do-not-leak" not in repr(environ)
    assert environ["TRITON_PRINT_AUTOTUNING"] == "1"  # the allow-list lets Triton's settings through
    # ... and our cache folder too, unless the worker runs as another user, who could not write it
    assert environ.get("TRITON_CACHE_DIR") == ("/tmp/triton-cache" if worker_identity() is None else None)
    assert environ.get("KERNELOPT_CUDA_BUILD_DIR") == ("/tmp/cuda-builds" if worker_identity() is None else None)
    assert environ["HOME"] == environ["TMPDIR"] == cwd
    assert Path(cwd).name.startswith("kernelopt-worker-")
    assert environ["PYTHONUNBUFFERED"] == "1" and environ["PYTHONDONTWRITEBYTECODE"] == "1"
    assert not Path(cwd).exists(), "the temporary directory must be removed"


def test_explicit_secret_raises_before_starting() -> None:
    with pytest.raises(ValueError, match="HF_TOKEN"):
        run("environment", env={"HF_TOKEN": "hf_x"})
    with pytest.raises(ValueError, match="my_api_key"):
        worker_env("/tmp/w", env={"my_api_key": "x"})


def test_explicit_env_and_gpu_pinning() -> None:
    result = run("environment", env={"KERNELOPT_SEED": "7"}, gpu=0)
    assert result.ok, result
    assert result.value["environ"]["KERNELOPT_SEED"] == "7"
    assert result.value["environ"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert visible_device(1, {"CUDA_VISIBLE_DEVICES": "2,3"}) == "3"
    with pytest.raises(ValueError, match="not visible"):
        visible_device(2, {"CUDA_VISIBLE_DEVICES": "2,3"})


def test_caller_workdir_is_kept(worker_tmp: Path) -> None:
    workdir = worker_tmp / "work"
    result = run("environment", workdir=workdir)
    assert result.ok, result
    assert result.value["cwd"] == str(workdir.resolve())
    assert workdir.is_dir()


def test_unimportable_target_is_an_error() -> None:
    result = run_isolated("no_such_module_for_kernelopt:main", timeout_s=TIMEOUT_S)
    assert result.status == "error"
    assert "cannot load target 'no_such_module_for_kernelopt:main'" in result.reason
    assert "ModuleNotFoundError" in result.reason
    missing = run("no_such_function")
    assert missing.status == "error"
    assert "AttributeError" in missing.reason and "no_such_function" in missing.reason


def test_malformed_target_raises() -> None:
    with pytest.raises(ValueError, match="package.module:function"):
        run_isolated("worker_targets.add")


def test_malicious_result_cannot_run_code_in_the_parent(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    result = run("malicious_result", str(marker))
    assert result.status == "error"
    assert "posix.system is not allowed" in result.reason
    assert not marker.exists()


def test_tensors_and_arrays_round_trip() -> None:
    import numpy as np
    import torch

    result = run("tensors")
    assert result.ok, result
    value = result.value
    assert torch.equal(value["tensor"], torch.arange(6, dtype=torch.float64).reshape(2, 3).t())
    assert value["dtype"] is torch.bfloat16 and value["size"] == torch.Size([2, 3])
    assert np.array_equal(value["array"], np.arange(4, dtype=np.float32))
    assert value["scalar"] == 1.5


def test_parent_is_made_non_dumpable_before_a_worker_starts() -> None:
    """Other processes of the user (a worker included) cannot read the parent's /proc/<pid>/environ."""
    import subprocess
    import sys

    code = (
        "import ctypes, ctypes.util\n"
        "from kernelopt.workers.hardening import protect_parent_environment\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
        "before = libc.prctl(3, 0, 0, 0, 0)\n"
        "ok = protect_parent_environment()\n"
        "print(before, ok, libc.prctl(3, 0, 0, 0, 0))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "True", "0"]


def test_a_cancelled_worker_ends_at_once(worker_tmp: Path) -> None:
    import threading

    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    started = time.monotonic()
    result = run_isolated("worker_targets:write_pid_and_sleep", str(worker_tmp / "pid"), timeout_s=120,
                          extra_path=[TESTS_DIR], cancel=cancel)
    assert result.status == "cancelled" and result.reason == "cancelled by the caller"
    assert time.monotonic() - started < 30
    pid = int((worker_tmp / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists()  # ended and reaped


def test_a_worker_of_another_user_gets_no_path_entry_it_cannot_reach(tmp_path, monkeypatch) -> None:
    """``python -m kernelopt`` from root's private folder puts that folder first on sys.path; a worker
    running as another user must not inherit it (on the H200 it met it as a PermissionError in an import)."""
    from kernelopt.workers.environment import worker_env

    private = tmp_path / "private"
    (private / "inner").mkdir(parents=True)
    private.chmod(0o700)
    public = Path(tempfile.mkdtemp(prefix="kernelopt-public-"))  # under the world-searchable temp folder
    try:
        public.chmod(0o755)
        monkeypatch.setattr(sys, "path", [str(private / "inner"), str(public), *sys.path])
        other = worker_env(tmp_path, other_user=True)["PYTHONPATH"].split(os.pathsep)
        same = worker_env(tmp_path, other_user=False)["PYTHONPATH"].split(os.pathsep)
        assert str(private / "inner") not in other and str(private / "inner") in same
        assert str(public) in other
    finally:
        public.rmdir()
