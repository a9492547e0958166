"""The judge's handle on the candidate's process.

:class:`RemoteRunner` owns one persistent worker running
:mod:`kernelopt.evaluate.runner` and turns its calls into what the gates need:
a launcher that runs a candidate on the judge's own (lent) buffers, a timed call
whose reading the judge checks against its own clock, the re-stitched model's
forward into the judge's output buffers. Whatever the candidate does to its
process, it reaches the judge only as data: tensors the judge reads itself,
numbers the judge checks, and replies unpickled through the safe allow-list.

Right after every start of that process, before any candidate is built in it,
the runner times the *original* kernel the same way it will time candidates;
what the judge's clock saw beyond the runner's own readings then is the honest
overhead of a remote call (:attr:`calibration`), against which every later
reading is checked (``verify.performance.judge_timing_evidence``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from kernelopt.evaluate.runner import DEFAULT_BACKEND, ORIGINAL
from kernelopt.evaluate.shared_tensors import share, share_args
from kernelopt.verify.performance import Calibration
from kernelopt.workers.identity import check_cuda_lending, worker_identity
from kernelopt.workers.isolated import WorkerResult
from kernelopt.workers.persistent import PersistentWorker

MODULE = "kernelopt.evaluate.runner"
ROLE_ENV = {"KERNELOPT_ROLE": "runner"}
CALIBRATION_CALLS = 12


class RunnerDied(Exception):
    """The candidate's process ended or hung during a call: the candidate's failure."""

    def __init__(self, call: str, outcome: WorkerResult) -> None:
        super().__init__(f"the candidate's process ended during {call}: {outcome.status}: {outcome.reason}")
        self.call = call
        self.outcome = outcome

    @property
    def one_line(self) -> str:
        """``status: reason``, its first line only (for a reason shown to a person)."""
        return f"{self.outcome.status}: {self.outcome.reason}".splitlines()[0]


class RemoteRunner:
    """The candidate's process, seen from the judge."""

    module = MODULE  # what that process runs (the kernel-file runner has its own)

    def __init__(
        self,
        *,
        device: str = "cuda",
        spec: dict[str, Any] | None = None,
        backend: str = DEFAULT_BACKEND,
        gpu: int | None = None,
        timeout_s: float = 600.0,
        env: dict[str, str] | None = None,
        extra_path: Sequence[str | Path] = (),
    ) -> None:
        if torch.device(device).type == "cuda":  # before anything is built: a root judge cannot lend to them
            check_cuda_lending(worker_identity())
        src_root = str(Path(__file__).resolve().parents[2])
        self.worker = PersistentWorker(gpu=gpu, env={**ROLE_ENV, **(env or {})}, extra_path=[src_root, *extra_path])
        self.device, self.spec, self.backend, self.timeout_s = device, spec, backend, timeout_s
        self._started = -1  # worker.starts at our last start-up
        self._originals: dict[str, str] = {}
        self._calibration_kernel: tuple[str, list[Any]] | None = None
        self._calibrate_model = False  # no kernel to calibrate on: the original model's timed forward
        self.calibration = Calibration()
        self.built: set[str] = set()
        self.host_ms: dict[bool, float] = {}  # the host's time of a forward in a loop, by recorded: the last read
        self.op_hosts: dict[bool, dict[str, str]] = {}  # kernelopt's own ops' host paths there, read with it

    # -- process life -----------------------------------------------------------------------

    def _raw(self, call: str, *args: Any, timeout_s: float | None = None) -> Any:
        outcome = self.worker.call(f"{self.module}:{call}", *args, timeout_s=timeout_s or self.timeout_s)
        if not outcome.ok:
            raise RunnerDied(call, outcome)
        return outcome.value

    def _ensure(self) -> None:
        if self.worker.alive and self.worker.starts == self._started:
            return
        self._raw("start", self.backend, self.device, self.spec)
        self._started = self.worker.starts
        self.built.clear()
        for name, source in self._originals.items():
            self._raw("register_original", name, source)
        self.calibration = Calibration()
        if self._calibration_kernel is not None:
            self._calibrate(*self._calibration_kernel)
        elif self._calibrate_model:
            self._calibrate_forward()

    def call(self, name: str, *args: Any, timeout_s: float | None = None) -> Any:
        """One call into the candidate's process (started, and calibrated, first if it is not running)."""
        self._ensure()
        return self._raw(name, *args, timeout_s=timeout_s)

    def restart(self) -> None:
        """A fresh process for the next call (after a candidate took the old one down)."""
        self.worker.close()

    def close(self) -> None:
        self.worker.close()

    # -- calibration --------------------------------------------------------------------------

    def register_original(self, name: str, source: str, args: Sequence[Any]) -> None:
        """Name the trusted kernel this process calibrates on; restarts the process if a candidate
        already ran in it (calibration must come from a process no candidate has touched).
        ``args`` are kept for every later calibration and written by the original each time:
        pass copies of whatever the kernel writes."""
        self._originals[name] = source
        if self._calibration_kernel is None:  # the original writes into ``args`` whenever it calibrates
            self._calibration_kernel = (name, list(args))
        if self.worker.alive and self.worker.starts == self._started:
            if self.built:
                self.restart()
            else:
                self._raw("register_original", name, source)
                if not self.calibration:
                    self._calibrate(*self._calibration_kernel)
        self._ensure()

    def calibrate_on_model(self) -> None:
        """Calibrate this process on the original model's timed forward, where no kernel was registered
        (a graph candidate's evaluation times whole models only); a process a candidate already
        touched is restarted first, as for :meth:`register_original`."""
        if self._calibration_kernel is not None or self._calibrate_model:
            self._ensure()
            return
        self._calibrate_model = True
        if self.worker.alive and self.worker.starts == self._started:
            if self.built:
                self.restart()
            else:
                self._calibrate_forward()
        self._ensure()

    def _calibrate_forward(self) -> None:
        self._raw("warm_model")  # the capture is not part of any reading
        self._raw("time_model")
        self._calibrate_on(self._model_reading(False, self._raw))

    def _calibrate(self, name: str, args: list[Any]) -> None:
        shared = share_args(args)
        self._raw("launch", name, ORIGINAL, [shared])  # warm: the first launch may compile or autotune
        self._calibrate_on(lambda: self._raw("time_launch", name, ORIGINAL, shared))

    def _calibrate_on(self, timed_call: Callable[[], dict[str, Any]]) -> None:
        """What the judge's clock sees beyond the process's own readings of a trusted call, kept as the
        calibration every later reading of this process is checked against; beside it, the device's lead
        inside each of those calls (``timed_call``: the worker's reply, its ``ms`` and ``lead_ms``), which
        the check allows once rather than as overhead to be multiplied."""
        unexplained, leads = [], []
        for _ in range(CALIBRATION_CALLS):
            _sync(self.device)
            started = time.perf_counter()
            reply = timed_call()
            unexplained.append((time.perf_counter() - started) * 1000.0 - float(reply["ms"]))
            leads.append(float(reply.get("lead_ms", 0.0)))
        self._raw("release")
        self.calibration = Calibration(tuple(unexplained), tuple(leads))

    # -- candidates ---------------------------------------------------------------------------

    def build(self, name: str, source: str) -> tuple[str, str | None, float]:
        """(digest, error or None, seconds) of compiling ``source`` in the candidate's process. A build
        that fails still ran the candidate's module code there: the process counts as touched."""
        reply = self.call("build", name, source)
        self.built.add(reply["digest"])
        return str(reply["digest"]), reply["error"], float(reply["seconds"])

    def launcher(self, name: str, key: str) -> Callable[[Sequence[Any]], None]:
        """A launch function over the judge's buffers: the candidate writes where the judge reads."""

        def run(args: Sequence[Any]) -> None:
            _sync(self.device)
            self.call("launch", name, key, [share_args(args)])

        return run

    def timed(self, name: str, key: str, args_of: Callable[[], Sequence[Any]]) -> Callable[[], float]:
        """One timed remote launch on the argument set ``args_of()`` names at call time (ms, as reported)."""
        return self._timed(args_of, "time_launch", name, key)

    def _timed(self, args_of: Callable[[], Sequence[Any]], call: str, *head: Any) -> Callable[[], float]:
        """A timed remote ``call(*head, shared args)``; each argument set is shared with the process once."""
        cache: dict[int, list[Any]] = {}

        def run() -> float:
            args = args_of()
            shared = cache.get(id(args))
            if shared is None:
                shared = cache[id(args)] = share_args(args)
            return float(self.call(call, *head, shared)["ms"])

        return run

    def timed_original(self, name: str, args_of: Callable[[], Sequence[Any]]) -> Callable[[], float]:
        """:meth:`timed` for the original kernel this process built at start-up."""
        return self.timed(name, ORIGINAL, args_of)

    # -- the re-stitched model ----------------------------------------------------------------

    def warm_model(self) -> None:
        """Have the candidate's process capture its model ahead of the first model gate."""
        if self.spec is not None:
            self.call("warm_model")

    def set_swaps(
        self, replacements: Sequence[tuple[dict[str, Any], str]], graphs: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Install (address, digest) replacements and built graph candidates (by
        digest) in the candidate process's model."""
        return dict(self.call("set_swaps", list(replacements), list(graphs)))

    def build_graph(self, candidate: dict[str, Any]) -> tuple[str, str | None, float]:
        """(digest, error or None, seconds) of building a graph candidate's kernels in the candidate's
        process; as for :meth:`build`, the process counts as touched either way."""
        reply = self.call("build_graph", candidate)
        self.built.add(reply["digest"])
        return str(reply["digest"]), reply["error"], float(reply["seconds"])

    def forward_into(
        self, inputs: Sequence[Any], outputs: Sequence[torch.Tensor], recorded: bool = False
    ) -> list[dict[str, Any]]:
        """The re-stitched model's outputs for ``inputs``, copied into ``outputs`` (the judge's buffers);
        ``recorded``: through the model's recorded CUDA graph, replayed on ``inputs``' values."""
        _sync(self.device)
        call = "run_model_recorded" if recorded else "run_model"
        reply = self.call(call, share_args(inputs), [share(o) for o in outputs])
        return list(reply["outputs"])

    def release(self) -> None:
        """Let the candidate's process drop the buffers it kept open for timing."""
        if self.worker.alive and self.worker.starts == self._started:
            self._raw("release")

    def drop_recorded(self) -> None:
        """Let the process drop its model's recorded CUDA graph (a no-op where it is not running)."""
        if self.worker.alive and self.worker.starts == self._started:
            self._raw("drop_recorded")

    def timed_model(self, recorded: bool = False) -> Callable[[], float]:
        """One timed forward a call; ``recorded``: one replay of the forward recorded as a CUDA graph."""
        reading = self._model_reading(recorded, self.call)
        return lambda: float(reading()["ms"])

    def _model_reading(self, recorded: bool, call: Callable[..., Any]) -> Callable[[], dict[str, Any]]:
        """The worker's reply for one timed forward (``recorded``: replay), its ``ms`` the longer of the
        device's time of that flushed call and the host's time of a forward called right after another
        (``host_model``, asked once now): a forward in a loop pays the longer. The host's time of the one
        timed call is not it: read alone after the other side's process ran, it finds the host's caches
        cold (:func:`~kernelopt.measure.split_timer.read_host`). The wall time the judge checks a reading
        against is the timed call's alone, as before."""
        asked = call("host_model", recorded)
        host = float(asked["host_ms"])
        self.host_ms[recorded] = host  # shown beside the readings: whether a comparison was the host's
        self.op_hosts[recorded] = dict(asked.get("op_hosts") or {})

        def reading() -> dict[str, Any]:
            reply = dict(call("time_model", True, recorded, False))
            reply["ms"] = max(float(reply["ms"]), host)
            return reply

        return reading


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class ReferenceRunner(RemoteRunner):
    """A worker process that only ever runs the original kernels and the original model.

    Gate 4 times the original here rather than in the judge, so both sides of every
    ratio are read the same way (a worker's events, the judge's clock around the
    call); and since no candidate is ever built here, its readings need no checking."""

    def build(self, name: str, source: str) -> tuple[str, str | None, float]:
        raise RuntimeError("the reference process never builds a candidate; use the candidate's RemoteRunner")

    def launcher(self, name: str, key: str) -> Callable[[Sequence[Any]], None]:
        raise RuntimeError("the reference process never launches a candidate; use the candidate's RemoteRunner")

    def set_swaps(
        self, replacements: Sequence[tuple[dict[str, Any], str]], graphs: Sequence[str] = ()
    ) -> dict[str, Any]:
        raise RuntimeError("the reference process runs the original model only; use the candidate's RemoteRunner")

    def build_graph(self, candidate: dict[str, Any]) -> tuple[str, str | None, float]:
        raise RuntimeError("the reference process never builds a candidate; use the candidate's RemoteRunner")

    def timed(self, name: str, key: str, args_of: Callable[[], Sequence[Any]]) -> Callable[[], float]:
        if key != ORIGINAL:
            raise RuntimeError("the reference process times the original kernel only")
        return super().timed(name, key, args_of)
