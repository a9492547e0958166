"""Every chart of a report, as Plotly figures: built once, shown in the page and exported as SVG or PNG.

One module builds them all, from the report's data records only, so the HTML
page and ``kernelopt report --figures`` (slides, papers) show the same figures.
A figure's key is its stable id: the chart's element id in the page and its
file name when exported.

Text in a Plotly label is a small HTML dialect (``<b>``, ``<br>``, links), so
every name that comes from a run (kernel names, notes, problem names) goes
through :func:`label`, which escapes it; Plotly turns the entities back into the
characters when it draws.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from kernelopt.report.bench_data import FileBenchData, ProblemBenchData
from kernelopt.report.metrics import BASELINE_LABELS, BASELINES, fast_p
from kernelopt.report.run_data import Launch, RunData, SearchTree
from kernelopt.report.tree_layout import tree_layout

TEMPLATE = "plotly_white"
KIND_ORDER = ("vendor", "aten", "cpp", "triton", "copy")  # copy: generated kernels that only move data
KIND_COLORS = {
    "vendor": "#4c78a8",
    "aten": "#72b7b2",
    "cpp": "#b279a2",
    "triton": "#f58518",
    "copy": "#e45756",
    "other": "#bab0ac",
}
OUTSIDE_KERNELS = "outside kernels"  # the compiled forward's time no launch accounts for (launch gaps, host)
VERDICT_COLORS = {
    "root": "#4c78a8",
    "passed": "#54a24b",
    "static": "#b279a2",
    "correctness": "#e45756",
    "model": "#f58518",
    "performance": "#eeca3b",
    "worker": "#9d755d",
    "pending": "#bab0ac",
}
OTHER_VERDICT_COLOR = "#7f7f7f"
WINNER_COLOR = "#d4a017"
BASELINE_COLORS = {"eager": "#72b7b2", "compile": "#4c78a8", "max_autotune": "#e45756", "best_stock": "#b279a2"}
TOP_KERNELS = 15  # the time-by-kernel chart names this many launches' kernels; the rest are summed


def label(text: object) -> str:
    """``text`` safe inside a Plotly label: its HTML dialect escaped."""
    return html.escape(str(text), quote=False)


def _layout(fig: go.Figure, title: str, height: int, **extra: object) -> go.Figure:
    settings: dict[str, object] = {
        "template": TEMPLATE,
        "title": {"text": label(title), "x": 0.01, "xanchor": "left"},
        "height": height,
        "margin": {"l": 60, "r": 30, "t": 60, "b": 50},
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13},
    }
    fig.update_layout(**{**settings, **extra})
    return fig


# -- an optimize (or analyze) run --------------------------------------------------------------


def run_figures(data: RunData) -> dict[str, go.Figure]:
    """The run's charts, in page order: time by launch kind, by kernel, the roofline, one search tree per target."""
    figures: dict[str, go.Figure] = {}
    if data.launches:
        figures["time-by-kind"] = time_by_kind(data)
        figures["time-by-kernel"] = time_by_kernel(data)
    if data.summary.peak_gbps and any(_moves_bytes(launch) for launch in data.launches):
        figures["roofline"] = roofline(data)
    for number, tree in enumerate(data.trees, start=1):
        figures[f"search-{number}"] = search_tree(tree)
    return figures


def _moves_bytes(launch: Launch) -> bool:
    return launch.kind == "triton" and bool(launch.bytes_moved) and launch.time_us > 0


def _columns(data: RunData) -> list[str]:
    after = "kernelopt (replaced kernels at their verified speedup)"
    return ["torch.compile (analysed)", after] if data.replaced else ["torch.compile (analysed)"]


def time_by_kind(data: RunData) -> go.Figure:
    """Stacked bars: the compiled forward's time per launch kind, before and after the replacements."""
    columns = _columns(data)
    before: dict[str, float] = defaultdict(float)
    after: dict[str, float] = defaultdict(float)
    for launch in data.launches:
        before[launch.shown_kind] += launch.time_us
        after[launch.shown_kind] += data.after_us(launch.name, launch.time_us)
    compiled_us = (data.summary.compiled_ms or 0.0) * 1000.0
    outside = max(0.0, compiled_us - sum(before.values()))
    kinds = [k for k in KIND_ORDER if k in before] + sorted(set(before) - set(KIND_ORDER))
    fig = go.Figure()
    for kind in kinds:
        values = [before[kind], after[kind]][: len(columns)]
        fig.add_trace(
            go.Bar(
                name=label(kind),
                y=columns,
                x=values,
                orientation="h",
                marker_color=KIND_COLORS.get(kind, KIND_COLORS["other"]),
                hovertemplate="%{y}<br>" + label(kind) + ": %{x:.1f} µs<extra></extra>",
            )
        )
    if outside > 0:
        fig.add_trace(
            go.Bar(
                name=OUTSIDE_KERNELS,
                y=columns,
                x=[outside] * len(columns),
                orientation="h",
                marker_color=KIND_COLORS["other"],
                hovertemplate="%{y}<br>outside kernels (launch gaps, host): %{x:.1f} µs<extra></extra>",
            )
        )
    return _layout(
        fig,
        "Compiled forward by launch kind (µs of GPU time per forward)",
        160 + 60 * len(columns),
        barmode="stack",
        xaxis_title="µs per forward",
        legend={"orientation": "h", "y": -0.35},
    )


def time_by_kernel(data: RunData) -> go.Figure:
    """Horizontal bars per kernel (summed over its launches), before and after, the largest first."""
    per_kernel: dict[tuple[str, str], float] = defaultdict(float)
    for launch in data.launches:
        per_kernel[(launch.shown_kind, launch.name)] += launch.time_us
    ranked = sorted(per_kernel.items(), key=lambda item: item[1], reverse=True)
    shown, rest = ranked[:TOP_KERNELS], ranked[TOP_KERNELS:]
    names = [label(f"[{kind}] {name}") for (kind, name), _ in shown]
    before = [us for _, us in shown]
    after = [data.after_us(name, us) for (_, name), us in shown]
    if rest:
        names.append(f"{len(rest)} other kernels")
        before.append(sum(us for _, us in rest))
        after.append(sum(data.after_us(name, us) for (_, name), us in rest))
    fig = go.Figure()
    columns = _columns(data)
    fig.add_trace(go.Bar(name=columns[0], y=names, x=before, orientation="h", marker_color=BASELINE_COLORS["compile"]))
    if len(columns) > 1:
        fig.add_trace(go.Bar(name=columns[1], y=names, x=after, orientation="h", marker_color=VERDICT_COLORS["passed"]))
    fig.update_traces(hovertemplate="%{y}<br>%{x:.1f} µs<extra>%{fullData.name}</extra>")
    return _layout(
        fig,
        "Time per kernel (µs per forward, summed over its launches)",
        140 + 28 * len(names) * len(columns),
        barmode="group",
        xaxis_title="µs per forward",
        yaxis={"autorange": "reversed", "automargin": True},
        legend={"orientation": "h", "y": -0.2},
    )


def roofline(data: RunData) -> go.Figure:
    """The memory roofline of the Triton kernels: achieved bandwidth against bytes moved, before and after.

    The analysis records bytes, not flops, so the roof is the measured copy bandwidth alone;
    a kernel's distance below it is its headroom."""
    per_kernel: dict[str, list[float]] = {}
    for launch in data.launches:
        if _moves_bytes(launch):
            bytes_time = per_kernel.setdefault(launch.name, [0.0, 0.0])
            bytes_time[0] += float(launch.bytes_moved or 0)
            bytes_time[1] += launch.time_us
    peak = float(data.summary.peak_gbps or 0.0)
    names = list(per_kernel)
    mb = [per_kernel[n][0] / 1e6 for n in names]
    before = [per_kernel[n][0] / (per_kernel[n][1] * 1e3) for n in names]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[min(mb) / 2, max(mb) * 2],
            y=[peak, peak],
            mode="lines",
            name=f"measured copy peak {peak:.0f} GB/s",
            line={"color": "#444", "dash": "dash"},
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=mb,
            y=before,
            mode="markers",
            name="torch.compile",
            marker={"size": 12, "color": BASELINE_COLORS["compile"]},
            text=[label(n) for n in names],
            customdata=[100 * g / peak for g in before],
            hovertemplate="%{text}<br>%{x:.3g} MB, %{y:.0f} GB/s (%{customdata:.0f} % of peak)<extra>before</extra>",
        )
    )
    replaced = [n for n in names if any(k.name == n for k in data.replaced)]
    if replaced:
        after = {n: per_kernel[n][0] / (data.after_us(n, per_kernel[n][1]) * 1e3) for n in replaced}
        xs = [per_kernel[n][0] / 1e6 for n in replaced]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[after[n] for n in replaced],
                mode="markers",
                name="kernelopt",
                marker={"size": 13, "symbol": "diamond", "color": VERDICT_COLORS["passed"]},
                text=[label(n) for n in replaced],
                customdata=[100 * after[n] / peak for n in replaced],
                hovertemplate="%{text}<br>%{x:.3g} MB, %{y:.0f} GB/s (%{customdata:.0f} % of peak)<extra>after</extra>",
            )
        )
        for n, x in zip(replaced, xs):
            fig.add_annotation(
                x=_log10(x),
                y=_log10(after[n]),
                ax=_log10(x),
                ay=_log10(per_kernel[n][0] / (per_kernel[n][1] * 1e3)),
                xref="x",
                yref="y",
                axref="x",
                ayref="y",
                showarrow=True,
                arrowhead=2,
                arrowcolor=VERDICT_COLORS["passed"],
                text="",
            )
    low = min([*before, *(after.values() if replaced else [])]) / 2
    return _layout(
        fig,
        "Roofline of the Triton kernels (bandwidth; traffic counts each tensor argument once)",
        460,
        xaxis={"type": "log", "title": "MB moved per forward"},
        yaxis={"type": "log", "title": "achieved GB/s", "range": [_log10(low), _log10(peak * 1.5)]},
        legend={"orientation": "h", "y": -0.2},
    )


def _log10(value: float) -> float:
    return math.log10(max(value, 1e-12))


def search_tree(tree: SearchTree) -> go.Figure:
    """One target's search graph top-down: nodes coloured by gate verdict, the winning path drawn thick.

    Each marker carries its node id (``customdata``): the page shows that node's gate record on a click."""
    positions = tree_layout((n.id, n.parent_id) for n in tree.nodes)
    path = tree.path_to_winner()
    on_path = set(zip(path, path[1:]))
    edges_x: list[float | None] = []
    edges_y: list[float | None] = []
    path_x: list[float | None] = []
    path_y: list[float | None] = []
    for node in tree.nodes:
        if node.parent_id is None or node.parent_id not in positions:
            continue
        (x0, d0), (x1, d1) = positions[node.parent_id], positions[node.id]
        xs, ys = (path_x, path_y) if (node.parent_id, node.id) in on_path else (edges_x, edges_y)
        xs += [x0, x1, None]
        ys += [-d0, -d1, None]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=edges_x, y=edges_y, mode="lines", line={"color": "#ccc", "width": 1}, hoverinfo="skip", showlegend=False
        )
    )
    if path_x:
        fig.add_trace(
            go.Scatter(
                x=path_x,
                y=path_y,
                mode="lines",
                line={"color": WINNER_COLOR, "width": 4},
                name="winning path" if tree.delivered else "path to the best passed (not delivered)",
                hoverinfo="skip",
            )
        )
    by_verdict: dict[str, list] = defaultdict(list)
    for node in tree.nodes:
        by_verdict[node.verdict].append(node)
    order = [v for v in VERDICT_COLORS if v in by_verdict] + sorted(set(by_verdict) - set(VERDICT_COLORS))
    for verdict in order:
        nodes = by_verdict[verdict]
        fig.add_trace(
            go.Scatter(
                x=[positions[n.id][0] for n in nodes],
                y=[-positions[n.id][1] for n in nodes],
                mode="markers",
                name=_verdict_label(verdict),
                marker={
                    "size": 14,
                    "color": VERDICT_COLORS.get(verdict, OTHER_VERDICT_COLOR),
                    "line": {"color": "#333", "width": 1},
                },
                customdata=[n.id for n in nodes],
                text=[_node_hover(n.id, n.operator, n.note, verdict, n.fitness) for n in nodes],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    if tree.winner is not None and tree.winner in positions:
        x, depth = positions[tree.winner]
        winner = next(n for n in tree.nodes if n.id == tree.winner)
        fig.add_trace(
            go.Scatter(
                x=[x],
                y=[-depth],
                mode="markers",
                name="delivered" if tree.delivered else "best passed (not delivered)",
                marker={"size": 24, "symbol": "star", "color": WINNER_COLOR, "line": {"color": "#333", "width": 1}},
                customdata=[winner.id],
                text=[_node_hover(winner.id, winner.operator, winner.note, winner.verdict, winner.fitness)],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    depth = max((d for _, d in positions.values()), default=0)
    return _layout(
        fig,
        f"Search graph of {tree.target} ({len(tree.nodes)} nodes; click a node for its gate record)",
        220 + 90 * depth,
        xaxis={"visible": False},
        yaxis={
            "title": "depth",
            "tickvals": [-d for d in range(depth + 1)],
            "ticktext": [str(d) for d in range(depth + 1)],
        },
        hovermode="closest",
        legend={"orientation": "h", "y": -0.15},
    )


def _verdict_label(verdict: str) -> str:
    if verdict in ("root", "pending", "passed"):
        return {"root": "root (Inductor's kernel)", "pending": "pending", "passed": "passed every gate"}[verdict]
    if verdict == "worker":
        return "failed: no gate answered (worker)"
    return label(f"failed: {verdict} gate")


def _node_hover(node_id: int, operator: str, note: str, verdict: str, fitness: float | None) -> str:
    speed = f", {fitness:.3f}×" if verdict == "passed" and fitness else ""
    return f"#{node_id} {label(operator)}: {label(note[:120])}<br>{label(verdict)}{speed}"


# -- a bench ----------------------------------------------------------------------------------


def bench_figures(data: ProblemBenchData) -> dict[str, go.Figure]:
    """The bench's charts, in page order: fast_p over p, the speedup distribution, per-problem speedups."""
    figures = {"fast-p": fast_p_curve(data), "speedups": speedup_distribution(data)}
    if any(o.passed and o.speedup_vs_compile is not None for o in data.outcomes):
        figures["per-problem"] = per_problem(data)
    return figures


def fast_p_grid(speedups: Sequence[float]) -> list[float]:
    """The thresholds at which fast_p changes (every measured speedup), from a little below the smallest
    (or 1) to a little past the largest: the whole curve, on a log axis (fast_0 is in the table)."""
    low, top = min([1.0, *speedups]), max([1.0, *speedups])
    return sorted({round(low * 0.9, 4), 1.0, *speedups, round(top * 1.1, 4)})


def fast_p_curve(data: ProblemBenchData) -> go.Figure:
    """KernelBench's fast_p (share of all problems correct and faster than p) as p grows, per baseline."""
    fig = go.Figure()
    for baseline in BASELINES:
        speedups = [s for o in data.outcomes if o.passed and (s := o.speedup(baseline)) is not None]
        grid = fast_p_grid(speedups)
        values = [100 * fast_p(data.outcomes, p, baseline) for p in grid] if data.outcomes else []
        fig.add_trace(
            go.Scatter(
                x=grid,
                y=values,
                mode="lines",
                line={"shape": "hv", "width": 3, "color": BASELINE_COLORS[baseline]},
                name=f"vs {BASELINE_LABELS[baseline]}",
                hovertemplate="p = %{x:.3f}: %{y:.0f} % of problems<extra>%{fullData.name}</extra>",
            )
        )
    fig.add_vline(x=1.0, line={"color": "#888", "dash": "dot"})
    return _layout(
        fig,
        f"fast_p over p ({len(data.outcomes)} problems; failed ones count as not fast)",
        420,
        xaxis={"type": "log", "title": "p (speedup threshold, log scale)"},
        yaxis={"title": "fast_p (% of all problems)", "range": [0, 105]},
        legend={"orientation": "h", "y": -0.2},
    )


def speedup_distribution(data: ProblemBenchData) -> go.Figure:
    """Every correct problem's speedup against each baseline, as boxes with their points (log axis)."""
    fig = go.Figure()
    for baseline in BASELINES:
        rows = [(o.name, s) for o in data.outcomes if o.passed and (s := o.speedup(baseline)) is not None]
        fig.add_trace(
            go.Box(
                y=[s for _, s in rows],
                name=f"vs {BASELINE_LABELS[baseline]}",
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker={"color": BASELINE_COLORS[baseline], "size": 7},
                text=[label(name) for name, _ in rows],
                hovertemplate="%{text}: %{y:.3f}×<extra>%{fullData.name}</extra>",
            )
        )
    fig.add_hline(y=1.0, line={"color": "#888", "dash": "dot"})
    return _layout(
        fig,
        "Speedup distribution against each baseline (correct problems)",
        460,
        yaxis={"type": "log", "title": "speedup (×)"},
        showlegend=False,
    )


def per_problem(data: ProblemBenchData) -> go.Figure:
    """Each correct problem's speedup over torch.compile, max-autotune and the best stock mode, with its
    interquartile range."""
    rows = [o for o in data.outcomes if o.passed and o.speedup_vs_compile is not None]
    fig = go.Figure()
    for baseline in ("compile", "max_autotune", "best_stock"):
        xs, names, low, high = [], [], [], []
        for o in rows:
            value = o.speedup(baseline)
            if value is None:
                continue
            spread = o.speedup_spread(baseline)
            xs.append(value)
            names.append(label(o.name))
            low.append(value - spread[0] if spread else 0.0)
            high.append(spread[1] - value if spread else 0.0)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=names,
                mode="markers",
                name=f"vs {BASELINE_LABELS[baseline]}",
                marker={"size": 9, "color": BASELINE_COLORS[baseline]},
                error_x={"type": "data", "symmetric": False, "array": high, "arrayminus": low, "thickness": 1.5},
                hovertemplate="%{y}: %{x:.3f}×<extra>%{fullData.name}</extra>",
            )
        )
    fig.add_vline(x=1.0, line={"color": "#888", "dash": "dot"})
    return _layout(
        fig,
        "Speedup per problem (bars: interquartile range where timed interleaved in one process)",
        160 + 22 * len(rows),
        xaxis={"type": "log", "title": "speedup (×)"},
        yaxis={"autorange": "reversed", "automargin": True},
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom"},
        margin={"l": 60, "r": 30, "t": 100, "b": 50},  # room for the legend between the title and the plot
    )


# -- a bench over kernel files ------------------------------------------------------------------


def file_bench_figures(data: FileBenchData) -> dict[str, go.Figure]:
    """The kernel-file bench's chart: each file that ran, its speedup over its own original."""
    return {"per-file": per_file(data)} if any(o.score is not None for o in data.outcomes) else {}


def per_file(data: FileBenchData) -> go.Figure:
    """Each file's score (a delivery's verified speedup with its interquartile range; 1.0 where the original
    stays), delivered and kept in two colours."""
    fig = go.Figure()
    for delivered, name, color in ((True, "delivered", "#54a24b"), (False, "original kept", "#bab0ac")):
        rows = [o for o in data.outcomes if o.score is not None and o.delivered is delivered]
        low = [o.score - o.speedup_iqr[0] if o.speedup_iqr and o.score else 0.0 for o in rows]
        high = [o.speedup_iqr[1] - o.score if o.speedup_iqr and o.score else 0.0 for o in rows]
        fig.add_trace(
            go.Scatter(
                x=[o.score for o in rows],
                y=[label(o.name) for o in rows],
                mode="markers",
                name=name,
                marker={"size": 10, "color": color},
                error_x={"type": "data", "symmetric": False, "array": high, "arrayminus": low, "thickness": 1.5},
                hovertemplate="%{y}: %{x:.3f}×<extra>%{fullData.name}</extra>",
            )
        )
    fig.add_vline(x=1.0, line={"color": "#888", "dash": "dot"})
    ran = sum(1 for o in data.outcomes if o.score is not None)
    return _layout(
        fig,
        "Speedup per file over its original (bars: interquartile range)",
        160 + 22 * ran,
        xaxis={"type": "log", "title": "speedup (×)"},
        yaxis={"autorange": "reversed", "automargin": True},
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom"},
        margin={"l": 60, "r": 30, "t": 100, "b": 50},
    )
