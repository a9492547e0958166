"""``kernelopt bench``: optimize every problem of a suite and keep the scoreboard.

Each problem runs in its own isolated worker (``target``, by default
:func:`kernelopt.pipeline.optimize.bench_problem`), so a problem that hangs, segfaults or
exhausts memory costs one row of the table, never the suite. After every problem
the whole result is rewritten atomically to ``results.json`` and ``results.csv``,
so a bench killed at any moment resumes (``resume=True``) from the last finished
problem.

The worker target is called as ``target(problem_path: str, options: dict) -> dict``
where ``options`` holds ``name`` and ``time_limit_s`` (the per-problem budget, None
for the target's default) plus the caller's ``extra_options`` (for the default target,
``settings`` too: the run's :meth:`~kernelopt.config.Settings.values`). It returns a dict in
the shape of :meth:`ProblemOutcome.to_dict`, with ``status``/``reason`` filled for
the compile and run errors it catches itself, and may put the GPU's name in
``details["device"]``.

A suite is a directory of KernelBench-format files, searched recursively (our
``examples/problems`` or KernelBench's own ``level1``…``level4``); a KernelBench
checkout's root is accepted too and means its ``KernelBench/`` folder.

Longer than most modules: the runner, its GPU lanes, resume and the results files
share one results document and one lock.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import platform
import shlex
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from kernelopt.config import Settings, default_of, load_settings
from kernelopt.errors import KerneloptError
from kernelopt.measure.environment import source_digest
from kernelopt.pipeline.bench_report import markdown_report
from kernelopt.pipeline.metrics import ProblemOutcome, summarize
from kernelopt.pipeline.suite_check import check_suite
from kernelopt.problem.loader import SuiteEntry
from kernelopt.workers import WorkerResult, run_isolated
from kernelopt.workers.identity import require_readable

DEFAULT_TARGET = "kernelopt.pipeline.bench_problem:bench_problem"
DEFAULT_WORKER_TIMEOUT_S: float = default_of("bench_timeout_s")  # without a time limit (the bench_timeout_s setting)
WORKER_TIMEOUT_MARGIN_S: float = default_of("bench_timeout_margin_s")  # with one: room for timing three baselines
RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
RESULTS_MD = "results.md"
STDERR_KEPT_CHARS = 1000
CSV_COLUMNS = (
    "name",
    "status",
    "correct",
    "eager_ms",
    "compiled_ms",
    "max_autotune_ms",
    "optimized_ms",
    "speedup_vs_eager",
    "speedup_vs_compile",
    "speedup_vs_max_autotune",
    "evaluations",
    "reason",
)
_WORKER_STATUS = {"timeout": "timeout", "crash": "crash", "oom": "crash", "error": "run_error"}


@dataclass(frozen=True)
class BenchEvent:
    """Progress for a display: ``kind`` is ``"start"``, ``"done"`` or ``"skip"`` (already in the results)."""

    kind: str
    name: str
    index: int  # 1-based position in the selected problems
    total: int
    outcome: ProblemOutcome | None = None


@dataclass
class BenchReport:
    """The scoreboard: one outcome per problem, the summary and where it was written."""

    suite: Path
    results_dir: Path
    outcomes: list[ProblemOutcome]
    summary: dict[str, Any]
    meta: dict[str, Any]
    resumed: list[str] = field(default_factory=list)  # names taken from an earlier run, not re-run

    @property
    def json_path(self) -> Path:
        return self.results_dir / RESULTS_JSON

    @property
    def csv_path(self) -> Path:
        return self.results_dir / RESULTS_CSV

    @property
    def markdown_path(self) -> Path:
        return self.results_dir / RESULTS_MD

    def to_dict(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "outcomes": [o.to_dict() for o in self.outcomes],
            "summary": self.summary,
            "resumed": list(self.resumed),
            "files": {"json": str(self.json_path), "csv": str(self.csv_path), "markdown": str(self.markdown_path)},
        }


def suite_root(suite_dir: str | Path) -> Path:
    """The directory whose files are the problems: a KernelBench checkout means its ``KernelBench/``."""
    root = Path(suite_dir)
    inner = root / "KernelBench"
    if inner.is_dir() and any(child.is_dir() and child.name.startswith("level") for child in inner.iterdir()):
        return inner
    return root


def default_worker_timeout(time_limit_s: float | None, config: Settings | None = None) -> float:
    """How long a problem's worker may live: its search budget plus room for the baselines
    (the ``bench_timeout_s`` and ``bench_timeout_margin_s`` settings of ``config``)."""
    config = config or load_settings()
    if time_limit_s is None:
        return config.bench_timeout_s
    return time_limit_s + config.bench_timeout_margin_s


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
    config: Settings | None = None,
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
    ``config`` (default: :func:`~kernelopt.config.load_settings`) bounds the workers and,
    for the default target, travels to each problem as ``options["settings"]`` (a worker
    reads no settings itself).

    Raises :class:`KerneloptError` for a missing suite, a selection that matches
    nothing, or existing results without ``resume``; every failure of a problem is
    recorded in its outcome instead.
    """
    if time_limit_s is not None and time_limit_s <= 0:
        raise KerneloptError(f"--time-limit must be positive, got {time_limit_s:g}")
    config = config or load_settings()
    if target == DEFAULT_TARGET:  # our target reads them; another target gets only what its caller passes
        extra_options = {"settings": config.values(), **(extra_options or {})}
    timeout_s = default_worker_timeout(time_limit_s, config) if worker_timeout_s is None else worker_timeout_s
    if timeout_s <= 0:
        raise KerneloptError(f"--timeout must be positive, got {timeout_s:g}")
    if gpus < 1:
        raise KerneloptError(f"--gpus must be at least 1, got {gpus}")
    _check_target(target, extra_path)
    if target == DEFAULT_TARGET:
        _require_gpus(gpus)
    root = suite_root(suite_dir).resolve()
    require_readable(root, "the suite")
    out_dir = Path(results_dir)
    previous = _previous_results(out_dir, root, resume)

    entries = check_suite(root, only=list(problems) if problems else None, extra_path=extra_path)
    _check_selection(root, entries, problems)
    if shard is not None:
        index, count = shard
        if not 1 <= index <= count:
            raise KerneloptError(f"--shard {index}/{count}: the shard number must be between 1 and {count}")
        entries = entries[index - 1 :: count]

    now = _timestamp()
    command = command if command is not None else shlex.join(["kernelopt", *sys.argv[1:]])
    if previous is None:
        meta: dict[str, Any] = {"suite": str(root), "command": command, "started": now, "resumed": []}
        done: dict[str, ProblemOutcome] = {}
    else:
        meta = dict(previous["meta"])
        meta.setdefault("resumed", []).append({"at": now, "command": command})
        done = {o.name: o for o in previous["outcomes"] if not (retry_failed and o.status != "ok")}
    meta.update(
        finished=None,
        target=target,
        time_limit_s=time_limit_s,
        worker_timeout_s=timeout_s,
        extra_options=dict(extra_options or {}),
        versions=_versions(),
        gpus=gpus,
        shard=list(shard) if shard else None,
    )
    order = [entry.name for entry in entries]
    outcomes = dict(done)
    resumed = [name for name in order if name in done]

    def write() -> dict[str, Any]:
        ordered = _ordered(outcomes, order)
        meta["device"] = next((o.details["device"] for o in ordered if o.details.get("device")), None)
        return _write_results(out_dir, meta, ordered)

    out_dir.mkdir(parents=True, exist_ok=True)
    write()  # the directory claims its suite at once, so a second bench without --resume refuses it
    lock = threading.Lock()  # one writer of the results and of the progress display
    free_gpus = list(range(gpus))
    stop = threading.Event()  # set when the bench is interrupted: running workers end at once

    def run_one(index: int, entry: SuiteEntry) -> None:
        with lock:
            gpu = free_gpus.pop(0) if gpus > 1 else None
            _emit(on_event, BenchEvent("start", entry.name, index, len(entries)))
        try:
            outcome = _bench_one(entry, target, time_limit_s, timeout_s, extra_options or {}, extra_path, gpu, stop)
        finally:
            with lock:
                if gpu is not None:
                    free_gpus.append(gpu)
        if stop.is_set():
            return  # cut short: not an outcome, so a resumed bench runs it again
        with lock:
            outcomes[entry.name] = outcome
            write()
            _emit(on_event, BenchEvent("done", entry.name, index, len(entries), outcome))

    todo = []
    for index, entry in enumerate(entries, start=1):
        if entry.name in done:
            _emit(on_event, BenchEvent("skip", entry.name, index, len(entries), done[entry.name]))
        else:
            todo.append((index, entry))
    if gpus == 1:  # in this thread: Ctrl-C reaches the running problem's worker at once
        for index, entry in todo:
            run_one(index, entry)
    else:
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
    meta["finished"] = _timestamp()
    summary = write()
    return BenchReport(root, out_dir, _ordered(outcomes, order), summary, meta, resumed)


def merge_results(result_dirs: Sequence[str | Path], out_dir: str | Path) -> BenchReport:
    """Join the results of several benches of one suite (shards, or machines) into ``out_dir``.

    A problem found in several keeps its ``ok`` outcome over a failed one, else the last
    one given. Raises :class:`KerneloptError` for a missing results file or a different suite.
    """
    if not result_dirs:
        raise KerneloptError("nothing to merge: name at least one results directory")
    documents = []
    for directory in result_dirs:
        path = Path(directory) / RESULTS_JSON
        if not path.exists():
            raise KerneloptError(f"{path} does not exist: run kernelopt bench with --out {directory} first")
        documents.append(_read_results(path))
    suites = {Path(d["meta"]["suite"]).name for d in documents}
    if len(suites) > 1:
        raise KerneloptError(
            f"these results are of different suites ({', '.join(sorted(suites))}); merge one suite at a time"
        )
    outcomes: dict[str, ProblemOutcome] = {}
    for document in documents:
        for outcome in document["outcomes"]:
            kept = outcomes.get(outcome.name)
            if kept is None or kept.status != "ok" or outcome.status == "ok":
                outcomes[outcome.name] = outcome
    ordered = sorted(outcomes.values(), key=lambda o: o.name)
    meta = dict(documents[0]["meta"])
    # Each part keeps its own command and resumes in merged_from; the merge itself has been resumed by nothing yet.
    meta.update(
        merged_from=[{"dir": str(d), "meta": doc["meta"]} for d, doc in zip(result_dirs, documents)],
        shard=None,
        resumed=[],
    )
    meta["finished"] = max((doc["meta"].get("finished") or "" for doc in documents), default=None) or None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = _write_results(out, meta, ordered)
    return BenchReport(Path(meta["suite"]), out, ordered, summary, meta)


# -- one problem -----------------------------------------------------------------------


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


# -- selection and resume --------------------------------------------------------------


def _check_selection(root: Path, entries: list[SuiteEntry], problems: Sequence[str] | None) -> None:
    if not problems:
        return
    unmatched = [
        sel for sel in problems if not any(sel == e.name or sel == e.path.stem or sel in e.name for e in entries)
    ]
    if unmatched:
        raise KerneloptError(f"{root}: no problem matches {', '.join(unmatched)} (see the file names under it)")


def _require_gpus(gpus: int) -> None:
    """The real benchmark needs the GPUs it was asked for: said once, before any worker starts or any
    results folder is written (without a GPU every problem would only record a run error)."""
    import torch

    if not torch.cuda.is_available():
        raise KerneloptError("kernelopt bench needs an NVIDIA GPU with CUDA; torch sees none")
    if gpus > torch.cuda.device_count():
        raise KerneloptError(f"--gpus {gpus} asks for more GPUs than the {torch.cuda.device_count()} torch sees")


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


def _read_results(path: Path) -> dict[str, Any]:
    """A results.json as ``{"meta", "outcomes"}``; a file that does not parse is a one-line error."""
    try:
        data = json.loads(path.read_text())
        outcomes = [ProblemOutcome.from_dict(item) for item in data["outcomes"]]
        meta = data["meta"]
        meta["suite"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KerneloptError(
            f"{path} cannot be resumed ({type(exc).__name__}: {exc}); remove it or choose another --out"
        ) from exc
    return {"meta": meta, "outcomes": outcomes}


def _previous_results(out_dir: Path, root: Path, resume: bool) -> dict[str, Any] | None:
    path = out_dir / RESULTS_JSON
    if not path.exists():
        return None
    if not resume:
        raise KerneloptError(f"{path} exists; pass --resume to continue it or choose another --out")
    previous = _read_results(path)
    suite = previous["meta"]["suite"]
    if Path(suite).name != root.name:  # the same suite in a moved (or copied) checkout resumes
        raise KerneloptError(f"{path} holds results for the suite {suite}, not {root}; choose another --out")
    previous["meta"]["suite"] = str(root)
    return previous


def _ordered(outcomes: dict[str, ProblemOutcome], order: list[str]) -> list[ProblemOutcome]:
    """Suite order; results of problems outside this selection (an earlier run's) keep theirs, last."""
    position = {name: i for i, name in enumerate(order)}
    return sorted(outcomes.values(), key=lambda o: position.get(o.name, len(order)))


# -- files -----------------------------------------------------------------------------


def _write_results(out_dir: Path, meta: dict[str, Any], outcomes: list[ProblemOutcome]) -> dict[str, Any]:
    summary = summarize(outcomes)
    document = {"meta": meta, "outcomes": [o.to_dict() for o in outcomes], "summary": summary}
    _atomic_write(out_dir / RESULTS_JSON, json.dumps(document, indent=2, allow_nan=False) + "\n")
    _atomic_write(out_dir / RESULTS_CSV, _csv_text(outcomes))
    _atomic_write(out_dir / RESULTS_MD, markdown_report(meta, outcomes, summary))
    return summary


def _csv_text(outcomes: list[ProblemOutcome]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for o in outcomes:
        row = o.to_dict()
        writer.writerow([_csv_cell(row[column]) for column in CSV_COLUMNS])
    return buffer.getvalue()


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _atomic_write(path: Path, text: str) -> None:
    """Write beside the target and rename over it: a reader or a kill never sees half a file."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version(), "kernelopt_source": source_digest()}
    for package in ("kernelopt", "torch", "triton"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _emit(on_event: Callable[[BenchEvent], None] | None, event: BenchEvent) -> None:
    if on_event is not None:
        on_event(event)
