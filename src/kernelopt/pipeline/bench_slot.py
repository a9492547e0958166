"""A bench given a slot of time: whether the next problem may start (``--stop-after``, ``bench --slot``).

A lent GPU or a CI job gives a bench a fixed number of seconds; a problem cut off at its end loses all
the GPU time it had spent. ``--stop-after`` starts no problem past a fixed point, which its caller
must work out from how long each problem takes. ``--slot`` works it out per problem: a problem starts
only where the seconds it is expected to take fit in what is left. The expectation is read from the
results, never guessed: the problem's own earlier row (a ``--rerun``), else the longest row the results
hold (a conservative stand-in, since problems of one suite differ several-fold), else the worker's
time-out, the most any problem may take. A problem that outlasts its expectation is stopped when the slot
ends (:func:`slot_deadline`): the bench then writes its results and ends within its slot, and the
problem's run, unfinished in the store with the stages it had done, is what ``--resume`` goes on with,
where the lender of the slot would have killed the whole bench.

Another bench's rows can say more (``--expect-from``: another card's scoreboard of the same suite, or an
earlier run's): each problem there is expected to take its seconds there, scaled by how this bench's rows
ran against the same problems' rows there (the median ratio), so a short problem is not refused because
the longest row so far was long. The same rows can order the bench (``--order payoff``, :func:`by_payoff`):
the problems that would add most to the suite's target for each second they take, were they to read as
there, start first, so that a slot too short for all of them spends itself on those.
"""

from __future__ import annotations

import functools
import math
import statistics
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelopt.errors import KerneloptError
from kernelopt.report.metrics import SEARCHABLE_SHARE, ProblemOutcome, against_best_stock

ORDERS = ("given", "payoff")
"""A bench's orders (``--order``): the order ``--problems`` names them in (suite order without it), or by
:func:`by_payoff`."""

STARTUP_S = 8.0
"""Seconds a bench's slot spends before its first problem starts (its GPU and resume checks), which a plan
counts first (``docs/measurements.md``, 2026-12-06)."""


@dataclass(frozen=True)
class Expected:
    """How many seconds a problem is expected to take, and where that number comes from."""

    seconds: float
    source: str  # "its earlier row", "its row in ...", "the longest row so far" or "the worker time-out"


@dataclass(frozen=True)
class Reference:
    """Another bench's rows (``--expect-from``): each problem's worker seconds there, the folder, and its rows
    of this suite (what a plan projects the problems it would start to read: :func:`projected_target`)."""

    where: str
    seconds: Mapping[str, float]
    rows: Mapping[str, ProblemOutcome] = field(default_factory=dict)

    def scale(self, rows: Iterable[ProblemOutcome]) -> tuple[float, int]:
        """(how this bench's ``rows`` ran against the same problems' rows there: the median ratio of their
        seconds, 1.0 where no problem is in both; how many problems that is)."""
        ratios = [row.worker_s / self.seconds[row.name] for row in rows if row.worker_s and self.seconds.get(row.name)]
        return (statistics.median(ratios), len(ratios)) if ratios else (1.0, 0)


def read_reference(results_dir: Path, suite_problems: Sequence[str], read: Callable[[Path], dict]) -> Reference:
    """The rows of the bench results in ``results_dir`` (``read`` parses its results.json) that give a
    worker's seconds for a problem of this suite (``suite_problems``): all of them, since the ones this
    bench does not run still scale the others; one line where there is no such folder or none of its rows
    is of this suite."""
    path = results_dir / "results.json"
    if not path.is_file():
        raise KerneloptError(f"--expect-from {results_dir}: no results.json there; name a bench's results folder")
    try:
        rows = read(path)["outcomes"]
    except KerneloptError as exc:  # read's own line speaks of resuming: say what was asked instead
        raise KerneloptError(
            f"--expect-from {results_dir}: its results.json does not read as a bench of model problems "
            f"({exc.__cause__ or exc})"
        ) from exc
    wanted = set(suite_problems)
    seconds = {row.name: float(row.worker_s) for row in rows if row.worker_s and row.name in wanted}
    if not seconds:
        raise KerneloptError(
            f"--expect-from {results_dir}: none of this suite's problems has a row with its seconds there; "
            "name a results folder of this suite"
        )
    return Reference(str(results_dir), seconds, {row.name: row for row in rows if row.name in wanted})


def expected_seconds(
    name: str,
    earlier: Mapping[str, ProblemOutcome],
    rows: Iterable[ProblemOutcome],
    timeout_s: float,
    reference: Reference | None = None,
) -> Expected:
    """The seconds problem ``name`` is expected to take: its row in ``earlier`` (the rows a rerun
    replaces), else its row in ``reference`` scaled by :meth:`Reference.scale` over ``rows``, else the
    longest of ``rows`` (every row the results hold, those of this bench included), else ``timeout_s``.
    Never more than ``timeout_s``: the worker is killed there."""
    own = earlier.get(name)
    if own is not None and own.worker_s is not None:
        return Expected(min(own.worker_s, timeout_s), "its earlier row")
    rows = list(rows)
    if reference is not None and name in reference.seconds:
        scale, common = reference.scale(rows)
        how = (
            f" × {scale:.2f}, the median over {common} problem(s) both ran" if common else ", as no problem ran in both"
        )
        return Expected(min(reference.seconds[name] * scale, timeout_s), f"its row in {reference.where}{how}")
    known = [row.worker_s for row in rows if row.worker_s is not None]
    if known:
        return Expected(min(max(known), timeout_s), "the longest row so far")
    return Expected(timeout_s, "the worker time-out")


def slot_refusal(elapsed_s: float, slot_s: float | None, expected: Expected) -> str | None:
    """Why a problem expected to take ``expected`` does not start ``elapsed_s`` into a slot of
    ``slot_s`` seconds; None where it fits (or there is no slot)."""
    if slot_s is None:
        return None
    left = slot_s - elapsed_s
    if expected.seconds <= left:
        return None
    return (
        f"it would not end within --slot: {expected.seconds:.0f} s expected ({expected.source}), "
        f"{max(left, 0.0):.0f} s left"
    )


def start_refusal(
    elapsed_s: float, stop_after_s: float | None, slot_s: float | None, expected: Callable[[], Expected]
) -> str | None:
    """Why a problem does not start ``elapsed_s`` into the bench (``--stop-after`` has passed, or it would
    not end within ``--slot``: :func:`slot_refusal`); None where it starts. ``expected`` is asked only
    where there is a slot."""
    if stop_after_s is not None and elapsed_s >= stop_after_s:
        return "--stop-after has passed"
    return slot_refusal(elapsed_s, slot_s, expected()) if slot_s is not None else None


def slot_deadline(slot_s: float | None, elapsed_s: float, on_end: Callable[[], None]) -> threading.Timer | None:
    """A started timer that calls ``on_end`` when a slot of ``slot_s`` seconds ends, ``elapsed_s`` of it
    gone now (at once where none is left); None without a slot. The caller cancels it when the bench ends."""
    if slot_s is None:
        return None
    timer = threading.Timer(max(slot_s - elapsed_s, 0.0), on_end)
    timer.daemon = True
    timer.start()
    return timer


def cut_reason(slot_s: float) -> str:
    """What a problem stopped at the slot's end is told: why, and what goes on with it."""
    return f"stopped at the end of --slot ({slot_s:.0f} s); --resume goes on with its unfinished run"


@dataclass(frozen=True)
class Planned:
    """One problem of a bench's plan (``bench --plan``): when it would start, or why it would not."""

    name: str
    expected: Expected
    start_s: float | None  # seconds into the bench; None: it would not start
    why: str = ""


def plan_slot(
    names: Sequence[str],
    expected: Callable[[str], Expected],
    lanes: int = 1,
    stop_after_s: float | None = None,
    slot_s: float | None = None,
    startup_s: float = 0.0,
) -> list[Planned]:
    """The problems ``names`` as a bench would start them, each taking what it is expected to take
    (``expected``), one a lane at a time on ``lanes`` GPUs, under :func:`start_refusal`'s rule: what to
    expect of a slot before spending it. A problem that would not start leaves its lane free. The first
    start on each lane comes ``startup_s`` into the slot (:data:`STARTUP_S` for a bench's own)."""
    free = [startup_s] * max(lanes, 1)  # when each lane is next free
    plan = []
    for name in names:
        lane = min(range(len(free)), key=free.__getitem__)
        at = free[lane]
        guess = expected(name)
        why = start_refusal(at, stop_after_s, slot_s, functools.partial(_known, guess))
        plan.append(Planned(name, guess, None if why else at, why or ""))
        if not why:
            free[lane] = at + guess.seconds
    return plan


def _known(value: Expected) -> Expected:
    return value


@dataclass(frozen=True)
class Projection:
    """The suite's target (:func:`~kernelopt.report.metrics.against_best_stock`) now, and were the problems a
    plan would start to read as their rows in another bench do: an estimate to plan a slot by, never a
    result (another card's or another code's rows)."""

    now: float | None  # the geomean over the best stock mode of the searchable rows, as the results hold them
    now_rows: int
    then: float | None  # the same with each started problem's row taken from the reference
    then_rows: int
    taken: list[str]  # the started problems whose rows the reference has
    missing: list[str]  # those it has not: left as they are here (a row, or none)


def projected_target(rows: Mapping[str, ProblemOutcome], starting: Sequence[str], reference: Reference) -> Projection:
    """:class:`Projection` of this bench's ``rows`` (by problem) where each problem of ``starting`` reads as
    its row in ``reference``."""
    taken = [name for name in starting if name in reference.rows]
    projected = {**rows, **{name: reference.rows[name] for name in taken}}
    now, then = against_best_stock(list(rows.values())), against_best_stock(list(projected.values()))
    return Projection(
        now["geomean_searchable"],
        len(now["searchable"]),
        then["geomean_searchable"],
        len(then["searchable"]),
        taken,
        [name for name in starting if name not in reference.rows],
    )


def projection_line(projection: Projection, where: str) -> str:
    """``bench --plan``'s estimate in one line ('' where no started problem has a row in the reference)."""
    if not projection.taken:
        return ""

    def reads(geomean: float | None, count: int) -> str:
        return f"{geomean:.3f}x over {count} row(s)" if geomean is not None else "no searchable row"

    missing = f"; {', '.join(projection.missing)} not there, left as here" if projection.missing else ""
    return (
        f"if {', '.join(projection.taken)} read as in {where}, the geomean over the best stock mode (rows whose "
        f"Triton kernels take {100 * SEARCHABLE_SHARE:g} % or more) would read {reads(projection.then, projection.then_rows)}, from "
        f"{reads(projection.now, projection.now_rows)} now{missing}: an estimate from another bench's rows, "
        "not a result"
    )


@dataclass(frozen=True)
class Payoff:
    """What starting one problem would do to the suite's target were it to read as its row in another bench
    (``ratio``: the target then over the target now, None where it has no row there), and the seconds it is
    expected to take."""

    name: str
    ratio: float | None
    seconds: float

    def rate(self) -> float:
        """The target's log-ratio a second (0 where it has no row there): what :func:`by_payoff` ranks by."""
        return math.log(self.ratio) / max(self.seconds, 1.0) if self.ratio else 0.0


def by_payoff(
    names: Sequence[str],
    rows: Mapping[str, ProblemOutcome],
    reference: Reference,
    expected: Callable[[str], Expected],
) -> list[Payoff]:
    """``names`` ordered by what each alone would add to the suite's target (:func:`projected_target` with it
    alone taken from ``reference``) for each second it is expected to take (``expected``), most first; one
    without a row there counts as adding nothing (after those that would raise the target, before those that
    would lower it), ties in the order given. Each problem is weighed alone: a greedy order for a slot, not
    the best set of problems for it."""
    payoffs = []
    for name in names:
        ratio = None
        if name in reference.rows:
            projection = projected_target(rows, [name], reference)
            ratio = (projection.then or 1.0) / (projection.now or 1.0)
        payoffs.append(Payoff(name, ratio, expected(name).seconds))
    return sorted(payoffs, key=lambda p: -p.rate())


def order_line(payoffs: Sequence[Payoff], where: str) -> str:
    """The order :func:`by_payoff` chose, in one line: each problem with what it would do to the target and
    the seconds it is expected to take."""
    said = [
        f"{p.name} ({100 * (p.ratio - 1):+.1f} % in {p.seconds:.0f} s)"
        if p.ratio is not None
        else f"{p.name} (no row there)"
        for p in payoffs
    ]
    return (
        f"order: by what each would add to the target a second, were it to read as in {where} (an estimate): "
        + ", ".join(said)
    )
