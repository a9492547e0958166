"""``kernelopt`` command line (typer: typed options, help and exit codes from one library).

An option that has a setting (:mod:`kernelopt.config`) defaults to None and is resolved
through :func:`~kernelopt.config.load_settings`, so a flag, ``KERNELOPT_*``, the settings
file and ``--effort`` agree on one order; ``--help`` shows the effective value.
"""

from __future__ import annotations

from pathlib import Path

import typer

from kernelopt.cli.common import (
    EFFORT_OPTION,
    LLM_CONFIG_OPTION,
    SIZE_OPTION,
    STORE_OPTION,
    TRAIN_OPTION,
    app,
    err,
    out,
    parse_sizes,
    print_json,
    setting_option,
    user_errors,
)
from kernelopt.config import load_settings
from kernelopt.errors import KerneloptError
from kernelopt.search.operators import DEFAULT_OPERATORS


@app.command()
@user_errors
def analyze(
    problem: Path = typer.Argument(
        ..., help="A KernelBench-format problem file, or a standalone Triton or Helion kernel file."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the full report as JSON."),
    seed: int = typer.Option(0, help="Seed for weights and inputs."),
    trials: int | None = setting_option(
        "analyze_trials", "--trials", help="Timed trials for eager and compiled models (interleaved)."
    ),
    store: Path | None = STORE_OPTION,
    stock_modes: bool = typer.Option(
        False,
        "--stock-modes",
        help="Also time each stock torch.compile mode (the stock_modes setting) against the default.",
    ),
    train: bool = TRAIN_OPTION,
    size: list[str] | None = SIZE_OPTION,
) -> None:
    """Where the compiled model spends its GPU time, launch by launch, and how much is headroom."""
    from kernelopt.cli.format import print_analysis
    from kernelopt.pipeline.analyze import analyze_file
    from kernelopt.problem.file_kind import MODEL, file_kind
    from kernelopt.store import Store

    sizes = parse_sizes(size)
    kind = file_kind(problem)
    if kind != MODEL:  # a kernel file: its time against its roofline floor
        from kernelopt.cli.kernel_file_cmd import print_file_analysis, refuse_model_flags
        from kernelopt.pipeline.analyze_kernel_file import analyze_kernel_file

        refuse_model_flags(problem, kind, {"--stock-modes": stock_modes, "--train": train})
        with Store(store) as db:
            found = analyze_kernel_file(problem, db, trials=trials, sizes=sizes)
        if as_json:
            print_json(found)
        else:
            print_file_analysis(found, out)
        return
    with Store(store) as db:  # the problem file runs in a worker, never in this process
        report = analyze_file(problem, db, seed=seed, trials=trials, stock_modes=stock_modes, train=train, sizes=sizes)
    if as_json:
        print_json(report.to_dict())
    else:
        print_analysis(report, out)


@app.command()
@user_errors
def verify(
    problem: Path = typer.Argument(
        ..., help="A KernelBench-format problem file, or a standalone Triton or Helion kernel file."
    ),
    kernel: str | None = typer.Option(
        None,
        "--kernel",
        help="Name of the generated Triton kernel to replace (see kernelopt analyze); for a kernel file, the "
        "@triton.jit kernel a CUDA C++ candidate replaces (where launch launches more than one).",
    ),
    candidate: Path = typer.Option(
        ...,
        "--candidate",
        help="The replacement kernel: a Python file in Inductor's format (for a kernel file: a whole kernel "
        "file), or CUDA C++ whose first line is `// kernelopt: cuda` (see the README).",
    ),
    export: Path | None = typer.Option(
        None,
        "--export",
        help="Where to write the verified model (default: <problem>.<kernel>.kopt.json; for a kernel file "
        "<stem>_kopt.py, or <stem>_kopt.cu for CUDA C++).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the full report as JSON."),
    timeout: float | None = setting_option(
        "verify_timeout_s", "--timeout", help="Seconds before the evaluation worker is killed."
    ),
    margin: float | None = setting_option(
        "margin", "--margin", help="Required speedup margin over the original kernel (0.03 = 3%)."
    ),
    store: Path | None = STORE_OPTION,
    train: bool = TRAIN_OPTION,
    size: list[str] | None = SIZE_OPTION,
) -> None:
    """Run your own kernel through the four gates; export the re-stitched model (or your faster kernel
    file, with its verification record) if it passes."""
    from kernelopt.api.verify import verify as run_verify
    from kernelopt.cli.format import print_verify
    from kernelopt.problem.file_kind import MODEL, file_kind
    from kernelopt.problem.loader import check_size_names
    from kernelopt.store import Store

    sizes = parse_sizes(size)
    kind = file_kind(problem)
    check_size_names(problem, sizes)  # bad input before the candidate is read or a worker starts
    if kind != MODEL:
        from kernelopt.api.verify_file import verify_file
        from kernelopt.cli.kernel_file_cmd import refuse_model_flags

        refuse_model_flags(problem, kind, {"--train": train})

        with Store(store) as db:
            report = verify_file(
                problem, candidate, db, export, kernel=kernel, timeout_s=timeout, margin=margin, sizes=sizes
            )
    else:
        if kernel is None:
            raise KerneloptError(
                f"{problem} is a problem file: name the generated kernel to replace with --kernel (see kernelopt analyze)"
            )
        with Store(store) as db:
            report = run_verify(
                problem, kernel, candidate, db, export, timeout_s=timeout, margin=margin, train=train, sizes=sizes
            )
    if as_json:
        print_json(report.to_dict())
    else:
        print_verify(report, out)
    if not report.passed:
        raise typer.Exit(1)


@app.command()
@user_errors
def optimize(
    problem: Path = typer.Argument(
        ..., help="A KernelBench-format problem file, or a standalone Triton kernel file (docs/kernel-files.md)."
    ),
    budget: int | None = setting_option("budget", "--budget", help="Evaluations per kernel (each one: four gates)."),
    time_limit: float | None = typer.Option(None, "--time-limit", help="Wall-clock seconds per kernel search."),
    patience: int | None = setting_option(
        "patience", "--patience", help="Stop a kernel's search after this many rounds without improvement."
    ),
    operators: str = typer.Option(
        ",".join(DEFAULT_OPERATORS),
        "--operators",
        help="Comma-separated: launch-config, eviction-policy, compiler-knobs (whole-model Inductor options, "
        "searched first), structural (the kernel regenerated by Inductor under other options), graph-variants (a "
        "graph's whole call sequence regenerated under options that change which kernels run, judged end to end).",
    ),
    policy: str = typer.Option("beam", help="Selection policy: beam (default) or ucb."),
    max_targets: int | None = setting_option(
        "max_targets", "--max-targets", help="Search at most this many kernels, by headroom."
    ),
    effort: str | None = EFFORT_OPTION,
    resume: int | None = typer.Option(None, "--resume", help="Continue a killed optimize run by its id."),
    llm: str | None = typer.Option(
        None, "--llm", help="Add the LLM agents: openai:MODEL, anthropic:MODEL or openai-compatible:MODEL@URL."
    ),
    llm_config: Path | None = LLM_CONFIG_OPTION,
    kernel: str | None = typer.Option(
        None,
        "--kernel",
        help="For a Triton kernel file with --llm: the @triton.jit kernel the agents rewrite and a CUDA C++ "
        "candidate replaces (default: the first one launch launches), as for kernelopt verify.",
    ),
    export: Path | None = typer.Option(
        None,
        "--export",
        help="Where to write the verified model (default: <problem>.kopt.json; for a kernel file, the verified file: <stem>_kopt.py).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the full report as JSON."),
    no_report: bool = typer.Option(
        False, "--no-report", help="Do not write the HTML report (default: <problem>.report.html beside --export)."
    ),
    store: Path | None = STORE_OPTION,
    stock_modes: bool = typer.Option(
        False,
        "--stock-modes",
        help="Also time the result against each stock torch.compile mode (the stock_modes setting).",
    ),
    cuda_graphs: str | None = setting_option(
        "cuda_graphs",
        "--cuda-graphs",
        help="auto: the result may run under a CUDA-graph mode (with --stock-modes), and a launch-bound one is "
        "judged as CUDA-graph replays; off: never.",
    ),
    train: bool = TRAIN_OPTION,
    size: list[str] | None = SIZE_OPTION,
) -> None:
    """Search faster kernels for a problem; export a verified model, or keep the compiler's baseline."""
    from kernelopt.cli.format import OptimizeProgress, print_optimize
    from kernelopt.pipeline.optimize import optimize as run_optimize
    from kernelopt.pipeline.optimize import require_gpu
    from kernelopt.problem.file_kind import MODEL, file_kind
    from kernelopt.problem.loader import check_size_names
    from kernelopt.search.termination import Budget
    from kernelopt.store import Store

    config = load_settings(
        {
            "effort": effort,
            "budget": budget,
            "patience": patience,
            "max_targets": max_targets,
            "store": store,
            "cuda_graphs": cuda_graphs,
        }
    )
    sizes = parse_sizes(size)
    kind = file_kind(problem)  # a problem, or a standalone Triton / Helion kernel file
    check_size_names(problem, sizes)  # bad input before the GPU check and the progress display
    plan = Budget(max_evaluations=config.budget, max_wall_s=time_limit, patience=config.patience)
    names = [o.strip() for o in operators.split(",") if o.strip()]
    if kind != MODEL:
        from kernelopt.cli.kernel_file_cmd import optimize_kernel_file, print_file_report

        refused = {
            "--train": train,
            "--stock-modes": stock_modes,
            "--max-targets": max_targets is not None,
            "--cuda-graphs": cuda_graphs is not None,
        }
        done = optimize_kernel_file(
            problem, kind, names, policy, plan, config, export, resume, llm, llm_config, as_json, refused, err, sizes,
            kernel,
        )  # fmt: skip
        if as_json:
            print_json(done.to_dict())
        else:
            print_file_report(done, out)
        return
    if kernel is not None:  # a model's kernels are Inductor's, searched by headroom
        raise KerneloptError(
            f"--kernel applies to a kernel file; {problem} is a problem file, whose generated kernels are searched "
            "by headroom: leave --kernel out (--max-targets bounds how many)"
        )
    require_gpu()
    with Store(config.store) as db, OptimizeProgress(err, enabled=not as_json) as progress:
        report = run_optimize(
            problem,
            db,
            operators=names,
            policy=policy,
            budget=plan,
            max_targets=config.max_targets,
            export_path=export,
            resume_run=resume,
            llm=llm,
            llm_config=llm_config,
            on_event=progress.update,
            config=config,
            write_report=not no_report,
            stock_modes=stock_modes,
            train=train,
            sizes=sizes,
        )
    if as_json:
        print_json(report.to_dict())
    else:
        print_optimize(report, out)


@app.command()
@user_errors
def runs(
    kind: str | None = typer.Option(
        None, help="Only runs of this kind: analyze, verify or optimize (bench records an optimize run per problem)."
    ),
    store: Path | None = STORE_OPTION,
) -> None:
    """The runs in the store (ids for --resume), newest last."""
    from kernelopt.cli.format import print_runs
    from kernelopt.store import Store
    from kernelopt.store.db import RUN_KINDS

    if kind is not None and kind not in RUN_KINDS:
        raise KerneloptError(f"--kind {kind}: no such run kind; pass one of {', '.join(RUN_KINDS)}")
    with Store(store, read_only=True) as db:
        print_runs(db.runs(kind), out)


@app.command()
@user_errors
def nodes(
    run_id: int = typer.Argument(..., help="The optimize run whose search graph to print (see kernelopt runs)."),
    kernel: str | None = typer.Option(None, help="Only this target (a kernel name, or 'model' for compiler knobs)."),
    as_json: bool = typer.Option(False, "--json", help="Print every node as JSON, results included."),
    store: Path | None = STORE_OPTION,
) -> None:
    """Every candidate a run's search made: parent, operator, what it changed, its gate record."""
    from dataclasses import asdict

    from kernelopt.cli.format import print_nodes
    from kernelopt.search.candidate import MODEL_TARGET
    from kernelopt.search.nodes import NodeStore
    from kernelopt.store import Store

    with Store(store, read_only=True) as db:
        run = db.run(run_id)  # an unknown run id is a clear error, not an empty listing
        graph = NodeStore(db, run_id)
        targets = graph.targets()
        if kernel == "model":  # the help's name for the whole-model (compiler knobs) target
            kernel = MODEL_TARGET
        if kernel is not None and kernel not in targets:
            raise KerneloptError(
                f"run {run_id} searched no target {kernel!r}; its targets: {', '.join(targets) or 'none'}"
            )
        chosen = [kernel] if kernel is not None else targets
        found = {t: graph.nodes(t) for t in chosen}
    if as_json:
        print_json({t: [asdict(n) for n in ns] for t, ns in found.items()})
        return
    if not found:
        raise KerneloptError(
            f"run {run_id} has no search nodes (an analyze or verify run, or killed before its search)"
        )
    baseline = "the user's file (the baseline)" if run.args.get("input") not in (None, "model") else None
    for target, ns in found.items():
        print_nodes(target, ns, out, baseline)


@app.command()
@user_errors
def transcripts(
    run_id: int = typer.Argument(..., help="The run whose LLM exchanges to print (see kernelopt runs)."),
    role: str | None = typer.Option(None, help="Only this role: analyst, planner, coder, repairer, judge."),
    full: bool = typer.Option(False, help="Print prompts and responses whole instead of trimmed."),
    store: Path | None = STORE_OPTION,
) -> None:
    """Every prompt and response of a run's LLM agents, in the order they were sent."""
    from kernelopt.cli.format import transcript_text
    from kernelopt.store import Store
    from kernelopt.store.llm_records import transcripts as read_transcripts

    with Store(store, read_only=True) as db:
        db.run(run_id)  # an unknown run id is a clear error, not an empty listing
        found = [t for t in read_transcripts(db.connection, run_id) if role is None or t.role == role]
    if not found:
        raise KerneloptError(
            f"run {run_id} has no LLM transcripts{f' for role {role}' if role else ''} (was it run with --llm?)"
        )
    for t in found:
        out.print(transcript_text(t, None if full else 2000), markup=False, highlight=False)


@app.command()
@user_errors
def doctor(
    store: Path | None = STORE_OPTION,
    remeasure: bool = typer.Option(False, help="Measure the copy bandwidth again even if the store has it."),
) -> None:
    """GPU, driver, torch / Triton versions, peak copy bandwidth and whether Nsight Compute reads counters."""
    from kernelopt.api.doctor import diagnose
    from kernelopt.cli.format import print_doctor
    from kernelopt.store import Store

    with Store(store) as db:
        print_doctor(diagnose(db, remeasure=remeasure), out)


@app.command("build-op")
@user_errors
def build_op(
    arch: str | None = typer.Option(
        None, help="GPU architecture as MAJOR.MINOR (9.0: H100, H200); default: this machine's GPU's."
    ),
) -> None:
    """Build kernelopt's row-softmax op (every dtype pair) and group-norm op (every dtype, and its C++ host
    path for this torch) into KERNELOPT_CUDA_BUILD_DIR, for a machine without nvcc that runs a result using
    them (the kernelopt.cluster_softmax, kernelopt.cluster_norm and kernelopt.cluster_group_norm options)."""
    import torch

    from kernelopt.capture.cuda_kernel import CudaBuildError, build_root
    from kernelopt.capture.rewrites import group_norm_host, group_norm_kernel, group_norm_op, row_softmax_kernel

    if arch is None:
        if not torch.cuda.is_available():
            raise KerneloptError("no GPU here to read the architecture from: pass --arch, e.g. --arch 9.0")
        target = torch.cuda.get_device_capability()
    else:
        major, dot, minor = arch.partition(".")
        if not (major.isdigit() and dot and minor.isdigit()):
            raise KerneloptError(f"--arch {arch!r}: give MAJOR.MINOR, e.g. --arch 9.0")
        target = (int(major), int(minor))
    if target < (9, 0):
        raise KerneloptError(
            f"sm_{target[0]}{target[1]} has no thread-block clusters, which the op needs: build for 9.0 or later"
        )
    try:
        libraries = row_softmax_kernel.build_all(target)
        group_norms = group_norm_kernel.build_all(target)
        host = group_norm_host.build(group_norm_op.PLANS_KEPT)
    except CudaBuildError as exc:
        raise KerneloptError(str(exc)) from None
    out.print(f"kernelopt.row_softmax for sm_{target[0]}{target[1]}, {len(libraries)} dtype pairs, in {build_root()}:")
    for library in libraries:
        out.print(f"  {library}", markup=False, highlight=False)
    out.print(f"kernelopt.group_norm for sm_{target[0]}{target[1]}, {len(group_norms)} dtypes, in {build_root()}:")
    for library in group_norms:
        out.print(f"  {library}", markup=False, highlight=False)
    out.print(f"kernelopt.group_norm's C++ host path for torch {torch.__version__}:")
    out.print(f"  {host}", markup=False, highlight=False)


@app.command("config")
@user_errors
def config_command(
    effort: str | None = EFFORT_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print every setting as JSON: value, source, variable, help."),
) -> None:
    """Every setting in effect, its value and where it came from (argument, KERNELOPT_*, kernelopt.toml, profile)."""
    from rich.table import Table

    rows = load_settings({"effort": effort}).rows()
    if as_json:
        print_json({row["name"]: {k: v for k, v in row.items() if k != "name"} for row in rows})
        return
    table = Table(
        title="kernelopt settings (highest first: argument, environment, settings file, effort profile, default)",
        title_justify="left",
    )
    for header in ("setting", "value", "source", "variable", "what it sets"):
        table.add_column(header)
    for row in rows:
        value = row["value"]
        shown = (
            ",".join(map(str, value))
            if isinstance(value, list)
            else f"{value:g}"
            if isinstance(value, float)
            else str(value)
        )
        table.add_row(row["name"], shown, row["source"], row["env"], row["help"])
    out.print(table)


# The suite and report commands register on app after this module's own, so --help lists them after.
from kernelopt.cli import bench_cmd, report_cmd  # noqa: E402,F401


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
