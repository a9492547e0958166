"""The results folder of a bench over kernel files: ``results.json`` the truth, ``results.csv`` and
``results.md`` written from it, each replaced atomically, with ``meta["input"] == "kernel-files"``, so
neither kind of bench resumes the other's folder. Its rows and scoreboard are
:mod:`kernelopt.report.file_scoreboard`'s.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from kernelopt.errors import KerneloptError
from kernelopt.pipeline.bench_results import atomic_write
from kernelopt.report.file_scoreboard import FileOutcome, file_markdown, summarize_files
from kernelopt.report.results_folder import FILE_SUITE, RESULTS_CSV, RESULTS_JSON, RESULTS_MD

FILE_CSV_COLUMNS = (
    "name",
    "kind",
    "status",
    "delivered",
    "speedup",
    "speedup_q1",
    "speedup_q3",
    "original_us",
    "optimized_us",
    "operators",
    "evaluations",
    "run_id",
    "exported",
    "reason",
)


def write_file_results(out_dir: Path, meta: dict[str, Any], outcomes: list[FileOutcome]) -> dict[str, Any]:
    """Rewrite the three result files from ``meta`` and ``outcomes``; return the summary."""
    summary = summarize_files(outcomes, meta.get("skipped") or [])
    document = {"meta": meta, "outcomes": [o.to_dict() for o in outcomes], "summary": summary}
    atomic_write(out_dir / RESULTS_JSON, json.dumps(document, indent=2, allow_nan=False) + "\n")
    atomic_write(out_dir / RESULTS_CSV, _csv_text(outcomes))
    atomic_write(out_dir / RESULTS_MD, file_markdown(meta, outcomes, summary))
    return summary


def read_file_results(path: Path) -> dict[str, Any]:
    """A kernel-file bench's results.json as ``{"meta", "outcomes"}``; one line for anything else."""
    try:
        data = json.loads(path.read_text())
        meta = data["meta"]
        kind = meta.get("input")
        outcomes = [FileOutcome.from_dict(item) for item in data["outcomes"]] if kind == FILE_SUITE else []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KerneloptError(
            f"{path} cannot be resumed ({type(exc).__name__}: {exc}); remove it or choose another --out"
        ) from exc
    if kind != FILE_SUITE:
        raise KerneloptError(
            f"{path} holds the results of a bench of model problems, not of kernel files; choose another --out"
        )
    return {"meta": meta, "outcomes": outcomes}


def _csv_text(outcomes: list[FileOutcome]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FILE_CSV_COLUMNS)
    for o in outcomes:
        q1, q3 = o.speedup_iqr or (None, None)
        row = {**o.to_dict(), "speedup_q1": q1, "speedup_q3": q3, "operators": ",".join(o.operators)}
        writer.writerow(["" if row[c] is None else _cell_text(row[c]) for c in FILE_CSV_COLUMNS])
    return buffer.getvalue()


def _cell_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:.6g}" if isinstance(value, float) else str(value)
