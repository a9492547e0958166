"""An evaluation session: one captured model, many candidates through the four gates.

Runs inside a worker process. Capturing the compiled model, snapshotting a
kernel's launches and measuring the peak bandwidth happen once per session;
each candidate then costs its own compile and the gates. A batch's candidates
compile ahead in a pool of processes (:mod:`kernelopt.evaluate.compile_pool`)
while earlier ones are measured on the GPU, one at a time; each result carries
its stage timings so the throughput can be read, not guessed.

Longer than most modules: the gate settings and the session's gate order are one
contract (what the search runs light and the re-check runs in full).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from kernelopt.capture import Artifact, capture, compat
from kernelopt.capture.snapshot import snapshot_launches
from kernelopt.capture.swap import KernelAddress, build_kernel, find_kernel
from kernelopt.config import Settings, default_of
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.compile_pool import CompilePool, default_workers
from kernelopt.evaluate.remote import ReferenceRunner, RemoteRunner, RunnerDied
from kernelopt.measure import measure_copy_bandwidth
from kernelopt.measure.timer import SplitComparison, compare_split
from kernelopt.problem import DISTRIBUTIONS, load_problem, outputs_as_list
from kernelopt.problem.edges import check_edge_names
from kernelopt.problem.layouts import clone_args, exact_clone
from kernelopt.verify.cases import EDGE_CASES, param_roles
from kernelopt.verify.correctness import nan_fill_
from kernelopt.verify.memcheck import run_memcheck
from kernelopt.verify.model_gate import ModelGatePolicy
from kernelopt.verify.model_level import ReferenceCache, run_model_gate
from kernelopt.verify.perf_runner import min_time_us, run_performance_gate, screen
from kernelopt.verify.performance import PerformancePolicy, judge_end_to_end, judge_timing_evidence
from kernelopt.verify.static import check_static
from kernelopt.verify.subkernel import as_launcher, run_subkernel_gate
from kernelopt.verify.verdict import Verdict

STAGE_MARK = "kernelopt-stage:"


@dataclass
class GateSettings:
    """How hard the gates look. ``screen_trials`` > 0 times the candidate against the
    original first, in a short interleaved run, and rejects it at the performance gate
    when it is below ``screen_min_speedup`` there, before the costly correctness and
    model gates: a search's many slower candidates cost a compile and a few launches.
    A candidate that passes still goes through all four gates in order. The defaults are
    the ``default`` effort profile's (:mod:`kernelopt.config`); a run passes its own."""

    kernel_seeds: tuple[int, ...] = default_of("kernel_seeds")
    model_seeds: tuple[int, ...] = default_of("model_seeds")
    trials: int = default_of("trials")
    margin: float = default_of("margin")
    max_error_ratio: float = 10.0
    end_to_end: bool = True
    screen_trials: int = 0
    screen_min_speedup: float = 1.0
    kernel_distributions: tuple[str, ...] | None = None  # gate 2's random inputs; None: every distribution
    kernel_edges: tuple[str, ...] | None = None  # gate 2's edge cases; None: every one (EDGE_CASES)
    memcheck: bool = True  # a candidate that passed runs once more under compute-sanitizer's memcheck

    def __post_init__(self) -> None:
        unknown = [d for d in self.kernel_distributions or () if d not in DISTRIBUTIONS]
        if unknown:
            raise KerneloptError(
                f"unknown input distribution(s) {', '.join(unknown)}; choose from {', '.join(DISTRIBUTIONS)}"
            )
        check_edge_names(self.kernel_edges or ())

    @property
    def edges(self) -> tuple[str, ...]:
        return EDGE_CASES if self.kernel_edges is None else self.kernel_edges

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SEARCH_DISTRIBUTIONS = ("neg",)  # beside the real-data snapshot: the signs flipped (a kernel assuming x >= 0 fails)


def search_settings(config: Settings | None = None) -> GateSettings:
    """The search's gates: a short timing screen (``screen_trials``), then gate 2 on the
    recorded snapshot plus one random case per search seed (negated inputs) and gate 3
    with the search's model seeds. Every winner is evaluated again with the full
    :class:`GateSettings` (every seed x 4 distributions) before anything is delivered.
    ``config`` None: the ``default`` effort profile's values.

    The screen asks for half the performance margin: a candidate must beat 1 + margin
    at gate 4, and on the H200 near-roofline kernels sent most ~1.00x candidates
    through the costly gates only to fail the margin there. Gate 2 with every
    distribution (5 cases of 3 launches) was the costliest stage on the H200: a
    median 2.1-2.4 s per candidate reaching it on 1 GB kernels (softmax, cumsum),
    15.5 s on row-L2's 8.6 GB, against 0.1-0.5 s for each other stage."""
    config = config or Settings()
    return GateSettings(
        kernel_seeds=config.search_kernel_seeds,
        model_seeds=config.search_model_seeds,
        trials=config.trials,
        margin=config.margin,
        end_to_end=False,
        screen_trials=config.screen_trials,
        screen_min_speedup=1.0 + config.margin / 2,
        kernel_distributions=SEARCH_DISTRIBUTIONS,
        kernel_edges=(),
        memcheck=False,
    )


def final_settings(search: GateSettings, config: Settings | None = None) -> GateSettings:
    """The winners' re-evaluation: no screen, every distribution and edge case, memcheck, and at
    least the full seeds of gates 2 and 3 (``kernel_seeds``, ``model_seeds`` of ``config``;
    None: the ``default`` effort profile's)."""
    full = config or Settings()
    return replace(
        search,
        screen_trials=0,
        end_to_end=False,
        kernel_distributions=None,
        kernel_edges=None,
        memcheck=True,
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
        return (
            self.problem_path,
            tuple(sorted(self.overrides.items())),
            self.seed,
            tuple(sorted(self.options.items())),
        )


def stage(name: str) -> None:
    """Announce a stage, so a parent can say where a dead worker died."""
    print(f"{STAGE_MARK} {name}", flush=True)


class EvaluationSession:
    """The judge: one captured model, many candidates through the four gates.

    It holds the trusted side only: the capture, the recorded launches, the
    float64 references, the original kernels and every threshold. No candidate
    source is ever loaded here: each is built, launched and timed in the
    candidate's own process (:class:`~kernelopt.evaluate.remote.RemoteRunner`) on
    buffers this session owns and lends, and every verdict is computed here
    from what lands in those buffers and from timings checked against this
    process's clock."""

    def __init__(
        self,
        spec: ProblemSpec,
        peak_gbps: float | None = None,
        compile_workers: int | None = None,
        runner: RemoteRunner | None = None,
        reference: RemoteRunner | None = None,
    ) -> None:
        # Started with the first kernel searched (snapshots): a problem with no target never pays for it.
        self.pool = CompilePool(default_workers() if compile_workers is None else compile_workers)
        stage("capture")
        self.spec = spec
        self.device = torch.device("cuda")
        self.problem = load_problem(spec.problem_path, overrides=spec.overrides or None)
        self.model = self.problem.build_model(spec.seed, self.device)
        self.inputs = self.problem.make_inputs(spec.seed, self.device)
        self.artifact: Artifact = capture(self.model, self.inputs, spec.options)
        self.runner = runner or RemoteRunner(device="cuda", spec=asdict(spec))
        # The original kernels and model are timed in a clean worker of their own, as candidates are in theirs.
        self.reference = reference or ReferenceRunner(device="cuda", spec=asdict(spec))
        self._peak = peak_gbps
        self._snapshots: dict[str, list[list[Any]]] = {}
        self._references = ReferenceCache()  # float64 references and baseline errors, per seed
        self._layouts: list[tuple[tuple[int, ...], tuple[int, ...], torch.dtype]] | None = None

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
            address, var, kernel = self.kernel(name)
            self._snapshots[name] = [s.args for s in snapshot_launches(self.artifact, self.inputs, address.graph, var)]
            if self._snapshots[name]:  # the candidate's process calibrates its clock on the trusted original
                written = {i for i, (_, _, writes) in enumerate(param_roles(kernel)) if writes}
                calibration = [
                    exact_clone(a) if i in written and isinstance(a, torch.Tensor) else a
                    for i, a in enumerate(self._snapshots[name][0])
                ]  # read-only inputs shared
                self.runner.register_original(kernel.name, kernel.source, calibration)
                self.reference.register_original(kernel.name, kernel.source, calibration)
                self.runner.warm_model()
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

    # -- the re-stitched model, run in the candidate's process --------------------------------

    def output_layouts(self) -> list[tuple[tuple[int, ...], tuple[int, ...], torch.dtype]]:
        """Shape, strides and dtype of each output of the compiled model (read once, from the baseline)."""
        if self._layouts is None:
            outs = outputs_as_list(self.artifact(*self.inputs), self.problem.path)
            self._layouts = [(tuple(o.shape), tuple(o.stride()), o.dtype) for o in outs]
        return self._layouts

    def remote_forward(self, inputs: Sequence[Any]) -> list[torch.Tensor]:
        """The candidate process's re-stitched model on ``inputs``, landed in fresh poisoned buffers of
        this process's (which never held a baseline result)."""
        outputs = [
            nan_fill_(torch.empty_strided(shape, stride, dtype=dtype, device=self.device))
            for shape, stride, dtype in self.output_layouts()
        ]
        layouts = self.runner.forward_into(inputs, outputs)
        if len(layouts) != len(outputs):
            raise ModelOutputMismatch(f"the re-stitched model returned {len(layouts)} outputs, expected {len(outputs)}")
        for i, (layout, out) in enumerate(zip(layouts, outputs)):
            if tuple(layout["shape"]) != tuple(out.shape) or layout["dtype"] != str(out.dtype).removeprefix("torch."):
                raise ModelOutputMismatch(
                    f"output {i} of the re-stitched model is {layout['dtype']}{list(layout['shape'])}, "
                    f"expected {str(out.dtype).removeprefix('torch.')}{list(out.shape)}"
                )
        return outputs

    def _capture_difference(self, kernel: Any) -> str | None:
        """The first line where the candidate process's capture of ``kernel`` differs from this one's."""
        try:
            theirs = self.runner.call("kernel_source", kernel.name)["source"]
        except RunnerDied:
            return None
        if theirs is None:
            return "the candidate's process has no such kernel"
        for i, (a, b) in enumerate(zip(kernel.source.splitlines(), theirs.splitlines())):
            if a != b:
                return f"line {i + 1}: judge {a.strip()[:300]!r} vs runner {b.strip()[:300]!r}"
        return None if kernel.source == theirs else "the sources differ in length"

    def model_gate(self, seeds: Sequence[int], max_error_ratio: float) -> Verdict:
        """Gate 3 against the swaps installed in the candidate's process."""

        def run_baseline(xs: Sequence[Any]) -> Any:
            return self.artifact(*xs)

        try:
            return run_model_gate(
                self.problem,
                self.model,
                run_baseline,
                self.remote_forward,
                self.device,
                seeds,
                ModelGatePolicy(max_ratio=max_error_ratio),
                cache=self._references,
            )
        except ModelOutputMismatch as exc:
            return Verdict("model", False, str(exc), {"rule": "output_layout"})

    def end_to_end(self, trials: int) -> SplitComparison:
        """The compiled model (in the reference process) against the re-stitched one (in the candidate's),
        interleaved, both timed the same way."""
        return compare_split(
            self.reference.timed_model(), self.runner.timed_model(), trials=trials, baseline_remote=True
        )

    def evaluate(self, name: str, source: str, settings: GateSettings, static: Verdict | None = None) -> dict[str, Any]:
        """The four gates in order for one candidate of one kernel; stops at the first failure.

        ``result["timings"]`` holds the seconds of each stage (``compile`` is a cache hit
        when the compile pool warmed it); ``gpu_s`` is the whole evaluation. A candidate
        whose process dies or hangs fails at the gate it was in; this session lives on."""
        started = time.monotonic()
        address, var, kernel = self.kernel(name)
        result: dict[str, Any] = {
            "verdicts": [],
            "passed": False,
            "address": address.to_dict(),
            "original_source": kernel.source,
        }
        timings: dict[str, float] = {}
        result["timings"] = timings
        clock = [started]
        current = ["static"]

        def lap(stage_name: str) -> None:
            now = time.monotonic()
            timings[stage_name] = round(now - clock[0], 6)
            clock[0] = now

        def enter(stage_name: str) -> None:
            current[0] = stage_name
            stage(stage_name)

        def done(verdict: Verdict | None = None) -> dict[str, Any]:
            if verdict is not None:
                result["verdicts"].append(verdict.to_dict())
            result["gpu_s"] = time.monotonic() - started
            return result

        enter("static")
        if static is None:  # evaluate_batch passes the verdict it already has
            static = check_static(source, kernel_name=kernel.name, original_source=kernel.source)
        lap("static")
        if not static.passed:
            return done(static)
        result["verdicts"].append(static.to_dict())
        try:
            return self._dynamic_gates(name, kernel, address, source, settings, result, lap, enter, done)
        except RunnerDied as exc:
            self.runner.restart()
            gate = current[0] if current[0] in ("correctness", "model", "performance") else "correctness"
            result["worker_status"] = exc.outcome.status
            return done(
                Verdict(
                    gate,
                    False,
                    f"{exc} (in the {current[0]} stage)",
                    {"rule": "candidate_process", "stage": current[0], "worker": exc.outcome.to_dict()},
                )
            )

    def _dynamic_gates(
        self,
        name: str,
        kernel: Any,
        address: KernelAddress,
        source: str,
        settings: GateSettings,
        result: dict[str, Any],
        lap: Any,
        enter: Any,
        done: Any,
    ) -> dict[str, Any]:
        enter("correctness")
        original = vars(self.artifact.graphs[address.graph].module)[self.kernel(name)[1]]
        snapshots = self.snapshots(name)
        key, error, _ = self.runner.build(kernel.name, source)
        lap("compile")
        if error is not None:
            return done(Verdict("correctness", False, error, {"rule": "build"}))
        if settings.screen_trials > 0 and snapshots:
            enter("screen")
            screened = screen(kernel, original, self.runner, key, snapshots[0], settings.screen_trials, self.reference)
            lap("screen")
            result["screen"] = screened.to_dict()
            speedup = screened.comparison.speedup
            if speedup < settings.screen_min_speedup:
                return done(
                    Verdict(
                        "performance",
                        False,
                        (
                            f"screened out: {speedup:.3f}x in a {settings.screen_trials}-trial interleaved run "
                            f"(below {settings.screen_min_speedup:g}x); correctness and model gates not run"
                        ),
                    )
                )
            enter("correctness")
        correctness = run_subkernel_gate(
            kernel,
            as_launcher(original),
            self.runner.launcher(kernel.name, key),
            snapshots,
            settings.kernel_seeds,
            settings.kernel_distributions,
            settings.edges,
        )
        lap("correctness")
        if not correctness.passed:
            return done(correctness)
        result["verdicts"].append(correctness.to_dict())

        enter("model")
        try:
            self.runner.set_swaps([(address.to_dict(), key, kernel.source)])
        except RunnerDied as exc:
            if exc.outcome.status != "error":
                raise
            return done(
                Verdict(
                    "model",
                    False,
                    f"the replacement cannot be stitched in: {exc.outcome.reason}",
                    {"rule": "swap", "capture_difference": self._capture_difference(kernel)},
                )
            )
        model_verdict = self.model_gate(settings.model_seeds, settings.max_error_ratio)
        lap("model")
        if not model_verdict.passed:
            return done(model_verdict)
        result["verdicts"].append(model_verdict.to_dict())

        enter("performance")
        perf, kernel_cmp = run_performance_gate(
            kernel,
            original,
            self.runner,
            key,
            snapshots[0],
            self.peak_gbps,
            PerformancePolicy(margin=settings.margin),
            settings.trials,
            self.reference,
        )
        result["kernel_comparison"] = kernel_cmp.to_dict()
        if perf.passed and settings.end_to_end:
            e2e = self.end_to_end(max(10, settings.trials // 2))
            evidence = judge_timing_evidence(
                e2e.comparison.candidate.samples_ms, e2e.candidate_wall_ms, self.runner.calibration_ms, what="model"
            )
            result["end_to_end"] = {
                **judge_end_to_end(e2e.comparison),
                "comparison": e2e.to_dict(),
                "evidence": evidence.to_dict() if evidence else None,
            }
            if evidence is not None:
                perf = evidence
        lap("performance")
        if perf.passed and settings.memcheck:
            enter("memcheck")
            memcheck = run_memcheck(source, kernel.name, snapshots[0])
            lap("memcheck")
            result["memcheck"] = memcheck.to_dict()
            if memcheck.status in ("errors", "failed"):
                result["verdicts"].append(perf.to_dict())
                return done(
                    Verdict(
                        "correctness",
                        False,
                        f"memcheck on the recorded launch: {memcheck.reason}",
                        {"rule": "memcheck", "memcheck": memcheck.to_dict()},
                    )
                )
        result["passed"] = perf.passed
        return done(perf)

    def evaluate_batch(
        self, name: str, sources: Sequence[str], settings: GateSettings, warm_timeout_s: float = 120.0
    ) -> list[dict[str, Any]]:
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
        self.runner.close()
        self.reference.close()


class ModelOutputMismatch(Exception):
    """The re-stitched model's outputs do not have the compiled model's layouts."""
