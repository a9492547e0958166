"""``kernelopt bench``: the command and its printing; the work is :func:`kernelopt.pipeline.bench.run_bench`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernelopt.cli.common import (
    EFFORT_OPTION,
    LLM_CONFIG_OPTION,
    STORE_OPTION,
    app,
    err,
    out,
    parse_sizes,
    print_json,
    setting_option,
    user_errors,
)
from kernelopt.search.operators import DEFAULT_OPERATORS

if TYPE_CHECKING:
    from kernelopt.agents.relay import RelayAccess
    from kernelopt.pipeline.bench import BenchEvent, BenchReport
    from kernelopt.report.metrics import ProblemOutcome

_STATUS_STYLE = {
    "ok": "green",
    "load_error": "red",
    "compile_error": "red",
    "run_error": "red",
    "timeout": "yellow",
    "crash": "red",
}


@app.command("bench")
@user_errors
def bench(
    suite_dir: Path = typer.Argument(
        ...,
        help="A directory of KernelBench-format problems (ours, or a KernelBench checkout), or of Triton / Helion "
        "kernel files (not both).",
    ),
    problems: str | None = typer.Option(
        None,
        "--problems",
        help="Comma-separated names, file stems or name parts to run, in that order (default: all, in suite "
        "order); the results keep suite order.",
    ),
    time_limit: float | None = typer.Option(
        None,
        "--time-limit",
        help="Search wall time per searched kernel, in seconds (a problem searches up to --max-targets kernels).",
    ),
    out_dir: Path | None = typer.Option(None, "--out", help="Results directory (default: bench-results/<suite name>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the results in --out, skipping finished problems."),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="With --resume: run again the problems that did not finish ok."
    ),
    rerun: str | None = typer.Option(
        None,
        "--rerun",
        help="With --resume: comma-separated problems to run again though they finished; the new row replaces "
        "the earlier one, which the results keep under meta.replaced (kernel files too).",
    ),
    stop_after: float | None = typer.Option(
        None,
        "--stop-after",
        help="Start no problem this many seconds after the bench began (running ones finish; --resume runs "
        "the rest): for a fixed slot of GPU time, so no problem is cut short and its time lost.",
    ),
    slot: float | None = typer.Option(
        None,
        "--slot",
        help="The bench's whole time in seconds: a problem starts only where the seconds it is expected to take "
        "(its earlier row on --rerun, else the longest row so far, else --timeout) fit in what is left, and one "
        "still running at the end is stopped; --resume runs the rest, going on with a stopped one's run.",
    ),
    expect_from: Path | None = typer.Option(
        None,
        "--expect-from",
        help="With --slot: a bench results folder (another GPU's scoreboard of this suite, or an earlier run) "
        "whose rows say how long each problem takes, scaled by how this bench's rows ran against the same "
        "problems there.",
    ),
    order: str = typer.Option(
        "given",
        "--order",
        help="given: run the problems in --problems' order (suite order without it); payoff (with --expect-from): "
        "those that would add most to the suite's target a second, were they to read as their rows there, first.",
    ),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        help="Seconds before a problem's worker is killed (default: time limit + "
        "the bench_timeout_margin_s setting, or the bench_timeout_s setting; see kernelopt config).",
    ),
    budget: int | None = setting_option("budget", "--budget", help="Candidate evaluations per kernel and problem."),
    max_targets: int | None = setting_option(
        "max_targets", "--max-targets", help="Kernels searched per problem, by what they can buy end to end."
    ),
    effort: str | None = EFFORT_OPTION,
    stock_modes: str | None = setting_option(
        "stock_modes",
        "--stock-modes",
        help="Stock torch.compile modes timed beside the default, each in its own process, for the best stock mode.",
    ),
    cuda_graphs: str | None = setting_option(
        "cuda_graphs",
        "--cuda-graphs",
        help="auto: a result may run under a CUDA-graph mode, and a launch-bound one is judged as CUDA-graph "
        "replays; off: never.",
    ),
    operators: str = typer.Option(
        ",".join(DEFAULT_OPERATORS),
        "--operators",
        help="Comma-separated search operators, as for optimize (see kernelopt optimize --help).",
    ),
    shard: str | None = typer.Option(
        None,
        "--shard",
        help="I/N: run every N-th problem from the I-th (split a suite over machines; join with bench-merge).",
    ),
    gpus: int = typer.Option(
        1, "--gpus", help="Problems run at once, one per GPU (each worker sees only its own GPU)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the full results as JSON."),
    no_report: bool = typer.Option(False, "--no-report", help="Do not write report.html beside the results."),
    plan: bool = typer.Option(
        False,
        "--plan",
        help="Run nothing and write nothing: say when each problem left to run would start and how long it is "
        "expected to take, under --slot, --stop-after and --expect-from as given (needs no GPU).",
    ),
    store: Path | None = STORE_OPTION,
    size: list[str] | None = typer.Option(
        None,
        "--size",
        help="NAME=VALUE: set a size constant in every problem that defines it (repeatable), e.g. --size "
        "batch_size=64; a resumed bench keeps the sizes it started with.",
    ),
    llm: str | None = typer.Option(
        None,
        "--llm",
        help="Add the LLM agents to every problem's search: openai:MODEL, anthropic:MODEL or "
        "openai-compatible:MODEL@URL. Problem workers reach it through a relay that holds the key.",
    ),
    llm_config: Path | None = LLM_CONFIG_OPTION,
    llm_max_requests: int = typer.Option(
        5000, "--llm-max-requests", help="With --llm: LLM requests the relay lets the whole bench make."
    ),
    llm_max_usd: float | None = typer.Option(
        None,
        "--llm-max-usd",
        help="With --llm: dollars the whole bench may spend on the LLM (its answers' tokens at the config's "
        "prices); then the relay refuses.",
    ),
    worker_target: str | None = typer.Option(None, "--worker-target", hidden=True),
    worker_path: list[Path] | None = typer.Option(None, "--worker-path", hidden=True),
) -> None:
    """Optimize every problem of a suite: correctness, speedups over eager and torch.compile, fast_p; JSON and CSV.
    A folder of Triton / Helion kernel files instead: each file as kernelopt optimize FILE runs it, scored
    against its own original (docs/kernel-files.md)."""
    from kernelopt.config import load_settings
    from kernelopt.pipeline.bench import DEFAULT_TARGET, run_bench, suite_root
    from kernelopt.problem.suite_kinds import KERNEL_FILES, suite_kinds
    from kernelopt.search.operators import make_operators

    config = load_settings(
        {
            "effort": effort,
            "budget": budget,
            "max_targets": max_targets,
            "stock_modes": stock_modes,
            "cuda_graphs": cuda_graphs,
        }
    )
    sizes = parse_sizes(size)
    selected = [name.strip() for name in problems.split(",") if name.strip()] if problems else None
    root = suite_root(suite_dir).resolve()
    kinds = suite_kinds(root, selected)  # read, never run; a folder of both kinds is one line here
    if kinds.input == KERNEL_FILES:
        from kernelopt.cli.bench_files_cmd import (
            bench_kernel_files,
            file_operators_of,
            print_file_bench,
            refuse_model_bench_flags,
        )
        from kernelopt.pipeline.bench_files import FILE_TARGET

        refuse_model_bench_flags(
            suite_dir,
            {
                "--llm": llm is not None or llm_config is not None,
                "--stock-modes": stock_modes is not None,
                "--cuda-graphs": cuda_graphs is not None,
                "--max-targets": max_targets is not None,
                "--gpus": gpus != 1,
                "--shard": shard is not None,
                "--stop-after": stop_after is not None,
                "--slot": slot is not None,
                "--expect-from": expect_from is not None,
                "--plan": plan,
            },
        )
        done = bench_kernel_files(
            root,
            kinds,
            err,
            results_dir=out_dir or Path("bench-results") / root.name,
            time_limit_s=time_limit,
            resume=resume,
            retry_failed=retry_failed,
            rerun=_names(rerun),
            worker_timeout_s=timeout,
            options={
                "budget": config.budget,
                "patience": config.patience,
                "operators": file_operators_of(operators),
                **({"store": str(store)} if store else {}),
            },
            config=config,
            sizes=sizes,
            selection=selected,
            target=worker_target or FILE_TARGET,
            extra_path=list(worker_path or []),
            write_report=not no_report,
        )
        if as_json:
            print_json(done.to_dict())
        else:
            print_file_bench(done, out)
        if done.report_error:  # on stderr in both forms: the results stand, the page is missing
            err.print(f"warning: {done.report_error}", markup=False, highlight=False)
        return
    chosen = [name.strip() for name in operators.split(",") if name.strip()]
    make_operators(chosen)  # an unknown operator stops here, not in every problem's worker
    relay_for = nullcontext(None) if plan else llm_relay(llm, llm_config, llm_max_requests, llm_max_usd)
    with relay_for as relay:  # a bad --llm or a missing key: here
        report = run_bench(
            suite_dir,
            problems=selected,
            time_limit_s=time_limit,
            results_dir=out_dir or Path("bench-results") / suite_dir.resolve().name,
            resume=resume,
            target=worker_target or DEFAULT_TARGET,
            worker_timeout_s=timeout,
            extra_options={
                "budget": config.budget,
                "max_targets": config.max_targets,
                "patience": config.patience,
                "operators": chosen,
                "settings": config.values(),
                **({"store": str(store)} if store else {}),
            },
            on_event=lambda event: _print_event(event, err),
            extra_path=list(worker_path or []),
            gpus=gpus,
            shard=_shard(shard),
            retry_failed=retry_failed,
            rerun=_names(rerun),
            config=config,
            write_report=not no_report,
            sizes=sizes,
            stop_after_s=stop_after,
            slot_s=slot,
            expect_from=expect_from,
            order=order,
            plan_only=plan,
            llm=relay,
        )
    if plan:
        _plan_line(report, slot)
        return
    _show(report, as_json)


@contextmanager
def llm_relay(
    llm: str | None, llm_config: Path | None, max_requests: int, max_usd: float | None = None
) -> Iterator[RelayAccess | None]:
    """The bench's key relay for ``--llm`` (:mod:`kernelopt.agents.relay`), serving while the bench runs;
    its access goes to every problem's worker. None without ``--llm`` or ``--llm-config``. The key is
    read here, once: a missing one stops the bench before any problem."""
    if llm is None and llm_config is None:
        yield None
        return
    from kernelopt.agents.providers import LLMConfig, load_llm_config, resolve_api_key
    from kernelopt.agents.providers.anthropic_provider import DEFAULT_ANTHROPIC_URL
    from kernelopt.agents.providers.openai_provider import DEFAULT_OPENAI_URL
    from kernelopt.agents.relay import KeyRelay

    config = load_llm_config(llm_config) if llm_config is not None else LLMConfig()
    spec = config.spec_for(llm)
    key = resolve_api_key(spec, api_key_env=config.api_key_env)
    upstream = spec.base_url or (DEFAULT_ANTHROPIC_URL if spec.kind == "anthropic" else DEFAULT_OPENAI_URL)
    with KeyRelay(spec, key, upstream, config, max_requests, max_usd) as relay:
        yield relay.access
    cost = f", ${relay.spent_usd:.2f}" if relay.spent_usd else ""
    err.print(f"LLM through the bench's relay: {relay.requests} requests{cost}", markup=False, highlight=False)


@app.command("bench-merge")
@user_errors
def bench_merge(
    out_dir: Path = typer.Argument(..., help="Where the joined results.json and results.csv go."),
    result_dirs: list[Path] = typer.Argument(..., help="Results directories of benches of the same suite (shards)."),
    as_json: bool = typer.Option(False, "--json", help="Print the joined results as JSON."),
    no_report: bool = typer.Option(False, "--no-report", help="Do not write report.html beside the joined results."),
) -> None:
    """Join the results of several benches of one suite (--shard runs, other machines) into one scoreboard."""
    from kernelopt.pipeline.bench import merge_results

    report = merge_results(result_dirs, out_dir, write_report=not no_report)
    _show(report, as_json)


def _show(report: BenchReport, as_json: bool) -> None:
    if as_json:
        print_json(report.to_dict())
    else:
        print_bench(report, out)
    if report.report_error:  # on stderr in both forms: the results stand, the page is missing
        err.print(f"warning: {report.report_error}", markup=False, highlight=False)


def _plan_line(report: BenchReport, slot: float | None) -> None:
    """``bench --plan``'s last line: how many of the problems left would start, and that nothing ran."""
    plan = report.meta.get("planned") or {}
    within = f" within --slot {slot:g} s" if slot is not None else ""
    out.print(
        f"plan: {len(plan.get('start') or [])} of the {plan.get('of', 0)} problems left to run would start{within}; "
        "nothing was run or written",
        markup=False,
        highlight=False,
    )
    if plan.get("projection"):
        out.print(plan["projection"], markup=False, highlight=False)


def _shard(text: str | None) -> tuple[int, int] | None:
    from kernelopt.errors import KerneloptError

    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(count) > 0):
        raise KerneloptError(f"--shard {text}: expected I/N, such as 1/2")
    return int(index), int(count)


def _ms(value: float | None) -> str:
    from kernelopt.report.scoreboard import fmt_ms

    return fmt_ms(value, missing="—")


def _ratio(value: float | None) -> str:
    from kernelopt.report.scoreboard import fmt_ratio

    return fmt_ratio(value, digits=2, missing="—")


def _share(value: float | None) -> str:
    from kernelopt.report.scoreboard import fmt_share

    return fmt_share(value, missing="—")


def _print_event(event: BenchEvent, console: Console) -> None:
    position = f"[{event.index}/{event.total}]"
    if event.kind == "ordered":
        console.print(event.why, markup=False, highlight=False)
    elif event.kind == "start":
        console.print(f"{position} {event.name} ...", markup=False, highlight=False)
    elif event.kind == "planned":
        at = f"at {event.elapsed_s:.0f} s" if event.elapsed_s is not None else ""
        console.print(f"{position} {event.name} would start {at}: {event.why}", markup=False, highlight=False)
    elif event.kind in ("not-started", "cut"):
        since = f" ({event.elapsed_s:.0f} s since the bench began)" if event.elapsed_s is not None else ""
        verb = "not started" if event.kind == "not-started" else "cut"
        console.print(f"{position} {event.name} {verb}: {event.why}{since}", markup=False, highlight=False)
    elif event.outcome is not None:
        o = event.outcome
        verb = "already done:" if event.kind == "skip" else "->"
        line = f"{position} {event.name} {verb} {o.status}"
        if o.worker_s is not None and event.kind != "skip":  # a row read back ran in an earlier bench
            line += f" in {o.worker_s:.0f} s"
        if o.status == "ok":
            line += f", {'correct' if o.correct else 'INCORRECT'}, {_ratio(o.speedup_vs_compile)} vs torch.compile"
            if o.best_stock_mode is not None:  # the baseline that counts: the best mode the user could have picked
                line += f", {_ratio(o.speedup_vs_best_stock)} vs the best stock mode ({o.best_stock_mode})"
        else:
            line += f": {o.reason}"
        console.print(line, markup=False, highlight=False)


def _problem_row(o: ProblemOutcome) -> list[Text | str]:
    return [
        Text(o.name),
        Text(o.status, style=_STATUS_STYLE.get(o.status, "")),
        Text("yes") if o.correct else Text("no", style="red") if o.status == "ok" else "—",
        _ms(o.eager_ms),
        _ms(o.compiled_ms),
        _ms(o.max_autotune_ms),
        _ms(o.optimized_ms),
        _ratio(o.speedup_vs_eager),
        _ratio(o.speedup_vs_compile),
        _ratio(o.speedup_vs_max_autotune),
        Text(o.best_stock_mode or "—"),
        _ratio(o.speedup_vs_best_stock),
        Text(o.base_mode),
    ]


def print_bench(report: BenchReport, console: Console) -> None:
    """The per-problem table, the reasons of failed problems, then the suite summary."""
    from kernelopt.report.metrics import BASELINE_LABELS

    table = Table(title=f"kernelopt bench: {report.suite}", title_justify="left")
    longest = max((len(o.name) for o in report.outcomes), default=7)
    table.add_column("problem", no_wrap=True, min_width=longest)  # narrow terminals squeeze the numbers, not names
    for header in ("status", "correct", "eager ms", "compile ms", "max-autotune ms", "optimized ms"):
        table.add_column(header, justify="left" if header == "status" else "right")
    for header in ("vs eager", "vs compile", "vs max-autotune", "best stock mode", "vs best stock", "built on"):
        table.add_column(header, justify="right")
    for outcome in report.outcomes:
        table.add_row(*_problem_row(outcome))
    table.caption = (
        "vs max-autotune: measured interleaved in the max-autotune process where that worked "
        "(then not the ratio of the two ms columns, which come from different processes); best stock mode: "
        "of the default and the stock_modes setting's, the one kernelopt is least faster than"
    )
    table.caption_justify = "left"
    console.print(table)

    failed = [o for o in report.outcomes if o.status != "ok"]
    for o in failed:
        console.print(f"  {o.name}: {o.status}: {o.reason}", markup=False, highlight=False)

    s = report.summary
    summary = Table(title="summary (fast_p over all problems; geomean over correct ones)", title_justify="left")
    summary.add_column("baseline")
    for key in s["fast_p"]["compile"]:
        summary.add_column(f"fast_{key}", justify="right")
    summary.add_column("geomean speedup", justify="right")
    for baseline, label in BASELINE_LABELS.items():
        row = [_share(v) for v in s["fast_p"][baseline].values()]
        summary.add_row(label, *row, _ratio(s["geomean_speedup"][baseline]))
    console.print(summary)

    counts = ", ".join(f"{status} {n}" for status, n in s["status_counts"].items() if n)
    console.print(f"problems: {s['problems']} ({counts or 'none'}); correct: {s['correct']}", highlight=False)
    slower = s["slower_than_baseline"]
    style = "red" if slower else "green"
    names = f": {', '.join(slower)}" if slower else ""
    console.print(f"[{style}]slower than torch.compile (beyond 1 %): {len(slower)}[/]{names}", highlight=False)
    from kernelopt.report.scoreboard import best_stock_target_line, coverage_line

    if coverage_line(s):
        console.print(coverage_line(s), markup=False, highlight=False)
    console.print(best_stock_target_line(s), markup=False, highlight=False)
    rate = s["evaluations_per_gpu_minute"]
    console.print(
        f"evaluations: {s['evaluations']}, GPU time {s['gpu_s']:.0f} s"
        + (f", {rate:.0f} evaluations per GPU-minute" if rate is not None else ""),
        highlight=False,
    )
    if report.resumed:
        console.print(f"taken from the earlier run: {len(report.resumed)} problem(s)", highlight=False)
    console.print(
        f"results: {report.json_path}, {report.csv_path}, {report.markdown_path}", markup=False, highlight=False
    )
    if report.report_path:
        console.print(f"report: {report.report_path}", markup=False, highlight=False)


def _names(listed: str | None) -> list[str] | None:
    """A comma-separated list of names (``--rerun a,b``), blanks dropped."""
    return [name.strip() for name in listed.split(",") if name.strip()] if listed else None
