"""``kernelopt report``: the HTML page of a run in the store or of a bench's results; the work is
:mod:`kernelopt.report`."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kernelopt.cli.common import STORE_OPTION, app, out, user_errors
from kernelopt.errors import KerneloptError

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from kernelopt.store import Store


@app.command("report")
@user_errors
def report(
    run: str = typer.Argument(
        ..., help="An optimize or analyze run id (see kernelopt runs), or a bench results folder (or its results.json)."
    ),
    output: Path | None = typer.Option(
        None,
        "-o",
        "--output",
        help="Where to write the page (default: kernelopt-run-RUN.html here; report.html beside a bench's results).",
    ),
    open_it: bool = typer.Option(False, "--open", help="Open the page in the default browser."),
    figures: Path | None = typer.Option(
        None, "--figures", help="Also write every chart to this folder as an image (needs the images extra)."
    ),
    fmt: str = typer.Option("svg", "--format", help="Image format of --figures: svg or png."),
    store: Path | None = STORE_OPTION,
) -> None:
    """One self-contained HTML page (opens offline): summary, time breakdown, roofline, search graphs, diffs,
    agent transcripts; for a bench the scoreboard, fast_p over p and the speedup distributions."""
    from kernelopt.report import default_run_report_path, write_bench_report, write_run_report
    from kernelopt.report.export import FORMATS
    from kernelopt.store import Store

    if figures is not None and fmt not in FORMATS:
        raise KerneloptError(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    if run.isdigit() and not Path(run).exists():  # a results folder named like a number is still a folder
        with Store(store, read_only=True) as db:  # a report reads; it never creates or migrates a store
            written = write_run_report(db, int(run), output or default_run_report_path(int(run)))
            charts = _run_charts(db, int(run)) if figures is not None else None
    else:
        written = write_bench_report(run, output)
        charts = _bench_charts(run) if figures is not None else None
    out.print(f"report: {written}", markup=False, highlight=False)
    if figures is not None and charts is not None:
        from kernelopt.report.export import export_figures

        for path in export_figures(charts, figures, fmt):
            out.print(f"figure: {path}", markup=False, highlight=False)
    if open_it and not webbrowser.open(written.resolve().as_uri()):
        raise KerneloptError(f"no browser could be started here; open {written} yourself")


def _run_charts(db: Store, run_id: int) -> dict[str, go.Figure]:
    from kernelopt.report.figures import run_figures
    from kernelopt.report.run_data import load_run

    return run_figures(load_run(db, run_id))


def _bench_charts(results: str) -> dict[str, go.Figure]:
    from kernelopt.report.write import bench_view

    return bench_view(results)[1]
