"""Tensors in a recorded launch's exact layouts: copies, fresh values, rotating timing inputs.

A generated kernel indexes raw memory assuming the layout it was compiled for,
so every input the gates make for it keeps the recorded view's shape, strides,
dtype and whole addressable span (stride-0 and gapped views included). This is
input generation, the ``problem`` layer's job: the gates' random cases, the
edge cases (:mod:`kernelopt.problem.edges`) and the timing runs' fresh values
all start here.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch


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
    span = max(span_elements(t), 1)
    flat = torch.empty(span, dtype=t.dtype, device=t.device)
    for start in range(0, span, BLOCK_ELEMENTS):  # float32 draws a block at a time: no whole-size temporary
        stop = min(span, start + BLOCK_ELEMENTS)
        flat[start:stop] = torch.randn(stop - start, generator=generator, device=t.device, dtype=torch.float32)
    return flat.mul_(scale).as_strided(t.shape, t.stride(), 0)


BLOCK_ELEMENTS = 1 << 24
"""Fresh and perturbed values are made this many elements at a time, so making them costs the
tensor and a bounded temporary, never several copies of a gigabyte input."""


def _flat_span(t: torch.Tensor) -> torch.Tensor:
    """The whole memory span ``t`` can address, as one flat view (overlapping views included)."""
    return torch.as_strided(t, (span_elements(t),), (1,), t.storage_offset())


def perturbed_copy_(dst: torch.Tensor, src: torch.Tensor, rel: float = 1e-3) -> None:
    """Write ``src * (1 + rel * noise)`` into ``dst`` over the whole span (same layouts assumed).

    New values with the same distribution as the real data, for timing runs that
    must not see the same inputs twice. Works for overlapping (stride-0) views.
    """
    span = span_elements(src)
    if not span:
        return
    s, d = _flat_span(src), _flat_span(dst)
    compute = torch.promote_types(src.dtype, torch.float32)  # 1 + 1e-3 noise would round to 1 in bf16
    for start in range(0, span, BLOCK_ELEMENTS):
        stop = min(span, start + BLOCK_ELEMENTS)
        noise = torch.randn(stop - start, device=src.device, dtype=compute)
        d[start:stop] = noise.mul_(rel).add_(1).mul_(s[start:stop])


def exact_copy_(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Copy ``src``'s whole addressable span into ``dst``'s (same layouts assumed; overlapping views too)."""
    if span_elements(src):
        _flat_span(dst).copy_(_flat_span(src))


class RotatingInputs:
    """Argument sets for timed runs that never see the same pointers or values twice in a row.

    ``sets`` distinct copies of ``base`` are used in turn; before each use, the
    floating tensors at ``refresh`` positions get new values (``perturbed_copy_``)
    and the other tensors there are restored from ``base`` (so a call that wrote
    into them cannot change what the next call reads). Call :meth:`prepare` outside
    the timed region, then time a call on :attr:`current`.

    :meth:`fork` gives a second cursor over the *same* sets: the two sides of an A/B
    comparison then run on the same memory, so where the allocator happened to put
    one side's buffers cannot favour it (on the H200 that alone moved a kernel's
    median by 1-2 % against itself).
    """

    def __init__(self, base: Sequence[Any], refresh: Sequence[int], sets: int = 2) -> None:
        self.base = list(base)
        tensors = [i for i in refresh if isinstance(base[i], torch.Tensor)]
        self.refresh = [i for i in tensors if base[i].is_floating_point()]
        self.restore = [i for i in tensors if not base[i].is_floating_point()]
        self.sets = [clone_args(base) for _ in range(sets)]
        self._next = 0
        self.current = self.sets[0]

    def fork(self) -> RotatingInputs:
        """Another cursor over the same argument sets, starting at the first."""
        other = copy.copy(self)
        other._next = 0
        other.current = other.sets[0]
        return other

    def prepare(self) -> None:
        self.current = self.sets[self._next]
        self._next = (self._next + 1) % len(self.sets)
        for i in self.refresh:
            perturbed_copy_(self.current[i], self.base[i])
        for i in self.restore:
            exact_copy_(self.current[i], self.base[i])


def clone_args(args: Sequence[Any]) -> list[Any]:
    return [exact_clone(a) if isinstance(a, torch.Tensor) else a for a in args]


def describe_arg(value: Any) -> str:
    """What an agent may know of one launch argument: a tensor's dtype, shape and strides (never its
    data), or a scalar as it is."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype}{list(value.shape)} strides {tuple(value.stride())}"
    if isinstance(value, (bool, int, float, str)) or value is None:
        return repr(value)
    return type(value).__name__


def describe_args(names: Sequence[str], values: Sequence[Any]) -> dict[str, str]:
    """Each named launch argument described (:func:`describe_arg`), in order; extra values go unnamed."""
    return {name: describe_arg(value) for name, value in zip(names, values)}
