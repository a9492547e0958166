"""An evaluation session: one captured model, many candidates through the four gates.

Runs inside a worker process. Capturing the compiled model, snapshotting a
kernel's launches and measuring the peak bandwidth happen once per session;
each candidate then costs its own compile and the gates. A batch's candidates
compile ahead in a pool of processes (:mod:`kernelopt.verify.compile_pool`)
while earlier ones are measured on the GPU, one at a time; each result carries
its stage timings so the throughput can be read, not guessed.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

import torch

from kernelopt.capture import Artifact, capture, compat
from kernelopt.capture.snapshot import clone_args, snapshot_launches
from kernelopt.capture.swap import (
    KernelAddress,
    SwapError,
    build_kernel,
    check_swaps_live,
    find_kernel,
    reapply,
    restore,
    swap_kernel,
)
from kernelopt.measure import compare, measure_copy_bandwidth
from kernelopt.errors import KerneloptError
from kernelopt.problem import DISTRIBUTIONS, load_problem
from kernelopt.verify.compile_pool import CompilePool, default_workers
from kernelopt.verify.model_gate import ModelGatePolicy
from kernelopt.verify.model_level import ReferenceCache, run_model_gate
from kernelopt.verify.perf_runner import min_time_us, run_performance_gate, time_kernels
from kernelopt.verify.performance import PerformancePolicy, judge_end_to_end
from kernelopt.verify.static import check_static
from kernelopt.verify.subkernel import run_subkernel_gate
from kernelopt.verify.verdict import Verdict

STAGE_MARK = "kernelopt-stage:"


@dataclass
class GateSettings:
    """How hard the gates look. ``screen_trials`` > 0 times the candidate against the
    original first, in a short interleaved run, and rejects it at the performance gate
    when it is below ``screen_min_speedup`` there, before the costly correctness and
    model gates: a search's many slower candidates cost a compile and a few launches.
    A candidate that passes still goes through all four gates in order."""

    kernel_seeds: tuple[int, ...] = (1, 2, 3)
    model_seeds: tuple[int, ...] = (0, 1, 2)
    trials: int = 50
    margin: float = 0.03
    max_error_ratio: float = 10.0
    end_to_end: bool = True
    screen_trials: int = 0
    screen_min_speedup: float = 1.0
    kernel_distributions: tuple[str, ...] | None = None  # gate 2's random inputs; None: every distribution

    def __post_init__(self) -> None:
        unknown = [d for d in self.kernel_distributions or () if d not in DISTRIBUTIONS]
        if unknown:
            raise KerneloptError(f"unknown input distribution(s) {', '.join(unknown)}; choose from {', '.join(DISTRIBUTIONS)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SEARCH_DISTRIBUTIONS = ("neg",)  # beside the real-data snapshot: the signs flipped (a kernel assuming x >= 0 fails)


def search_settings() -> GateSettings:
    """The search's gates: a 10-trial screen, then gate 2 on the recorded snapshot plus one
    random case (seed 1, negated inputs) and gate 3 with one seed. Every winner is
    evaluated again with the full :class:`GateSettings` (3 seeds x 4 distributions)
    before anything is delivered.

    The screen asks for half the performance margin: a candidate must beat 1 + margin
    at gate 4, and on the H200 near-roofline kernels sent most ~1.00x candidates
    through the costly gates only to fail the margin there. Gate 2 with every
    distribution (5 cases of 3 launches) was the costliest stage on the H200: a
    median 2.1-2.4 s per candidate reaching it on 1 GB kernels (softmax, cumsum),
    15.5 s on row-L2's 8.6 GB, against 0.1-0.5 s for each other stage."""
    full = GateSettings()
    return GateSettings(kernel_seeds=(1,), model_seeds=(0,), end_to_end=False, screen_trials=10,
                        screen_min_speedup=1.0 + full.margin / 2, kernel_distributions=SEARCH_DISTRIBUTIONS)


def final_settings(search: GateSettings) -> GateSettings:
    """The winners' re-evaluation: no screen, every distribution, and at least the default
    seeds of gates 2 and 3."""
    full = GateSettings()
    return replace(
        search, screen_trials=0, end_to_end=False, kernel_distributions=None,
        kernel_seeds=tuple(dict.fromkeys(search.kernel_seeds + full.kernel_seeds)),
        model_seeds=tuple(dict.fromkeys(search.model_seeds + full.model_seeds)),
    )


@dataclass
class ProblemSpec:
    """What a worker needs to rebuild the exact model the user has (no tensors travel)."""

    problem_path: str
    overrides: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)

    def key(self) -> tuple:
        return (self.problem_path, tuple(sorted(self.overrides.items())), self.seed, tuple(sorted(self.options.items())))


def stage(name: str) -> None:
    """Announce a stage, so a parent can say where a dead worker died."""
    print(f"{STAGE_MARK} {name}", flush=True)


class EvaluationSession:
    def __init__(self, spec: ProblemSpec, peak_gbps: float | None = None, compile_workers: int | None = None) -> None:
        # Started with the first kernel searched (snapshots): a problem with no target never pays for it.
        self.pool = CompilePool(default_workers() if compile_workers is None else compile_workers)
        stage("capture")
        self.spec = spec
        self.device = torch.device("cuda")
        self.problem = load_problem(spec.problem_path, overrides=spec.overrides or None)
        self.model = self.problem.build_model(spec.seed, self.device)
        self.inputs = self.problem.make_inputs(spec.seed, self.device)
        self.artifact: Artifact = capture(self.model, self.inputs, spec.options)
        self._peak = peak_gbps
        self._snapshots: dict[str, list[list[Any]]] = {}
        self._references = ReferenceCache()  # float64 references and baseline errors, per seed

    @property
    def peak_gbps(self) -> float:
        if self._peak is None:
            self._peak = measure_copy_bandwidth().gbps
        return self._peak

    def kernel(self, name: str) -> tuple[KernelAddress, str, Any]:
        return find_kernel(self.artifact, name)

    def snapshots(self, name: str) -> list[list[Any]]:
        if name not in self._snapshots:
            self.pool.start()  # a kernel is about to be searched: compile processes start up meanwhile
            address, var, _ = self.kernel(name)
            self._snapshots[name] = [s.args for s in snapshot_launches(self.artifact, self.inputs, address.graph, var)]
        return self._snapshots[name]

    def inductor_tuned_config(self, name: str) -> dict[str, Any] | None:
        """The config Inductor's coordinate-descent tuner picks for this kernel at its real
        arguments: the search starts from Inductor's tuned result, not only its heuristic.
        Tuned on a private copy of the kernel (a marked source loads as its own module),
        so the captured model keeps the kernel it was compiled with."""
        _, _, kernel = self.kernel(name)
        snapshots = self.snapshots(name)
        if not snapshots:
            return None
        probe = build_kernel(kernel.source + "\n# kernelopt: coordinate-descent probe\n", kernel.name)
        return compat.coordinate_descent_config(probe, clone_args(snapshots[0]))

    def kernel_facts(self, name: str) -> dict[str, Any]:
        _, _, kernel = self.kernel(name)
        snaps = self.snapshots(name)
        return {"min_time_us": min_time_us(kernel, snaps[0], self.peak_gbps) if snaps else None}

    def evaluate(self, name: str, source: str, settings: GateSettings, static: Verdict | None = None) -> dict[str, Any]:
        """The four gates in order for one candidate of one kernel; stops at the first failure.

        ``result["timings"]`` holds the seconds of each stage (``compile`` is a cache hit
        when the compile pool warmed it); ``gpu_s`` is the whole evaluation."""
        started = time.monotonic()
        address, var, kernel = self.kernel(name)
        result: dict[str, Any] = {"verdicts": [], "passed": False, "address": address.to_dict(), "original_source": kernel.source}
        timings: dict[str, float] = {}
        result["timings"] = timings
        clock = [started]

        def lap(stage_name: str) -> None:
            now = time.monotonic()
            timings[stage_name] = round(now - clock[0], 6)
            clock[0] = now

        def done(verdict: Verdict | None = None) -> dict[str, Any]:
            if verdict is not None:
                result["verdicts"].append(verdict.to_dict())
            result["gpu_s"] = time.monotonic() - started
            return result

        stage("static")
        if static is None:  # evaluate_batch passes the verdict it already has
            static = check_static(source, kernel_name=kernel.name, original_source=kernel.source)
        lap("static")
        if not static.passed:
            return done(static)
        result["verdicts"].append(static.to_dict())

        stage("correctness")
        original = vars(self.artifact.graphs[address.graph].module)[var]
        try:
            candidate = build_kernel(source, kernel.name)
        except SwapError as exc:
            lap("compile")
            return done(Verdict("correctness", False, str(exc)))
        lap("compile")
        snapshots = self.snapshots(name)
        if settings.screen_trials > 0 and snapshots:
            stage("screen")
            screen = time_kernels(kernel, original, candidate, snapshots[0], settings.screen_trials)
            lap("screen")
            result["screen"] = screen.to_dict()
            if screen.speedup < settings.screen_min_speedup:
                return done(Verdict("performance", False, (
                    f"screened out: {screen.speedup:.3f}x in a {settings.screen_trials}-trial interleaved run "
                    f"(below {settings.screen_min_speedup:g}x); correctness and model gates not run")))
        correctness = run_subkernel_gate(kernel, original, candidate, snapshots, settings.kernel_seeds,
                                         settings.kernel_distributions)
        lap("correctness")
        if not correctness.passed:
            return done(correctness)
        result["verdicts"].append(correctness.to_dict())

        stage("model")
        swap = swap_kernel(self.artifact, address, source, kernel=candidate)
        try:
            check_swaps_live(self.artifact, [swap], self.inputs)

            def run_baseline(xs: Sequence[Any]) -> Any:
                restore(self.artifact, swap)
                return self.artifact(*xs)

            def run_candidate(xs: Sequence[Any]) -> Any:
                reapply(self.artifact, swap)
                return self.artifact(*xs)

            model_verdict = run_model_gate(
                self.problem, self.model, run_baseline, run_candidate, self.device, settings.model_seeds,
                ModelGatePolicy(max_ratio=settings.max_error_ratio), cache=self._references,
            )
            lap("model")
            if not model_verdict.passed:
                return done(model_verdict)
            result["verdicts"].append(model_verdict.to_dict())

            stage("performance")
            perf, kernel_cmp = run_performance_gate(
                kernel, original, candidate, snapshots[0], self.peak_gbps, PerformancePolicy(margin=settings.margin), settings.trials
            )
            result["kernel_comparison"] = kernel_cmp.to_dict()
            if perf.passed and settings.end_to_end:
                e2e = compare(
                    lambda: self.artifact(*self.inputs),
                    lambda: self.artifact(*self.inputs),
                    trials=max(10, settings.trials // 2),
                    prepare_baseline=lambda: restore(self.artifact, swap),
                    prepare_candidate=lambda: reapply(self.artifact, swap),
                )
                result["end_to_end"] = {**judge_end_to_end(e2e), "comparison": e2e.to_dict()}
            result["passed"] = perf.passed
            lap("performance")
            return done(perf)
        finally:
            restore(self.artifact, swap)

    def evaluate_batch(self, name: str, sources: Sequence[str], settings: GateSettings, warm_timeout_s: float = 120.0) -> list[dict[str, Any]]:
        """Compile the batch ahead in the pool, then run the gates one candidate at a time.

        Each result gets ``timings["warm_wait"]`` (seconds the GPU sat waiting for the
        pool) and ``batch_share_s``: the batch's wall time divided among its candidates,
        which is what evaluations per GPU-minute are counted from."""
        started = time.monotonic()
        _, _, kernel = self.kernel(name)
        # Untrusted source reaches a compile process only after the static gate has read it.
        statics = [check_static(src, kernel_name=kernel.name, original_source=kernel.source) for src in sources]
        futures = self.pool.submit([(src, kernel.name) if v.passed else None for src, v in zip(sources, statics)])
        results = []
        for src, static, future in zip(sources, statics, futures):
            if not static.passed:
                waited, problem = 0.0, None
            elif not self.pool.warmed_up and future is not None:  # on the H200 the first batch waited ~7 s
                waited, problem = 0.0, "compile pool still starting: compiled in the session"
            else:
                waited, problem = self.pool.wait(future, warm_timeout_s)
            result = self.evaluate(name, src, settings, static)
            result["timings"]["warm_wait"] = round(waited, 6)
            if problem is not None and future is not None:
                result["warm_problem"] = problem
            results.append(result)
        share = (time.monotonic() - started) / max(1, len(sources))
        for result in results:
            result["batch_share_s"] = share
        return results

    def close(self) -> None:
        self.pool.close()
