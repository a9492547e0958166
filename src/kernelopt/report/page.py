"""The HTML skeleton every report shares: one self-contained file, safe with untrusted text.

Self-contained: plotly.js is inlined from the installed plotly package and the
styles are inline, so the file opens offline and can be mailed or committed as
it is. Each chart is an empty ``<div class="chart">`` plus its figure as JSON in
a ``<script type="application/json">`` block; a small script draws them all and
marks ``<body data-charts="rendered">`` when every one is drawn (or ``failed``),
which is what the browser test waits for.

Safe: kernel sources, notes, LLM prompts and responses are untrusted text. Every
value put into markup goes through :func:`esc` (HTML-escaped, quotes included);
every JSON block goes through :func:`script_json`, which escapes ``<``, ``>``,
``&`` and the two JavaScript line separators, so no string can close its
``<script>`` element; and the click panel fills itself with ``textContent``,
never ``innerHTML``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

import plotly.graph_objects as go

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def esc(value: object) -> str:
    """``value`` as text inside HTML markup or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def script_json(value: Any) -> str:
    """``value`` as JSON that is inert inside a ``<script>`` element (``</script>`` cannot appear in it)."""
    text = value if isinstance(value, str) else json.dumps(value, allow_nan=False, sort_keys=True)
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def plotly_js() -> str:
    """The installed plotly.js bundle, made safe to inline (it holds no ``</script``; checked, not assumed)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().replace("</script", "<\\/script")


def chart(figure_id: str, caption: str = "") -> str:
    """The placeholder a figure is drawn into, with an optional caption below it."""
    note = f'<p class="caption">{esc(caption)}</p>' if caption else ""
    return (
        f'<figure><div class="chart" id="chart-{esc(figure_id)}" data-figure="{esc(figure_id)}"></div>{note}</figure>'
    )


def table(headers: Iterable[str], rows: Iterable[Iterable[object]], numeric: Iterable[int] = ()) -> str:
    """A plain table; every cell escaped. ``numeric``: column indexes aligned right."""
    right = set(numeric)
    names = list(headers)
    head = "".join(f"<th{' class=num' if i in right else ''}>{esc(h)}</th>" for i, h in enumerate(names))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=num' if i in right else ''}>{esc(c)}</td>" for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    thead = f"<thead><tr>{head}</tr></thead>" if any(names) else ""  # a key-value table needs no header row
    return f"<table>{thead}<tbody>{body}</tbody></table>"


def card(title: str, value: str, detail: str = "") -> str:
    return (
        f'<div class="card"><div class="card-title">{esc(title)}</div><div class="card-value">{esc(value)}</div>'
        f'<div class="card-detail">{esc(detail)}</div></div>'
    )


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{body}</section>'


def document(
    title: str,
    subtitle: str,
    sections: list[tuple[str, str, str]],
    figures: Mapping[str, go.Figure],
    records: Mapping[str, Any] | None = None,
) -> str:
    """The whole page: ``sections`` as (anchor, title, body HTML), each figure's JSON, the click records."""
    nav = "".join(f'<a href="#{esc(anchor)}">{esc(name)}</a>' for anchor, name, _ in sections)
    body = "".join(section(anchor, name, content) for anchor, name, content in sections)
    blobs = "".join(
        f'<script type="application/json" id="figure-{esc(key)}">{script_json(figure.to_json())}</script>'
        for key, figure in figures.items()
    )
    blobs += "".join(
        f'<script type="application/json" id="records-{esc(key)}">{script_json(value)}</script>'
        for key, value in (records or {}).items()
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style><script>{plotly_js()}</script></head>"
        f'<body data-charts="pending"><header><h1>{esc(title)}</h1><p class="sub">{esc(subtitle)}</p>'
        f"<nav>{nav}</nav></header><main>{body}</main>{blobs}<script>{BOOT}</script></body></html>\n"
    )


STYLE = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg: #f6f8fa; --ok: #1a7f37; --bad: #cf222e; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); }
header { padding: 20px 32px 8px; border-bottom: 1px solid var(--line); background: var(--bg); }
h1 { margin: 0; font-size: 22px; } h2 { font-size: 18px; margin: 28px 0 10px; } h3 { font-size: 15px; margin: 18px 0 6px; }
.sub { margin: 4px 0 10px; color: var(--muted); }
nav a { margin-right: 16px; color: #0969da; text-decoration: none; } nav a:hover { text-decoration: underline; }
main { padding: 0 32px 48px; max-width: 1400px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; min-width: 190px; background: #fff; }
.card-title { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card-value { font-size: 24px; font-weight: 600; } .card-detail { color: var(--muted); font-size: 12px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg); } td:last-child { min-width: 16em; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 8px 0 20px; } .chart { width: 100%; min-height: 200px; }
.caption, .note { color: var(--muted); font-size: 13px; margin: 4px 0 12px; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; overflow: auto;
      font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; word-break: break-word; }
.diff { white-space: pre; } .diff .add { background: #dafbe1; display: block; } .diff .del { background: #ffebe9; display: block; }
.diff .hunk { color: #8250df; display: block; } .diff .same { display: block; }
details { border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; padding: 4px 10px; }
summary { cursor: pointer; font-weight: 500; }
.record { border: 1px dashed var(--line); border-radius: 6px; padding: 8px 12px; margin: 4px 0 24px; min-height: 40px; }
.record dt { font-weight: 600; float: left; clear: left; width: 130px; } .record dd { margin: 0 0 4px 140px; }
.pass { color: var(--ok); font-weight: 600; } .fail { color: var(--bad); font-weight: 600; }
"""

BOOT = """
(function () {
  "use strict";
  function svgButton(name) {
    return {name: "Download as SVG", icon: Plotly.Icons.disk, click: function (gd) {
      Plotly.downloadImage(gd, {format: "svg", filename: name});
    }};
  }
  function text(tag, value, cls) {
    var el = document.createElement(tag);
    el.textContent = value === null || value === undefined ? "" : String(value);
    if (cls) { el.className = cls; }
    return el;
  }
  function showRecord(panel, r) {
    panel.replaceChildren();
    panel.appendChild(text("h3", "node #" + r.node + " (" + r.operator + ")"));
    var dl = document.createElement("dl");
    [["parent", r.parent], ["round", r.round], ["change", r.change], ["verdict", r.verdict],
     ["speedup", r.speedup === null ? "" : r.speedup.toFixed(3) + "x"], ["reason", r.reason],
     ["kernel time", r.kernel_time_us === null ? "" : r.kernel_time_us.toFixed(1) + " us"],
     ["worker", r.worker_status]].forEach(function (kv) {
      if (kv[1] === null || kv[1] === undefined || kv[1] === "") { return; }
      dl.appendChild(text("dt", kv[0])); dl.appendChild(text("dd", kv[1]));
    });
    panel.appendChild(dl);
    if (r.gates && r.gates.length) {
      var table = document.createElement("table");
      var head = document.createElement("tr");
      ["gate", "verdict", "reason"].forEach(function (h) { head.appendChild(text("th", h)); });
      table.appendChild(head);
      r.gates.forEach(function (g) {
        var row = document.createElement("tr");
        row.appendChild(text("td", g.gate));
        row.appendChild(text("td", g.passed ? "pass" : "FAIL", g.passed ? "pass" : "fail"));
        row.appendChild(text("td", g.reason));
        table.appendChild(row);
      });
      panel.appendChild(table);
    }
    [["launch config", r.config], ["Inductor options", r.options], ["plan", r.plan]].forEach(function (kv) {
      if (kv[1]) { panel.appendChild(text("h3", kv[0])); panel.appendChild(text("pre", JSON.stringify(kv[1], null, 2))); }
    });
  }
  var charts = Array.prototype.slice.call(document.querySelectorAll(".chart"));
  function draw(el) {
    var key = el.getAttribute("data-figure");
    var fig = JSON.parse(document.getElementById("figure-" + key).textContent);
    var config = {responsive: true, displaylogo: false, modeBarButtonsToAdd: [svgButton(key)],
                  toImageButtonOptions: {format: "png", filename: key, scale: 2}};
    return Plotly.newPlot(el, fig.data, fig.layout, config).then(function () {
      var blob = document.getElementById("records-" + key);
      var panel = document.getElementById("record-" + key);
      if (!blob || !panel) { return; }
      var records = JSON.parse(blob.textContent);
      el.on("plotly_click", function (event) {
        var point = event && event.points && event.points[0];
        var record = point ? records[String(point.customdata)] : undefined;
        if (record) { showRecord(panel, record); }
      });
    });
  }
  var drawn = charts.map(function (el) {
    try { return draw(el); } catch (error) { return Promise.reject(error); }  // one bad chart, the others still drawn
  });
  Promise.all(drawn).then(function () {
    document.body.setAttribute("data-charts", "rendered");
  }, function (error) {
    document.body.setAttribute("data-charts", "failed");
    console.error("a chart could not be drawn:", error);
  });
})();
"""
