"""Search nodes evaluated in the persistent evaluation worker: batching, chunking, result records.

The glue between the search (nodes, :class:`EvaluationResult`) and the evaluation
worker (plain dicts from :mod:`kernelopt.evaluate.worker_targets`): a batch goes
to the worker in chunks sized to about :data:`CHUNK_TARGET_S` of work, a crash
costs only the candidate that caused it, and each raw result becomes the
search's record of it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict
from typing import Any

from kernelopt.config import Settings, load_settings
from kernelopt.evaluate.one_candidate import crash_stage, gate_of_stage
from kernelopt.evaluate.session import GateSettings, ProblemSpec
from kernelopt.search.candidate import EvaluationResult
from kernelopt.search.nodes import Node
from kernelopt.workers import WorkerResult
from kernelopt.workers.identity import worker_cache, worker_identity
from kernelopt.workers.persistent import PersistentWorker

SESSION = "kernelopt.evaluate.worker_targets"
BATCH = 8  # most candidates in one worker call
CHUNK_TARGET_S = 10.0  # a worker call's wall time the chunking aims at
PER_CANDIDATE_TIMEOUT_S = 120.0  # a batch that takes longer is treated as hung: the worker is replaced


def result_of(raw: dict[str, Any]) -> EvaluationResult:
    """An evaluation's plain-data answer from the worker as the search's fitness record."""
    verdicts = raw.get("verdicts", [])
    failed = next((v for v in verdicts if not v["passed"]), None)
    cmp = raw.get("kernel_comparison")
    passed = bool(raw.get("passed"))
    # The batch's wall time shared among its candidates: compile-ahead overlaps, the GPU is held throughout.
    measurements = {"gpu_s": raw.get("batch_share_s", raw.get("gpu_s", 0.0))}
    if raw.get("timings"):
        measurements["timings"] = raw["timings"]
    if cmp:
        measurements["kernel_comparison"] = cmp
        measurements["kernel_time_us"] = cmp["candidate"]["median_ms"] * 1000.0
        measurements["baseline_time_us"] = cmp["baseline"]["median_ms"] * 1000.0
    if raw.get("end_to_end"):
        measurements["end_to_end"] = raw["end_to_end"]
    if raw.get("graph_candidate"):  # a passed graph candidate's call sequence and kernels, for the export
        measurements["graph_candidate"] = raw["graph_candidate"]
    if raw.get("build_s") is not None:  # a CUDA C++ candidate's nvcc time, inside gpu_s but reported apart
        measurements["build_s"] = raw["build_s"]
    return EvaluationResult(
        passed=passed,
        fitness=float(cmp["speedup"]) if passed and cmp else 0.0,
        failed_gate=None if passed else (failed["gate"] if failed else "performance"),
        reason=(verdicts[-1]["reason"] if verdicts else "no verdict")
        if passed
        else (failed["reason"] if failed else "not faster"),
        verdicts=verdicts,
        measurements=measurements,
        worker_status=raw.get("worker_status", "ok"),
    )


def failure_of(outcome: WorkerResult) -> EvaluationResult:
    """A worker that died or timed out on a candidate: a failure at the gate it was in."""
    return EvaluationResult.failure(
        gate_of_stage(crash_stage(outcome.stderr_tail)),
        f"worker {outcome.status}: {outcome.reason}",
        worker_status=outcome.status,
    )


def gpu_seconds(nodes: list[Node]) -> float:
    """The evaluation worker's time spent on ``nodes``."""
    return sum((n.result.measurements.get("gpu_s", 0.0) if n.result else 0.0) for n in nodes)


def stage_medians(nodes: list[Node]) -> dict[str, float]:
    """Median seconds per stage over the evaluated nodes, plus their share of the GPU's time (``gpu``)."""
    samples: dict[str, list[float]] = {}
    for node in nodes:
        measurements = node.result.measurements if node.result else {}
        for stage_name, seconds in (measurements.get("timings") or {}).items():
            samples.setdefault(stage_name, []).append(float(seconds))
        if "gpu_s" in measurements:
            samples.setdefault("gpu", []).append(float(measurements["gpu_s"]))
    return {name: round(statistics.median(values), 4) for name, values in samples.items()}


class WorkerEvaluator:
    """Evaluates batches of nodes in the persistent worker; a crash costs only the candidate that caused it.

    A batch goes to the worker in chunks sized so one call takes about
    :data:`CHUNK_TARGET_S` (measured on the previous chunk; the first is a single
    candidate): cheap kernels share calls, while on a problem whose candidate costs
    ten seconds (row-L2's 8.6 GB) a wall-time budget is overshot by one candidate,
    not eight. A budget stop still records a finished chunk's other results
    (:meth:`ChunkedResults.ready`)."""

    def __init__(
        self,
        worker: PersistentWorker,
        spec: ProblemSpec,
        kernel: str,
        settings: GateSettings,
        peak: float | None,
        timeout_s: float,
    ) -> None:
        self.worker, self.spec, self.kernel, self.settings, self.peak, self.timeout_s = (
            worker,
            spec,
            kernel,
            settings,
            peak,
            timeout_s,
        )
        self.per_candidate_s: float | None = None  # the last chunk's wall time per candidate

    def _call(self, sources: list[str]):
        return self.worker.call(
            f"{SESSION}:evaluate_candidates",
            asdict(self.spec),
            self.kernel,
            sources,
            self.settings.to_dict(),
            self.peak,
            timeout_s=self.timeout_s + PER_CANDIDATE_TIMEOUT_S * len(sources),
        )

    def one(self, source: str) -> EvaluationResult:
        """One candidate alone; a worker that dies on it is a failure at the gate it died in."""
        single = self._call([source])
        return result_of(single.value[0]) if single.ok else failure_of(single)

    def chunk_size(self) -> int:
        if not self.per_candidate_s:
            return 1
        return max(1, min(BATCH, int(CHUNK_TARGET_S / self.per_candidate_s)))

    def evaluate_chunk(self, chunk: list[Node]) -> list[tuple[Node, EvaluationResult]]:
        started = time.monotonic()
        outcome = self._call([n.candidate.source or "" for n in chunk])
        if outcome.ok:
            self.per_candidate_s = (time.monotonic() - started) / len(chunk)
            return [(node, result_of(raw)) for node, raw in zip(chunk, outcome.value)]
        return [
            (node, self.one(node.candidate.source or "")) for node in chunk
        ]  # find the one that took the worker down

    def __call__(self, nodes: list[Node]) -> ChunkedResults:
        return ChunkedResults(self, nodes)


class ChunkedResults:
    """A batch's results, one worker call per chunk; ``ready()`` hands over what a finished chunk still holds."""

    def __init__(self, evaluator: WorkerEvaluator, nodes: list[Node]) -> None:
        self._evaluator = evaluator
        self._todo = list(nodes)
        self._held: list[tuple[Node, EvaluationResult]] = []

    def __iter__(self) -> ChunkedResults:
        return self

    def __next__(self) -> tuple[Node, EvaluationResult]:
        if not self._held:
            if not self._todo:
                raise StopIteration
            size = self._evaluator.chunk_size()
            chunk, self._todo = self._todo[:size], self._todo[size:]
            self._held = self._evaluator.evaluate_chunk(chunk)
        return self._held.pop(0)

    def ready(self) -> list[tuple[Node, EvaluationResult]]:
        held, self._held = self._held, []
        return held


def compile_cache_env(config: Settings | None = None) -> dict[str, str]:
    """A Triton kernel cache and a CUDA C++ build cache that outlive one worker: a restarted worker,
    the workers it starts, and the next run do not recompile the kernels already built. Candidates cannot write files (the static
    gate refuses any I/O), so sharing it does not let one candidate tamper with another.

    The cache root is the ``cache`` setting (workers that run as a user of their own keep
    a folder of their own: :func:`~kernelopt.workers.identity.worker_cache`); the worker also
    gets the ``compile_workers`` setting as ``KERNELOPT_COMPILE_WORKERS``, wherever it was set
    (a worker reads no settings file of its own)."""
    config = config or load_settings()
    identity = worker_identity()
    return {
        "TRITON_CACHE_DIR": str(worker_cache(config.cache / "triton", identity)),
        # CUDA C++ candidates' builds, by source hash: nvcc ran ~95 s per build on the H200, once in the
        # candidate's process, again in memcheck's replay, again in every later run
        "KERNELOPT_CUDA_BUILD_DIR": str(worker_cache(config.cache / "cuda", identity)),
        "KERNELOPT_COMPILE_WORKERS": str(config.compile_workers),
    }


def stock_cache_env(config: Settings | None = None) -> dict[str, str]:
    """:func:`compile_cache_env` plus an Inductor cache (its FX graph cache, max-autotune's choices and
    coordinate descent's configs) for the processes that time stock ``torch.compile`` modes. Each mode
    runs in a fresh process whose temp folder is its own, so without it every process compiled and
    autotuned from scratch (max-autotune's process 20-30 s a problem on the H200), and each could pick
    other autotuned configs. Only those processes get it: a candidate's worker compiles with Inductor's
    caches off (:func:`~kernelopt.capture.compat.fresh_compile`), and is not told where the baselines'
    compiled code lives."""
    config = config or load_settings()
    return {
        **compile_cache_env(config),
        "TORCHINDUCTOR_CACHE_DIR": str(worker_cache(config.cache / "inductor-stock", worker_identity())),
    }
