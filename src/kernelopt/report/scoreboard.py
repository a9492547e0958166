"""A bench's scoreboard as Markdown (``results.md``), written beside results.json.

So that a results folder can be committed as it is: the suite summary, every
problem's row, the failures with their reasons, and what produced the numbers
(device, versions, the code's digest, the commands), all from the same data
as the JSON, never retyped by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelopt.measure.op_hosts import through_python
from kernelopt.problem.loader import size_flags
from kernelopt.report.metrics import BASELINE_LABELS, BASELINES, ProblemOutcome


def fmt_ms(value: float | None, missing: str = "") -> str:
    """Milliseconds, three significant digits (the console table and Markdown alike)."""
    return missing if value is None else f"{value:.3g}"


def fmt_ratio(value: float | None, digits: int = 3, missing: str = "") -> str:
    return missing if value is None else f"{value:.{digits}f}×"


def best_stock_target_line(summary: dict[str, Any]) -> str:
    """The suite's target in one line: the geomean over the best stock mode of the problems a kernel search
    can move (Triton kernels at the summary's share of the compiled time or more), and the problems below
    the floor of their best stock mode; the problems recorded without a share are named as such."""
    t = summary.get("against_best_stock") or {}
    if not t:
        return ""
    share, floor = 100 * t["min_triton_share"], t["below_threshold"]
    line = (
        f"Over the best stock mode, on the {len(t['searchable'])} correct problems whose Triton kernels take "
        f"{share:.0f} % of the compiled time or more: geomean {fmt_ratio(t['geomean_searchable'], missing='—')}; "
        f"below {floor:.2f}× of it: {len(t['below'])}{': ' + ', '.join(t['below']) if t['below'] else ''}"
    )
    if t["share_unknown"]:
        line += f"; Triton share not recorded (older results): {len(t['share_unknown'])}"
    return line + "."


def shown_names(names: Sequence[str], limit: int = 8) -> str:
    """Names in a line of prose: the first ``limit``, then how many more."""
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def coverage_line(summary: dict[str, Any]) -> str:
    """How much of the suite the numbers cover: '' where every problem ran or the suite's list was not
    recorded, else the problems run of the suite's and those not run yet (a partial bench's geomean
    speaks for the problems it ran, not for the suite)."""
    missing = summary.get("not_run")
    if not missing:
        return ""
    total = summary["problems"] + len(missing)
    return f"Run so far: {summary['problems']} of the suite's {total} problems; not yet run: {shown_names(missing)}."


def cold_host_line(summary: dict[str, Any]) -> str:
    """The rows timed before the judge read a forward's host time in a loop, counted ('' where none, or a
    summary written before it was counted)."""
    cold = summary.get("cold_host_rows")
    if not cold:
        return ""
    return (
        f"Timed before the judge read a forward's host time in a loop (fc965f3): {len(cold)} of the "
        f"{summary['correct']} correct rows ({shown_names(cold)}). Their gate 4 and final end-to-end readings (*vs compile*) "
        "held one timed call's host time, read cold, so a short forward's candidate may have been refused on host "
        "time; their stock-mode columns were timed in one process and are not affected."
    )


def python_host_line(summary: dict[str, Any]) -> str:
    """The rows whose delivered model called one of kernelopt's own ops through Python, counted ('' where
    none, or a summary written before it was counted)."""
    slow = summary.get("python_host_rows")
    if not slow:
        return ""
    return (
        f"Delivered with one of kernelopt's own ops on its Python host path in the judged process: {len(slow)} "
        f"row(s) ({shown_names(slow)}). Each call of the op paid Python's host time there (its C++ path did "
        "not build or load: the row's `op_hosts` says why), so a short forward's gain may read low."
    )


def op_hosts_line(op_hosts: dict[str, str] | None) -> str:
    """Which host path each of kernelopt's own ops in a delivered model took in its judged process ('' where
    it calls none), and what Python's means: every call of the op paid it, so a short forward's gain reads
    low."""
    if not op_hosts:
        return ""
    line = "; ".join(f"{op}: {state}" for op, state in sorted(op_hosts.items()))
    if any(through_python(state) for state in op_hosts.values()):
        line += (
            " (each call of an op on Python's path paid it on the host: a forward of a few hundred µs may read "
            "lower than with the op's C++ path)"
        )
    return line


def replays_line(as_replays: dict | None, compiled: str) -> str:
    """The final verification's CUDA-graph judgment in one line ('' where it was not asked for)."""
    if not as_replays:
        return ""
    gain = as_replays.get("graphs_gain")
    own = f"; {compiled}'s own replays ran {gain:.3f}x its forward" if gain else ""
    if as_replays.get("speedup") is not None:
        within = "" if as_replays.get("beyond_noise") else ", within noise"
        return (
            f"as CUDA-graph replays: {as_replays['speedup']:.3f}x over {compiled}'s replays "
            f"(IQR {as_replays['q1']:.3f}-{as_replays['q3']:.3f}{within}){own}"
        )
    return f"judged without CUDA graphs: {as_replays.get('reason', 'no reason recorded')}"


def fmt_ratio_spread(value: float | None, spread: tuple[float, float] | None) -> str:
    """A speedup with its interquartile range where one was measured: ``1.328× (1.326–1.330)``."""
    text = fmt_ratio(value)
    return f"{text} ({spread[0]:.3f}–{spread[1]:.3f})" if text and spread else text


def fmt_seconds(value: float | None, missing: str = "") -> str:
    """Whole seconds (a worker's wall time), or ``missing``."""
    return missing if value is None else f"{value:.0f}"


def fmt_share(value: float | None, missing: str = "") -> str:
    return missing if value is None else f"{100 * value:.0f} %"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def commands_of(meta: dict[str, Any]) -> list[str]:
    """The command lines behind a results folder: a merged one's parts first (recursively,
    a merge can be resumed and merged again), then its own command and each resume's."""
    out = [command for part in meta.get("merged_from") or [] for command in commands_of(part["meta"])]
    if not meta.get("merged_from"):
        out.append(str(meta.get("command", "")))
    out += [f"{r.get('command', '')}   # resumed {r.get('at', '')}" for r in meta.get("resumed") or []]
    return list(dict.fromkeys(out))  # results merged before resumes were kept apart repeat some


def markdown_header(meta: dict[str, Any], title: str, unit: str) -> list[str]:
    """A results.md's opening lines: its title, the device and versions, when it ran, and the sizes
    given to every ``unit`` (problem or file) that defines them."""
    versions = meta.get("versions") or {}
    lines = [
        f"# {title}: {meta.get('suite', '')}",
        "",
        f"Device: {meta.get('device') or 'unknown'}; "
        + ", ".join(f"{k} {v}" for k, v in versions.items() if v is not None)
        + f". Started {meta.get('started')}, finished {meta.get('finished') or '(not finished)'}.",
        "",
    ]
    if meta.get("sizes"):
        lines += [f"Sizes: `{size_flags(meta['sizes'])}`, in every {unit} that defines the constant.", ""]
    return lines


def problem_notes(outcome: ProblemOutcome) -> list[str]:
    """What a row's numbers alone do not say: the CUDA-graph mode its result runs under, its final
    verification as CUDA-graph replays (launch-bound models), a score read again by a fixed rule, and
    a run that went on after a time-out killed its worker (its numbers come from more than one worker), a
    stock mode's process in which kernelopt's op fell back to torch, and a row that replaced an earlier
    measurement of the problem (``bench --rerun``)."""
    details = outcome.details
    notes = []
    if details.get("run_mode"):
        gain = details.get("run_mode_gain")
        under = f", {gain:.3f}x its plain speed there" if isinstance(gain, (int, float)) else ""
        notes.append(f"runs under mode={details['run_mode']} (CUDA graphs){under}")
    if isinstance(details.get("as_replays"), dict):
        notes.append(replays_line(details["as_replays"], outcome.base_mode))
    if details.get("rescored"):
        notes.append(str(details["rescored"]))
    if details.get("resumed"):
        after_cut = details.get("resumed_after_cut")
        stopped_by = "the end of the bench's --slot had stopped" if after_cut else "a time-out had cut short"
        notes.append(f"went on with run {details['resumed']}, which {stopped_by}")
    if details.get("taken"):
        timed = ", ".join(details.get("stock_taken") or []) or "none"
        notes.append(
            f"run {details['taken']} had finished when a time-out cut the stock timings short; taken as it"
            f" was (stock modes timed before the cut, kept: {timed})"
        )
    stock = details.get("stock")
    for mode, record in stock.items() if isinstance(stock, dict) else ():
        if isinstance(record, dict) and record.get("fallbacks"):
            notes.append(
                f"under {mode}, kernelopt's own op was computed by torch, not its kernel, in that mode's process "
                f"({'; '.join(record['fallbacks'])}): the time against {mode} is torch's computation's"
            )
    earlier = details.get("replaced")
    if isinstance(earlier, dict):
        score = earlier.get("best_stock_speedup")
        read = f", {score:.3f}x of its best stock mode" if isinstance(score, (int, float)) else ""
        gone = (
            f"; its export, not made again, removed: {', '.join(earlier['removed'])}" if earlier.get("removed") else ""
        )
        notes.append(
            f"run again with --rerun at {earlier.get('replaced_at')}; the row it replaced: {earlier.get('status')}{read}{gone}"
        )
    return notes


def markdown_report(meta: dict[str, Any], outcomes: Sequence[ProblemOutcome], summary: dict[str, Any]) -> str:
    """The whole scoreboard as one Markdown document."""
    lines = markdown_header(meta, "kernelopt bench", "problem")
    merged = meta.get("merged_from") or []
    if merged:
        lines += [
            f"Merged with `kernelopt bench-merge` from {len(merged)} results folders (a later one's run of a "
            "problem replaces an earlier one's); their commands:",
            "",
        ]
    lines += [f"    {command}" for command in commands_of(meta)] + [""]
    slower = summary["slower_than_baseline"]
    rate = summary["evaluations_per_gpu_minute"]
    lines += [
        "## Summary",
        "",
        f"{summary['problems']} problems, {summary['correct']} correct; "
        f"slower than torch.compile (beyond 1 %): {len(slower)}{': ' + ', '.join(slower) if slower else ''}; "
        f"{summary['evaluations']} evaluations in {summary['gpu_s']:.0f} s of GPU"
        + (f" ({rate:.0f} per GPU-minute)" if rate is not None else "")
        + ".",
        "",
        *([coverage_line(summary), ""] if coverage_line(summary) else []),
        *([cold_host_line(summary), ""] if cold_host_line(summary) else []),
        *([python_host_line(summary), ""] if python_host_line(summary) else []),
        best_stock_target_line(summary),
        "",
        "| baseline | " + " | ".join(f"fast_{k}" for k in summary["fast_p"]["compile"]) + " | geomean speedup |",
        "|---|" + "---|" * (len(summary["fast_p"]["compile"]) + 1),
    ]
    for baseline in BASELINES:
        shares = " | ".join(fmt_share(v) for v in summary["fast_p"][baseline].values())
        lines.append(f"| {BASELINE_LABELS[baseline]} | {shares} | {fmt_ratio(summary['geomean_speedup'][baseline])} |")
    lines += [
        "",
        "fast_p counts every problem (failed ones too); geometric means are over the correct problems. "
        "Times are medians in ms. The max-autotune column comes from a process of its own; where that process "
        "also timed kernelopt's model interleaved with it, *vs max-autotune* is that ratio. In brackets: the "
        "interquartile range of a speedup timed interleaved in one process (*vs compile*: the final verification). "
        "*Best stock mode*: of torch.compile's default and each mode of the stock_modes setting (each timed in "
        "its own process beside kernelopt's model), the one kernelopt's model as delivered (under its run mode's "
        "CUDA graphs, or without any) is least faster than. *Built on*: "
        "the stock mode the search started from (base_mode); where it is not the default, *vs compile* was "
        "timed in the default's own process against kernelopt's model. *Of floor*: the traffic floor's time "
        "(inputs, weights and outputs moved once, and inputs a statistic wider than the chip makes read again, "
        "at the measured peak bandwidth) over the optimized time: 100 % leaves nothing for any kernel or fusion; "
        "empty where vendor calls run (their work is not traffic) or the row predates it. *Wall s*: the "
        "seconds the problem's worker ran, compiles and every stock mode included (what a slot of GPU time "
        "is planned with, `--stop-after`).",
        "",
        "## Per problem",
        "",
        "| problem | status | correct | eager | compile | max-autotune | optimized | vs eager | vs compile "
        "| vs max-autotune | best stock mode | vs best stock | built on | of floor | evaluations | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| {_cell(o.name)} | {o.status} | {'yes' if o.correct else 'no'} | {fmt_ms(o.eager_ms)} | {fmt_ms(o.compiled_ms)} "
            f"| {fmt_ms(o.max_autotune_ms)} | {fmt_ms(o.optimized_ms)} | {fmt_ratio(o.speedup_vs_eager)} "
            f"| {fmt_ratio_spread(o.speedup_vs_compile, o.speedup_spread('compile'))} "
            f"| {fmt_ratio_spread(o.speedup_vs_max_autotune, o.speedup_spread('max_autotune'))} "
            f"| {o.best_stock_mode or ''} "
            f"| {fmt_ratio_spread(o.speedup_vs_best_stock, o.speedup_spread('best_stock'))} | {o.base_mode} "
            f"| {fmt_share(o.of_floor)} | {o.evaluations} | {fmt_seconds(o.worker_s)} |"
        )
    notes = [f"- {_cell(o.name)}: {note}" for o in outcomes if o.passed for note in problem_notes(o)]
    if notes:
        lines += ["", "## Notes", ""] + notes
    failed = [o for o in outcomes if o.status != "ok"]
    if failed:
        lines += ["", "## Failures", ""]
        lines += [f"- {o.name}: {o.status}: {_cell(o.reason)}" for o in failed]
    return "\n".join(lines) + "\n"
