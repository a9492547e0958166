"""Standalone kernel files: a Triton or Helion kernel the user brings without a model.

A *Triton kernel file* defines one or more ``@triton.jit`` kernels (with or without
``@triton.autotune``), ``launch(*inputs)`` that allocates the outputs, launches the
kernels and returns the output(s), ``get_inputs()``, and optionally
``reference(*inputs)``: PyTorch code with the semantics the kernel must keep. Without
a reference, the original ``launch`` is the reference. A *Helion kernel file* defines
a ``@helion.kernel`` function (the entry, unless the file also defines ``launch``) and
``get_inputs()``. Both may carry top-level size constants and ``SMALL_SIZES``, as
problem files do.

:func:`~kernelopt.problem.file_kind.file_kind` tells the kinds apart from the syntax tree alone (nothing runs), so
``kernelopt optimize FILE`` can pick the pipeline before it executes user code; every
way a file can be wrong is one :class:`~kernelopt.errors.ProblemError` line that names
the file and the fix. See ``docs/kernel-files.md``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.errors import ProblemError
from kernelopt.problem.file_kind import ENTRY, HELION, KIND_HINT, MODEL, TRITON, file_shape
from kernelopt.problem.layouts import clone_args
from kernelopt.problem.loader import InputFile, execute_file


@dataclass
class KernelFile(InputFile):
    """A loaded Triton or Helion kernel file: its entry point, its reference and its source."""

    kind: str = TRITON
    source: str = ""
    kernels: tuple[str, ...] = ()
    entry_name: str = ENTRY
    params: tuple[str, ...] = field(default_factory=tuple)

    @property
    def entry(self) -> Callable[..., Any]:
        return getattr(self.module, self.entry_name)

    @property
    def reference(self) -> Callable[..., Any] | None:
        return getattr(self.module, "reference", None)

    def with_sizes(self, **overrides: Any) -> KernelFile:
        return load_kernel_file(self.path, overrides={**self.overrides, **overrides}, name=self.name)

    def run_entry(self, inputs: list[Any]) -> Any:
        """The original entry on ``inputs`` (the file's own code: its failure is the file's fault)."""
        return self._call(f"{self.entry_name}()", lambda: self.entry(*inputs))

    def kernel_calls(self, inputs: list[Any], names: Sequence[str], copy: bool = False) -> dict[str, list[KernelCall]]:
        """What the entry passes each kernel of ``names`` when it runs on ``inputs``, call by call: the
        arguments a kernel really gets (``launch`` computes them), which the file's inputs are not.
        ``copy``: each call's tensors cloned before it runs, for a caller that runs the kernel on them again."""
        saved = {name: getattr(self.module, name) for name in names}
        calls: dict[str, list[KernelCall]] = {name: [] for name in names}
        try:
            for name, kernel in saved.items():
                setattr(self.module, name, _Recorder(kernel, calls[name], copy))
            self.run_entry(inputs)
        finally:
            for name, kernel in saved.items():
                setattr(self.module, name, kernel)
        return calls


@dataclass(frozen=True)
class KernelCall:
    """One call of a kernel by the file's entry, its arguments as the entry passed them."""

    args: tuple[Any, ...]
    keywords: dict[str, Any]


class _Recorder:
    """Stands in for one kernel in the loaded module while the entry runs: records each call, then makes
    it. Called directly (a Helion kernel) or through its grid (``kernel[grid](...)``, a Triton kernel);
    any other attribute is the kernel's own."""

    def __init__(self, kernel: Any, calls: list[KernelCall], copy: bool) -> None:
        self.kernel, self.calls, self.copy = kernel, calls, copy

    def _record(self, args: tuple[Any, ...], keywords: dict[str, Any]) -> None:
        if self.copy:
            args, keywords = tuple(clone_args(args)), dict(zip(keywords, clone_args(list(keywords.values()))))
        self.calls.append(KernelCall(args, dict(keywords)))

    def __call__(self, *args: Any, **keywords: Any) -> Any:
        self._record(args, keywords)
        return self.kernel(*args, **keywords)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        launch = self.kernel[grid]

        def call(*args: Any, **keywords: Any) -> Any:
            self._record(args, keywords)
            return launch(*args, **keywords)

        return call

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)


def load_kernel_file(path: str | Path, overrides: dict[str, Any] | None = None, name: str | None = None) -> KernelFile:
    """Execute a Triton or Helion kernel file and check it has what its kind needs."""
    path = Path(path)
    if not path.is_file():
        raise ProblemError(f"{path}: no such kernel file")
    text = path.read_text()
    shape = file_shape(text, path)
    if shape.kind == MODEL:
        raise ProblemError(f"{path}: is a problem file (it defines class Model); load it with load_problem")
    if shape.kind == HELION and ENTRY not in shape.functions and len(shape.kernels) > 1:
        raise ProblemError(
            f"{path}: defines {len(shape.kernels)} @helion.kernel functions and no launch(*inputs); "
            "add launch to say which runs (and how), or keep one kernel"
        )
    if "get_inputs" not in shape.functions:
        raise ProblemError(f"{path}: defines no get_inputs(); add one that returns the kernel's input tensors")
    module, sizes = execute_file(path, overrides, "kernelopt_kernel")
    entry = ENTRY if ENTRY in shape.functions else shape.kernels[0]
    if not callable(getattr(module, entry, None)):
        raise ProblemError(f"{path}: {entry} is not callable after the file ran; {KIND_HINT}")
    reference = getattr(module, "reference", None)
    if reference is not None and not callable(reference):
        raise ProblemError(f"{path}: reference is not a function; define reference(*inputs) or leave it out")
    return KernelFile(
        name=name or path.stem,
        path=path,
        module=module,
        sizes=sizes,
        overrides=dict(overrides or {}),
        kind=shape.kind,
        source=text,
        kernels=shape.kernels,
        entry_name=entry,
        params=_params(getattr(module, entry)),
    )


def _params(fn: Any) -> tuple[str, ...]:
    target = getattr(fn, "fn", fn)  # a Helion Kernel wraps the function it was made from
    try:
        return tuple(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return ()
