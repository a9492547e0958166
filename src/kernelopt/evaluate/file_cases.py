"""The trusted side of a kernel file's judge: its inputs, what the original makes of them, its reference.

Every case is a seed and a distribution of the inputs (``get_inputs()`` rescaled, or refilled
with an edge case's values in the inputs' exact layouts), the original's outputs on them and the
inputs it writes in place. Built in the judge's process from the user's own file, never from a
candidate. Kept for the next candidate while the kept cases stay under :data:`CASE_CACHE_BYTES`
(the given inputs always), else built again each time, so a final check's 18 cases of a big file
never sit on the GPU at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelopt.problem.edges import edge_like_layout
from kernelopt.problem.kernel_file import KernelFile
from kernelopt.problem.layouts import clone_args
from kernelopt.verify.correctness import bitwise_changes
from kernelopt.verify.model_level import double_copy

CASE_CACHE_BYTES = 4 << 30  # cases kept between candidates, beyond the given inputs' (always kept)
EDGE = "edge:"  # a case name's prefix for an edge-case distribution (kernelopt.problem.edges)


@dataclass
class Case:
    """One set of inputs and what the original made of it."""

    label: str
    inputs: list[Any]  # pristine: every call gets a copy
    expected: list[torch.Tensor]  # what the original returned
    written: dict[int, torch.Tensor]  # input position -> its value after the original wrote it


def tensors(value: Any, what: str) -> list[torch.Tensor]:
    """A file's return value as a list of tensors (None: no outputs; an in-place file)."""
    items = [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]
    for i, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            raise TypeError(f"{what} returned {type(item).__name__} at position {i}; it must return tensors")
    return items


def nbytes(values: Sequence[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in values if isinstance(t, torch.Tensor))


class FileCases:
    """The cases of one kernel file on one device, and its float64 reference per seed."""

    def __init__(self, file: KernelFile, device: str) -> None:
        self.file, self.device = file, device
        self._cases: dict[tuple[int, str], Case] = {}
        self._cached_bytes = 0
        self._ref64: dict[int, list[torch.Tensor]] = {}

    def case(self, seed: int, distribution: str) -> Case:
        """The inputs of (seed, distribution) and the original's outputs on them."""
        key = (seed, distribution)
        if key not in self._cases:
            inputs = self._inputs(seed, distribution)
            run = clone_args(inputs)
            returned = tensors(self.file.run_entry(run), f"{self.file.entry_name}()")
            written = {
                i: run[i]
                for i, (a, b) in enumerate(zip(inputs, run))
                if isinstance(a, torch.Tensor) and bitwise_changes(f"input {i}", a, b)[0]
            }
            edge = distribution.startswith(EDGE)
            label = f"seed {seed}, edge {distribution[len(EDGE) :]}" if edge else f"seed {seed}, {distribution} inputs"
            case = Case(label, inputs, returned, written)
            size = nbytes(inputs) + nbytes(returned) + nbytes(list(written.values()))
            if distribution != "given" and self._cached_bytes + size > CASE_CACHE_BYTES:
                return case
            self._cached_bytes += size
            self._cases[key] = case
        return self._cases[key]

    def _inputs(self, seed: int, distribution: str) -> list[Any]:
        """The file's inputs for ``seed``: rescaled (a :data:`~kernelopt.problem.inputs.DISTRIBUTIONS` name)
        or, for ``edge:NAME``, refilled in their exact layouts with that edge case's values."""
        if not distribution.startswith(EDGE):
            return self.file.make_inputs(seed, self.device, distribution)
        generator = torch.Generator(device=self.device).manual_seed(seed)
        given = self.file.make_inputs(seed, self.device)
        name = distribution[len(EDGE) :]
        return [edge_like_layout(t, name, generator) if isinstance(t, torch.Tensor) else t for t in given]

    def reference64(self, seed: int) -> list[torch.Tensor] | None:
        """The file's ``reference`` on seed ``seed``'s inputs in float64; None without a reference."""
        reference = self.file.reference
        if reference is None:
            return None
        if seed not in self._ref64:
            inputs = double_copy(self.case(seed, "given").inputs)
            self._ref64[seed] = tensors(self.file._call("reference()", lambda: reference(*inputs)), "reference()")
        return self._ref64[seed]
