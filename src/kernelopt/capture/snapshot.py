"""Launch snapshots: a kernel's real arguments, recorded during a model run.

A snapshot lets one sub-kernel run alone on real data, its outputs compared
with the original's. We record with our own launch proxies rather than
tritonparse: the proxies already see every launch with its live tensors, in
process, with no extra dependency on the GPU machine; tritonparse writes traces
for offline reproduction, which a correctness gate does not need.

Copies are exact: the whole memory span a view can address is copied and the
view rebuilt with the same shape, strides and dtype, because an Inductor kernel
indexes raw memory assuming the layout it was compiled for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelopt.capture import compat
from kernelopt.capture.artifact import Artifact
from kernelopt.capture.output_code import KernelDef
from kernelopt.capture.recorder import KernelProxy, LaunchSink


def span_elements(t: torch.Tensor) -> int:
    """Elements of storage a view can address, from its first to its last element."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))


def exact_clone(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with identical shape, strides and dtype, including stride-0 and gapped views."""
    span = span_elements(t)
    if span == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    flat = torch.as_strided(t, (span,), (1,), t.storage_offset()).clone()
    return flat.as_strided(t.shape, t.stride(), 0)


def random_like_layout(t: torch.Tensor, generator: torch.Generator, scale: float) -> torch.Tensor:
    """Fresh values in ``t``'s exact layout: standard normal × ``scale`` for floating tensors."""
    span = span_elements(t)
    flat = torch.randn(max(span, 1), generator=generator, device=t.device, dtype=torch.float32).to(t.dtype) * scale
    return flat.as_strided(t.shape, t.stride(), 0)


def perturbed_copy_(dst: torch.Tensor, src: torch.Tensor, rel: float = 1e-3) -> None:
    """Write ``src * (1 + rel * noise)`` into ``dst`` over the whole span (same layouts assumed).

    New values with the same distribution as the real data, for timing runs that
    must not see the same inputs twice. Works for overlapping (stride-0) views.
    """
    span = span_elements(src)
    if span == 0:
        return
    s = torch.as_strided(src, (span,), (1,), src.storage_offset())
    torch.as_strided(dst, (span,), (1,), dst.storage_offset()).copy_(s * (1 + rel * torch.randn_like(s)))


class RotatingInputs:
    """Argument sets for timed runs that never see the same pointers or values twice in a row.

    ``sets`` distinct copies of ``base`` are used in turn; before each use, the
    floating tensors at ``refresh`` positions get new values (``perturbed_copy_``).
    Call :meth:`prepare` outside the timed region, then time a call on :attr:`current`.
    """

    def __init__(self, base: Sequence[Any], refresh: Sequence[int], sets: int = 2) -> None:
        self.base = list(base)
        self.refresh = [i for i in refresh if isinstance(base[i], torch.Tensor) and base[i].is_floating_point()]
        self.sets = [clone_args(base) for _ in range(sets)]
        self._next = 0
        self.current = self.sets[0]

    def prepare(self) -> None:
        self.current = self.sets[self._next]
        self._next = (self._next + 1) % len(self.sets)
        for i in self.refresh:
            perturbed_copy_(self.current[i], self.base[i])


def clone_args(args: Sequence[Any]) -> list[Any]:
    return [exact_clone(a) if isinstance(a, torch.Tensor) else a for a in args]


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
