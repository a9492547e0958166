"""A bench's results folder: ``results.json``, ``results.csv`` and ``results.md``, and their merge.

One document (the run's ``meta``, every problem's outcome, the summary) is the
truth; the CSV and the Markdown are written from it each time, never edited. Each
file is replaced atomically (written beside, then renamed), so a bench killed at
any moment leaves the last finished problem's results whole and can resume from
them; :func:`merge_results` joins the folders of benches that split one suite.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.errors import KerneloptError
from kernelopt.problem.loader import size_flags
from kernelopt.report import try_write, write_bench_report
from kernelopt.report.metrics import ProblemOutcome, not_run, rescored, summarize
from kernelopt.report.results_folder import FILE_SUITE, RESULTS_CSV, RESULTS_JSON, RESULTS_MD
from kernelopt.report.scoreboard import markdown_report

CSV_COLUMNS = (
    "name",
    "status",
    "correct",
    "eager_ms",
    "compiled_ms",
    "max_autotune_ms",
    "optimized_ms",
    "speedup_vs_eager",
    "speedup_vs_compile",
    "speedup_vs_max_autotune",
    "best_stock_mode",
    "best_stock_ms",
    "speedup_vs_best_stock",
    "base_mode",
    "triton_share",
    "floor_ms",
    "evaluations",
    "worker_s",
    "reason",
)


@dataclass
class BenchReport:
    """The scoreboard: one outcome per problem, the summary and where it was written."""

    suite: Path
    results_dir: Path
    outcomes: list[ProblemOutcome]
    summary: dict[str, Any]
    meta: dict[str, Any]
    resumed: list[str] = field(default_factory=list)  # names taken from an earlier run, not re-run
    report_path: Path | None = None  # the HTML report beside the results (kernelopt.report), once written
    report_error: str | None = None  # one line when it could not be written; the results stand

    @property
    def json_path(self) -> Path:
        return self.results_dir / RESULTS_JSON

    @property
    def csv_path(self) -> Path:
        return self.results_dir / RESULTS_CSV

    @property
    def markdown_path(self) -> Path:
        return self.results_dir / RESULTS_MD

    def to_dict(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "outcomes": [o.to_dict() for o in self.outcomes],
            "summary": self.summary,
            "resumed": list(self.resumed),
            "files": {
                "json": str(self.json_path),
                "csv": str(self.csv_path),
                "markdown": str(self.markdown_path),
                "report": str(self.report_path) if self.report_path else None,
            },
            "report_error": self.report_error,
        }

    def write_report(self) -> None:
        """The HTML report beside the results; a failure to render is kept as one line, not raised."""
        path, self.report_error = try_write(
            lambda: write_bench_report(self.json_path),
            f"the bench in {self.results_dir}",
            f"try again with kernelopt report {self.results_dir}",
        )
        self.report_path = path


def merge_results(result_dirs: Sequence[str | Path], out_dir: str | Path, write_report: bool = True) -> BenchReport:
    """Join the results of several benches of one suite (shards, or machines) into ``out_dir``
    (with its HTML report, unless ``write_report`` is False).

    A problem found in several keeps its ``ok`` outcome over a failed one, else the last
    one given. Raises :class:`KerneloptError` for a missing results file, a different suite,
    different ``--size`` overrides or rows measured on different GPUs.
    """
    if not result_dirs:
        raise KerneloptError("nothing to merge: name at least one results directory")
    documents = []
    for directory in result_dirs:
        path = Path(directory) / RESULTS_JSON
        if not path.exists():
            raise KerneloptError(f"{path} does not exist: run kernelopt bench with --out {directory} first")
        documents.append(read_results(path))
    suites = {Path(d["meta"]["suite"]).name for d in documents}
    if len(suites) > 1:
        raise KerneloptError(
            f"these results are of different suites ({', '.join(sorted(suites))}); merge one suite at a time"
        )
    sizes = {size_flags(d["meta"].get("sizes")) for d in documents}
    if len(sizes) > 1:  # one scoreboard, one problem size: numbers at other sizes do not add up
        raise KerneloptError(
            f"these results were made at different sizes ({'; '.join(sorted(sizes))}); merge benches run with the same --size"
        )
    devices = {o.details["device"] for d in documents for o in d["outcomes"] if o.details.get("device")}
    if len(devices) > 1:  # one scoreboard, one GPU: a geomean over two GPUs' speedups says nothing of either
        raise KerneloptError(
            f"these results were measured on different GPUs ({'; '.join(sorted(devices))}); merge benches run on "
            "one GPU model"
        )
    outcomes: dict[str, ProblemOutcome] = {}
    for document in documents:
        for outcome in document["outcomes"]:
            kept = outcomes.get(outcome.name)
            if kept is None or kept.status != "ok" or outcome.status == "ok":
                outcomes[outcome.name] = outcome
    ordered = sorted(outcomes.values(), key=lambda o: o.name)
    meta = dict(documents[0]["meta"])
    # Each part keeps its own command and resumes in merged_from; the merge itself has been resumed by nothing yet.
    meta.update(
        merged_from=[{"dir": str(d), "meta": doc["meta"]} for d, doc in zip(result_dirs, documents)],
        shard=None,
        resumed=[],
    )
    meta["finished"] = max((doc["meta"].get("finished") or "" for doc in documents), default=None) or None
    listed = [set(doc["meta"]["suite_problems"]) for doc in documents if "suite_problems" in doc["meta"]]
    if listed:
        meta["suite_problems"] = sorted(set().union(*listed))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = write_results(out, meta, ordered)
    report = BenchReport(Path(meta["suite"]), out, ordered, summary, meta)
    if write_report:
        report.write_report()
    return report


def read_results(path: Path) -> dict[str, Any]:
    """A results.json as ``{"meta", "outcomes"}``, each row as the current scoring reads it
    (:func:`~kernelopt.report.metrics.rescored`); a file that does not parse is a one-line error."""
    try:
        data = json.loads(path.read_text())
        outcomes = [rescored(ProblemOutcome.from_dict(item)) for item in data["outcomes"]]
        meta = data["meta"]
        meta["suite"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KerneloptError(
            f"{path} cannot be resumed ({type(exc).__name__}: {exc}); remove it or choose another --out"
        ) from exc
    if meta.get("input") == FILE_SUITE:  # its rows are scored against each file's original, not torch.compile
        raise KerneloptError(
            f"{path} holds the results of a bench of kernel files, not of model problems; a bench of model "
            "problems and bench-merge read only those: choose another folder"
        )
    return {"meta": meta, "outcomes": outcomes}


def write_results(out_dir: Path, meta: dict[str, Any], outcomes: list[ProblemOutcome]) -> dict[str, Any]:
    summary = summarize(outcomes)
    summary["not_run"] = not_run(meta, outcomes)
    document = {"meta": meta, "outcomes": [o.to_dict() for o in outcomes], "summary": summary}
    atomic_write(out_dir / RESULTS_JSON, json.dumps(document, indent=2, allow_nan=False) + "\n")
    atomic_write(out_dir / RESULTS_CSV, _csv_text(outcomes))
    atomic_write(out_dir / RESULTS_MD, markdown_report(meta, outcomes, summary))
    return summary


def _csv_text(outcomes: list[ProblemOutcome]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for o in outcomes:
        row = o.to_dict()
        writer.writerow([_csv_cell(row[column]) for column in CSV_COLUMNS])
    return buffer.getvalue()


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def atomic_write(path: Path, text: str) -> None:
    """Write beside the target and rename over it: a reader or a kill never sees half a file."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
