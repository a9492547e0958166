"""``kernelopt bench``: optimize every problem of a suite and keep the scoreboard.

Each problem runs in its own isolated worker (``target``, by default
:func:`kernelopt.pipeline.bench_problem.bench_problem`), so a problem that hangs, segfaults or
exhausts memory costs one row of the table, never the suite. After every problem
the whole result is rewritten atomically to ``results.json`` and ``results.csv``,
so a bench killed at any moment resumes (``resume=True``) from the last finished
problem. (The run's stages, GPU lanes and resume are one loop; the result files, the per-problem
worker and the slot's rules live in ``bench_results``, ``bench_problem`` and ``bench_slot``.)

The worker target is called as ``target(problem_path: str, options: dict) -> dict``
where ``options`` holds ``name`` and ``time_limit_s`` (the per-problem budget, None
for the target's default) plus the caller's ``extra_options`` (for the default target,
``settings`` too: the run's :meth:`~kernelopt.config.Settings.values`). It returns a dict in
the shape of :meth:`ProblemOutcome.to_dict`, with ``status``/``reason`` filled for
the compile and run errors it catches itself, and may put the GPU's name in
``details["device"]``.

A suite is a directory of KernelBench-format files, searched recursively (our
``examples/problems`` or KernelBench's own ``level1``…``level4``); a KernelBench
checkout's root is accepted too and means its ``KernelBench/`` folder. A folder of
kernel files is :mod:`kernelopt.pipeline.bench_files`'s (the CLI picks by what the folder
holds); one that mixes both kinds is refused here, in one line.

The results folder (its files, their atomic writes, reading it back to resume,
merging several) is :mod:`kernelopt.pipeline.bench_results`; this module runs the
suite: selection, resume, the GPU lanes and one worker per problem.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from kernelopt.agents.relay import RelayAccess
from kernelopt.config import Settings, default_of, load_settings
from kernelopt.errors import KerneloptError
from kernelopt.measure.environment import gpu_labels, source_digest
from kernelopt.pipeline.bench_results import (
    CSV_COLUMNS,
    RESULTS_CSV,
    RESULTS_JSON,
    RESULTS_MD,
    BenchReport,
    merge_results,
    read_results,
    write_results,
)
from kernelopt.pipeline.bench_resume import (
    carried_rows,
    check_one_device,
    check_rerun,
    check_resumed_gpus,
    in_given_order,
    ordered,
    previous_results,
    replace_row,
    rerun_names,
    results_meta,
    resumed_sizes,
)
from kernelopt.pipeline.bench_slot import (
    ORDERS,
    STARTUP_S,
    Expected,
    by_payoff,
    cut_reason,
    expected_seconds,
    order_line,
    plan_slot,
    projected_target,
    projection_line,
    read_reference,
    slot_deadline,
    start_refusal,
)
from kernelopt.pipeline.suite_check import check_suite
from kernelopt.problem.loader import SuiteEntry, matches, size_names, suite_files
from kernelopt.problem.suite_kinds import KERNEL_FILES, suite_kinds
from kernelopt.report.metrics import ProblemOutcome, not_run, summarize
from kernelopt.workers import WorkerResult, run_isolated
from kernelopt.workers.identity import require_readable

EXPORT_DIR = "models"  # under the results: <problem name>.kopt.json
DEFAULT_TARGET = "kernelopt.pipeline.bench_problem:bench_problem"
CUT = "cut"  # the results' meta: problems stopped at a slot's end whose unfinished run has not ended since
DEFAULT_WORKER_TIMEOUT_S: float = default_of("bench_timeout_s")  # without a time limit (the bench_timeout_s setting)
WORKER_TIMEOUT_MARGIN_S: float = default_of("bench_timeout_margin_s")  # with one: room for timing three baselines
EXTRA_STOCK_MODE_S = 600.0
STDERR_KEPT_CHARS = 1000
_WORKER_STATUS = {"timeout": "timeout", "crash": "crash", "oom": "crash", "error": "run_error"}


@dataclass(frozen=True)
class BenchEvent:
    """Progress for a display: ``kind`` is ``"start"``, ``"done"``, ``"skip"`` (already in the results),
    ``"not-started"`` (``stop_after_s`` had passed, or the problem would not end within ``slot_s``: left for
    a resumed bench), ``"cut"`` (running when ``slot_s`` ended: stopped, its run left unfinished for a
    resumed bench), ``"ordered"`` (before any other, ``order="payoff"``'s: ``why`` the order and its
    reasons, no problem named) or, in a plan, ``"planned"`` (``elapsed_s``: when it would start; ``why``: how
    long it is expected to take); ``why`` says which, ``elapsed_s`` how long the bench had run, its start-up
    included."""

    kind: str
    name: str
    index: int  # 1-based position in the selected problems
    total: int
    outcome: ProblemOutcome | None = None
    elapsed_s: float | None = None
    why: str = ""


def suite_root(suite_dir: str | Path) -> Path:
    """The directory whose files are the problems: a KernelBench checkout means its ``KernelBench/``."""
    root = Path(suite_dir)
    inner = root / "KernelBench"
    if inner.is_dir() and any(child.is_dir() and child.name.startswith("level") for child in inner.iterdir()):
        return inner
    return root


def default_worker_timeout(time_limit_s: float | None, config: Settings | None = None) -> float:
    """How long a problem's worker may live: its search budget plus room for the baselines
    (the ``bench_timeout_s`` and ``bench_timeout_margin_s`` settings of ``config``); each stock
    mode beyond the first adds :data:`EXTRA_STOCK_MODE_S` (a compile and two timed comparisons)."""
    config = config or load_settings()
    extra = EXTRA_STOCK_MODE_S * max(0, len(config.stock_modes.split(",")) - 1)
    if time_limit_s is None:
        return config.bench_timeout_s + extra
    return time_limit_s + config.bench_timeout_margin_s + extra


def run_bench(
    suite_dir: str | Path,
    *,
    problems: Sequence[str] | None = None,
    time_limit_s: float | None = None,
    results_dir: str | Path,
    resume: bool = False,
    target: str = DEFAULT_TARGET,
    worker_timeout_s: float | None = None,
    extra_options: dict[str, Any] | None = None,
    on_event: Callable[[BenchEvent], None] | None = None,
    extra_path: Sequence[str | Path] = (),
    command: str | None = None,
    gpus: int = 1,
    shard: tuple[int, int] | None = None,
    retry_failed: bool = False,
    rerun: Sequence[str] | None = None,
    config: Settings | None = None,
    write_report: bool = True,
    sizes: dict[str, Any] | None = None,
    stop_after_s: float | None = None,
    slot_s: float | None = None,
    expect_from: str | Path | None = None,
    order: str = "given",
    plan_only: bool = False,
    llm: RelayAccess | None = None,
    _clock: Callable[[], float] = time.monotonic,
) -> BenchReport:
    """Benchmark every (selected) problem of ``suite_dir``; write and return the scoreboard.

    ``problems`` selects by name, file stem or substring of the name (the loader's
    rule). ``worker_timeout_s`` bounds each worker (default:
    :func:`default_worker_timeout`). ``extra_path`` goes first on the workers'
    ``sys.path`` (tests use it to reach a fake target). ``command`` is recorded in
    the results (default: this process's command line). ``gpus`` > 1 runs that many
    problems at once, each worker pinned to its own GPU (one problem per GPU at a
    time, so timings never share a GPU); results are written as each one finishes.
    ``shard=(i, n)`` keeps every n-th selected problem starting at the i-th (1-based),
    so n machines can split a suite; :func:`merge_results` joins their results.
    ``retry_failed`` with ``resume`` runs again the problems whose earlier outcome was
    not ``ok`` (a timeout, a crash, an out-of-memory caused by something else).
    ``rerun`` with ``resume`` runs again the finished problems it names (the loader's rule, within
    the selection): the new outcome replaces the earlier one, whatever either says, and the results'
    ``meta["replaced"]`` keeps what the earlier one was (a better run is not picked by its number).
    ``write_report`` writes the HTML report (``report.html``) beside the results at the end;
    a report that cannot be written leaves ``report_error``, never a failed bench.
    ``config`` (default: :func:`~kernelopt.config.load_settings`) bounds the workers and,
    for the default target, travels to each problem as ``options["settings"]`` (a worker
    reads no settings itself). ``sizes`` (``--size NAME=VALUE``) sets a size constant in every
    selected problem that defines it (:func:`problem_sizes`; each travels as ``options["sizes"]``);
    the results record them, and a resumed bench keeps them. ``stop_after_s``: no problem starts
    that many seconds after the bench began (those running finish): a bench given a fixed slot
    of time (a lent GPU, a CI job) ends between problems instead of cutting one short, whose
    GPU time would be lost; ``--resume`` runs the rest. ``slot_s``: the bench's whole time; a problem
    starts only where the seconds it is expected to take
    (:func:`~kernelopt.pipeline.bench_slot.expected_seconds`) fit in what is left, and the others are
    left for a resumed bench as ``stop_after_s`` leaves them; one still running when the slot ends is
    stopped, and a resumed bench goes on with its unfinished run. ``expect_from`` (with ``slot_s``): a
    bench results folder whose rows say how long each problem takes
    (:class:`~kernelopt.pipeline.bench_slot.Reference`; recorded in the results). ``order`` (one of
    :data:`~kernelopt.pipeline.bench_slot.ORDERS`): "given" runs the problems in ``problems``' order (suite
    order without it); "payoff" (with ``expect_from``) runs those left to run by what each would add to the
    suite's target a second, were it to read as its row there
    (:func:`~kernelopt.pipeline.bench_slot.by_payoff`; the order and its reasons recorded in the results'
    ``meta["order"]``). ``plan_only``: nothing
    runs, nothing is written and no GPU is asked for; each problem left to run is said as a ``"planned"``
    event (when it would start, expected how long) or a ``"not-started"`` one, as the slot's rules would
    take them (:func:`~kernelopt.pipeline.bench_slot.plan_slot`), and the report holds the results so far;
    with ``expect_from``, the plan also says what the suite's target would read were those that would start
    to read as their rows there (:func:`~kernelopt.pipeline.bench_slot.projected_target`).
    ``llm``: every problem's search adds the LLM agents, reaching the provider through the caller's relay
    (:mod:`kernelopt.agents.relay`).

    Raises :class:`KerneloptError` for a missing suite, a selection that matches
    nothing, existing results without ``resume``, ``rerun`` without ``resume`` or naming no selected
    problem, a size no selected problem defines, or
    sizes other than those of the results resumed; every failure of a problem is
    recorded in its outcome instead.
    """
    if time_limit_s is not None and time_limit_s <= 0:
        raise KerneloptError(f"--time-limit must be positive, got {time_limit_s:g}")
    config = config or load_settings()
    if target == DEFAULT_TARGET:  # our target reads them; another target gets only what its caller passes
        extra_options = {"settings": config.values(), **(extra_options or {})}
    timeout_s = default_worker_timeout(time_limit_s, config) if worker_timeout_s is None else worker_timeout_s
    _check_numbers(timeout_s, gpus, stop_after_s, slot_s)
    if expect_from is not None and slot_s is None:
        raise KerneloptError("--expect-from needs --slot: it says how long each problem is expected to take in one")
    if order not in ORDERS:
        raise KerneloptError(f"--order {order!r}: pass one of {', '.join(ORDERS)}")
    if order == "payoff" and expect_from is None:
        raise KerneloptError(
            "--order payoff needs --expect-from: it orders the problems by their rows in another bench's results"
        )
    check_rerun(rerun, resume)
    began = _clock()
    began_s = time.monotonic()  # the slot's timer runs on real seconds, whatever _clock a test gives
    _check_target(target, extra_path)
    root = suite_root(suite_dir).resolve()
    if root.is_dir() and suite_kinds(root, problems).input == KERNEL_FILES:  # a mixed folder: one line there
        raise KerneloptError(
            f"{root} holds kernel files, not model problems: bench them with kernelopt bench {suite_dir} "
            "(kernelopt.pipeline.bench_files.run_file_bench)"
        )
    out_dir = Path(results_dir)
    if target == DEFAULT_TARGET:  # the verified models stay with the results, one per problem that won
        extra_options = {"export_dir": str((out_dir / EXPORT_DIR).resolve()), **(extra_options or {})}
    previous = previous_results(out_dir, root, resume, read_results)
    if previous is not None:  # a resumed bench goes on at the sizes it started with
        sizes = resumed_sizes(out_dir, previous["meta"], sizes)
    applied = problem_sizes(root, problems, sizes)  # bad input before the GPU check
    if target == DEFAULT_TARGET and not plan_only:
        require_gpus(gpus)
        if previous is not None:
            check_resumed_gpus(previous, machine_gpus(gpus), out_dir / RESULTS_JSON)
    require_readable(root, "the suite")

    entries = _selected(root, problems, shard, extra_path)
    again = rerun_names(root, [(e.name, e.path) for e in entries], rerun)

    now = timestamp()
    command = command if command is not None else shlex.join(["kernelopt", *sys.argv[1:]])
    carried = carried_rows(previous, retry_failed, again, out_dir)
    done: dict[str, ProblemOutcome] = carried.done
    earlier: dict[str, ProblemOutcome] = carried.earlier  # kept until the new one is in
    replaced = dict(earlier)  # what a rerun took before: its seconds are what it is expected to take again
    meta = results_meta(previous, {"suite": str(root)}, now, command, again)
    meta.update(
        finished=None,
        target=target,
        time_limit_s=time_limit_s,
        worker_timeout_s=timeout_s,
        extra_options=dict(extra_options or {}),
        versions=bench_versions(),
        gpus=gpus,
        shard=list(shard) if shard else None,
        sizes=dict(sizes or {}),
        suite_problems=[name for name, _ in suite_files(root)],  # what "run so far" is counted against
        llm=f"{llm.kind}:{llm.model}" if llm else None,  # the relay's address and token are never recorded
    )
    suite_order = meta["suite_problems"]  # the scoreboard's rows in suite order, whatever order they ran in
    reference = read_reference(Path(expect_from), suite_order, read_results) if expect_from else None
    meta["expect_from"] = reference.where if reference else None
    outcomes = {**done, **earlier}

    def expected(name: str) -> Expected:
        return expected_seconds(name, replaced, outcomes.values(), timeout_s, reference)

    meta["order"] = None
    if order == "payoff" and reference is not None:  # the finished first (skipped), then the rest by payoff
        ranked = by_payoff([e.name for e in entries if e.name not in done], outcomes, reference, expected)
        position = {payoff.name: i for i, payoff in enumerate(ranked)}
        entries = sorted(entries, key=lambda entry: position.get(entry.name, -1))
        meta["order"] = order_line(ranked, reference.where)
        _emit(on_event, BenchEvent("ordered", "", 0, len(entries), why=meta["order"]))
    resumed = [entry.name for entry in entries if entry.name in done]
    if plan_only:  # nothing below runs: the plan's names stand in the report's meta, which is not written
        meta["planned"] = _plan(
            entries,
            done,
            expected,
            gpus,
            stop_after_s,
            slot_s,
            on_event,
        )
        if reference is not None:  # what the suite's target would read were they to read as there
            projection = projected_target(outcomes, meta["planned"]["start"], reference)
            meta["planned"]["projection"] = projection_line(projection, reference.where)
        rows = ordered(outcomes, suite_order)
        summary = {**summarize(rows), "not_run": not_run(meta, rows)}
        return BenchReport(root, out_dir, rows, summary, meta, resumed)

    def write() -> dict[str, Any]:
        rows = ordered(outcomes, suite_order)
        meta["device"] = next((o.details["device"] for o in rows if o.details.get("device")), None)
        return write_results(out_dir, meta, rows)

    out_dir.mkdir(parents=True, exist_ok=True)
    write()  # the directory claims its suite at once, so a second bench without --resume refuses it
    lock = threading.Lock()  # one writer of the results and of the progress display
    free_gpus = list(range(gpus))
    stop = threading.Event()  # set when the bench is interrupted: running workers end at once
    slot_over = threading.Event()  # set when --slot ends: stop is set with it

    def run_one(index: int, entry: SuiteEntry) -> None:
        with lock:
            elapsed = _clock() - began
            why = start_refusal(elapsed, stop_after_s, slot_s, lambda: expected(entry.name))
            if not why and slot_over.is_set():  # the slot's timer has rung, whatever the clock read
                why = "--slot has ended"
            if why:
                _emit(on_event, BenchEvent("not-started", entry.name, index, len(entries), elapsed_s=elapsed, why=why))
                return  # not an outcome: a resumed bench runs it
            gpu = free_gpus.pop(0) if gpus > 1 else None
            _emit(on_event, BenchEvent("start", entry.name, index, len(entries)))
        try:
            options = {**(extra_options or {}), **({"sizes": applied[entry.path]} if applied.get(entry.path) else {})}
            if entry.name in again:  # its worker takes no finished run of the problem for the new row
                options["rerun"] = True
            if entry.name in meta.get(CUT, []):  # its run, stopped at a slot's end, is gone on with uncounted
                options["after_cut"] = True
            if llm is not None:
                options["llm"] = llm.to_dict()
            outcome = _bench_one(entry, target, time_limit_s, timeout_s, options, extra_path, gpu, stop)
        finally:
            with lock:
                if gpu is not None:
                    free_gpus.append(gpu)
        if stop.is_set():  # cut short: not an outcome, so a resumed bench runs it again
            if slot_over.is_set() and slot_s is not None:
                with lock:
                    elapsed = _clock() - began
                    why = cut_reason(slot_s)
                    if entry.name not in meta.setdefault(CUT, []):
                        meta[CUT].append(entry.name)
                    _emit(on_event, BenchEvent("cut", entry.name, index, len(entries), elapsed_s=elapsed, why=why))
            return
        with lock:
            check_one_device(outcomes.values(), outcome, out_dir / RESULTS_JSON)
            if entry.name in earlier:  # a rerun: the earlier outcome is recorded as replaced, not lost
                old = earlier.pop(entry.name)
                files = ([old.details.get("exported")], [outcome.details.get("exported")])
                replace_row(meta, outcome, old, timestamp(), _reading(old), files, out_dir)
            outcomes[entry.name] = outcome
            if entry.name in meta.get(CUT, []):
                meta[CUT].remove(entry.name)
            write()
            _emit(on_event, BenchEvent("done", entry.name, index, len(entries), outcome))

    todo = []
    for index, entry in enumerate(entries, start=1):
        if entry.name in done:
            _emit(on_event, BenchEvent("skip", entry.name, index, len(entries), done[entry.name]))
        else:
            todo.append((index, entry))

    def end_slot() -> None:
        slot_over.set()
        stop.set()

    deadline = slot_deadline(slot_s, time.monotonic() - began_s, end_slot)
    try:
        _in_lanes(todo, run_one, gpus, stop)
    finally:
        if deadline is not None:
            deadline.cancel()
    meta["finished"] = timestamp()
    summary = write()
    report = BenchReport(root, out_dir, ordered(outcomes, suite_order), summary, meta, resumed)
    if write_report:
        report.write_report()
    return report


# -- one problem -----------------------------------------------------------------------


def _plan(
    entries: Sequence[SuiteEntry],
    done: Mapping[str, ProblemOutcome],
    expected: Callable[[str], Expected],
    gpus: int,
    stop_after_s: float | None,
    slot_s: float | None,
    on_event: Callable[[BenchEvent], None] | None,
) -> dict[str, Any]:
    """``run_bench(plan_only=True)``'s events: each problem left to run as the slot's rules would take it;
    the names of those that would start (``start``) and how many were left (``of``)."""
    index = {entry.name: i for i, entry in enumerate(entries, start=1)}
    todo = [entry.name for entry in entries if entry.name not in done]
    plan = plan_slot(todo, expected, gpus, stop_after_s, slot_s, STARTUP_S)
    for planned in plan:
        kind = "planned" if planned.start_s is not None else "not-started"
        why = (
            f"{planned.expected.seconds:.0f} s expected ({planned.expected.source})" if not planned.why else planned.why
        )
        _emit(
            on_event,
            BenchEvent(kind, planned.name, index[planned.name], len(entries), elapsed_s=planned.start_s, why=why),
        )
    return {"start": [p.name for p in plan if p.start_s is not None], "of": len(plan)}


def _bench_one(
    entry: SuiteEntry,
    target: str,
    time_limit_s: float | None,
    timeout_s: float,
    extra_options: dict[str, Any],
    extra_path: Sequence[str | Path],
    gpu: int | None = None,
    cancel: threading.Event | None = None,
) -> ProblemOutcome:
    if entry.error is not None:  # no worker for a file that does not even load
        return _failed(entry, "load_error", entry.error or "failed to load", {"kernelopt_source": source_digest()})
    options = {**extra_options, "name": entry.name, "time_limit_s": time_limit_s}
    # A problem's worker is kernelopt's own orchestration, which writes the store and the exports, so it
    # keeps our user; the workers it starts for candidates run as the worker user (workers.identity).
    result = run_isolated(
        target,
        str(entry.path),
        options,
        timeout_s=timeout_s,
        extra_path=extra_path,
        gpu=gpu,
        cancel=cancel,
        drop_identity=False,
    )
    outcome = _outcome_of(entry, result)
    outcome.details["kernelopt_source"] = source_digest()  # which code ran it, in a bench resumed across changes
    if extra_options.get("sizes"):
        outcome.details["sizes"] = extra_options["sizes"]  # the size constants this problem ran at
    if gpu is not None:
        outcome.details["gpu"] = gpu
    return outcome


def _outcome_of(entry: SuiteEntry, result: WorkerResult) -> ProblemOutcome:
    """The worker's returned outcome, or its way of ending turned into one."""
    details: dict[str, Any] = {"worker_s": round(result.duration_s, 3)}
    if not result.ok:
        details["worker_status"] = result.status
        if result.stderr_tail:
            details["stderr_tail"] = result.stderr_tail[-STDERR_KEPT_CHARS:]
        return _failed(entry, _WORKER_STATUS.get(result.status, "crash"), result.reason, details)
    value = result.value
    try:
        if not isinstance(value, dict):
            raise ValueError(f"expected a dict, got {type(value).__name__}")
        outcome = ProblemOutcome.from_dict({**value, "name": entry.name, "path": str(entry.path)})
    except ValueError as exc:
        return _failed(entry, "run_error", f"worker target returned an invalid outcome: {exc}", details)
    if outcome.status != "ok":
        outcome.correct = False  # a problem that did not run cannot be correct
    outcome.details = {**_json_safe(outcome.details), **details}
    return outcome


def _json_safe(details: dict[str, Any]) -> dict[str, Any]:
    """The target's details if strict JSON can hold them; else their repr, so the bench goes on."""
    try:
        json.dumps(details, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return {"unserializable_details": f"{type(exc).__name__}: {exc}", "repr": repr(details)[:STDERR_KEPT_CHARS]}
    return details


def _failed(entry: SuiteEntry, status: str, reason: str, details: dict[str, Any] | None = None) -> ProblemOutcome:
    return ProblemOutcome(
        name=entry.name,
        path=str(entry.path),
        status=status,
        reason=reason,
        correct=False,
        details=dict(details or {}),
    )


def _in_lanes(
    todo: list[tuple[int, SuiteEntry]], run_one: Callable[[int, SuiteEntry], None], gpus: int, stop: threading.Event
) -> None:
    """Run ``todo`` one problem a GPU at a time: in this thread on one GPU (Ctrl-C reaches the running
    problem's worker at once), else in ``gpus`` threads, where a failure in any of them (or Ctrl-C) sets
    ``stop``, so the running problems' workers end at once and no queued one starts."""
    if gpus == 1:
        for index, entry in todo:
            run_one(index, entry)
        return
    pool = ThreadPoolExecutor(max_workers=gpus)
    try:
        futures = [pool.submit(run_one, index, entry) for index, entry in todo]
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)  # a failure in any thread stops the bench at once
        for future in [f for f in futures if f in finished] + [f for f in futures if f not in finished]:
            future.result()
    except BaseException:  # stopped (Ctrl-C, an error): the running problems' workers end now
        stop.set()
        raise
    finally:  # no queued problem starts; what finished is already written
        pool.shutdown(wait=True, cancel_futures=True)


# -- selection and resume --------------------------------------------------------------


def _check_numbers(timeout_s: float, gpus: int, stop_after_s: float | None, slot_s: float | None) -> None:
    """The bench's numbers, each wrong one a line naming the flag."""
    if timeout_s <= 0:
        raise KerneloptError(f"--timeout must be positive, got {timeout_s:g}")
    if gpus < 1:
        raise KerneloptError(f"--gpus must be at least 1, got {gpus}")
    if stop_after_s is not None and stop_after_s < 0:
        raise KerneloptError(f"--stop-after must be zero or more seconds, got {stop_after_s:g}")
    if slot_s is not None and slot_s <= 0:
        raise KerneloptError(f"--slot must be a positive number of seconds, got {slot_s:g}")


def _selected(
    root: Path, problems: Sequence[str] | None, shard: tuple[int, int] | None, extra_path: Sequence[str | Path]
) -> list[SuiteEntry]:
    """The suite's problems this bench runs, in the order ``problems`` names them (each name must match
    one; all of them in suite order where it is None), then every n-th of them for ``shard=(i, n)``."""
    entries = check_suite(root, only=list(problems) if problems else None, extra_path=extra_path)
    _check_selection(root, entries, problems)
    entries = in_given_order(entries, problems, lambda e: (e.name, e.path))
    if shard is None:
        return entries
    index, count = shard
    if not 1 <= index <= count:
        raise KerneloptError(f"--shard {index}/{count}: the shard number must be between 1 and {count}")
    return entries[index - 1 :: count]


def _reading(outcome: ProblemOutcome) -> dict[str, Any]:
    """What a rerun problem's earlier row measured, kept in the record of replaced rows."""
    return {
        "correct": outcome.correct,
        "optimized_ms": outcome.optimized_ms,
        "best_stock_mode": outcome.best_stock_mode,
        "best_stock_speedup": outcome.best_stock_speedup,
    }


def _check_selection(root: Path, entries: list[SuiteEntry], problems: Sequence[str] | None) -> None:
    if not problems:
        return
    unmatched = [sel for sel in problems if not any(matches(sel, e.name, e.path) for e in entries)]
    if unmatched:
        raise KerneloptError(f"{root}: no problem matches {', '.join(unmatched)} (see the file names under it)")


def problem_sizes(
    root: Path, problems: Sequence[str] | None, sizes: dict[str, Any] | None
) -> dict[Path, dict[str, Any]]:
    """The ``sizes`` each selected problem file takes: those naming one of its size constants (read
    without running it). A name no selected problem defines would change nothing, so it is one line
    listing the size constants they do define."""
    if not sizes:
        return {}
    files = suite_files(root, problems)
    defined = {path: size_names(path) for _, path in files}
    unknown = [name for name in sizes if not any(name in names for names in defined.values())]
    if files and unknown:  # no file selected: the selection check says so
        known = sorted({name for names in defined.values() for name in names})
        raise KerneloptError(
            f"--size {', '.join(unknown)}: no selected problem of {root} defines a size constant of that name; "
            f"theirs: {', '.join(known) or 'none'}"
        )
    return {path: {k: v for k, v in sizes.items() if k in names} for path, names in defined.items()}


def require_gpus(gpus: int) -> None:
    """The real benchmark needs the GPUs it was asked for: said once, before any worker starts or any
    results folder is written (without a GPU every problem would only record a run error)."""
    import torch

    if not torch.cuda.is_available():
        raise KerneloptError("kernelopt bench needs an NVIDIA GPU with CUDA; torch sees none")
    if gpus > torch.cuda.device_count():
        raise KerneloptError(f"--gpus {gpus} asks for more GPUs than the {torch.cuda.device_count()} torch sees")


def machine_gpus(count: int) -> list[str]:
    """The names of this machine's first ``count`` GPUs (:func:`~kernelopt.measure.environment.gpu_labels`),
    or one line saying why they could not be read."""
    try:
        return gpu_labels(count)
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise KerneloptError(
            f"bench could not read this machine's GPUs to check them against its results: {exc}"
        ) from exc


def _check_target(target: str, extra_path: Sequence[str | Path]) -> None:
    """Refuse at once a target whose module cannot be found, rather than fail every problem with it."""
    module_name = target.partition(":")[0]
    if extra_path or not module_name:
        return  # found, if at all, on the workers' extra path; run_isolated checks the form
    try:
        found = importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise KerneloptError(f"worker target {target!r}: module {module_name} cannot be imported")


def bench_versions() -> dict[str, str | None]:
    """Python, kernelopt (and its source digest), torch and Triton: what a results folder was made with."""
    versions: dict[str, str | None] = {"python": platform.python_version(), "kernelopt_source": source_digest()}
    for package in ("kernelopt", "torch", "triton"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def timestamp() -> str:
    """Now, in UTC to the second: a results folder's start, finish and resumes."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _emit(on_event: Callable[[BenchEvent], None] | None, event: BenchEvent) -> None:
    if on_event is not None:
        on_event(event)


# The results folder's names, re-exported for callers that import them from here.
__all__ = [
    "CSV_COLUMNS",
    "DEFAULT_TARGET",
    "DEFAULT_WORKER_TIMEOUT_S",
    "RESULTS_CSV",
    "RESULTS_JSON",
    "RESULTS_MD",
    "WORKER_TIMEOUT_MARGIN_S",
    "BenchEvent",
    "BenchReport",
    "default_worker_timeout",
    "merge_results",
    "problem_sizes",
    "run_bench",
    "suite_root",
]
