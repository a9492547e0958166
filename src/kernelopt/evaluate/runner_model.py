"""The re-stitched model in the candidate's process: its own capture, the candidates swapped in.

Gate 3 and the end-to-end timing need the whole compiled model with a
candidate in it. That model runs here, beside the candidate, never in the
judge: the judge keeps its own capture of the same problem (same seed, same
weights) for the baseline and the float64 reference, lends this process the
seed's inputs and poisoned output buffers, and compares what lands in them.
Outputs are copied into the judge's buffers, so this process's allocator (which
never held a baseline result) is all a stale-output kernel could read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch

from kernelopt.capture import capture
from kernelopt.capture.graph_swap import GraphCandidate, GraphSwap, check_graphs_live, restore_graph, swap_graph
from kernelopt.capture.rewrites import row_softmax_op
from kernelopt.capture.swap import KernelAddress, Swap, check_swaps_live, restore, swap_kernel
from kernelopt.measure.graph_replay import RecordedForward
from kernelopt.problem import load_problem, outputs_as_list


class RunnerModel:
    """One problem's compiled model, with the swaps the judge asked for installed."""

    def __init__(self, spec: dict[str, Any], device: torch.device) -> None:
        self.problem = load_problem(
            spec["problem_path"], overrides=spec.get("overrides") or None, train=bool(spec.get("train"))
        )
        seed = int(spec.get("seed", 0))
        model = self.problem.build_model(seed, device)
        self.inputs = self.problem.make_inputs(seed, device)
        self.artifact = capture(model, self.inputs, spec.get("options") or {})
        self.swaps: list[Swap] = []
        self.graph_swaps: list[GraphSwap] = []
        self._recorded: RecordedForward | None = None  # the forward as one CUDA graph, recorded on first use

    def set_swaps(
        self,
        replacements: Sequence[tuple[dict[str, Any], Any]],
        graphs: Sequence[tuple[GraphCandidate, dict[str, Any]]] = (),
    ) -> dict[str, Any]:
        """Replace the installed swaps with ``replacements`` (address dict, built kernel) and ``graphs``
        (graph candidates with their built kernels); empty lists restore the compiled model. Proves
        each replacement launches and each changed call sequence runs. The judge's address names this
        capture's kernel although each process stamps its own Triton backend hash
        (:func:`~kernelopt.capture.output_code.kernel_identity`). A recorded CUDA graph holds the
        launches of the swaps it was recorded with: it is dropped."""
        self._recorded = None
        for graph_swap in reversed(self.graph_swaps):
            restore_graph(graph_swap)
        self.graph_swaps = []
        for swap in reversed(self.swaps):
            restore(self.artifact, swap)
        self.swaps = []
        for address, kernel in replacements:
            self.swaps.append(swap_kernel(self.artifact, KernelAddress.from_dict(address), "", kernel=kernel))
        for candidate, built in graphs:
            self.graph_swaps.append(swap_graph(self.artifact, candidate, built))
        before = Counter(row_softmax_op.FALLBACKS)
        if self.swaps:
            check_swaps_live(self.artifact, self.swaps, self.inputs)
        if self.graph_swaps:
            check_graphs_live(self.artifact, self.graph_swaps, self.inputs)
        # kernelopt's own op computed by torch on the GPU: a graph candidate that never runs its kernel
        fell_back = row_softmax_op.fallbacks_since(before)
        return {"swaps": len(self.swaps), "graphs": len(self.graph_swaps), "fallbacks": fell_back}

    def run(self, inputs: Sequence[Any], outputs: Sequence[torch.Tensor]) -> dict[str, Any]:
        """Forward on ``inputs``; each result is copied into the matching lent buffer when its layout
        matches, and every result's layout is reported so the judge can name a mismatch."""
        with torch.no_grad():
            results = outputs_as_list(self.artifact(*inputs), self.problem.path)
        layouts = []
        for i, result in enumerate(results):
            layouts.append({"shape": list(result.shape), "dtype": str(result.dtype).removeprefix("torch.")})
            if i < len(outputs) and outputs[i].shape == result.shape and outputs[i].dtype == result.dtype:
                outputs[i].copy_(result)
        if inputs and isinstance(inputs[0], torch.Tensor) and inputs[0].is_cuda:
            torch.cuda.synchronize()
        return {"outputs": layouts}

    def forward(self) -> None:
        self.artifact(*self.inputs)

    def recorded(self) -> RecordedForward:
        """The forward on this process's inputs, recorded once as a CUDA graph (raises
        :class:`~kernelopt.measure.graph_replay.GraphCaptureError` where it cannot be)."""
        if self._recorded is None:
            tensors = [x for x in self.inputs if isinstance(x, torch.Tensor)]
            device = tensors[0].device if tensors else torch.device("cpu")

            def call() -> list[torch.Tensor]:
                with torch.no_grad():
                    return outputs_as_list(self.artifact(*self.inputs), self.problem.path)

            self._recorded = RecordedForward(call, device)
        return self._recorded

    def drop_recorded(self) -> None:
        """Hand the recorded graph's memory pool back (it holds a copy of the forward's buffers)."""
        if self._recorded is not None:
            self._recorded = None
            torch.cuda.empty_cache()

    def run_recorded(self, inputs: Sequence[Any], outputs: Sequence[torch.Tensor]) -> dict[str, Any]:
        """:meth:`run` through the recorded graph: ``inputs``' values are copied into the recorded
        inputs, the recorded outputs are poisoned, the graph replays, and its outputs land in the lent
        buffers; the recorded inputs get their own values back. So a forward that records other work
        than it runs when called (a kernel that asks whether it is being captured) is judged on what
        the graph does, on values it never saw while recording."""
        recorded = self.recorded()
        statics = [x for x in self.inputs if isinstance(x, torch.Tensor)]
        given = [x for x in inputs if isinstance(x, torch.Tensor)]
        if len(given) != len(statics) or any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(given, statics)):
            raise ValueError("the inputs lent for a replay must have the recorded inputs' shapes and dtypes")
        kept = [x.clone() for x in statics]
        with torch.no_grad():
            for static, value in zip(statics, given):
                static.copy_(value)
            poison_outputs(recorded.outputs, statics)
            recorded.replay()
            layouts = []
            for i, result in enumerate(recorded.outputs):
                layouts.append({"shape": list(result.shape), "dtype": str(result.dtype).removeprefix("torch.")})
                if i < len(outputs) and outputs[i].shape == result.shape and outputs[i].dtype == result.dtype:
                    outputs[i].copy_(result)
            for static, value in zip(statics, kept):
                static.copy_(value)
        torch.cuda.synchronize()
        return {"outputs": layouts}


def poison_outputs(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> None:
    """Fill each floating output with NaN before a replay, so a graph that skips writing it shows;
    an output that shares memory with an input (a model that returns its input, or a view of it) is
    left alone: poisoning it would poison what the replay reads."""
    held = {x.untyped_storage().data_ptr() for x in inputs}
    for out in outputs:
        if (out.dtype.is_floating_point or out.dtype.is_complex) and out.untyped_storage().data_ptr() not in held:
            out.fill_(float("nan"))
