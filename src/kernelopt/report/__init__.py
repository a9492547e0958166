"""The ``report`` layer: one self-contained HTML page per run or bench, to look at rather than read.

Below ``pipeline``, which calls it at the end of ``optimize`` and ``bench``: it reads
what runs recorded (the store, a bench's results.json) and holds the scoreboard
itself, its arithmetic (:mod:`kernelopt.report.metrics`), its Markdown and console
formats (:mod:`kernelopt.report.scoreboard`) and a results folder's names; it imports
no pipeline stage. Gathering
(``run_data``, ``bench_data``) is apart from drawing (``figures``, one module for the
page and the SVG/PNG export) and from markup (``page``, ``run_page``, ``bench_page``).
Plotly is imported only when a report is written.
"""

from __future__ import annotations

from kernelopt.report.write import (
    BENCH_REPORT,
    default_run_report_path,
    report_beside,
    try_write,
    write_bench_report,
    write_run_report,
)

__all__ = [
    "BENCH_REPORT",
    "default_run_report_path",
    "report_beside",
    "try_write",
    "write_bench_report",
    "write_run_report",
]
