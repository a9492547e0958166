"""An evaluation session: one captured model, many candidates through the four gates.

Runs inside a worker process. Capturing the compiled model, snapshotting a
kernel's launches and measuring the peak bandwidth happen once per session;
each candidate then costs its own compile and the gates. A batch's candidates
compile ahead in a pool of processes (:mod:`kernelopt.evaluate.compile_pool`)
while earlier ones are measured on the GPU, one at a time; each result carries
its stage timings so the throughput can be read, not guessed.

This module holds the session's trusted state and the order of the gates for one
candidate (:meth:`EvaluationSession.evaluate`); how hard each gate looks is
:mod:`kernelopt.evaluate.gate_settings` (re-exported here), and the judge's side of
the re-stitched model (gate 3, the end-to-end timing) is
:mod:`kernelopt.evaluate.restitched`.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from kernelopt.capture import Artifact, capture, compat
from kernelopt.capture.artifact import separate_code
from kernelopt.capture.compile_stop import STOPPED, Probe, probing, rewritten_nothing, stop_where_unchanged
from kernelopt.capture.graph_swap import GraphCandidate, describe_options, from_variant
from kernelopt.capture.kernel_source import as_launched
from kernelopt.capture.output_code import source_hash
from kernelopt.capture.rewrites.passes import COMPILE_PASSES, OWN_OP_OPTIONS, is_compile_option
from kernelopt.capture.rewrites.var_sums import VAR_SUMS_OPTION
from kernelopt.capture.row_split import ROW_SPLIT_OPTION, WIDE, RowSplitError, row_split, wide_reductions
from kernelopt.capture.snapshot import snapshot_launches
from kernelopt.capture.swap import KernelAddress, build_kernel, find_kernel
from kernelopt.evaluate.compile_pool import CompilePool, default_workers
from kernelopt.evaluate.gate_settings import SEARCH_DISTRIBUTIONS, GateSettings, final_settings, search_settings
from kernelopt.evaluate.remote import ReferenceRunner, RemoteRunner, RunnerDied
from kernelopt.evaluate.restitched import RestitchedModel
from kernelopt.evaluate.steps import STAGE_MARK, Stages, memcheck_failure, screened_out, stage
from kernelopt.measure import measure_copy_bandwidth
from kernelopt.measure.split_timer import SplitComparison
from kernelopt.problem import load_problem
from kernelopt.problem.layouts import clone_args, describe_args, exact_clone
from kernelopt.verify.cases import param_roles
from kernelopt.verify.memcheck import run_memcheck
from kernelopt.verify.perf_runner import min_time_us, run_performance_gate, screen
from kernelopt.verify.performance import PerformancePolicy, judge_end_to_end
from kernelopt.verify.static import check_static
from kernelopt.verify.subkernel import as_launcher, run_subkernel_gate
from kernelopt.verify.verdict import Verdict


def variant_tag(options: dict[str, Any]) -> str:
    """The prefix of a graph variant's kernel names, from its options alone: the same candidate (and
    digest) whichever session, and in whatever order, compiles it."""
    return "ko_" + source_hash(repr(sorted(options.items())))[:8]


def _no_graph_candidate(graph: int, why: str, rule: str) -> dict[str, Any]:
    verdict = Verdict("static", False, f"no graph candidate: {why}", {"rule": rule})
    return {"verdicts": [verdict.to_dict()], "passed": False, "graph": graph, "timings": {}, "gpu_s": 0.0}


OWN_OPTIONS = (ROW_SPLIT_OPTION,)  # graph options kernelopt applies itself, never a whole-model compile's
# What each of kernelopt's own options would change in a graph, counted on the capture's post-grad graphs
# (compile_stop.probing): a compile options set only of these, where every graph counts 0, is not run.
PROBES: dict[str, Probe] = {**COMPILE_PASSES, ROW_SPLIT_OPTION: wide_reductions}


def _row_split(made: GraphCandidate, variant: Any, tag: str) -> GraphCandidate | str:
    """A row-split variant's candidate, its cooperative reductions given tickets and pinned to the
    launch config Inductor chose for them at the variant's first run (read from the variant's module:
    its kernels are named as there, without the candidate's ``tag``); or why there is none."""
    configs = {}
    for kernel in made.kernels:
        loaded = getattr(variant.module, kernel.name.removeprefix(f"{tag}_"), None)
        config = compat.chosen_config(loaded) if loaded is not None else None
        if config is not None:
            configs[kernel.name] = config
    try:
        return row_split(made, configs)
    except RowSplitError as exc:
        return f"no row split: {exc}"


def probed_capture(
    model: torch.nn.Module, inputs: Sequence[Any], options: dict[str, Any]
) -> tuple[Artifact, list[dict[str, int | None]] | None]:
    """``model`` captured under ``options``, with what each of kernelopt's own options (:data:`PROBES`)
    would change in each of its graphs; None where the counts cannot be matched to the graphs (a
    training step's backward compiles later, without the post-grad pass)."""
    with probing(PROBES) as probed:
        artifact = capture(model, inputs, options)
    return artifact, (probed if len(probed) == len(artifact.graphs) else None)


@dataclass
class ProblemSpec:
    """What a worker needs to rebuild the exact model the user has (no tensors travel)."""

    problem_path: str
    overrides: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    train: bool = False  # the problem's training step: outputs and gradients (problem.training)

    def key(self) -> tuple:
        return (
            self.problem_path,
            tuple(sorted(self.overrides.items())),
            self.seed,
            tuple(sorted(self.options.items())),
            self.train,
        )


class EvaluationSession:
    """The judge: one captured model, many candidates through the four gates.

    It holds the trusted side only: the capture, the recorded launches, the
    float64 references, the original kernels and every threshold. No candidate
    source is ever loaded here: each is built, launched and timed in the
    candidate's own process (:class:`~kernelopt.evaluate.remote.RemoteRunner`) on
    buffers this session owns and lends, and every verdict is computed here
    from what lands in those buffers and from timings checked against this
    process's clock."""

    _probed: list[dict[str, int | None]] | None = None  # per graph, what each of kernelopt's options would change

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
        self.problem = load_problem(spec.problem_path, overrides=spec.overrides or None, train=spec.train)
        self.model = self.problem.build_model(spec.seed, self.device)
        self.inputs = self.problem.make_inputs(spec.seed, self.device)
        self.artifact: Artifact
        self.artifact, self._probed = probed_capture(self.model, self.inputs, spec.options)
        self.runner = runner or RemoteRunner(device="cuda", spec=asdict(spec))
        # The original kernels and model are timed in a clean worker of their own, as candidates are in theirs.
        self.reference = reference or ReferenceRunner(device="cuda", spec=asdict(spec))
        self._peak = peak_gbps
        self._snapshots: dict[str, list[list[Any]]] = {}
        self._graph_variants: dict[
            str, list[GraphCandidate | str]
        ] = {}  # options key -> per graph: candidate or why not
        self._judged_graphs: dict[tuple[int, str], dict[str, Any]] = {}  # (graph, code digest) -> options
        self.restitched = RestitchedModel(
            self.problem, self.model, self.artifact, self.inputs, self.device, self.runner, self.reference
        )

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
                original = as_launched(kernel.source, kernel.name, self.launched_config(name))
                self.runner.register_original(kernel.name, original, calibration)
                self.reference.register_original(kernel.name, original, calibration)
                self.runner.warm_model()
        return self._snapshots[name]

    def launched_config(self, name: str) -> dict[str, Any] | None:
        """The launch config the captured model ran kernel ``name`` with (None: not recorded)."""
        return next((launch.config for launch in self.artifact.launches if launch.name == name and launch.config), None)

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

    def graph_variants(self, options: dict[str, Any]) -> list[GraphCandidate | str]:
        """Each graph of the model as Inductor compiles it under ``options`` (beside the capture, which
        keeps its code), as a graph candidate or the reason there is none; compiled once per option set.
        Inductor's own code, from the user's own model: no candidate runs here."""
        key = repr(sorted(options.items()))
        if key not in self._graph_variants:
            self._graph_variants[key] = self._compile_graph_variants(options, len(self._graph_variants))
        return self._graph_variants[key]

    def compile_variant(self, options: dict[str, Any], tag: str) -> Artifact | str:
        """The model compiled under ``options`` beside the capture (a forward with its own code object,
        so the captured model keeps its kernels), or why it could not be. ``kernelopt.row_split`` among
        them compiles under :func:`~kernelopt.capture.compat.row_split_compile`, a wide ``var_mean`` as two
        sums (:mod:`~kernelopt.capture.rewrites.var_sums`); kernelopt's own compile options
        (``kernelopt.online_softmax``) go with Inductor's to the compile."""
        inductor = {k: v for k, v in options.items() if k not in OWN_OPTIONS}
        unknown = [name for name in inductor if not is_compile_option(name)]
        if unknown:
            return f"this torch has no option {unknown[0]}"
        chunk = options.get(ROW_SPLIT_OPTION)
        if chunk:  # its cooperative reductions hold a wide var_mean's elements alone, not Welford's arrays too
            inductor[VAR_SUMS_OPTION] = True
        stage(tag)
        # one graph: a compile whose own rewrites change nothing stops before Inductor's codegen (with
        # more, another graph may hold what the rewrite is for); a row split's, where no reduction is wide
        # (a row split with a rewrite of its own, group_rows: where that rewrite changes nothing, since the
        # row split alone is a variant of its own)
        one_graph = len(self.artifact.graphs) == 1
        probe = wide_reductions if chunk and not any(options.get(name) for name in COMPILE_PASSES) else None
        with compat.stopped_compile_dirs() as kept:
            try:
                with (
                    compat.row_split_compile(int(chunk), WIDE) if chunk else contextlib.nullcontext(),
                    stop_where_unchanged(probe) if one_graph else contextlib.nullcontext(),
                ):
                    return capture(
                        separate_code(self.model, tag.replace(" ", "_")),
                        self.inputs,
                        {**self.spec.options, **inductor},
                        reset=False,
                    )
            except Exception as exc:  # an option this model cannot compile with: say so, go on
                unchanged = rewritten_nothing(exc)
                if unchanged is None:
                    return f"did not compile: {type(exc).__name__}: {exc}".splitlines()[0][:300]
                for folder in kept:  # the stop was ours: its compile's temporary cache goes
                    shutil.rmtree(folder, ignore_errors=True)
                return f"not compiled: {unchanged}"

    def unchanged_by(self, options: dict[str, Any]) -> str | None:
        """Why a compile under ``options`` would write every graph of the model as it is, known from the
        capture's probes without compiling (``options`` only kernelopt's own, each counting nothing in
        any graph); None where it might not, or the probes cannot say. A model of several graphs is
        left out as a model of one is stopped (:func:`~kernelopt.capture.compile_stop.stop_where_unchanged`)."""
        probed = self._probed
        own = [name for name, value in options.items() if name in PROBES and value]
        if probed is None or not own:
            return None
        idle = [name for name in own if all(row.get(name) == 0 for row in probed)]
        one = len(probed) == 1
        where = "the graph" if one else f"any of the {len(probed)} graphs"
        if len(idle) == len(own) == len(options):
            compiled = "Inductor would compile it" if one else "Inductor would compile each"
            return f"not compiled: {', '.join(own)} {STOPPED} in {where}: {compiled} as it is"
        # a rewrite of kernelopt's that changes nothing beside other options: those alone, a variant of their own
        passes = [name for name in idle if name in COMPILE_PASSES]
        if passes:
            return f"not compiled: {', '.join(passes)} {STOPPED} in {where}: the other options alone compile it so"
        return None

    def rewrites_found(self, options: dict[str, Any]) -> bool:
        """Whether a rewrite of kernelopt's among ``options`` changes some graph of the model, by the
        capture's probes (False where they could not say)."""
        probed = self._probed or []
        passes = [name for name, value in options.items() if name in COMPILE_PASSES and value]
        return any((row.get(name) or 0) > 0 for row in probed for name in passes)

    def own_ops_found(self) -> dict[str, int]:
        """How many ops of the model's graphs each rewrite that hands ops to kernelopt's own kernels
        (:data:`~kernelopt.capture.rewrites.passes.OWN_OP_OPTIONS`) would take, by the capture's probes; only
        those that find some (none where the probes could not say)."""
        counts = {name: sum(row.get(name) or 0 for row in self._probed or []) for name in OWN_OP_OPTIONS}
        return {name: count for name, count in counts.items() if count > 0}

    def _compile_graph_variants(self, options: dict[str, Any], index: int) -> list[GraphCandidate | str]:
        unchanged = self.unchanged_by(options)
        if unchanged is not None:
            return [unchanged] * len(self.artifact.graphs)
        variant = self.compile_variant(options, f"kernelopt graph {index}")
        if isinstance(variant, str):
            return [variant] * len(self.artifact.graphs)
        if len(variant.graphs) != len(self.artifact.graphs):
            why = f"compiled into {len(variant.graphs)} graphs, not {len(self.artifact.graphs)}"
            return [why] * len(self.artifact.graphs)
        out: list[GraphCandidate | str] = []
        tag = variant_tag(options)
        for original, other in zip(self.artifact.graphs, variant.graphs):
            made = from_variant(original, other, tag, f"Inductor with {options}", options)
            if made is None:
                out.append("the same call sequence and kernels, or other parameters or outputs")
            else:
                out.append(_row_split(made, other, tag) if options.get(ROW_SPLIT_OPTION) else made)
        del variant
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return out

    def warm_for_models(self) -> None:
        """Both processes that time whole models hold their compiled model and have run it once, before the
        first graph candidate: a fresh process compiles the model (about 20 s each on the H200 under
        max-autotune-no-cudagraphs, the first forward autotuning), which a graph search would otherwise
        count against its wall-time budget and charge to its first candidate's screen."""
        self.runner.calibrate_on_model()
        self.reference.warm_model()
        self.reference.timed_model()()  # the first forward: Inductor's autotuning at first call

    def evaluate_graph(self, graph: int, options: dict[str, Any], settings: GateSettings) -> dict[str, Any]:
        """The gates for graph ``graph`` as Inductor writes it under ``options``
        (:func:`kernelopt.evaluate.graph_candidate.evaluate_graph`)."""
        from kernelopt.evaluate.graph_candidate import evaluate_graph

        variants = self.graph_variants(options)
        made = variants[graph] if 0 <= graph < len(variants) else f"the model has no graph {graph}"
        if isinstance(made, str):
            return _no_graph_candidate(graph, made, "variant")
        # Another option set of this session wrote the very same code (an option that changes nothing
        # next to another): that one's verdict stands for both, and no gate runs twice on it.
        first = self._judged_graphs.setdefault((graph, made.code_digest(variant_tag(options))), options)
        if first != options:
            why = f"Inductor wrote the same call and kernels under {describe_options(first)}, judged already"
            return _no_graph_candidate(graph, why, "duplicate")
        result = evaluate_graph(self.restitched, self.artifact.graphs[graph].source_code, made, settings)
        if result["passed"]:
            result["graph_candidate"] = made.to_dict()
        return result

    def kernel_facts(self, name: str) -> dict[str, Any]:
        """The kernel's roofline floor and its recorded launch's arguments (dtypes, shapes, strides and
        sizes, never data: what the agents are shown of it)."""
        _, _, kernel = self.kernel(name)
        snaps = self.snapshots(name)
        names = [p.name for p in kernel.runtime_params]
        return {
            "min_time_us": min_time_us(kernel, snaps[0], self.peak_gbps) if snaps else None,
            "launch": describe_args(names, snaps[0]) if snaps else None,
        }

    def model_gate(self, seeds: Sequence[int], max_error_ratio: float, recorded: bool = False) -> Verdict:
        """Gate 3 against the swaps installed in the candidate's process (:meth:`RestitchedModel.model_gate`)."""
        return self.restitched.model_gate(seeds, max_error_ratio, recorded)

    def end_to_end(self, trials: int, recorded: bool = False) -> SplitComparison:
        """The compiled model against the re-stitched one, interleaved (:meth:`RestitchedModel.end_to_end`)."""
        return self.restitched.end_to_end(trials, recorded)

    def evaluate(self, name: str, source: str, settings: GateSettings, static: Verdict | None = None) -> dict[str, Any]:
        """The four gates in order for one candidate of one kernel; stops at the first failure.

        ``result["timings"]`` holds the seconds of each stage (``compile`` is a cache hit
        when the compile pool warmed it); ``gpu_s`` is the whole evaluation. A candidate
        whose process dies or hangs fails at the gate it was in; this session lives on."""
        address, var, kernel = self.kernel(name)
        result: dict[str, Any] = {
            "verdicts": [],
            "passed": False,
            "address": address.to_dict(),
            "original_source": kernel.source,
        }
        stages = Stages(result)
        stages.enter("static")
        if static is None:  # evaluate_batch passes the verdict it already has
            static = check_static(source, kernel_name=kernel.name, original_source=kernel.source)
        stages.lap("static")
        if not static.passed:
            return stages.done(static)
        result["verdicts"].append(static.to_dict())
        try:
            return self._dynamic_gates(
                name, kernel, address, source, settings, result, stages.lap, stages.enter, stages.done
            )
        except RunnerDied as exc:
            self.runner.restart()
            return stages.died(exc)

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
                return done(screened_out(speedup, settings.screen_trials, settings.screen_min_speedup))
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
            self.runner.set_swaps([(address.to_dict(), key)])
        except RunnerDied as exc:
            if exc.outcome.status != "error":
                raise
            return done(
                Verdict(
                    "model",
                    False,
                    f"the replacement cannot be stitched in: {exc.outcome.reason}",
                    {"rule": "swap", "capture_difference": self.restitched.capture_difference(kernel)},
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
            evidence = self.restitched.timing_evidence(e2e)
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
            # The replay is a process of its own that needs the launch's arguments on this GPU again:
            # hand the blocks the gates freed back to the driver (at full size they are tens of GB).
            torch.cuda.empty_cache()
            memcheck = run_memcheck(source, kernel.name, snapshots[0])
            lap("memcheck")
            result["memcheck"] = memcheck.to_dict()
            if memcheck.status in ("errors", "failed"):
                result["verdicts"].append(perf.to_dict())
                return done(memcheck_failure(memcheck, "the recorded launch"))
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


# How hard the gates look lives in gate_settings; callers import it from here too.
__all__ = [
    "SEARCH_DISTRIBUTIONS",
    "STAGE_MARK",
    "EvaluationSession",
    "GateSettings",
    "ProblemSpec",
    "final_settings",
    "search_settings",
    "stage",
]
