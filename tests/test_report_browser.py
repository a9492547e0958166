"""End to end: reports opened in a headless Chromium (Debian's ``chromium``; ``.ci/run`` installs it).

Each page must draw every chart (each chart container holds Plotly's rendered
``svg.main-svg``), say nothing on the console, throw nothing, open no dialog,
request nothing beyond its own file (it is self-contained), and show text; a
screenshot of each is saved. A click on a search node must fill the gate-record
panel with the node's verdicts, untrusted text included, as text.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from headless import Browser, PageLog, find_chromium
from report_runs import INJECTION, RecordedRuns, record_runs

from kernelopt.report import write_bench_report

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (apt-get install chromium; .ci/run installs it)"
)
H200_SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "h200-2026-11-30-suite"
CHARTS = """Array.from(document.querySelectorAll('.chart')).map(el => ({
  id: el.id, drawn: el.querySelector('svg.main-svg') !== null, traces: (el.data || []).length,
  height: el.getBoundingClientRect().height}))"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> RecordedRuns:
    return record_runs(tmp_path_factory.mktemp("recorded"))


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM is not None
    with Browser(CHROMIUM, width=1280, height=1000) as b:
        yield b


def _open(browser: Browser, page: Path) -> list[dict]:
    """Open ``page``, wait until its charts are drawn, and return each chart's state."""
    browser.log = PageLog()
    browser.open(page)
    state = browser.wait_for("document.body.dataset.charts !== 'pending' && document.body.dataset.charts")
    charts = browser.evaluate(CHARTS)
    assert state == "rendered", (state, browser.log.errors)
    return charts


@pytest.mark.parametrize("which", ["search", "agent", "bench"])
def test_every_chart_renders_offline_without_a_console_error(
    which: str, recorded: RecordedRuns, browser: Browser, tmp_path: Path
) -> None:
    page = {
        "search": recorded.search_report,
        "agent": recorded.agent_report,
        "bench": write_bench_report(H200_SUITE, tmp_path / "bench.html"),
    }[which]
    charts = _open(browser, page)
    expected = page.read_text().count('<div class="chart"')
    assert expected >= 3 and len(charts) == expected
    missing = [c["id"] for c in charts if not c["drawn"] or not c["traces"] or c["height"] < 150]
    assert missing == [], charts  # every chart drawn, with data, at a readable size
    assert browser.log.errors == []
    assert browser.log.requests == [page.resolve().as_uri()]  # scripts and styles inlined: nothing else fetched
    assert len(browser.evaluate("document.body.innerText")) > 500  # not a blank page
    shot = browser.screenshot(tmp_path / f"{which}.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 30_000  # a blank page is ~5 kB


def test_a_click_on_a_node_shows_its_gate_record_as_text(recorded: RecordedRuns, browser: Browser) -> None:
    _open(browser, recorded.agent_report)
    scripts = browser.evaluate("document.scripts.length")
    failed = browser.evaluate(
        "(() => { const gd = document.getElementById('chart-search-1');"
        " const t = gd.data.find(t => t.name === 'failed: correctness gate');"
        " gd.emit('plotly_click', {points: [{customdata: t.customdata[0]}]});"
        " return t.customdata[0]; })()"
    )
    text = browser.evaluate("document.getElementById('record-search-1').innerText")
    assert f"node #{failed} (llm)" in text and "FAIL" in text and "correctness" in text
    assert INJECTION in text  # the gate's reason, shown whole and as text
    assert browser.evaluate("document.scripts.length") == scripts  # no element made of it
    assert "wide-row-warps" in text  # the plan the candidate implemented
    assert browser.log.errors == []


def test_the_checks_catch_a_missing_chart(recorded: RecordedRuns, browser: Browser, tmp_path: Path) -> None:
    """The same checks on pages with a damaged roofline figure: they must see it, or they prove nothing."""
    page = recorded.search_report.read_text()
    marker = '<script type="application/json" id="figure-roofline">'
    start = page.index(marker) + len(marker)
    end = page.index("</script>", start)
    unreadable, empty = tmp_path / "unreadable.html", tmp_path / "empty.html"
    unreadable.write_text(page[:start] + '{"data": [' + page[end:])
    empty.write_text(page[:start] + '{"data": [], "layout": {}}' + page[end:])
    browser.log = PageLog()
    browser.open(unreadable)
    state = browser.wait_for("document.body.dataset.charts !== 'pending' && document.body.dataset.charts")
    assert state == "failed" and any("a chart could not be drawn" in e for e in browser.log.errors)
    drawn = {c["id"]: c["drawn"] for c in browser.evaluate(CHARTS)}
    assert not drawn["chart-roofline"] and drawn["chart-search-1"]  # the other charts still drawn
    assert {c["id"]: c["traces"] for c in _open(browser, empty)}["chart-roofline"] == 0
