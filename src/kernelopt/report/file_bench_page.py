"""The page of one bench over kernel files: the summary, each file's verified speedup over its own
original, its row, what was not benched and the failures with their reasons.

A file's baseline is the file itself, not a ``torch.compile`` mode, so this page has none of the model
bench's columns (:mod:`kernelopt.report.bench_page`); only layout and wording live here, the numbers
are :mod:`kernelopt.report.file_scoreboard`'s and the chart :mod:`kernelopt.report.figures`'.
"""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

from kernelopt.report.bench_data import FileBenchData
from kernelopt.report.bench_page import provenance
from kernelopt.report.file_scoreboard import speedup_text
from kernelopt.report.page import card, chart, document, table
from kernelopt.report.scoreboard import fmt_ratio, fmt_seconds


def render_file_bench(data: FileBenchData, figures: Mapping[str, go.Figure]) -> str:
    """The whole page of ``data``'s bench, with ``figures`` (from :func:`~kernelopt.report.figures.file_bench_figures`)."""
    meta = data.meta
    sections = [("summary", "Summary", _summary(data))]
    if figures:
        sections.append(("charts", "Speedups", "".join(chart(key, _CAPTION) for key in figures)))
    sections.append(("files", "Per file", _files(data)))
    skipped = data.summary.get("skipped") or []
    if skipped:
        rows = [(s["name"], s["kind"], s["reason"]) for s in skipped]
        sections.append(("not-benched", "Not benched", table(("file", "kind", "why"), rows)))
    failed = [o for o in data.outcomes if o.status != "ok"]
    if failed:
        rows = [(o.name, o.status, o.reason) for o in failed]
        sections.append(("failures", "Failures", table(("file", "status", "reason"), rows)))
    sections.append(("provenance", "Provenance", _provenance(data)))
    subtitle = (
        f"{len(data.outcomes)} kernel files · {meta.get('device') or 'unknown device'} · "
        f"started {meta.get('started') or '—'}, finished {meta.get('finished') or '(not finished)'}"
    )
    return document(f"kernelopt bench (kernel files): {data.suite}", subtitle, sections, figures)


_CAPTION = (
    "Each delivered file's verified speedup over its original (the final check's, timed interleaved in one "
    "process; bars: its interquartile range); a file whose original stays is drawn at 1.0."
)


def _summary(data: FileBenchData) -> str:
    s = data.summary
    counts = ", ".join(f"{status} {n}" for status, n in s["status_counts"].items() if n) or "none"
    cards = [
        card("files", str(s["files"]), counts),
        card("delivered", str(s["delivered"]), "a verified faster file, with its record"),
        card("geomean speedup", fmt_ratio(s["geomean_speedup"]) or "—", "over the originals; 1.0 where one stays"),
        card("evaluations", str(s["evaluations"]), f"{s['gpu_s']:.0f} s of GPU"),
    ]
    return (
        f'<div class="cards">{"".join(cards)}</div>'
        '<p class="note">Each file ran as <code>kernelopt optimize FILE</code> does; its baseline is the file '
        "itself, timed where no candidate ever loads, not a torch.compile mode.</p>"
    )


def _files(data: FileBenchData) -> str:
    rows = [
        (
            o.name,
            o.kind,
            o.status,
            speedup_text(o) or "—",
            "—" if o.original_us is None else f"{o.original_us:.1f}",
            "—" if o.optimized_us is None else f"{o.optimized_us:.1f}",
            ", ".join(o.operators) or "—",
            o.evaluations,
            fmt_seconds(o.worker_s, "—"),
            o.run_id if o.run_id is not None else "—",
            o.exported or "—",
            o.reason,
        )
        for o in data.outcomes
    ]
    headers = (
        "file",
        "kind",
        "status",
        "speedup over the original",
        "original µs",
        "optimized µs",
        "operators",
        "evaluations",
        "wall s",
        "run",
        "delivered file",
        "outcome",
    )
    return table(headers, rows, numeric=(*range(3, 6), 7, 8)) + (
        "<p class=\"note\"><em>wall s</em>: the seconds the file's worker ran. <em>run</em>: the file's optimize "
        "run in the bench's store (kernelopt report RUN --store "
        "STORE shows its search).</p>"
    )


def _provenance(data: FileBenchData) -> str:
    return provenance(data, "folder", "time limit per file", "each file's own")
