"""The judge's side of the re-stitched model, which runs in the candidate's process.

Gate 3 and the end-to-end timing need the compiled model with a candidate in it;
that model lives beside the candidate (:mod:`kernelopt.evaluate.runner_model`),
never here. The judge keeps its own capture of the same problem for the baseline
and the float64 references, lends the candidate's process inputs and fresh
poisoned output buffers, checks the layouts of what comes back, and times its
compiled model in the reference process against the re-stitched one in the
candidate's, both read the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from kernelopt.capture import Artifact
from kernelopt.evaluate.remote import RemoteRunner, RunnerDied
from kernelopt.measure.split_timer import SplitComparison, compare_split
from kernelopt.problem import Problem, outputs_as_list
from kernelopt.verify.correctness import nan_fill_
from kernelopt.verify.model_gate import ModelGatePolicy
from kernelopt.verify.model_level import ReferenceCache, run_model_gate
from kernelopt.verify.performance import graphs_unpaid, judge_timing_evidence
from kernelopt.verify.verdict import Verdict


class ModelOutputMismatch(Exception):
    """The re-stitched model's outputs do not have the compiled model's layouts."""


class RestitchedModel:
    """Gate 3 and the end-to-end timing of the candidate process's re-stitched model.

    Holds the float64 references and baseline errors per seed (:class:`ReferenceCache`)
    and the compiled model's output layouts, both computed once and reused by every
    candidate of the session."""

    def __init__(
        self,
        problem: Problem,
        model: torch.nn.Module,
        artifact: Artifact,
        inputs: Sequence[Any],
        device: torch.device,
        runner: RemoteRunner,
        reference: RemoteRunner,
    ) -> None:
        self.problem = problem
        self.model = model
        self.artifact = artifact
        self.inputs = inputs
        self.device = device
        self.runner = runner
        self.reference = reference
        self._references = ReferenceCache()  # float64 references and baseline errors, per seed
        self._layouts: list[tuple[tuple[int, ...], tuple[int, ...], torch.dtype]] | None = None
        self._graphs_gain: SplitComparison | None = None  # the compiled model's replays over its forward
        self._unrecordable: str | None = None  # why the compiled model could not be recorded, once found

    def output_layouts(self) -> list[tuple[tuple[int, ...], tuple[int, ...], torch.dtype]]:
        """Shape, strides and dtype of each output of the compiled model (read once, from the baseline)."""
        if self._layouts is None:
            outs = outputs_as_list(self.artifact(*self.inputs), self.problem.path)
            self._layouts = [(tuple(o.shape), tuple(o.stride()), o.dtype) for o in outs]
        return self._layouts

    def remote_forward(self, inputs: Sequence[Any], recorded: bool = False) -> list[torch.Tensor]:
        """The candidate process's re-stitched model on ``inputs``, landed in fresh poisoned buffers of
        this process's (which never held a baseline result); ``recorded``: as a replay of its CUDA graph."""
        outputs = [
            nan_fill_(torch.empty_strided(shape, stride, dtype=dtype, device=self.device))
            for shape, stride, dtype in self.output_layouts()
        ]
        layouts = self.runner.forward_into(inputs, outputs, recorded)
        if len(layouts) != len(outputs):
            raise ModelOutputMismatch(f"the re-stitched model returned {len(layouts)} outputs, expected {len(outputs)}")
        for i, (layout, out) in enumerate(zip(layouts, outputs)):
            if tuple(layout["shape"]) != tuple(out.shape) or layout["dtype"] != str(out.dtype).removeprefix("torch."):
                raise ModelOutputMismatch(
                    f"output {i} of the re-stitched model is {layout['dtype']}{list(layout['shape'])}, "
                    f"expected {str(out.dtype).removeprefix('torch.')}{list(out.shape)}"
                )
        return outputs

    def capture_difference(self, kernel: Any) -> str | None:
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

    def remote_replay(self, inputs: Sequence[Any]) -> list[torch.Tensor]:
        """:meth:`remote_forward` through the candidate process's model recorded as a CUDA graph."""
        return self.remote_forward(inputs, recorded=True)

    def model_gate(self, seeds: Sequence[int], max_error_ratio: float, recorded: bool = False) -> Verdict:
        """Gate 3 against the swaps installed in the candidate's process; ``recorded``: against what
        their CUDA graph does when replayed on each seed's inputs (a model delivered under a
        CUDA-graph mode runs as replays, and a candidate could record other work than it runs)."""

        def run_baseline(xs: Sequence[Any]) -> Any:
            return self.artifact(*xs)

        try:
            return run_model_gate(
                self.problem,
                self.model,
                run_baseline,
                self.remote_replay if recorded else self.remote_forward,
                self.device,
                seeds,
                ModelGatePolicy(max_ratio=max_error_ratio),
                cache=self._references,
            )
        except ModelOutputMismatch as exc:
            return Verdict("model", False, str(exc), {"rule": "output_layout"})

    def end_to_end(self, trials: int, recorded: bool = False) -> SplitComparison:
        """The compiled model (in the reference process) against the re-stitched one (in the candidate's),
        interleaved, both timed the same way; ``recorded``: each side as replays of its forward
        recorded as a CUDA graph."""
        return compare_split(
            self.reference.timed_model(recorded),
            self.runner.timed_model(recorded),
            trials=trials,
            baseline_remote=True,
        )

    def host_times(self, recorded: bool = False) -> dict[str, float | None]:
        """The host's time of a forward in a loop (ms) each side's last end-to-end timing read beside its
        device times: where it is the longer, that side's readings are its host's, not its kernels'."""
        return {"baseline": self.reference.host_ms.get(recorded), "candidate": self.runner.host_ms.get(recorded)}

    def op_hosts(self, recorded: bool = False) -> dict[str, dict[str, str]]:
        """Each side's own ops' host paths, read with its host time (:meth:`host_times`)."""
        return {
            "baseline": self.reference.op_hosts.get(recorded, {}),
            "candidate": self.runner.op_hosts.get(recorded, {}),
        }

    def graphs_gain(self, trials: int) -> SplitComparison:
        """The compiled model's forward against its own CUDA-graph replays, interleaved in the
        reference process: how much of the compiled forward's time is launch overhead that a
        CUDA-graph mode removes (speedup > 1 where graphs pay). Timed once a session: the compiled
        model does not change."""
        if self._graphs_gain is None:
            self._graphs_gain = compare_split(
                self.reference.timed_model(), self.reference.timed_model(True), trials=trials, baseline_remote=True
            )
        return self._graphs_gain

    @property
    def recorded_gain(self) -> SplitComparison | None:
        """:meth:`graphs_gain` where it was timed, else None."""
        return self._graphs_gain

    def graphs_pay(self, trials: int) -> tuple[bool, str | None]:
        """(whether CUDA graphs pay for the compiled model beyond noise, why not in one line where they
        do not). Where they do not, the reference process drops its recorded graph at once."""
        if self._unrecordable is not None:  # a compiled model that cannot be recorded stays so: asked once
            return False, self._unrecordable
        try:
            why = graphs_unpaid(self.graphs_gain(trials).comparison)
        except RunnerDied as exc:
            self._unrecordable = f"the compiled model could not be recorded as a CUDA graph: {exc.one_line}"
            return False, self._unrecordable
        if why is not None:
            self.reference.drop_recorded()
        return why is None, why

    def timing_evidence(self, e2e: SplitComparison) -> Verdict | None:
        """None when the candidate process's readings of its model agree with the judge's clock, against
        that process's calibration; else the failed performance verdict naming the disagreement."""
        return judge_timing_evidence(
            e2e.comparison.candidate.samples_ms,
            e2e.candidate_wall_ms,
            self.runner.calibration,
            what="model",
        )
