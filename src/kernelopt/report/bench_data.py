"""What a bench report shows, read from a results folder's ``results.json``.

A bench keeps its scoreboard in its results folder, not in the store (each
problem's optimize run is in the store the bench was given), so the report reads
the same document ``kernelopt bench`` writes and ``bench-merge`` joins. Outcomes
go through :meth:`ProblemOutcome.from_dict`, the scoreboard's own validation, and
the summary is recomputed with the scoreboard's arithmetic rather than trusted
from the file, so the page and ``results.md`` cannot disagree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from kernelopt.errors import KerneloptError
from kernelopt.report.file_scoreboard import FileOutcome, summarize_files
from kernelopt.report.metrics import ProblemOutcome, not_run, rescored, summarize
from kernelopt.report.results_folder import FILE_SUITE, RESULTS_JSON, RESULTS_MD
from kernelopt.report.scoreboard import commands_of

Row = TypeVar("Row", ProblemOutcome, FileOutcome)


@dataclass(frozen=True)
class BenchData(Generic[Row]):
    """A bench's scoreboard: where it came from, one outcome per problem (or per kernel file), the summary."""

    source: Path  # the results.json read
    meta: dict[str, Any]
    outcomes: list[Row]
    summary: dict[str, Any]

    @property
    def suite(self) -> str:
        return str(self.meta.get("suite") or self.source.parent)

    @property
    def commands(self) -> list[str]:
        return commands_of(self.meta)


def results_file(path: str | Path) -> Path:
    """``path`` itself when it is a results.json, else the results.json inside the folder ``path``."""
    candidate = Path(path)
    found = candidate / RESULTS_JSON if candidate.is_dir() else candidate
    if not found.is_file():
        raise KerneloptError(
            f"{candidate}: no bench results here (expected {RESULTS_JSON}); pass a run id or a results folder"
        )
    return found


ProblemBenchData = BenchData[ProblemOutcome]  # a bench of model problems
FileBenchData = BenchData[FileOutcome]  # a kernel-file bench's: one row per file, its own summary


def _of_files(document: Any) -> bool:
    meta = document.get("meta") if isinstance(document, dict) else None
    return isinstance(meta, dict) and meta.get("input") == FILE_SUITE


def load_any_bench(path: str | Path) -> ProblemBenchData | FileBenchData:
    """The bench results at ``path`` of either kind (model problems or kernel files), the file read once."""
    source = results_file(path)
    try:
        document = json.loads(source.read_text())
    except (OSError, ValueError):
        return load_bench(source)  # says what is wrong with it, in one line
    return load_file_bench(source, document) if _of_files(document) else load_bench(source, document)


def load_file_bench(path: str | Path, document: Any = None) -> FileBenchData:
    """A kernel-file bench's results at ``path`` (``document``: its JSON, where already read): each row through
    :meth:`FileOutcome.from_dict` and the summary recomputed, as :func:`load_bench` does for problems; anything
    else is a one-line error."""
    source = results_file(path)
    try:
        document = json.loads(source.read_text()) if document is None else document
        meta = document["meta"]
        if not isinstance(meta, dict) or meta.get("input") != FILE_SUITE:
            raise ValueError("not the results of a bench of kernel files")
        outcomes = [FileOutcome.from_dict(item) for item in document["outcomes"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KerneloptError(
            f"{source} is not a readable kernel-file bench results file ({type(exc).__name__}: {exc}); "
            "write one with kernelopt bench FOLDER_OF_KERNEL_FILES"
        ) from exc
    return FileBenchData(source, meta, outcomes, summarize_files(outcomes, meta.get("skipped") or []))


def load_bench(path: str | Path, document: Any = None) -> ProblemBenchData:
    """The bench results at ``path`` (a results folder or its results.json; ``document``: its JSON, where
    already read); a malformed file is a one-line error."""
    source = results_file(path)
    try:
        document = json.loads(source.read_text()) if document is None else document
        meta = document["meta"]
        if isinstance(meta, dict) and meta.get("input") == FILE_SUITE:
            raise KerneloptError(
                f"{source}: the results of a bench of kernel files, not of model problems; read them with "
                f"load_file_bench (kernelopt report renders either), or {RESULTS_MD} beside them"
            )
        outcomes = [rescored(ProblemOutcome.from_dict(item)) for item in document["outcomes"]]
        if not isinstance(meta, dict):
            raise TypeError("meta is not an object")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KerneloptError(
            f"{source} is not a readable bench results file ({type(exc).__name__}: {exc}); "
            "write one with kernelopt bench or bench-merge"
        ) from exc
    return ProblemBenchData(source, meta, outcomes, {**summarize(outcomes), "not_run": not_run(meta, outcomes)})
