"""A results folder read back by a resumed bench: which rows it keeps and which it runs again.

Both benches (model problems, :mod:`kernelopt.pipeline.bench`; kernel files,
:mod:`kernelopt.pipeline.bench_files`) resume the same way: the folder must hold results of the same
suite, made at the sizes asked for; its finished rows are kept, but those ``--retry-failed`` asks for
(not ``ok``) and those ``--rerun`` names, whose earlier row stays in the results until the new one is in
and is then recorded as replaced (``meta["replaced"]`` and the new row's ``details["replaced"]``), never
lost. Rows of problems outside this selection keep their place, last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kernelopt.errors import KerneloptError
from kernelopt.problem.loader import matches, recorded_sizes, size_flags
from kernelopt.report.results_folder import RESULTS_JSON


class Row(Protocol):
    """What a scoreboard row holds that resuming reads: its name, status and details."""

    name: str
    status: str
    reason: str
    details: dict[str, Any]


R = TypeVar("R", bound=Row)


def previous_results(
    out_dir: Path, root: Path, resume: bool, read: Callable[[Path], dict[str, Any]], what: str = "suite"
) -> dict[str, Any] | None:
    """The results in ``out_dir`` (``read`` parses them as ``{"meta", "outcomes"}``), None where there are
    none yet; one line where there are some and ``resume`` is not set, or they are another suite's. A
    suite moved or copied (the same folder name) resumes, under its new path."""
    path = out_dir / RESULTS_JSON
    if not path.exists():
        return None
    if not resume:
        raise KerneloptError(f"{path} exists; pass --resume to continue it or choose another --out")
    previous = read(path)
    suite = previous["meta"]["suite"]
    if Path(suite).name != root.name:
        raise KerneloptError(f"{path} holds results for the {what} {suite}, not {root}; choose another --out")
    previous["meta"]["suite"] = str(root)
    return previous


def check_one_device(kept: Iterable[Row], new: Row, results: Path) -> None:
    """One scoreboard, one GPU: a new row measured on another device than a row the folder already holds
    (a suite resumed on another machine, or lanes on GPUs of two kinds) is refused in one line before it
    is written, since a geomean over two GPUs' speedups says nothing of either. Rows without a device
    (a file that did not load, a worker that died first) take no side."""
    device = new.details.get("device")
    if not device:
        return
    other = next((row for row in kept if row.details.get("device") not in (None, device)), None)
    if other is not None:
        raise KerneloptError(
            f"{new.name} ran on {device}, but {results} holds rows measured on {other.details['device']} "
            f"({other.name}); one scoreboard is one GPU's: run this bench there, or choose another --out "
            "(the new row is not written)"
        )


def check_resumed_gpus(previous: dict[str, Any] | None, labels: Sequence[str], results: Path) -> None:
    """:func:`check_one_device` before any work: a resumed folder's rows measured on one GPU and a machine
    whose GPUs (``labels``, :func:`~kernelopt.measure.environment.gpu_labels`) are another are refused in
    one line, so no problem's time is spent on a row that could not be kept."""
    if previous is None:
        return
    rows = previous.get("outcomes") or []
    recorded = previous["meta"].get("device") or next(
        (row.details["device"] for row in rows if row.details.get("device")), None
    )
    other = next((label for label in labels if label != recorded), None)
    if recorded and other is not None:
        raise KerneloptError(
            f"{results} holds rows measured on {recorded}, and this machine's GPU is {other}; one scoreboard is "
            "one GPU's: resume it on that GPU, or choose another --out"
        )


def resumed_sizes(out_dir: Path, meta: dict[str, Any], sizes: dict[str, Any] | None) -> dict[str, Any]:
    """The sizes a resumed bench goes on with: those its results were made with; other ones are one line."""
    started = recorded_sizes(meta.get("sizes"))
    if sizes is not None and dict(sizes) != started:
        raise KerneloptError(
            f"{out_dir / RESULTS_JSON} holds results made with {size_flags(started)}: resume with the same sizes "
            "or leave --size out, or choose another --out for these"
        )
    return started


E = TypeVar("E")


def in_given_order(
    entries: Sequence[E], selection: Sequence[str] | None, key: Callable[[E], tuple[str, Path]]
) -> list[E]:
    """``entries`` in the order ``selection`` names them (those one selection matches keep their own
    order; each runs once), so a bench stopped by its clock or its time-out has run the ones named first;
    every entry where nothing was selected."""
    if not selection:
        return list(entries)
    chosen: list[E] = []
    for sel in selection:
        chosen += [e for e in entries if matches(sel, *key(e)) and not any(e is c for c in chosen)]
    return chosen


def rerun_names(
    root: Path, entries: Sequence[tuple[str, Path]], rerun: Sequence[str] | None, noun: str = "problem"
) -> list[str]:
    """The names of the selected ``entries`` (name, path) that ``rerun`` names; a name matching none is
    one line (a typo would otherwise keep the old row in silence)."""
    if not rerun:
        return []
    unmatched = [sel for sel in rerun if not any(matches(sel, name, path) for name, path in entries)]
    if unmatched:
        raise KerneloptError(
            f"--rerun {', '.join(unmatched)}: no {noun} of this bench's selection in {root} matches "
            f"(name one the selection holds, or widen the selection)"
        )
    return [name for name, path in entries if any(matches(sel, name, path) for sel in rerun)]


def check_rerun(rerun: Sequence[str] | None, resume: bool) -> None:
    """``--rerun`` without ``--resume`` is one line: there are no earlier rows to run again."""
    if rerun and not resume:
        raise KerneloptError("--rerun runs problems of earlier results again: add --resume and the --out to continue")


@dataclass
class Carried:
    """The earlier results' rows, sorted for a resumed bench: ``done`` are kept and not run;
    ``earlier`` are run again and stand in the results until their new row replaces them."""

    done: dict[str, Any] = field(default_factory=dict)
    earlier: dict[str, Any] = field(default_factory=dict)


def carried_rows(
    previous: dict[str, Any] | None, retry_failed: bool, again: Sequence[str], out_dir: Path | None = None
) -> Carried:
    """Split the earlier ``previous["outcomes"]``: a failed row under ``retry_failed`` is dropped (run
    again, nothing to keep), a row ``again`` names is run again and kept until then, the rest are done.
    Rows to run again where ``out_dir`` holds no results yet are one line (a mistyped ``--out``)."""
    if previous is None:
        if again:
            raise KerneloptError(
                f"--rerun {', '.join(again)}: {out_dir / RESULTS_JSON if out_dir else 'the --out folder'} does not "
                "exist, so there is no earlier row to run again; name the results folder to resume with --out"
            )
        return Carried()
    carried = Carried()
    for row in previous["outcomes"]:
        if row.name in again:
            carried.earlier[row.name] = row
        elif not (retry_failed and row.status != "ok"):
            carried.done[row.name] = row
    return carried


def results_meta(
    previous: dict[str, Any] | None, fresh: Mapping[str, Any], at: str, command: str, again: Sequence[str]
) -> dict[str, Any]:
    """The results' meta as a bench starts: a new one's (``fresh``, its command and start), or the earlier
    results' with this resume added to ``meta["resumed"]`` (when, its command, what it runs again)."""
    if previous is None:
        return {**fresh, "command": command, "started": at, "resumed": []}
    meta = dict(previous["meta"])
    meta.setdefault("resumed", []).append({"at": at, "command": command, **({"rerun": list(again)} if again else {})})
    return meta


def replace_row(
    meta: dict[str, Any],
    new: R,
    earlier: R,
    at: str,
    reading: Mapping[str, Any],
    files: tuple[Sequence[str | None], Sequence[str | None]] = ((), ()),
    folder: Path | None = None,
) -> None:
    """Record that ``new`` (a rerun's row) replaced ``earlier`` at ``at``, in ``meta["replaced"]`` and in
    the new row's ``details["replaced"]`` (its scoreboard line says so); ``reading`` is what the earlier
    row measured (its speedup), kept beside its status. ``files``: the files the earlier row and the new
    one delivered; an earlier one inside the results ``folder`` that the new row does not deliver again
    is removed (a delivery no row stands behind is stale) and the record names it. A path outside that
    folder (results copied from another machine name theirs) is never touched."""
    record = {"name": earlier.name, "replaced_at": at, "status": earlier.status, "reason": earlier.reason, **reading}
    kept = {Path(f).resolve() for f in files[1] if f}
    inside = folder.resolve() if folder is not None else None
    removed = []
    for old in files[0]:
        path = Path(old).resolve() if old else None
        if path is None or path in kept or inside is None or not path.is_relative_to(inside) or not path.is_file():
            continue
        path.unlink()
        removed.append(str(old))
    if removed:
        record["removed"] = removed
    meta["replaced"] = [*meta.get("replaced", []), record]
    new.details = {**new.details, "replaced": record}


def ordered(rows: Mapping[str, R], order: Sequence[str]) -> list[R]:
    """``order`` (suite order); rows of problems outside it (an earlier run's) keep theirs, last."""
    position = {name: i for i, name in enumerate(order)}
    return sorted(rows.values(), key=lambda row: position.get(row.name, len(order)))
