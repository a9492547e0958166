"""The judge for a standalone kernel file: the user's file, its inputs, its references; four gates.

The kernel-file counterpart of :class:`~kernelopt.evaluate.session.EvaluationSession`,
run in a worker of its own. It holds the trusted side: the user's original file, the
inputs of every case, what the original returns on them (and writes into them), the
float64 reference and every threshold. A candidate file is imported only in its own
process (:class:`~kernelopt.evaluate.file_remote.FileRunner`); what it returns reaches
the judge copied into the judge's buffers, poisoned before every call.

The gates, in order, stopping at the first that fails:

1. static: :func:`~kernelopt.verify.static_kernel_file.check_static_file` (a CUDA C++ candidate: the
   C++ rules in the slot of ``FileSpec.kernel``, which the candidate's process binds to the build);
2. correctness: on every kernel seed and input distribution, and once per edge case
   (huge, all-negative, non-finite, tiny, constant values in the inputs' exact layouts;
   the final check's), the candidate's outputs against the original's at the dtype's
   tolerance, the inputs the original leaves alone left alone, the inputs it writes
   written the same (:func:`check_case`);
3. model: with a ``reference(*inputs)``, each output's error against the reference
   run in float64 must stay within ``max_error_ratio`` times the original's (the
   model gate's rule, :func:`judge_model`); without one, the original was gate 2's
   reference and this gate says so;
4. performance: the original (in a process that only ever runs it) against the
   candidate, interleaved, L2 flushed, fresh input values before every call, both
   rotating over the same argument sets; readings checked against the judge's clock,
   the roofline floor from the call's ideal bytes, and the last timed call's outputs
   checked against the original on the same inputs. On the GPU, a candidate that passed
   the final check's gates runs once more under compute-sanitizer's memcheck on the
   file's inputs (:func:`~kernelopt.verify.memcheck.run_memcheck`).

The cases and the float64 reference are :mod:`~kernelopt.evaluate.file_cases`; how a Helion
file runs in the judge (no autotuning of its own, the autotuner as a stage) is
:mod:`~kernelopt.evaluate.file_helion`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelopt.capture.cuda_kernel import is_cuda_source
from kernelopt.capture.cuda_slot import python_function, runtime_arguments, slot_dtypes
from kernelopt.evaluate.file_cases import EDGE, Case, FileCases, nbytes, tensors
from kernelopt.evaluate.file_helion import HELION_ENV, helion_configs, quiet
from kernelopt.evaluate.file_remote import FileRunner, ReferenceFileRunner
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.evaluate.remote import RunnerDied
from kernelopt.evaluate.runner_file import ORIGINAL
from kernelopt.evaluate.steps import Stages, memcheck_failure, screened_out
from kernelopt.measure.timer import SplitComparison, compare_split
from kernelopt.problem.file_kind import TRITON
from kernelopt.problem.inputs import DISTRIBUTIONS
from kernelopt.problem.kernel_file import KernelFile, load_kernel_file
from kernelopt.problem.layouts import RotatingInputs, clone_args, describe_arg, exact_clone
from kernelopt.verify.correctness import check_case, combine_cases, nan_fill_
from kernelopt.verify.memcheck import CudaSlotReplay, run_memcheck
from kernelopt.verify.memcheck_replay import FILE_PREFIX
from kernelopt.verify.model_gate import ModelGatePolicy, SeedResult, judge_model, output_stats, relative_error
from kernelopt.verify.perf_runner import WARMUP, judge_timed, rotating_sets
from kernelopt.verify.performance import PerformancePolicy
from kernelopt.verify.verdict import Verdict


@dataclass
class FileSpec:
    """What a worker needs to load the user's kernel file again (no tensors travel)."""

    path: str
    overrides: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    device: str = "cuda"  # "cpu" in the CPU tests (Triton's interpreter)
    kernel: str | None = None  # the kernel a CUDA C++ candidate replaces (None: the only one launch launches)

    def key(self) -> tuple:
        return (self.path, tuple(sorted(self.overrides.items())), self.seed, self.device, self.kernel)


class FileSession:
    """The judge of one kernel file: cases built once, many candidates through the four gates."""

    def __init__(self, spec: FileSpec, peak_gbps: float | None = None) -> None:
        self.spec = spec
        self.file: KernelFile = load_kernel_file(spec.path, spec.overrides)
        self.device = spec.device
        quiet(self.file)
        self._peak = peak_gbps
        self.cases = FileCases(self.file, self.device)
        first = self.case(spec.seed, "given")
        runner_args = dict(
            original_source=self.file.source,
            entry=self.file.entry_name,
            calibration_inputs=clone_args(first.inputs),
            device=self.device,
            env=HELION_ENV,
        )
        self.slot = cuda_slot(self.file, spec.kernel)
        self._slot_dtypes: dict[str, str] | None = None
        self.runner = FileRunner(**runner_args, slot=self.slot[0], runtime=self.slot[1])  # type: ignore[arg-type]
        self.reference = ReferenceFileRunner(**runner_args)  # type: ignore[arg-type]

    # -- the trusted side ------------------------------------------------------------------

    @property
    def peak_gbps(self) -> float | None:
        if self._peak is None and torch.device(self.device).type == "cuda":
            from kernelopt.measure import measure_copy_bandwidth

            self._peak = measure_copy_bandwidth().gbps
        return self._peak

    def helion_configs(
        self, effort: str | None = None, budget_s: int | None = None, search: str = ""
    ) -> dict[str, Any]:
        """Each Helion kernel's default config and, with ``effort``, Helion's own autotuner's choice."""
        inputs = clone_args(self.case(self.spec.seed, "given").inputs)
        return helion_configs(self.file, inputs, effort, budget_s, search)

    def case(self, seed: int, distribution: str) -> Case:
        return self.cases.case(seed, distribution)

    def min_time_us(self) -> float | None:
        """The least time one call can take: its inputs read and outputs written once, at the peak."""
        peak = self.peak_gbps
        if not peak:
            return None
        case = self.case(self.spec.seed, "given")
        return (nbytes(case.inputs) + nbytes(case.expected)) / (peak * 1e3)

    def facts(self) -> dict[str, Any]:
        case = self.case(self.spec.seed, "given")
        return {
            "min_time_us": self.min_time_us(),
            "inputs": [list(t.shape) for t in case.inputs if isinstance(t, torch.Tensor)],
            "outputs": [list(t.shape) for t in case.expected],
            "written_inputs": sorted(case.written),
            "reference": self.file.reference is not None,
            "launch": self.launch_facts(case.inputs),
        }

    def launch_facts(self, inputs: Sequence[Any]) -> dict[str, str]:
        """What the agents are shown of the file's arguments: each input's dtype, shape and strides, and
        what ``launch`` passes the slot kernel's runtime parameters (its first call), never data."""
        out = {f"input {i}": describe_arg(x) for i, x in enumerate(inputs)}
        name, runtime = self.slot[0], list(self.slot[1])
        if name is not None:
            calls = self.file.kernel_calls(clone_args(list(inputs)), [name], copy=True)[name]
            if calls:
                signature = inspect.signature(python_function(getattr(self.file.module, name)))
                values = runtime_arguments(name, signature, runtime, calls[0].args, calls[0].keywords)
                out.update({f"{name}.{p}": describe_arg(v) for p, v in zip(runtime, values)})
        return out

    def time_original(self, trials: int) -> dict[str, float]:
        """The original's median time (us) in the clean process, as gate 4 reads it."""
        self.reference.start()
        rotation = RotatingInputs(self.case(self.spec.seed, "given").inputs, self._refresh(), 1)
        timed = self.reference.timed_file(ORIGINAL, lambda: rotation.current)
        samples = []
        for _ in range(WARMUP + trials):
            rotation.prepare()
            samples.append(timed())
        self.reference.release()
        kept = sorted(samples[WARMUP:])
        return {"median_us": kept[len(kept) // 2] * 1000.0}

    def _refresh(self) -> list[int]:
        return [i for i, a in enumerate(self.case(self.spec.seed, "given").inputs) if isinstance(a, torch.Tensor)]

    # -- one candidate ---------------------------------------------------------------------

    def static(self, source: str) -> Verdict:
        """Gate 1 by the file's kind (:func:`~kernelopt.verify.static_kernel_file.check_static_file`); a CUDA C++
        candidate's tensors are checked against the dtypes the original passes its slot."""
        from kernelopt.verify.static_kernel_file import check_static_file

        dtypes = self.slot_dtypes() if is_cuda_source(source) else None
        return check_static_file(
            self.file.kind, source, original_source=self.file.source, kernel=self.spec.kernel, dtypes=dtypes
        )

    def slot_dtypes(self) -> dict[str, str]:
        """The dtype of each tensor the original ``launch`` passes the CUDA slot on the given inputs (read once)."""
        slot, runtime = self.slot
        if self._slot_dtypes is None:
            inputs = clone_args(self.case(self.spec.seed, "given").inputs)
            self._slot_dtypes = slot_dtypes(self.file, slot, runtime, inputs) if slot is not None else {}
        return self._slot_dtypes

    def evaluate_batch(self, sources: Sequence[str], settings: GateSettings) -> list[dict[str, Any]]:
        return [self.evaluate(source, settings) for source in sources]

    def evaluate(self, source: str, settings: GateSettings) -> dict[str, Any]:
        """The four gates in order for one candidate file; stops at the first failure."""
        result: dict[str, Any] = {"verdicts": [], "passed": False}
        stages = Stages(result)
        stages.enter("static")
        static = self.static(source)
        stages.lap("static")
        if not static.passed:
            return stages.done(static)
        result["verdicts"].append(static.to_dict())
        try:
            return self._dynamic_gates(source, settings, result, stages.lap, stages.enter, stages.done)
        except RunnerDied as exc:
            self.runner.restart()
            return stages.died(exc)

    def _dynamic_gates(
        self,
        source: str,
        settings: GateSettings,
        result: dict[str, Any],
        lap: Callable[[str], None],
        enter: Callable[[str], None],
        done: Callable[..., dict[str, Any]],
    ) -> dict[str, Any]:
        enter("correctness")
        key, error, seconds = self.runner.load(source)
        lap("compile")
        cuda = is_cuda_source(source)
        if cuda:
            result["build_s"] = seconds  # nvcc's time (0 for a cached build), apart from the gates' own
        if error is not None:
            reason = error if cuda else f"the candidate file does not import: {error}"
            return done(Verdict("correctness", False, reason, {"rule": "build"}))
        if settings.screen_trials > 0:
            enter("screen")
            screened = self._time(key, settings.screen_trials, keep_last=False)[0]
            lap("screen")
            result["screen"] = screened.to_dict()
            speedup = screened.comparison.speedup
            if speedup < settings.screen_min_speedup:
                return done(screened_out(speedup, settings.screen_trials, settings.screen_min_speedup))
            enter("correctness")
        correctness, outputs = self.correctness(key, settings)
        lap("correctness")
        if not correctness.passed:
            return done(correctness)
        result["verdicts"].append(correctness.to_dict())

        enter("model")
        model = self.model_gate(key, settings, outputs)
        lap("model")
        if not model.passed:
            return done(model)
        result["verdicts"].append(model.to_dict())

        enter("performance")
        perf, split = self.performance(key, settings)
        result["kernel_comparison"] = split.to_dict()
        lap("performance")
        if perf.passed and settings.memcheck and torch.device(self.device).type == "cuda":
            enter("memcheck")
            torch.cuda.empty_cache()  # the replay is a process of its own that needs the inputs on this GPU again
            inputs = self.case(self.spec.seed, "given").inputs
            entry = f"{FILE_PREFIX}{self.file.entry_name}"
            if cuda:  # the original file runs in the replay, its slot bound to the built source
                slot, runtime = self.slot
                memcheck = run_memcheck(
                    self.file.source, entry, inputs, cuda=CudaSlotReplay(source, slot or "", runtime)
                )
            else:
                memcheck = run_memcheck(source, entry, inputs)
            lap("memcheck")
            result["memcheck"] = memcheck.to_dict()
            if memcheck.status in ("errors", "failed"):
                result["verdicts"].append(perf.to_dict())
                return done(memcheck_failure(memcheck, "the file's inputs"))
        result["passed"] = perf.passed
        return done(perf)

    # -- gates 2-4 -------------------------------------------------------------------------

    def _run(self, key: str, case: Case) -> tuple[list[Any], list[torch.Tensor], str | None]:
        """The candidate on a copy of ``case``'s inputs, into poisoned buffers; (inputs after, outputs, error)."""
        inputs = clone_args(case.inputs)
        outputs = [nan_fill_(torch.empty_like(e)) for e in case.expected]
        reply = self.runner.run_into(key, inputs, outputs)
        if reply.get("error"):
            return inputs, outputs, f"{case.label}: {reply['error']}"
        returned = reply.get("returned") or []
        expected = [{"shape": list(e.shape), "dtype": str(e.dtype)} for e in case.expected]
        got = [{k: r.get(k) for k in ("shape", "dtype")} if "shape" in r else r for r in returned]
        if got != expected:
            return (
                inputs,
                outputs,
                (
                    f"{case.label}: the candidate's {self.file.entry_name}() returned {_describe(got)}; "
                    f"the original returns {_describe(expected)}"
                ),
            )
        return inputs, outputs, None

    def _check(self, case: Case, inputs: list[Any], outputs: list[torch.Tensor]) -> Verdict:
        written = {f"output {i}": (e, o) for i, (e, o) in enumerate(zip(case.expected, outputs))}
        written.update({f"input {i} (written in place)": (case.written[i], inputs[i]) for i in case.written})
        untouched = {
            f"input {i}": (a, inputs[i])
            for i, a in enumerate(case.inputs)
            if isinstance(a, torch.Tensor) and i not in case.written
        }
        return check_case(case.label, written, untouched, None)

    def correctness(self, key: str, settings: GateSettings) -> tuple[Verdict, dict[int, list[torch.Tensor]]]:
        """Gate 2 over every kernel seed x distribution; also the candidate's given-input outputs per seed."""
        distributions = ["given", *[d for d in settings.kernel_distributions or DISTRIBUTIONS if d != "given"]]
        distributions += [f"{EDGE}{e}" for e in settings.edges]  # once per run's first kernel seed, below
        verdicts: list[Verdict] = []
        kept: dict[int, list[torch.Tensor]] = {}
        for n, seed in enumerate(settings.kernel_seeds):
            for distribution in distributions:
                if distribution.startswith(EDGE) and n > 0:
                    continue  # an edge case's point is its structure, not its sample: one seed
                case = self.case(seed, distribution)
                inputs, outputs, error = self._run(key, case)
                if error is not None:
                    return Verdict("correctness", False, error, {"rule": "outputs", "case": case.label}), kept
                verdicts.append(self._check(case, inputs, outputs))
                if distribution == "given":
                    kept[seed] = outputs + [inputs[i] for i in sorted(case.written)]
        combined = combine_cases(verdicts)
        if combined.passed:  # the kernel gate's wording names a snapshot and a kernel; here it is the file
            combined = Verdict(
                "correctness",
                True,
                f"{len(verdicts)} cases (seeds x distributions, edge cases) matched the original file",
                combined.details,
            )
        return combined, kept

    def model_gate(self, key: str, settings: GateSettings, outputs: dict[int, list[torch.Tensor]]) -> Verdict:
        """Gate 3: every output's error against the float64 reference, within the ratio of the original's."""
        if self.file.reference is None:
            return Verdict(
                "model",
                True,
                "no reference(): the original's own outputs were the reference (gate 2)",
                {"reference": False},
            )
        per_seed = []
        for seed in settings.model_seeds:
            ref = self.cases.reference64(seed)
            assert ref is not None
            case = self.case(seed, "given")
            if seed not in outputs:
                inputs, got, error = self._run(key, case)
                if error is not None:
                    return Verdict("model", False, error, {"rule": "outputs"})
                outputs[seed] = got + [inputs[i] for i in sorted(case.written)]
            baseline = case.expected + [case.written[i] for i in sorted(case.written)]
            if len(ref) != len(baseline):
                return Verdict(
                    "model",
                    False,
                    f"reference() returns {len(ref)} tensor(s) but the original produces {len(baseline)}; "
                    "fix the file's reference",
                    {"rule": "reference"},
                )
            per_seed.append(
                SeedResult(
                    seed,
                    [relative_error(o, r) for o, r in zip(outputs[seed], ref)],
                    [relative_error(b, r) for b, r in zip(baseline, ref)],
                    [relative_error(torch.zeros_like(r), r) for r in ref],
                    [output_stats(r) for r in ref],
                )
            )
        return judge_model(per_seed, ModelGatePolicy(max_ratio=settings.max_error_ratio))

    def _time(self, key: str, trials: int, keep_last: bool) -> tuple[SplitComparison, Verdict | None]:
        """Interleaved timing of the original (clean process) against the candidate; with ``keep_last``
        the last timed candidate call's outputs are checked against the original on the same inputs."""
        base = self.case(self.spec.seed, "given")
        baseline = RotatingInputs(base.inputs, self._refresh(), rotating_sets(base.inputs))
        candidate = baseline.fork()
        total, calls = WARMUP + trials, [0]
        last: dict[str, Any] = {}

        def prepare_candidate() -> None:
            candidate.prepare()
            calls[0] += 1
            if keep_last and calls[0] == total:
                last["before"] = clone_args(candidate.current)

        def after_candidate() -> None:
            if keep_last and calls[0] == total:
                outputs = [nan_fill_(torch.empty_like(e)) for e in base.expected]
                last["reply"] = self.runner.last_into(outputs)
                last["outputs"], last["after"] = (
                    outputs,
                    [exact_clone(a) if isinstance(a, torch.Tensor) else a for a in candidate.current],
                )

        self.reference.start()
        try:
            split = compare_split(
                self.reference.timed_file(ORIGINAL, lambda: baseline.current),
                self.runner.timed_file(key, lambda: candidate.current),
                device=self.device,
                warmup=WARMUP,
                trials=trials,
                prepare_baseline=baseline.prepare,
                prepare_candidate=prepare_candidate,
                after_candidate=after_candidate,
                baseline_remote=True,
            )
        finally:
            self.runner.release()
            self.reference.release()
        if not keep_last:
            return split, None
        before = last["before"]
        run = clone_args(before)
        returned = tensors(self.file.run_entry(run), f"{self.file.entry_name}()")
        written = {i: run[i] for i in base.written}
        timed = Case("the last timed call", before, returned, written)
        return split, self._check(timed, last["after"], last["outputs"])

    def performance(self, key: str, settings: GateSettings) -> tuple[Verdict, SplitComparison]:
        """Gate 4: a real, noise-aware speedup on readings the judge's clock bears out, above the roofline
        floor, by a candidate whose timed outputs are right."""
        policy = PerformancePolicy(margin=settings.margin)
        split, timed = self._time(key, settings.trials, keep_last=True)
        assert timed is not None
        runner = self.runner
        verdict = judge_timed(timed, split, runner.calibration, self.min_time_us(), policy)
        return verdict, split

    def close(self) -> None:
        self.runner.close()
        self.reference.close()


def cuda_slot(file: KernelFile, kernel: str | None) -> tuple[str | None, tuple[str, ...]]:
    """(the kernel a CUDA C++ candidate replaces, its runtime parameters), read from the trusted original;
    (None, ()) where there is none to name (a Helion file, or several kernels and no choice: gate 1 says so)."""
    from kernelopt.verify.static_file_cuda import resolve_slot, slot_runtime

    if file.kind != TRITON:
        return None, ()
    try:
        slot = resolve_slot(file.source, kernel)
    except ValueError:
        return None, ()
    return slot, slot_runtime(file.source, slot)


def _describe(items: Sequence[dict[str, Any]]) -> str:
    if not items:
        return "nothing"
    return ", ".join(
        f"{tuple(i['shape'])} {i['dtype'].replace('torch.', '')}" if "shape" in i else i.get("type", "?") for i in items
    )
