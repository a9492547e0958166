"""The page of one bench: the suite summary, fast_p over p, the speedup distribution against each
baseline, every problem's row and the failures with their reasons.

Only layout and wording live here: the numbers come from :mod:`kernelopt.report.bench_data`
(the scoreboard's own arithmetic), the charts from :mod:`kernelopt.report.figures`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from kernelopt.problem.loader import size_flags
from kernelopt.report.bench_data import BenchData, ProblemBenchData
from kernelopt.report.metrics import BASELINE_LABELS, BASELINES
from kernelopt.report.page import card, chart, document, esc, table
from kernelopt.report.scoreboard import fmt_ms, fmt_ratio, fmt_ratio_spread, fmt_seconds, fmt_share, shown_names


def render_bench(data: ProblemBenchData, figures: Mapping[str, go.Figure]) -> str:
    """The whole page of ``data``'s bench, with ``figures`` (from :func:`~kernelopt.report.figures.bench_figures`)."""
    meta = data.meta
    sections = [
        ("summary", "Summary", _summary(data)),
        ("charts", "Speedups", "".join(chart(key, _CAPTIONS.get(key, "")) for key in figures)),
        ("problems", "Per problem", _problems(data)),
    ]
    failed = [o for o in data.outcomes if o.status != "ok"]
    if failed:
        sections.append(
            (
                "failures",
                "Failures",
                table(("problem", "status", "reason"), [(o.name, o.status, o.reason) for o in failed]),
            )
        )
    sections.append(("provenance", "Provenance", _provenance(data)))
    subtitle = (
        f"{len(data.outcomes)} problems · {meta.get('device') or 'unknown device'} · "
        f"started {meta.get('started') or '—'}, finished {meta.get('finished') or '(not finished)'}"
    )
    return document(f"kernelopt bench: {data.suite}", subtitle, sections, figures)


# the summary's lists of rows to read with care: (its key, the card's title, what its rows are)
ROWS_TO_READ_WITH_CARE = (
    (
        "cold_host_rows",
        "timed with the host read cold",
        "rows from before the judge read a forward's host time in a loop",
    ),
    ("python_host_rows", "own op through Python", "rows delivered with a kernelopt op on its Python host path"),
)

_CAPTIONS = {
    "fast-p": "KernelBench's fast_p: the share of all problems (failed ones included) that are correct with a "
    "speedup strictly above p.",
    "speedups": "Each point is one correct problem; the box spans its quartiles. The max-autotune speedup is timed "
    "interleaved in max-autotune's own process where that worked, else the ratio of two processes' medians.",
    "per-problem": "Horizontal bars: the interquartile range of a speedup timed interleaved in one process "
    "(vs torch.compile: the final verification).",
}


def _summary(data: ProblemBenchData) -> str:
    s = data.summary
    cards = [
        card(
            "problems",
            str(s["problems"]),
            f"{s['correct']} correct" + (f"; {len(s['not_run'])} of the suite not run yet" if s.get("not_run") else ""),
        ),
        *(
            card(f"geomean vs {BASELINE_LABELS[b]}", fmt_ratio(s["geomean_speedup"][b]) or "—", "over correct problems")
            for b in BASELINES
        ),
        *(
            [
                card(
                    "vs the best stock mode, searchable problems",
                    fmt_ratio(t["geomean_searchable"]) or "—",
                    f"{len(t['searchable'])} with Triton ≥ {100 * t['min_triton_share']:.0f} % of the time; "
                    f"below {t['below_threshold']:.2f}×: {', '.join(t['below']) or 'none'}",
                )
            ]
            if (t := s.get("against_best_stock"))
            else []
        ),
        *(
            card(title, str(len(names)), f"{what}: {shown_names(names)}")
            for key, title, what in ROWS_TO_READ_WITH_CARE
            if (names := s.get(key))
        ),
        card(
            "slower than torch.compile",
            str(len(s["slower_than_baseline"])),
            ", ".join(s["slower_than_baseline"]) or "beyond 1 %: none",
        ),
        card(
            "evaluations",
            str(s["evaluations"]),
            f"{s['gpu_s']:.0f} s of GPU"
            + (f", {s['evaluations_per_gpu_minute']:.0f} per GPU-minute" if s["evaluations_per_gpu_minute"] else ""),
        ),
    ]
    thresholds = list(s["fast_p"]["compile"])
    rows = [
        (BASELINE_LABELS[b], *(fmt_share(v) for v in s["fast_p"][b].values()), fmt_ratio(s["geomean_speedup"][b]))
        for b in BASELINES
    ]
    counts = ", ".join(f"{status} {n}" for status, n in s["status_counts"].items() if n)
    return (
        f'<div class="cards">{"".join(cards)}</div>'
        + table(
            ("baseline", *(f"fast_{t}" for t in thresholds), "geomean speedup"),
            rows,
            numeric=range(1, len(thresholds) + 2),
        )
        + f'<p class="note">Problems by status: {esc(counts or "none")}. fast_p counts every problem; geometric '
        "means are over the correct ones.</p>"
    )


def _problems(data: ProblemBenchData) -> str:
    rows = [
        (
            o.name,
            o.status,
            "yes" if o.correct else "no",
            fmt_ms(o.eager_ms, "—"),
            fmt_ms(o.compiled_ms, "—"),
            fmt_ms(o.max_autotune_ms, "—"),
            fmt_ms(o.optimized_ms, "—"),
            fmt_ratio(o.speedup_vs_eager) or "—",
            fmt_ratio_spread(o.speedup_vs_compile, o.speedup_spread("compile")) or "—",
            fmt_ratio_spread(o.speedup_vs_max_autotune, o.speedup_spread("max_autotune")) or "—",
            o.best_stock_mode or "—",
            fmt_ratio_spread(o.speedup_vs_best_stock, o.speedup_spread("best_stock")) or "—",
            o.base_mode,
            fmt_share(o.of_floor, "—"),
            o.evaluations,
            fmt_seconds(o.worker_s, "—"),
            o.details.get("run_id", "—"),
            o.reason,
        )
        for o in data.outcomes
    ]
    headers = (
        "problem",
        "status",
        "correct",
        "eager ms",
        "compile ms",
        "max-autotune ms",
        "optimized ms",
        "vs eager",
        "vs compile",
        "vs max-autotune",
        "best stock mode",
        "vs best stock",
        "built on",
        "of floor",
        "evaluations",
        "wall s",
        "run",
        "outcome",
    )
    return table(headers, rows, numeric=(*range(3, 12), 13, 14, 15)) + (
        '<p class="note">Times are medians in ms. <em>built on</em>: the stock mode the search started from '
        "(where it is not the default, <em>vs compile</em> was timed in the default's own process). <em>of floor</em>: "
        "the traffic floor's time over the optimized time (100 %: nothing left for any kernel or fusion; — where "
        "vendor calls run). <em>wall s</em>: the seconds the problem's worker ran (compiles, every stock mode, the search; "
        "what a slot of GPU time is planned with). <em>run</em>: "
        "the problem's optimize run in the bench's store (kernelopt report RUN --store STORE shows its search).</p>"
    )


def _provenance(data: ProblemBenchData) -> str:
    merged = data.meta.get("merged_from") or []
    note = f'<p class="note">Merged from {len(merged)} results folders.</p>' if merged else ""
    return provenance(data, "suite", "time limit per kernel", "each problem file's own", note)


def provenance(data: BenchData[Any], folder: str, limit: str, sizes: str, note: str = "") -> str:
    """A bench page's provenance: what ran where (``folder``: what the suite is called, ``limit``: what its
    time limit bounds, ``sizes``: what no ``--size`` means), with what versions, and its commands."""
    meta = data.meta
    versions = meta.get("versions") or {}
    rows = [
        (folder, data.suite),
        ("results", str(data.source)),
        ("device", meta.get("device") or "unknown"),
        (limit, "—" if meta.get("time_limit_s") is None else f"{meta['time_limit_s']:g} s"),
        ("worker time-out", "—" if meta.get("worker_timeout_s") is None else f"{meta['worker_timeout_s']:g} s"),
        ("sizes", size_flags(meta["sizes"]) if meta.get("sizes") else sizes),
    ]
    rows += [(f"version: {name}", str(value)) for name, value in sorted(versions.items()) if value is not None]
    commands = "<pre>" + esc("\n".join(data.commands)) + "</pre>"
    return table(("", ""), rows) + note + "<h3>Commands</h3>" + commands
