"""``kernelopt bench`` over a folder of kernel files: each one through ``kernelopt optimize FILE``'s run.

Every selected Triton or Helion file (:mod:`kernelopt.problem.suite_kinds`) runs in a worker of its own
(:func:`kernelopt.pipeline.bench_file.bench_kernel_file`), so a file that hangs or crashes costs its
row, never the suite. After each file the results folder is rewritten atomically
(:mod:`kernelopt.pipeline.bench_file_results`), so a bench killed at any moment resumes from the last
finished file; a file cut short starts again from scratch. Delivered files and their verification
records go to ``kernels/`` in the results folder; the runs go to the store, as ``optimize``'s do.

The files run one after the other on one GPU: ``--gpus`` and ``--shard`` are the model bench's.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.config import Settings, load_settings
from kernelopt.errors import KerneloptError
from kernelopt.measure.environment import source_digest
from kernelopt.pipeline import bench_resume as resume_rows
from kernelopt.pipeline.bench import bench_versions, machine_gpus, problem_sizes, require_gpus, timestamp
from kernelopt.pipeline.bench_file_results import read_file_results, write_file_results
from kernelopt.pipeline.optimize_file import file_operators
from kernelopt.problem.suite_kinds import SuiteKinds
from kernelopt.report.file_scoreboard import FileOutcome
from kernelopt.report.results_folder import FILE_SUITE, RESULTS_CSV, RESULTS_JSON, RESULTS_MD
from kernelopt.report.write import try_write, write_bench_report
from kernelopt.workers import WorkerResult, run_isolated

FILE_TARGET = "kernelopt.pipeline.bench_file:bench_kernel_file"
EXPORT_DIR = "kernels"
STDERR_KEPT_CHARS = 1000
_WORKER_STATUS = {"timeout": "timeout", "crash": "crash", "oom": "crash", "error": "run_error"}


@dataclass(frozen=True)
class FileBenchEvent:
    """Progress for a display: ``kind`` is ``"start"``, ``"done"`` or ``"skip"`` (finished in the results)."""

    kind: str
    name: str
    index: int
    total: int
    outcome: FileOutcome | None = None


@dataclass
class FileBenchReport:
    """The scoreboard of a kernel-file bench and where it was written."""

    suite: Path
    results_dir: Path
    outcomes: list[FileOutcome]
    summary: dict[str, Any]
    meta: dict[str, Any]
    resumed: list[str] = field(default_factory=list)
    report_path: Path | None = None  # the HTML report beside the results, once written
    report_error: str | None = None  # why it could not be written (the results stand)

    @property
    def files(self) -> dict[str, str]:
        return {
            kind: str(self.results_dir / name)
            for kind, name in (("json", RESULTS_JSON), ("csv", RESULTS_CSV), ("markdown", RESULTS_MD))
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "outcomes": [o.to_dict() for o in self.outcomes],
            "summary": self.summary,
            "resumed": list(self.resumed),
            "files": self.files,
            "report": str(self.report_path) if self.report_path else None,
            "report_error": self.report_error,
        }

    def write_report(self) -> None:
        """The HTML report beside the results; a failure to render is kept as one line, not raised."""
        self.report_path, self.report_error = try_write(
            lambda: write_bench_report(self.results_dir),
            f"the bench in {self.results_dir}",
            f"try again with kernelopt report {self.results_dir}",
        )


def check_operators(kinds: SuiteKinds, operators: Sequence[str] | None) -> None:
    """Operators given explicitly must apply to every selected file's kind (a Helion file takes
    Helion's, a Triton file launch configs and eviction hints): one line for the first that does not."""
    if not operators:
        return
    for _name, path, kind in kinds.kernels:
        try:
            file_operators(operators, kind)
        except KerneloptError as exc:
            raise KerneloptError(f"--operators for {path}: {exc}; select files of one kind with --problems") from None


def run_file_bench(
    root: Path,
    kinds: SuiteKinds,
    *,
    results_dir: str | Path,
    time_limit_s: float | None = None,
    resume: bool = False,
    retry_failed: bool = False,
    rerun: Sequence[str] | None = None,
    worker_timeout_s: float | None = None,
    options: dict[str, Any] | None = None,
    config: Settings | None = None,
    sizes: dict[str, Any] | None = None,
    selection: Sequence[str] | None = None,
    device: str = "cuda",
    target: str = FILE_TARGET,
    extra_path: Sequence[str | Path] = (),
    command: str | None = None,
    on_event: Callable[[FileBenchEvent], None] | None = None,
    write_report: bool = True,
) -> FileBenchReport:
    """Bench the kernel files of ``kinds`` (read from ``root`` by :func:`~kernelopt.problem.suite_kinds.suite_kinds`).

    ``options`` travel to every file's worker (``budget``, ``patience``, ``operators``: None for each
    kind's own, ``store``); ``sizes`` set a size constant in every selected file that defines it (kept
    with the results and on resume). ``retry_failed`` and ``rerun`` (with ``resume``) run again, as the
    model bench does, the files whose earlier row was not ``ok`` and the finished files ``rerun`` names
    (:mod:`kernelopt.pipeline.bench_resume`: the new row replaces the earlier one, which the results keep).
    ``device`` is ``cuda`` but in the CPU tests (Triton's interpreter). ``write_report`` writes the HTML
    report (``report.html``) beside the results at the end; one that cannot be written leaves
    ``report_error``, never a failed bench.
    Raises :class:`KerneloptError` for bad input before any worker starts; every failure of a file is
    its row instead."""
    if time_limit_s is not None and time_limit_s <= 0:
        raise KerneloptError(f"--time-limit must be positive, got {time_limit_s:g}")
    config = config or load_settings()
    timeout_s = worker_timeout_s
    if timeout_s is None:
        timeout_s = config.bench_timeout_s if time_limit_s is None else time_limit_s + config.bench_timeout_margin_s
    if timeout_s <= 0:
        raise KerneloptError(f"--timeout must be positive, got {timeout_s:g}")
    resume_rows.check_rerun(rerun, resume)
    options = dict(options or {})
    check_operators(kinds, options.get("operators"))
    out_dir = Path(results_dir)
    previous = resume_rows.previous_results(out_dir, root, resume, read_file_results, what="folder")
    if previous is not None:
        sizes = resume_rows.resumed_sizes(out_dir, previous["meta"], sizes)
    applied = problem_sizes(root, selection, sizes)
    if device == "cuda" and target == FILE_TARGET:
        require_gpus(1)
        if previous is not None:
            resume_rows.check_resumed_gpus(previous, machine_gpus(1), out_dir / RESULTS_JSON)

    entries = sorted(
        [(name, path, kind) for name, path, kind in kinds.kernels]
        + [(name, path, "unknown") for name, path in kinds.unreadable],
        key=lambda entry: str(entry[1]),
    )
    order = [name for name, _, _ in entries]  # the rows' order, whatever order the files ran in
    entries = resume_rows.in_given_order(entries, selection, lambda entry: (entry[0], entry[1]))
    again = resume_rows.rerun_names(root, [(name, path) for name, path, _ in entries], rerun, noun="file")
    now = timestamp()
    command = command if command is not None else shlex.join(["kernelopt", *sys.argv[1:]])
    skipped = [_not_benched(name, path) for name, path in kinds.cuda]
    carried = resume_rows.carried_rows(previous, retry_failed, again, out_dir)
    done: dict[str, FileOutcome] = carried.done
    earlier: dict[str, FileOutcome] = carried.earlier  # kept until the new one is in
    meta = resume_rows.results_meta(previous, {"suite": str(root), "input": FILE_SUITE}, now, command, again)
    meta.update(
        finished=None,
        time_limit_s=time_limit_s,
        worker_timeout_s=timeout_s,
        options=options,
        settings=config.values(),
        versions=bench_versions(),
        sizes=dict(sizes or {}),
        skipped=skipped,
    )
    outcomes = {**done, **earlier}

    def write() -> dict[str, Any]:
        rows = resume_rows.ordered(outcomes, order)
        meta["device"] = next((o.details["device"] for o in rows if o.details.get("device")), None)
        return write_file_results(out_dir, meta, rows)

    out_dir.mkdir(parents=True, exist_ok=True)
    write()  # the folder claims its suite at once: a second bench without --resume refuses it
    worker_options = {
        **options,
        "settings": config.values(),
        "device": device,
        "time_limit_s": time_limit_s,
        "export_dir": str((out_dir / EXPORT_DIR).resolve()),
    }
    for index, (name, path, kind) in enumerate(entries, start=1):
        if name in done:
            _emit(on_event, FileBenchEvent("skip", name, index, len(entries), done[name]))
            continue
        _emit(on_event, FileBenchEvent("start", name, index, len(entries)))
        file_options = {**worker_options, "name": name, **({"sizes": applied[path]} if applied.get(path) else {})}
        outcome = _bench_one(name, path, kind, target, file_options, timeout_s, extra_path)
        resume_rows.check_one_device(outcomes.values(), outcome, out_dir / RESULTS_JSON)
        if name in earlier:  # a rerun: the earlier row is recorded as replaced, not lost
            old = earlier.pop(name)
            reading = {"delivered": old.delivered, "speedup": old.speedup}
            files = ([old.exported, old.record], [outcome.exported, outcome.record])
            resume_rows.replace_row(meta, outcome, old, timestamp(), reading, files, out_dir)
        outcomes[name] = outcome
        write()
        _emit(on_event, FileBenchEvent("done", name, index, len(entries), outcomes[name]))
    meta["finished"] = timestamp()
    summary = write()
    resumed = [name for name in order if name in done]
    report = FileBenchReport(root, out_dir, resume_rows.ordered(outcomes, order), summary, meta, resumed)
    if write_report:
        report.write_report()
    return report


def _not_benched(name: str, path: Path) -> dict[str, str]:
    """A ``.cu`` slot file's line in the scoreboard: what it is and the command that judges it."""
    base = path.with_suffix(".py")
    how = (
        f"judge it with kernelopt verify {base} --candidate {path}"
        if base.is_file()
        else "judge it with kernelopt verify TRITON_FILE --candidate it"
    )
    return {
        "name": name,
        "path": str(path),
        "kind": "cuda",
        "reason": f"a CUDA C++ candidate for one kernel of a Triton file, not a kernel file of its own; {how}",
    }


def _bench_one(
    name: str,
    path: Path,
    kind: str,
    target: str,
    options: dict[str, Any],
    timeout_s: float,
    extra_path: Sequence[str | Path],
) -> FileOutcome:
    # Like a model problem's worker, this one is kernelopt's orchestration (it writes the store and the
    # deliveries), so it keeps our user; the candidates' own workers drop it (workers.identity).
    result = run_isolated(target, str(path), options, timeout_s=timeout_s, extra_path=extra_path, drop_identity=False)
    outcome = _outcome_of(name, path, kind, result)
    outcome.details["kernelopt_source"] = source_digest()
    if options.get("sizes"):
        outcome.details["sizes"] = options["sizes"]
    return outcome


def _outcome_of(name: str, path: Path, kind: str, result: WorkerResult) -> FileOutcome:
    """The worker's row, or its way of ending turned into one."""
    details: dict[str, Any] = {"worker_s": round(result.duration_s, 3)}
    if not result.ok:
        details["worker_status"] = result.status
        if result.stderr_tail:
            details["stderr_tail"] = result.stderr_tail[-STDERR_KEPT_CHARS:]
        status = _WORKER_STATUS.get(result.status, "crash")
        return FileOutcome(name, str(path), kind, status, result.reason, details=details)
    try:
        value = result.value if isinstance(result.value, dict) else {}
        outcome = FileOutcome.from_dict({"kind": kind, **value, "name": name, "path": str(path)})
    except ValueError as exc:
        reason = f"worker target returned an invalid outcome: {exc}"
        return FileOutcome(name, str(path), kind, "run_error", reason, details=details)
    outcome.details = {**outcome.details, **details}
    return outcome


def _emit(on_event: Callable[[FileBenchEvent], None] | None, event: FileBenchEvent) -> None:
    if on_event is not None:
        on_event(event)
