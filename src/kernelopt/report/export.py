"""The report's figures as SVG or PNG files, for slides and papers.

Plotly draws static images through kaleido, which drives a Chrome or Chromium
of the machine; both are optional (the ``images`` extra), since the HTML page
itself needs neither and can download any chart as PNG or SVG from its toolbar.
A missing piece is one line saying what to install.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import plotly.graph_objects as go

from kernelopt.errors import KerneloptError

FORMATS = ("svg", "png")
EXPORT_WIDTH = 1100  # px: kaleido's default (700) cuts kernel names; each figure keeps its own height


def export_figures(figures: Mapping[str, go.Figure], out_dir: str | Path, fmt: str = "svg") -> list[Path]:
    """Write every figure to ``out_dir/<figure id>.<fmt>``; the paths written, in figure order."""
    if fmt not in FORMATS:
        raise KerneloptError(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    try:
        import kaleido  # noqa: F401  (plotly finds it itself; imported here to say plainly when it is missing)
    except ImportError:
        raise KerneloptError(
            f"exporting figures as {fmt.upper()} needs kaleido and a Chrome or Chromium: "
            "pip install 'kernelopt[images]' (and apt-get install chromium)"
        ) from None
    import plotly.io as pio

    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{key}.{fmt}" for key in figures]
    heights = [int(figure.layout.height or 500) for figure in figures.values()]
    try:
        if hasattr(pio, "write_images"):  # plotly >= 6.1: one browser for every figure
            pio.write_images(
                list(figures.values()), paths, format=fmt, width=[EXPORT_WIDTH] * len(paths), height=heights
            )
        else:
            for figure, path, height in zip(figures.values(), paths, heights):
                figure.write_image(path, format=fmt, width=EXPORT_WIDTH, height=height)
    except Exception as exc:  # kaleido's own errors: no browser found, a browser that died
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise KerneloptError(
            f"kaleido could not draw the figures ({type(exc).__name__}: {reason}); "
            "install chromium (apt-get install chromium) or point BROWSER_PATH at a Chrome"
        ) from exc
    return paths
