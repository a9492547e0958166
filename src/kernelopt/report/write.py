"""Writing a report file: for a run in the store or for a bench's results, and the run's safe variant.

``optimize`` and ``bench`` write their report at the end by default; a report is
a view of results that are already safe on disk, so a failure to render it must
not fail the run. :func:`try_write` turns any error into one line for the run to
print, instead of a traceback or silence. The file is written beside its target
and renamed over it, so a reader never opens half a page.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from kernelopt.store import Store

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from kernelopt.report.bench_data import FileBenchData, ProblemBenchData

BENCH_REPORT = "report.html"  # beside results.json in a bench's results folder


def write_run_report(store: Store, run_id: int, path: str | Path) -> Path:
    """Render run ``run_id`` of ``store`` to ``path``; the written path."""
    from kernelopt.report.figures import run_figures
    from kernelopt.report.run_data import load_run
    from kernelopt.report.run_page import render_run

    data = load_run(store, run_id)
    return _atomic_write(Path(path), render_run(data, run_figures(data)))


def write_bench_report(results: str | Path, path: str | Path | None = None) -> Path:
    """Render the bench results at ``results`` (a folder or its results.json, of model problems or of
    kernel files) to ``path`` (default: ``report.html`` beside the results); the written path."""
    source, figures, render = bench_view(results)
    target = Path(path) if path is not None else source.parent / BENCH_REPORT
    return _atomic_write(target, render(figures))


def bench_view(results: str | Path) -> tuple[Path, dict[str, go.Figure], Callable[[dict[str, go.Figure]], str]]:
    """The bench results at ``results`` read by their kind (model problems or kernel files): the results
    file read, its charts, and the page of them given the charts."""
    from kernelopt.report.bench_data import load_any_bench
    from kernelopt.report.bench_page import render_bench
    from kernelopt.report.figures import bench_figures, file_bench_figures
    from kernelopt.report.file_bench_page import render_file_bench
    from kernelopt.report.results_folder import FILE_SUITE

    data = load_any_bench(results)
    if data.meta.get("input") == FILE_SUITE:
        files = cast("FileBenchData", data)
        return files.source, file_bench_figures(files), lambda figures: render_file_bench(files, figures)
    problems = cast("ProblemBenchData", data)
    return problems.source, bench_figures(problems), lambda figures: render_bench(problems, figures)


def default_run_report_path(run_id: int) -> Path:
    """Where ``kernelopt report RUN`` writes without ``-o``: the current directory."""
    return Path(f"kernelopt-run-{run_id}.html")


def report_beside(export_path: str | Path) -> Path:
    """The report of an optimize run beside its exported model: ``x.kopt.json`` → ``x.report.html``."""
    path = Path(export_path)
    stem = path.name.removesuffix(".kopt.json").removesuffix(".json")
    return path.with_name(f"{stem}.report.html")


def try_write(write: Callable[[], Path], what: str, retry: str) -> tuple[Path | None, str | None]:
    """Run ``write``; ``(path, None)``, or ``(None, one line)`` naming ``what`` failed, why and ``retry``.

    Catches every :class:`Exception` (not interrupts): whatever broke in the rendering, the
    run's own results are already written and must stand."""
    try:
        return write(), None
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "no message"
        install = "pip install plotly, then " if isinstance(exc, ImportError) else ""
        return (
            None,
            f"the HTML report of {what} could not be written ({type(exc).__name__}: {reason}); {install}{retry}",
        )


def _atomic_write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.chmod(temporary, 0o644)  # a page to share, not mkstemp's owner-only file
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
