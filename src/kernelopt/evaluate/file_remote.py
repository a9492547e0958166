"""The judge's handles on kernel-file processes: the candidate's, and a clean one for the original.

:class:`FileRunner` is :class:`~kernelopt.evaluate.remote.RemoteRunner` over
:mod:`kernelopt.evaluate.runner_file`: the same worker (its own user, no secrets),
the same calibration rule (right after every start, before any candidate is loaded,
the process times the user's *original* file the way it will time candidates, and the
judge keeps what its own clock saw beyond those readings), and replies that are plain
data. :class:`ReferenceFileRunner` only ever loads the original, so gate 4 times both
sides of the ratio the same way, each in a process of the same kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from kernelopt.errors import ProblemError
from kernelopt.evaluate.remote import RemoteRunner
from kernelopt.evaluate.runner_file import ORIGINAL
from kernelopt.evaluate.shared_tensors import share, share_args

FILE_MODULE = "kernelopt.evaluate.runner_file"


class FileRunner(RemoteRunner):
    """A process that loads, runs and times kernel files, seen from the judge."""

    module = FILE_MODULE

    def __init__(
        self,
        *,
        original_source: str,
        entry: str,
        calibration_inputs: Sequence[Any],
        device: str = "cuda",
        gpu: int | None = None,
        timeout_s: float = 600.0,
        env: dict[str, str] | None = None,
        extra_path: Sequence[str | Path] = (),
        slot: str | None = None,
        runtime: Sequence[str] = (),
    ) -> None:
        super().__init__(device=device, gpu=gpu, timeout_s=timeout_s, env=env, extra_path=extra_path)
        self.original_source, self.entry = original_source, entry
        self.slot, self.runtime = slot, list(runtime)  # the kernel a CUDA C++ candidate replaces, its parameters
        self._calibration_inputs = list(calibration_inputs)

    def _ensure(self) -> None:
        if self.worker.alive and self.worker.starts == self._started:
            return
        self._raw("start", self.device, self.entry, self.slot, self.runtime)
        self._started = self.worker.starts
        self.built.clear()
        reply = self._raw("load", self.original_source, True)
        if reply["error"]:
            raise ProblemError(f"the kernel file does not load in a worker: {reply['error']}")
        self._calibrate_file()

    def _calibrate_file(self) -> None:
        shared = share_args(self._calibration_inputs)
        self._raw("time_run", ORIGINAL, shared)  # warm: the first call compiles (and autotunes)
        self._calibrate_on(lambda: self._raw("time_run", ORIGINAL, shared))

    def start(self) -> None:
        """Start and calibrate now (not on the first candidate)."""
        self._ensure()

    def load(self, source: str) -> tuple[str, str | None, float]:
        """(digest, error or None, seconds) of importing a candidate file in this process; a file that
        fails to import still ran its module code here, so the process counts as touched."""
        reply = self.call("load", source)
        self.built.add(reply["digest"])
        return str(reply["digest"]), reply["error"], float(reply["seconds"])

    def run_into(self, key: str, inputs: Sequence[Any], outputs: Sequence[torch.Tensor]) -> dict[str, Any]:
        """One call of the file ``key`` on ``inputs`` (the judge's buffers, written in place where the
        file writes its inputs), its returned tensors copied into ``outputs``."""
        _sync(self.device)
        return dict(self.call("run", key, share_args(inputs), [share(o) for o in outputs]))

    def last_into(self, outputs: Sequence[torch.Tensor]) -> dict[str, Any]:
        """What the last timed call returned, copied into ``outputs``."""
        return dict(self.call("copy_last", [share(o) for o in outputs]))

    def timed_file(self, key: str, args_of: Callable[[], Sequence[Any]]) -> Callable[[], float]:
        """One timed call of file ``key`` on the argument set ``args_of()`` names at call time."""
        return self._timed(args_of, "time_run", key)


class ReferenceFileRunner(FileRunner):
    """A process that only ever runs the user's original file."""

    def load(self, source: str) -> tuple[str, str | None, float]:
        raise RuntimeError("the reference process never loads a candidate; use the candidate's FileRunner")

    def timed_file(self, key: str, args_of: Callable[[], Sequence[Any]]) -> Callable[[], float]:
        if key != ORIGINAL:
            raise RuntimeError("the reference process times the original file only")
        return super().timed_file(key, args_of)


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
