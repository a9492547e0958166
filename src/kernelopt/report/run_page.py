"""The page of one optimize (or analyze) run: summary, time breakdown, roofline, search graphs,
diffs of the replaced kernels, and for agent runs the plans, cost and transcripts.

Only layout and wording live here: the numbers come from :mod:`kernelopt.report.run_data`,
the charts from :mod:`kernelopt.report.figures`.
"""

from __future__ import annotations

import datetime
import json
from collections import Counter, defaultdict
from collections.abc import Mapping

import plotly.graph_objects as go

from kernelopt.report.diff import diff_html
from kernelopt.report.page import card, chart, document, esc, table
from kernelopt.report.run_data import RunData, Summary, record_of
from kernelopt.report.scoreboard import fmt_ratio, op_hosts_line, replays_line
from kernelopt.search.candidate import MODEL_TARGET
from kernelopt.search.graph_variants import GRAPH_TARGET_PREFIX
from kernelopt.store.llm_records import Transcript

STOCK_MODE_NOTE = "not timed: kernelopt optimize --stock-modes (or kernelopt bench) times every stock mode beside it"


def _summary_block(s: Summary, cards: list[str], rows: list[tuple[str, str]], note: str) -> str:
    """A run's summary: a line when it has not finished, the cards, the facts table and how to read them."""
    unfinished = "" if s.finished else f'<p class="note fail">This run has not finished: {esc(s.final_reason)}</p>'
    return (
        f'{unfinished}<div class="cards">{"".join(cards)}</div>' + table(("", ""), rows) + f'<p class="note">{note}</p>'
    )


def render_run(data: RunData, figures: Mapping[str, go.Figure]) -> str:
    """The whole page of ``data``'s run, with ``figures`` (from :func:`~kernelopt.report.figures.run_figures`)."""
    run, s = data.run, data.summary
    sections = [("summary", "Summary", _summary(data))]
    if "time-by-kind" in figures:
        sections.append(("time", "Where the time goes", _time(data)))
    if "roofline" in figures:
        sections.append(("roofline", "Roofline", chart("roofline", _roofline_caption(data))))
    if data.trees or data.kernels or data.graphs:
        sections.append(("search", "Search", _search(data, figures)))
    if data.kernels:
        title = "The delivered file" if s.kind != "model" else "Replaced kernels"
        sections.append(("kernels", title, _diffs(data)))
    if data.transcripts or data.llm_usage:
        sections.append(("agents", "LLM agents", _agents(data)))
    sections.append(("provenance", "Provenance", _provenance(data)))
    records = {key: _records(data, key) for key in figures if key.startswith("search-")}
    subtitle = f"{run.kind} run {run.id} · {run.status} · {s.device} · started {_when(run.started_at)}"
    return document(f"kernelopt: {s.problem}", subtitle, sections, figures, records)


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "—"
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g} ms"


def _spread(value: float | None) -> str:
    return "" if value is None else f"±{100 * value:.1f} % (IQR/median)"


def _best_stock_note(s: Summary) -> str:
    if not s.best_stock_mode:
        return STOCK_MODE_NOTE
    note = f"{s.best_stock_mode}, timed in its own process"
    if s.stock_untimed:
        note += f"; not timed: {'; '.join(s.stock_untimed)}"
    return note


def _us(value: object) -> str:
    return f"{value:.1f} µs" if isinstance(value, (int, float)) else "—"


def _file_summary(data: RunData) -> str:
    """A kernel-file run: the original file against the delivered one, and the floor of both."""
    s, f = data.summary, data.summary.file_report or {}
    floor, original, optimized = f.get("min_time_us"), f.get("original_us"), f.get("optimized_us")
    best = optimized or original
    cards = [
        card(
            "vs the original file",
            fmt_ratio(s.vs_compile) or "—",
            f"IQR {s.vs_compile_iqr[0]:.3f}–{s.vs_compile_iqr[1]:.3f}× (final check)"
            if s.vs_compile_iqr
            else "the original stays",
        ),
        card("original", _us(original), "timed in a process that never loads a candidate"),
        card("delivered", _us(optimized), "the final check's median" if optimized else "nothing delivered"),
        card(
            "roofline floor",
            _us(floor),
            f"the delivery at {100 * floor / best:.0f} % of it"
            if floor and best
            else "inputs read, outputs written once",
        ),
    ]
    helion = f.get("helion") or {}
    if helion:
        kernels = helion.get("kernels") or []
        chose = sum(1 for k in kernels if k.get("tuned"))
        failed = [k["error"] for k in kernels if k.get("error")]
        tuned = (
            ("chose a config" if len(kernels) == 1 else f"chose configs for {chose} of {len(kernels)} kernels")
            if chose
            else f"failed: {failed[0]}"
            if failed
            else "not run"
        )
        over = f.get("over_helion_tuned")
        cards.append(card("Helion's autotuner", fmt_ratio(over) or "—", f"{helion.get('effort', '')} effort, {tuned}"))
    rows = [
        ("outcome", s.final_reason or "—"),
        ("kernel file", f"{s.problem} ({s.kind})"),
        ("evaluations", "—" if s.evaluations is None else str(s.evaluations)),
        ("evaluation worker time", "—" if s.gpu_s is None else f"{s.gpu_s:.1f} s"),
        ("wall time", "—" if s.wall_s is None else f"{s.wall_s:.0f} s"),
        ("delivered file", s.exported or "none (the user's file stays)"),
        ("verification record", str(f.get("record") or "—")),
    ]
    rows += [("warning", w) for w in s.warnings]  # a missing profiler among them, as a model run's page says it
    return _summary_block(
        s,
        cards,
        rows,
        "Speedups are medians of per-round ratios of the original file against the candidate, timed interleaved "
        "with the L2 flushed, each side in a process of its own; in brackets their interquartile range.",
    )


def _summary(data: RunData) -> str:
    s = data.summary
    if s.kind != "model":
        return _file_summary(data)
    cards = [
        card(
            "vs torch.compile" if s.base_mode == "default" else f"vs torch.compile ({s.base_mode})",
            fmt_ratio(s.vs_compile) or "—",
            f"IQR {s.vs_compile_iqr[0]:.3f}–{s.vs_compile_iqr[1]:.3f}× (final verification)"
            if s.vs_compile_iqr
            else ("no spread: the baseline was kept" if s.vs_compile == 1.0 else ""),
        ),
        card(
            "vs eager",
            fmt_ratio(s.vs_eager) or "—",
            f"IQR {s.vs_eager_iqr[0]:.3f}–{s.vs_eager_iqr[1]:.3f}×" if s.vs_eager_iqr else "no spread recorded",
        ),
        card(
            "vs best stock mode",
            fmt_ratio(s.best_stock_speedup) or "—",
            _best_stock_note(s),
        ),
        card(
            "torch.compile vs eager",
            fmt_ratio(s.compile_vs_eager) or "—",
            f"eager {_spread(s.eager_spread)}, compiled {_spread(s.compiled_spread)}" if s.eager_spread else "",
        ),
        card("Amdahl bound", fmt_ratio(s.amdahl_bound, 2) or "—", "Triton kernels at the roofline, vendor calls kept"),
        card(
            "launch-overhead bound",
            fmt_ratio(s.launch_overhead_bound, 2) or "—",
            f"GPU busy {100 * s.gpu_busy:.0f} % of the forward" if s.gpu_busy is not None else "",
        ),
        card(
            "fusion bound",
            fmt_ratio(s.fusion_bound, 2) or "—",
            "compiled over the traffic floor (inputs, weights, outputs moved once"
            + (
                f"; {s.reread_bytes / 1e6:.3g} MB of inputs twice: a statistic wider than the chip)"
                if s.reread_bytes
                else ")"
            )
            if s.fusion_bound is not None
            else "only for graphs of generated kernels",
        ),
    ]
    rows = [
        ("outcome", s.final_reason or "—"),
        ("built on", s.base_mode + (f": {s.base_mode_reason}" if s.base_mode_reason else "")),
        ("eager", f"{_ms(s.eager_ms)} {_spread(s.eager_spread)}"),
        ("torch.compile", f"{_ms(s.compiled_ms)} {_spread(s.compiled_spread)}"),
        ("optimized", _ms(s.optimized_ms)),
        ("torch.compile in the final verification", _ms(s.final_compiled_ms)),
        ("evaluations", "—" if s.evaluations is None else str(s.evaluations)),
        ("evaluation worker time", "—" if s.gpu_s is None else f"{s.gpu_s:.1f} s"),
        ("wall time", "—" if s.wall_s is None else f"{s.wall_s:.0f} s"),
        ("exported model", s.exported or "none (the compiler's baseline stays)"),
    ]
    if s.run_mode:
        rows.append(("runs under", f"mode={s.run_mode} (CUDA graphs), recorded in the export: kernelopt.backend(path) "
                                   "applies it; kernelopt.load runs it without"))  # fmt: skip
    if s.run_mode_gain and s.vs_compile:
        rows.append(("as delivered", f"{s.vs_compile * s.run_mode_gain:.3f}x over the base compile: {s.vs_compile:.3f}x "
                                     f"times the graphs' {s.run_mode_gain:.3f}x (each interleaved in its process)"))  # fmt: skip
    if s.as_replays:
        rows.append(("as CUDA-graph replays", replays_line(s.as_replays, "the base compile")))
    if s.op_hosts:
        rows.append(("kernelopt's own ops", op_hosts_line(s.op_hosts)))
    if s.knobs:
        knobs = s.knobs
        rows.append(
            (
                "compiler knobs",
                f"best {knobs.get('best_options')} at {fmt_ratio(knobs.get('speedup')) or '—'}"
                f" ({'adopted: the kernels were searched on its compile' if knobs.get('used') else 'not adopted'}; "
                f"{knobs.get('evaluations')} evaluations)",
            )
        )
    moves = _moves_line(data)
    if moves:
        rows.append(("data movement only", moves + "; see where the time goes"))
    if data.graph_stage_advice:
        rows.append(("graph stage", f"optimize would also search graph variants here: {data.graph_stage_advice}"))
    rows += [("warning", w) for w in s.warnings]
    rows += [(f"skipped {name}", reason) for name, reason in s.skipped]
    return _summary_block(
        s,
        cards,
        rows,
        "Speedups are medians of per-round ratios timed interleaved in one process with the L2 flushed; in "
        "brackets their interquartile range. The bounds say what kernel work could buy at best.",
    )


def _time(data: RunData) -> str:
    s = data.summary
    measured = (
        f"Measured end to end in the final verification: torch.compile {_ms(s.final_compiled_ms)} → kernelopt "
        f"{_ms(s.optimized_ms)}."
        if data.replaced and s.optimized_ms
        else "No kernel was replaced: one column."
    )
    return (
        chart(
            "time-by-kind",
            "GPU time per forward attributed to each launch by the profiler; 'outside kernels' is "
            "the rest of the compiled forward's measured time (launch gaps, host work).",
        )
        + chart("time-by-kernel")
        + f'<p class="note">The second column is derived: each replaced kernel at its analysed time divided by the '
        f"speedup its gates verified, every other launch as analysed. {esc(measured)}</p>" + _copies(data)
    )


def _moves_line(data: RunData) -> str | None:
    """How many launches only move data and their share of the GPU time; None where the record does not say."""
    s, gpu_us = data.summary, sum(launch.time_us for launch in data.launches)
    if s.moves_ms is None or not s.moves_launches:
        return None
    share = f"{100 * s.moves_ms * 1000.0 / gpu_us:.1f} %" if gpu_us > 0 else "—"
    launches = f"{s.moves_launches} launch" + ("es" if s.moves_launches != 1 else "")
    return f"{launches}, {_ms(s.moves_ms)} ({share} of the GPU time)"


def _copies(data: RunData) -> str:
    """The generated kernels that only move data (kind ``copy``), each with its time and share of the GPU
    time: their cost is the layout's, which no launch config or eviction hint removes. Nothing for a record
    made before copies were told apart."""
    if data.summary.moves_ms is None:
        return ""
    line = _moves_line(data)
    if line is None:
        return '<p class="note">No generated kernel only moves data (no layout copy, transpose or concatenation).</p>'
    gpu_us = sum(launch.time_us for launch in data.launches)
    launches: Counter[str] = Counter()
    time_us: dict[str, float] = defaultdict(float)
    for launch in data.launches:
        if launch.moves_only:
            launches[launch.name] += 1
            time_us[launch.name] += launch.time_us
    rows = [
        (name, launches[name], f"{us:.1f}", f"{100 * us / gpu_us:.1f}" if gpu_us > 0 else "—")
        for name, us in sorted(time_us.items(), key=lambda item: -item[1])
    ]
    return (
        "<h3>Data movement only</h3>"
        f'<p class="note">Generated kernels that only move data (layout copies, transposes, concatenations): '
        f"{esc(line)}. No launch config or eviction hint removes that time, only a changed call sequence (a vendor "
        "call reading the strided view, a producer writing its consumer's layout).</p>"
        + table(("copy kernel", "launches", "µs per forward", "% of GPU time"), rows, numeric=(1, 2, 3))
    )


def _roofline_caption(data: RunData) -> str:
    return (
        f"Achieved bandwidth of each generated Triton kernel against its ideal traffic (each tensor argument read or "
        f"written once) and the device's measured copy peak ({data.summary.peak_gbps or 0:.0f} GB/s). "
        "The analysis records bytes, not flops, so there is no compute roof; arrows lead to the replaced kernels."
    )


def _search(data: RunData, figures: Mapping[str, go.Figure]) -> str:
    rows = [
        (
            k.name,
            f"{k.before_us:.1f}",
            "—" if k.after_us is None else f"{k.after_us:.1f}",
            fmt_ratio(k.speedup) if k.replaced else "baseline kept",
            str(k.evaluations),
            ", ".join(f"{gate} {n}" for gate, n in sorted(k.failures_by_gate.items())) or "—",
            f"{k.operator}: {k.note}" if k.replaced else "—",
            k.stop_reason,
            k.final_check or "—",
        )
        for k in data.kernels
    ]
    parts = []
    if rows:
        parts.append(
            table(
                (
                    "kernel",
                    "before µs",
                    "after µs",
                    "speedup",
                    "evaluations",
                    "failures by gate",
                    "winner",
                    "stopped because",
                    "final re-check",
                ),
                rows,
                numeric=(1, 2, 3, 4),
            )
        )
    if data.graphs:
        parts.append(_graph_table(data))
    for number, tree in enumerate(data.trees, start=1):
        key = f"search-{number}"
        name = "the whole model (Inductor options)" if tree.target == MODEL_TARGET else tree.target
        if tree.target.startswith(GRAPH_TARGET_PREFIX):
            name = f"{tree.target.strip('<>')}: its whole call sequence (graph candidates)"
        parts.append(f"<h3>{esc(name)}</h3>")
        if key in figures:
            parts.append(chart(key))
            parts.append(
                f'<div class="record" id="record-{key}"><p class="note">Click a node to see its gate record.</p></div>'
            )
    return "".join(parts)


def _graph_table(data: RunData) -> str:
    """Each graph's call-sequence search: a graph regenerated by Inductor under other options, timed end to end."""
    rows = [
        (
            f"graph {g.graph}",
            fmt_ratio(g.speedup) if g.replaced else "kept as compiled",
            str(g.evaluations),
            ", ".join(f"{gate} {n}" for gate, n in sorted(g.failures_by_gate.items())) or "—",
            f"{g.note} ({g.kernels} kernels of its own)" if g.replaced else "—",
            g.stop_reason,
            g.final_check or "—",
        )
        for g in data.graphs
    ]
    head = ("graph", "speedup end to end", "evaluations", "failures by gate", "winner", "stopped because",
            "final re-check")  # fmt: skip
    note = (
        '<p class="note">A graph candidate replaces a graph\'s whole call sequence (which kernels run), so it is '
        "timed on the whole model. The fastest winner whose options a whole-model compile takes, judged again "
        "(on a model of several graphs as the whole model compiled under them, first together with the other "
        "graphs' winners' options where one compile holds them all), became the compile the kernels were then "
        "searched on; other winners are swapped in, in place of their graph's kernel winners where both won.</p>"
    )
    if data.graph_stage:
        note += f'<p class="note">Searched without --operators naming graph-variants: {esc(data.graph_stage)}.</p>'
    return note + table(head, rows, numeric=(1, 2))


def _records(data: RunData, key: str) -> dict[str, object]:
    tree = data.trees[int(key.split("-")[1]) - 1]
    return {str(node.id): record_of(node) for node in tree.nodes}


def _diffs(data: RunData) -> str:
    replaced = data.replaced
    if not replaced:
        if data.summary.kind != "model":
            return '<p class="note">Nothing was delivered: the user\'s file stays.</p>'
        return '<p class="note">No kernel was replaced: the delivered model is the compiler\'s.</p>'
    parts = []
    for k in replaced:
        parts.append(f"<h3>{esc(k.name)} ({esc(fmt_ratio(k.speedup))}, {esc(k.operator)}: {esc(k.note)})</h3>")
        if k.inductor_source is None or k.replacement_source is None:
            parts.append('<p class="note">The store holds no source for one side of this kernel.</p>')
        else:
            parts.append(diff_html(k.inductor_source, k.replacement_source, k.name))
    return "".join(parts)


def _agents(data: RunData) -> str:
    parts = []
    usage = data.llm_usage or {}
    if usage:
        parts.append("<h3>Cost</h3>")
        parts.append(
            table(
                ("calls", "cache hits", "errors", "input tokens", "output tokens", "cost"),
                [
                    (
                        usage.get("calls", 0),
                        usage.get("cache_hits", 0),
                        usage.get("errors", 0),
                        usage.get("input_tokens", 0),
                        usage.get("output_tokens", 0),
                        f"${float(usage.get('cost_usd') or 0.0):.4f}",
                    )
                ],
                numeric=range(6),
            )
        )
        if usage.get("unpriced_models"):
            parts.append(
                f'<p class="note">No price known for {esc(", ".join(usage["unpriced_models"]))}: counted as $0.</p>'
            )
    by_role: dict[str, list[Transcript]] = {}
    for t in data.transcripts:
        by_role.setdefault(t.role, []).append(t)
    if by_role:
        parts.append(
            table(
                ("role", "exchanges", "input tokens", "output tokens", "cost", "errors"),
                [
                    (
                        role,
                        len(ts),
                        sum(t.input_tokens or 0 for t in ts),
                        sum(t.output_tokens or 0 for t in ts),
                        f"${sum(t.cost_usd or 0.0 for t in ts):.4f}",
                        sum(1 for t in ts if t.error),
                    )
                    for role, ts in by_role.items()
                ],
                numeric=range(1, 6),
            )
        )
    plans = [(tree.target, node) for tree in data.trees for node in tree.nodes if node.plan]
    if plans:
        parts.append("<h3>Plans</h3>")
        parts.append(
            table(
                ("node", "verdict", "strategy", "change", "expected effect", "evidence", "risks"),
                [
                    (
                        f"#{node.id}",
                        node.verdict,
                        node.plan.get("strategy", ""),
                        node.plan.get("change", ""),
                        node.plan.get("expected_effect", ""),
                        "; ".join(map(str, node.plan.get("evidence") or [])),
                        "; ".join(map(str, node.plan.get("risks") or [])),
                    )
                    for _, node in plans
                    if node.plan is not None
                ],
            )
        )
    if data.transcripts:
        parts.append("<h3>Transcripts</h3>")
        parts.extend(_transcript(t) for t in data.transcripts)
    return "".join(parts)


def _transcript(t: Transcript) -> str:
    node = f", node #{t.node_id}" if t.node_id is not None else ""
    cost = f", ${t.cost_usd:.4f}" if t.cost_usd else ""
    error = f" — ERROR: {t.error}" if t.error else ""
    head = (
        f"#{t.id} {t.role} ({t.provider}:{t.model}{node}, {t.input_tokens or 0} in / "
        f"{t.output_tokens or 0} out tokens{cost}){error}"
    )
    messages = "".join(f"<h3>{esc(m.get('role', '?'))}</h3><pre>{esc(m.get('content', ''))}</pre>" for m in t.messages)
    return f"<details><summary>{esc(head)}</summary>{messages}<h3>response</h3><pre>{esc(t.response or '')}</pre></details>"


def _provenance(data: RunData) -> str:
    run = data.run
    rows = [
        ("run", f"{run.kind} run {run.id}, {run.status}" + (f": {run.error}" if run.error else "")),
        ("problem", run.problem),
        ("device", run.device),
        ("started", _when(run.started_at)),
        ("finished", _when(run.finished_at)),
    ]
    rows += [(f"version: {name}", str(value)) for name, value in sorted(run.versions.items())]
    return (
        table(("", ""), rows) + "<h3>Options</h3><pre>" + esc(json.dumps(run.args, indent=2, sort_keys=True)) + "</pre>"
    )
