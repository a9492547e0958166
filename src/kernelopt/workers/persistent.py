"""A persistent isolated worker: one process, many calls, state kept between them.

Evaluating a candidate kernel needs the captured model; capturing takes seconds
and evaluating a launch config a fraction of one. A persistent worker captures
once and serves many evaluations, with the same isolation as ``run_isolated``
(own session, allow-listed environment, a user of its own when we are root, no
descriptor of ours but its two pipes, private working directory). A call that
crashes, hangs or exhausts memory ends the process: that call gets its
:class:`WorkerResult`, and the next call starts a fresh process.
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelopt.workers.environment import worker_env
from kernelopt.workers.hardening import protect_parent_environment
from kernelopt.workers.identity import hand_over, worker_identity
from kernelopt.workers.isolated import REAP_TIMEOUT_S, WorkerResult, _classify, _read_tail, _signal_group
from kernelopt.workers.protocol import OUTPUT_FILE
from kernelopt.workers.reaper import kill_left_behind, kill_tree
from kernelopt.workers.safe_pickle import safe_loads
from kernelopt.workers.serve import HEADER, write_frame
from kernelopt.workers.workdirs import make_workdir


class PersistentWorker:
    """A long-lived worker process; ``call`` is ``run_isolated`` without the start-up cost."""

    def __init__(
        self,
        *,
        gpu: int | None = None,
        env: Mapping[str, str] | None = None,
        extra_path: Sequence[str | Path] = (),
    ) -> None:
        self._gpu, self._env, self._extra_path = gpu, env, tuple(extra_path)
        self._process: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._request_w = self._response_r = -1
        self.starts = 0

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _start(self) -> None:
        protect_parent_environment()
        identity = worker_identity()
        self._dir = make_workdir("kernelopt-pworker-")
        hand_over(self._dir, identity)
        request_r, self._request_w = os.pipe()
        self._response_r, response_w = os.pipe()
        env = worker_env(
            self._dir, gpu=self._gpu, env=self._env, extra_path=self._extra_path, other_user=identity is not None
        )
        with open(self._dir / OUTPUT_FILE, "wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "kernelopt.workers.serve", str(request_r), str(response_w)],
                cwd=self._dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                close_fds=True,
                pass_fds=(request_r, response_w),
                start_new_session=True,
                **(identity.popen_kwargs() if identity is not None else {}),
            )
        os.close(request_r)
        os.close(response_w)
        self.starts += 1

    def call(
        self, target: str, *args: Any, kwargs: Mapping[str, Any] | None = None, timeout_s: float = 600
    ) -> WorkerResult:
        """Run ``target(*args, **kwargs)`` in the worker; any ending becomes a WorkerResult."""
        if not self.alive:
            self._stop()
            self._start()
        assert self._process is not None and self._dir is not None
        start = time.monotonic()
        data = pickle.dumps(
            {"target": target, "args": args, "kwargs": dict(kwargs or {})}, protocol=pickle.HIGHEST_PROTOCOL
        )
        try:
            write_frame(self._request_w, data)
            frame = self._read_response(start + timeout_s)
        except (BrokenPipeError, EOFError, OSError):
            frame = None
        duration = time.monotonic() - start
        if frame is None:  # died or timed out: classify like a one-shot worker, then drop it
            # By the clock, not by liveness: a process killed by a signal closes its pipes
            # before it can be reaped, so "still alive" right after EOF is not a timeout.
            timed_out = time.monotonic() >= start + timeout_s
            returncode = self._stop(keep_dir=True)
            result = _classify(self._dir, returncode, timed_out, duration, timeout_s, None)
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
            return result
        tail = _read_tail(self._dir / OUTPUT_FILE)
        try:
            payload = safe_loads(frame)
        except Exception as exc:
            return WorkerResult(
                "error", None, f"worker result refused: {type(exc).__name__}: {exc}", None, duration, tail
            )
        if payload.get("status") == "ok":
            return WorkerResult("ok", payload.get("value"), "ok", None, duration, tail)
        status = "oom" if payload.get("status") == "oom" else "error"
        reason = str(payload.get("summary", ""))
        return WorkerResult(status, None, reason, payload.get("traceback"), duration, tail)  # type: ignore[arg-type]

    def _read_response(self, deadline: float) -> bytes | None:
        buffer = b""
        need = HEADER.size
        size = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._response_r], [], [], min(remaining, 1.0))
            if not ready:
                if not self.alive:
                    return None
                continue
            chunk = os.read(self._response_r, 1 << 20)
            if not chunk:
                return None
            buffer += chunk
            if size is None and len(buffer) >= need:
                (size,) = HEADER.unpack(buffer[:need])
            if size is not None and len(buffer) >= need + size:
                return buffer[need : need + size]

    def _stop(self, keep_dir: bool = False) -> int | None:
        returncode = None
        if self._process is not None:
            if self._process.returncode is None:  # not reaped: its pid is still its own
                kill_tree(self._process.pid)  # all it started, adopted orphans included
            _signal_group(self._process.pid, signal.SIGKILL)
            try:
                returncode = self._process.wait(timeout=REAP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                returncode = None
            self._process = None
            if self._dir is not None:
                kill_left_behind(self._dir)  # children it started in a session of their own
        for fd in (self._request_w, self._response_r):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._request_w = self._response_r = -1
        if not keep_dir and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        return returncode

    def close(self) -> None:
        """End the worker process and remove its directory."""
        self._stop()

    def __enter__(self) -> PersistentWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
