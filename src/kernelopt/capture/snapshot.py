"""Launch snapshots: a kernel's real arguments, recorded during a model run.

A snapshot lets one sub-kernel run alone on real data, its outputs compared
with the original's. We record with our own launch proxies rather than
tritonparse: the proxies already see every launch with its live tensors, in
process, with no extra dependency on the GPU machine; tritonparse writes traces
for offline reproduction, which a correctness gate does not need.

Copies are exact (:func:`kernelopt.problem.layouts.clone_args`): the whole memory
span a view can address is copied and the view rebuilt with the same shape,
strides and dtype, because an Inductor kernel indexes raw memory assuming the
layout it was compiled for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelopt.capture import compat
from kernelopt.capture.artifact import Artifact
from kernelopt.capture.output_code import KernelDef
from kernelopt.capture.recorder import KernelProxy, LaunchSink
from kernelopt.problem.layouts import clone_args


@dataclass
class LaunchSnapshot:
    """The arguments one launch of a kernel received, copied before it ran."""

    kernel: KernelDef
    graph: int
    occurrence: int  # which launch of this kernel within one forward
    args: list[Any]


class _SnapshotProxy(KernelProxy):
    def __init__(self, *a: Any, out: list[LaunchSnapshot], **k: Any) -> None:
        super().__init__(*a, **k)
        self._out = out

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self._out.append(LaunchSnapshot(self._kernel, self._graph, len(self._out), clone_args(args)))
        return super().run(*args, **kwargs)


def snapshot_launches(artifact: Artifact, inputs: Sequence[Any], graph: int, var: str) -> list[LaunchSnapshot]:
    """Run the model once and copy the arguments of every launch of one kernel."""
    snapshots: list[LaunchSnapshot] = []
    sink = LaunchSink(record_args=False)
    g = vars(artifact.graphs[graph].module)
    kernel = artifact.graphs[graph].kernels[var]
    original = g[var]
    g[var] = _SnapshotProxy(sink, graph, kernel, original, lambda _k: None, out=snapshots)
    try:
        artifact(*inputs)
    finally:
        g[var] = original
    return snapshots


launch = compat.launch  # re-exported: gate runners launch kernels alone through the compat module
