"""Regenerate the example reports under docs/reports and their screenshots (needs chromium on PATH).

    python scripts/report_docs.py

The bench report is the real H200 suite (benchmarks/h200-2026-11-30-suite); the H200 optimize
report is run 1 of benchmarks/h200-2026-12-01-optimize-row-l2 (its store, committed). The
optimize-cpu-fixture page comes from the CPU store fixture of the tests (tests/report_runs.py:
the public optimize() with a scripted worker and a scripted LLM server, made-up numbers) and
shows what only an agent run has (plans, transcripts, cost); its device line says so.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from headless import Browser, find_chromium  # noqa: E402
from report_runs import record_runs  # noqa: E402

from kernelopt.report import write_bench_report, write_run_report  # noqa: E402
from kernelopt.store import Store  # noqa: E402

OUT = ROOT / "docs" / "reports"
BENCH = ROOT / "benchmarks" / "h200-2026-11-30-suite"
H200_OPTIMIZE = ROOT / "benchmarks" / "h200-2026-12-01-optimize-row-l2" / "kernelopt.db"
SHOTS = {  # page → (screenshot name, the element shown; None: the top of the page)
    "optimize-cpu-fixture.html": [
        ("optimize-top.png", None),
        ("optimize-time.png", "#time"),
        ("optimize-search.png", "#search"),
    ],
    "bench-h200-2026-11-30-suite.html": [("bench-top.png", None), ("bench-charts.png", "#charts")],
    "optimize-h200-row-l2.html": [("optimize-h200-top.png", None), ("optimize-h200-search.png", "#search")],
}

CLICK_WINNER = """(() => { const gd = document.getElementById('chart-search-1');
  const star = gd.data.find(t => t.name === 'delivered');
  gd.emit('plotly_click', {points: [{customdata: star.customdata[0]}]}); })()"""


def main() -> None:
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no chromium on PATH: apt-get install chromium")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        runs = record_runs(Path(tmp))
        shutil.copyfile(runs.agent_report, OUT / "optimize-cpu-fixture.html")
    write_bench_report(BENCH, OUT / "bench-h200-2026-11-30-suite.html")
    write_run_report(Store(H200_OPTIMIZE), 1, OUT / "optimize-h200-row-l2.html")
    with Browser(chromium, width=1280, height=1000) as browser:
        for page, shots in SHOTS.items():
            browser.open(OUT / page)
            if (
                browser.wait_for("document.body.dataset.charts !== 'pending' && document.body.dataset.charts")
                != "rendered"
            ):
                raise SystemExit(f"{page}: a chart failed to draw: {browser.log.errors}")
            for name, selector in shots:
                if selector == "#search":  # show a gate record, as a click on the delivered node does
                    browser.evaluate(CLICK_WINNER)
                print(browser.screenshot(OUT / name, selector=selector))
        if browser.log.errors:
            raise SystemExit(f"console errors: {browser.log.errors}")


if __name__ == "__main__":
    main()
