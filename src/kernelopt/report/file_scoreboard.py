"""The scoreboard of a bench over kernel files: one row per file, the summary and the Markdown page.

A kernel file's baseline is the file itself (its original kernel, timed where no candidate ever
loads), not a ``torch.compile`` mode, so its rows are not :class:`~kernelopt.report.metrics.ProblemOutcome`
rows: folding a file's speedup into a "vs torch.compile" column would print a number under the
wrong name. The results folder that holds them is :mod:`kernelopt.pipeline.bench_file_results`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelopt.measure.roofline import geometric_mean
from kernelopt.report.metrics import STATUSES, worker_seconds
from kernelopt.report.scoreboard import commands_of, fmt_ratio, fmt_seconds, markdown_header


@dataclass
class FileOutcome:
    """What benching one kernel file produced. ``speedup`` is the final check's verified speedup over
    the original and is set only where a faster file was ``delivered``; a file whose original stays
    has none (it counts as 1.0 in the geometric mean: the user keeps their own file)."""

    name: str
    path: str
    kind: str
    status: str
    reason: str
    delivered: bool = False
    speedup: float | None = None
    speedup_iqr: tuple[float, float] | None = None
    original_us: float | None = None
    optimized_us: float | None = None
    operators: list[str] = field(default_factory=list)
    evaluations: int = 0
    gpu_s: float = 0.0
    run_id: int | None = None
    exported: str | None = None
    record: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float | None:
        """The speedup the user gets: the delivery's, 1.0 where the original stays, None where it failed."""
        if self.status != "ok":
            return None
        return self.speedup if self.delivered and self.speedup else 1.0

    @property
    def worker_s(self) -> float | None:
        """Seconds the file's worker ran (:func:`~kernelopt.report.metrics.worker_seconds`)."""
        return worker_seconds(self.details)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["speedup_iqr"] = list(self.speedup_iqr) if self.speedup_iqr else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileOutcome:
        """Build and check an outcome a worker returned (or results.json holds); ValueError names the bad field,
        so a wrong type surfaces as the target's fault, not as a wrong number on the scoreboard."""
        if not isinstance(data, dict):
            raise ValueError(f"an outcome must be a dict, got {type(data).__name__}")
        missing = [key for key in ("name", "path", "kind", "status") if key not in data]
        if missing:
            raise ValueError(f"outcome lacks {', '.join(missing)}")
        if data["status"] not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {data['status']!r}")
        delivered = data.get("delivered", False)
        if not isinstance(delivered, bool):
            raise ValueError(f"delivered must be a bool, got {type(delivered).__name__}")
        speedup = _positive("speedup", data.get("speedup"))
        if delivered and speedup is None:
            raise ValueError("a delivered file needs its verified speedup")
        iqr = data.get("speedup_iqr")
        if iqr is not None:
            if not (isinstance(iqr, (list, tuple)) and len(iqr) == 2):
                raise ValueError(f"speedup_iqr must be two numbers or None, got {iqr!r}")
            iqr = (_positive("speedup_iqr", iqr[0]), _positive("speedup_iqr", iqr[1]))
        evaluations = data.get("evaluations", 0)
        if isinstance(evaluations, bool) or not isinstance(evaluations, int) or evaluations < 0:
            raise ValueError(f"evaluations must be a non-negative int, got {evaluations!r}")
        operators = data.get("operators") or []
        if not (isinstance(operators, list) and all(isinstance(o, str) for o in operators)):
            raise ValueError(f"operators must be a list of names, got {operators!r}")
        details = data.get("details") or {}
        if not isinstance(details, dict):
            raise ValueError(f"details must be a dict, got {type(details).__name__}")
        run_id = data.get("run_id")
        if run_id is not None and (isinstance(run_id, bool) or not isinstance(run_id, int)):
            raise ValueError(f"run_id must be an int or None, got {run_id!r}")
        return cls(
            name=str(data["name"]),
            path=str(data["path"]),
            kind=str(data["kind"]),
            status=data["status"],
            reason=str(data.get("reason", "")),
            delivered=delivered,
            speedup=speedup,
            speedup_iqr=iqr,  # type: ignore[arg-type]  # both checked positive above
            original_us=_positive("original_us", data.get("original_us")),
            optimized_us=_positive("optimized_us", data.get("optimized_us")),
            operators=list(operators),
            evaluations=evaluations,
            gpu_s=_positive("gpu_s", data.get("gpu_s") or None) or 0.0,
            run_id=run_id,
            exported=data.get("exported") and str(data["exported"]),
            record=data.get("record") and str(data["record"]),
            details=dict(details),
        )


def _positive(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number or None, got {value!r}")
    return float(value)


def summarize_files(outcomes: Sequence[FileOutcome], skipped: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
    """The suite's numbers: counts by status, deliveries, and the geometric mean of what users get
    (over the files that ran: a delivery's verified speedup, 1.0 where the original stays)."""
    counts = {status: 0 for status in STATUSES}
    for outcome in outcomes:
        counts[outcome.status] += 1
    scores = [s for s in (o.score for o in outcomes) if s is not None]
    gpu_s = math.fsum(o.gpu_s for o in outcomes)
    return {
        "files": len(outcomes),
        "status_counts": counts,
        "delivered": sum(1 for o in outcomes if o.delivered),
        "geomean_speedup": geometric_mean(scores) if scores else None,
        "evaluations": sum(o.evaluations for o in outcomes),
        "gpu_s": gpu_s,
        "skipped": list(skipped),
    }


def speedup_text(o: FileOutcome, digits: int = 3) -> str:
    """``1.139× (1.133–1.144)`` for a delivery, ``original kept`` where nothing passed, empty where it failed."""
    if o.status != "ok":
        return ""
    if not o.delivered:
        return "original kept"
    text = fmt_ratio(o.speedup, digits)
    return f"{text} ({o.speedup_iqr[0]:.{digits}f}–{o.speedup_iqr[1]:.{digits}f})" if o.speedup_iqr else text


def file_markdown(meta: dict[str, Any], outcomes: Sequence[FileOutcome], summary: dict[str, Any]) -> str:
    """The scoreboard as one Markdown document, from the same data as the JSON."""
    lines = markdown_header(meta, "kernelopt bench (kernel files)", "file")
    lines += [f"    {command}" for command in commands_of(meta)] + [""]
    counts = ", ".join(f"{s} {n}" for s, n in summary["status_counts"].items() if n) or "none"
    lines += [
        "## Summary",
        "",
        f"{summary['files']} files ({counts}); {summary['delivered']} delivered a verified faster file; "
        f"geomean speedup over the originals {fmt_ratio(summary['geomean_speedup']) or '—'} "
        "(1.0 where the original stays); "
        f"{summary['evaluations']} evaluations in {summary['gpu_s']:.0f} s of GPU.",
        "",
        "Each file ran as `kernelopt optimize FILE` does; its speedup is the final check's, timed interleaved "
        "against the original file in one process, with its interquartile range in brackets.",
        "",
        "## Per file",
        "",
        "| file | kind | status | speedup over the original | original µs | optimized µs | operators | evaluations "
        "| wall s | run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| {_md(o.name)} | {o.kind} | {o.status} | {speedup_text(o)} | {_us(o.original_us)} "
            f"| {_us(o.optimized_us)} | {', '.join(o.operators)} | {o.evaluations} | {fmt_seconds(o.worker_s)} "
            f"| {o.run_id or ''} |"
        )
    notes = [f"- {_md(o.name)}: {_md(_replaced_note(o.details['replaced']))}" for o in outcomes if _replaced(o)]
    if notes:
        lines += ["", "## Notes", "", *notes]
    skipped = summary.get("skipped") or []
    if skipped:
        lines += ["", "## Not benched", ""] + [f"- {_md(s['name'])} ({s['kind']}): {_md(s['reason'])}" for s in skipped]
    failed = [o for o in outcomes if o.status != "ok"]
    if failed:
        lines += ["", "## Failures", ""] + [f"- {_md(o.name)}: {o.status}: {_md(o.reason)}" for o in failed]
    return "\n".join(lines) + "\n"


def _replaced(o: FileOutcome) -> bool:
    return isinstance(o.details.get("replaced"), dict)


def _replaced_note(earlier: dict[str, Any]) -> str:
    """A rerun row's note: when it ran again and what the row it replaced said."""
    speedup = earlier.get("speedup")
    read = f", {speedup:.3f}x delivered" if earlier.get("delivered") and isinstance(speedup, (int, float)) else ""
    gone = f"; its delivery, not made again, removed: {', '.join(earlier['removed'])}" if earlier.get("removed") else ""
    return f"run again with --rerun at {earlier.get('replaced_at')}; the row it replaced: {earlier.get('status')}{read}{gone}"


def _us(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
