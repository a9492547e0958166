"""What a bench folder holds, read from each file's syntax tree (nothing runs): model problems, Triton or
Helion kernel files, or CUDA C++ slot files (``*.cu``).

``kernelopt bench`` takes one kind per run: model problems are compared with ``torch.compile``, kernel
files with their own original, and one scoreboard cannot hold both baselines. A ``.cu`` file is not a
problem of its own: it is a candidate for one kernel of a Triton file (``kernelopt verify FILE
--candidate X.cu``), so the bench lists it as not benched rather than searching it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelopt.errors import KerneloptError, ProblemError
from kernelopt.problem.file_kind import MODEL, file_kind
from kernelopt.problem.loader import matches, suite_files

MODELS, KERNEL_FILES = "models", "kernel-files"


@dataclass
class SuiteKinds:
    """The selected files of a folder by kind; ``unreadable`` ones (no kind: a syntax error, neither
    format) go with whichever kind the folder holds, where loading them says why."""

    models: list[tuple[str, Path]] = field(default_factory=list)
    kernels: list[tuple[str, Path, str]] = field(default_factory=list)  # (name, path, "triton" | "helion")
    cuda: list[tuple[str, Path]] = field(default_factory=list)
    unreadable: list[tuple[str, Path]] = field(default_factory=list)

    @property
    def input(self) -> str:
        """:data:`KERNEL_FILES` where kernel files are what the folder holds, else :data:`MODELS` (the
        model bench also takes a folder of files that do not parse: they become load-error rows)."""
        return KERNEL_FILES if self.kernels and not self.models else MODELS


def _selected(name: str, path: Path, only: Sequence[str] | None) -> bool:
    return not only or any(matches(sel, name, path) for sel in only)


def suite_kinds(root: Path, only: Sequence[str] | None = None) -> SuiteKinds:
    """The files of ``root`` that ``only`` selects (the loader's rule: name, stem or part of the name), by
    kind. A folder that mixes model problems and kernel files is one line naming both and the fix."""
    found = SuiteKinds()
    for name, path in suite_files(root, only):
        try:
            kind = file_kind(path)
        except ProblemError:
            found.unreadable.append((name, path))
            continue
        if kind == MODEL:
            found.models.append((name, path))
        else:
            found.kernels.append((name, path, kind))
    for path in sorted(p for p in root.rglob("*.cu") if "__pycache__" not in p.parts):
        name = str(path.relative_to(root))
        if _selected(name, path, only):
            found.cuda.append((name, path))
    chosen = [name for name, _ in found.models + found.unreadable + found.cuda] + [n for n, _, _ in found.kernels]
    unmatched = [sel for sel in only or () if not any(sel == n or sel in n for n in chosen)]
    if unmatched:  # the model bench's own words, before either bench starts anything
        raise KerneloptError(f"{root}: no problem matches {', '.join(unmatched)} (see the file names under it)")
    if found.models and found.kernels:
        raise KerneloptError(
            f"{root} mixes {len(found.models)} model problem(s) (such as {found.models[0][0]}) and "
            f"{len(found.kernels)} kernel file(s) (such as {found.kernels[0][0]}); bench one kind per run: "
            "point it at a folder of one kind, or pick one kind with --problems"
        )
    return found
