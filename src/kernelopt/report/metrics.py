"""The scoreboard's arithmetic: per-problem outcomes, fast_p and geometric means.

Definitions follow KernelBench so that our numbers can be set beside theirs:

* ``fast_p = #{problems that are correct and whose speedup > p} / #problems``.
  The denominator holds *every* problem of the suite, including those that failed to
  load, compile or run; the comparison is strict; ``fast_0`` is the correctness rate.
* The geometric mean of speedups is taken over the correct problems that have one,
  since a geometric mean is the average that treats 2x and 0.5x symmetrically.

Speedup is ``baseline time / optimized time`` against one of three baselines: eager
PyTorch and ``torch.compile`` in its default mode (each timed interleaved with the
model it is compared to), and ``torch.compile(mode="max-autotune-no-cudagraphs")``,
compiled in a process of its own. When that process also timed the optimized model
interleaved with it, ``max_autotune_speedup`` holds the ratio and is the speedup
against max-autotune; otherwise it is the ratio of medians from two processes.

The baseline that counts is the *best stock mode*: of every ``torch.compile`` mode the bench
timed (the default, and each of the ``stock_modes`` setting's, each in its own process beside
kernelopt's result), the one kernelopt's result is least faster than, read off the interleaved
ratios; ``best_stock_mode`` names it and ``best_stock_speedup`` is that ratio (conservative on
purpose: the least of the measured speedups, not a ratio of medians from different processes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from kernelopt.measure.op_hosts import through_python
from kernelopt.measure.roofline import geometric_mean
from kernelopt.measure.timer import HOST_READING

STATUSES = ("ok", "load_error", "compile_error", "run_error", "timeout", "crash")
BASELINES = ("eager", "compile", "max_autotune", "best_stock")
BASELINE_LABELS = {
    "eager": "eager",
    "compile": "torch.compile",
    "max_autotune": "max-autotune-no-cudagraphs",
    "best_stock": "the best stock mode",
}
FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)
SLOWER_TOLERANCE = 0.01  # timing noise allowed before "slower than torch.compile" is reported
SEARCHABLE_SHARE = 0.05
"""A problem whose generated Triton kernels take this share of the compiled forward's time or more is one
kernelopt's search can move: the suite's target (geomean over the best stock mode) is read over those."""
BELOW_BEST_STOCK = 0.99  # a problem under this speedup over the best stock mode is named in the summary

_BASELINE_FIELD = {
    "eager": "eager_ms",
    "compile": "compiled_ms",
    "max_autotune": "max_autotune_ms",
    "best_stock": "best_stock_ms",
}
_TIME_FIELDS = ("eager_ms", "compiled_ms", "max_autotune_ms", "optimized_ms", "best_stock_ms", "floor_ms")
_RATIO_FIELDS = ("max_autotune_speedup", "best_stock_speedup", "compile_speedup")


def _check_baseline(baseline: str) -> str:
    if baseline not in _BASELINE_FIELD:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
    return _BASELINE_FIELD[baseline]


def _time(name: str, value: Any, what: str = "a number of milliseconds") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be {what} or None, got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return float(value)


def worker_seconds(details: dict[str, Any]) -> float | None:
    """Seconds a bench row's worker ran, start to end (compiles, stock modes, search), as its ``details``
    keep them: what a slot of GPU time is planned with (``bench --stop-after``); None where no worker ran
    or an older row lacks them."""
    seconds = details.get("worker_s")
    return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None


@dataclass
class ProblemOutcome:
    """What benchmarking one problem produced, whether it worked or not.

    ``status`` says how far the problem got: ``"ok"`` (it ran; ``correct`` says whether
    the optimized model matched the reference), ``"load_error"``, ``"compile_error"``,
    ``"run_error"``, ``"timeout"`` or ``"crash"``; ``reason`` is one line for a person.
    Times are medians in milliseconds; ``None`` when that measurement was not made.
    ``details`` holds whatever else the producer wants kept (``"device"`` among them).
    """

    name: str
    path: str
    status: str
    reason: str
    correct: bool
    eager_ms: float | None = None
    compiled_ms: float | None = None  # torch.compile, default mode
    max_autotune_ms: float | None = None  # torch.compile, max-autotune-no-cudagraphs
    optimized_ms: float | None = None
    evaluations: int = 0
    gpu_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    max_autotune_speedup: float | None = None  # optimized over max-autotune, interleaved in one process
    best_stock_mode: str | None = None  # the torch.compile mode kernelopt's result is least faster than
    best_stock_ms: float | None = None  # that mode's median, in its own process
    best_stock_speedup: float | None = None  # optimized over that mode, interleaved in one process
    compile_speedup: float | None = None  # optimized over the default, interleaved in the default's own
    # process: set where the search built on another mode (its final verification timed that mode)
    base_mode: str = "default"  # the stock mode the search built on
    triton_share: float | None = None  # generated Triton kernels' share of the compiled forward's time (analysis)
    # the traffic floor's time: inputs, weights and outputs moved once (and inputs a statistic wider than the
    # chip makes read again) at the measured peak; for graphs of generated kernels only (analysis)
    floor_ms: float | None = None

    @property
    def passed(self) -> bool:
        """Ran and was correct: the only outcomes whose speedups count."""
        return self.status == "ok" and self.correct

    def speedup(self, baseline: str) -> float | None:
        """``baseline time / optimized time``; None when either is missing."""
        reference = getattr(self, _check_baseline(baseline))
        if baseline == "max_autotune" and self.max_autotune_speedup is not None:
            return self.max_autotune_speedup
        if baseline == "best_stock" and self.best_stock_speedup is not None:
            return self.best_stock_speedup
        if baseline == "compile" and self.compile_speedup is not None:
            return self.compile_speedup
        if reference is None or self.optimized_ms is None:
            return None
        return reference / self.optimized_ms

    def speedup_spread(self, baseline: str) -> tuple[float, float] | None:
        """The interquartile range of the speedup over ``baseline`` where it was timed interleaved
        in one process (compile: the final verification; max-autotune: its own process timing
        both); None where only medians from separate runs exist."""
        _check_baseline(baseline)
        if baseline == "best_stock":
            if self.best_stock_mode is None:
                return None
            if self.best_stock_mode == "default":
                return self.speedup_spread("compile")
            if "best_stock_iqr" in self.details:  # the row says which timing its ratio came from
                pair = tuple(self.details["best_stock_iqr"] or (None, None))
            else:
                measured = against_result(
                    (self.details.get("stock") or {}).get(self.best_stock_mode), self.base_mode, *self._delivered
                )
                cmp = (measured or {}).get("comparison") or {}
                # that mode's own process gave the ratio shown only where its speedup is that ratio: a
                # base mode's may come from the final verification instead, whose spread an older row lacks
                same = same_ratio((measured or {}).get("speedup"), self.best_stock_speedup)
                pair = (cmp.get("speedup_q1"), cmp.get("speedup_q3")) if same else (None, None)
        elif baseline == "max_autotune":
            if self.max_autotune_speedup is None or not isinstance(self.details.get("max_autotune"), dict):
                return None
            cmp = (against_result(self.details["max_autotune"], self.base_mode, *self._delivered) or {}).get(
                "comparison"
            ) or {}
            pair = (cmp.get("speedup_q1"), cmp.get("speedup_q3"))
        else:
            pair = tuple(self.details.get(f"speedup_vs_{baseline}_iqr") or (None, None))
        low, high = (pair + (None, None))[:2] if len(pair) == 2 else (None, None)
        if not (
            isinstance(low, (int, float))
            and isinstance(high, (int, float))
            and math.isfinite(low)
            and math.isfinite(high)
        ):
            return None
        return float(low), float(high)

    @property
    def _delivered(self) -> tuple[str | None, float | None]:
        """The run mode the result is delivered under, and its gain over the plain result (details)."""
        gain = self.details.get("run_mode_gain")
        return self.details.get("run_mode"), float(gain) if isinstance(gain, (int, float)) else None

    @property
    def speedup_vs_eager(self) -> float | None:
        return self.speedup("eager")

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.speedup("compile")

    @property
    def speedup_vs_max_autotune(self) -> float | None:
        return self.speedup("max_autotune")

    @property
    def speedup_vs_best_stock(self) -> float | None:
        return self.speedup("best_stock")

    @property
    def of_floor(self) -> float | None:
        """The traffic floor's time over the optimized time: how near the result is to what no kernel and
        no fusion can beat (1: nothing left); None where either is unknown."""
        if self.floor_ms is None or self.optimized_ms is None or not self.passed:
            return None
        return self.floor_ms / self.optimized_ms

    @property
    def worker_s(self) -> float | None:
        """Seconds the problem's worker ran (:func:`worker_seconds`)."""
        return worker_seconds(self.details)

    def to_dict(self) -> dict[str, Any]:
        """All fields, plus the speedups and the worker's seconds (ignored again by :meth:`from_dict`)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["details"] = dict(self.details)
        data.update(
            speedup_vs_eager=self.speedup_vs_eager,
            speedup_vs_compile=self.speedup_vs_compile,
            speedup_vs_max_autotune=self.speedup_vs_max_autotune,
            speedup_vs_best_stock=self.speedup_vs_best_stock,
            worker_s=self.worker_s,
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemOutcome:
        """Build and validate an outcome; raise ValueError naming the first bad field.

        Strict because the dict comes from a worker target: a wrong type or a NaN time
        must surface as that target's fault, not as a wrong number on the scoreboard.
        Derived keys (the speedups) and unknown keys are ignored.
        """
        if not isinstance(data, dict):
            raise ValueError(f"an outcome must be a dict, got {type(data).__name__}")
        missing = [key for key in ("name", "path", "status") if key not in data]
        if missing:
            raise ValueError(f"outcome lacks {', '.join(missing)}")
        status = data["status"]
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        correct = data.get("correct", False)
        if not isinstance(correct, bool):
            raise ValueError(f"correct must be a bool, got {type(correct).__name__}")
        evaluations = data.get("evaluations", 0)
        if isinstance(evaluations, bool) or not isinstance(evaluations, int) or evaluations < 0:
            raise ValueError(f"evaluations must be a non-negative int, got {evaluations!r}")
        gpu_s = data.get("gpu_s", 0.0)
        if isinstance(gpu_s, bool) or not isinstance(gpu_s, (int, float)) or not (math.isfinite(gpu_s) and gpu_s >= 0):
            raise ValueError(f"gpu_s must be a non-negative number, got {gpu_s!r}")
        details = data.get("details")
        details = {} if details is None else details
        if not isinstance(details, dict):
            raise ValueError(f"details must be a dict, got {type(details).__name__}")
        share = data.get("triton_share")
        if share is not None and (
            isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0
        ):
            raise ValueError(f"triton_share must be a share between 0 and 1 or None, got {share!r}")
        mode = data.get("best_stock_mode")
        if mode is not None and not isinstance(mode, str):
            raise ValueError(f"best_stock_mode must be a mode's name or None, got {type(mode).__name__}")
        return cls(
            name=str(data["name"]),
            path=str(data["path"]),
            status=status,
            reason=str(data.get("reason", "")),
            correct=correct,
            evaluations=evaluations,
            gpu_s=float(gpu_s),
            details=dict(details),
            best_stock_mode=mode,
            base_mode=str(data.get("base_mode") or "default"),
            triton_share=None if share is None else float(share),
            **{name: _time(name, data.get(name), "a ratio") for name in _RATIO_FIELDS},
            **{name: _time(name, data.get(name)) for name in _TIME_FIELDS},
        )


def against_result(
    record: Any, base: str, run_mode: str | None = None, run_mode_gain: float | None = None
) -> dict[str, Any] | None:
    """The interleaved comparison in a stock mode's record where its other side was kernelopt's
    result (the export, or with nothing exported the default's compile when the search built on
    the default), in the form the result is delivered in (:func:`as_delivered`); None where it was
    not, or failed, or cannot be said of the delivered form."""
    timed = record.get("vs_optimized") if isinstance(record, dict) else None
    if not timed:
        return None
    against = timed.get("optimized")
    if against == "torch.compile" and base == "default":
        return timed
    return as_delivered(timed, record, run_mode, run_mode_gain) if against == "kernelopt" else None


def as_delivered(
    timed: dict[str, Any], record: dict[str, Any], run_mode: str | None, run_mode_gain: float | None
) -> dict[str, Any] | None:
    """A stock mode's comparison with the export, turned into one with the export as it is delivered.

    A CUDA-graph mode's process times the export under that mode's graphs (``under``). Where the
    result is delivered without graphs (no run mode), the same process's timing of the export under
    the graphs against the plain export (``vs_plain``) turns the ratio into the delivered one: on the
    H200 row-L2 ran 1.17x faster than max-autotune under max-autotune's graphs, which copy its 8.6 GB
    input before every replay, and 2.14x as delivered; the scoreboard took the 1.17x and named
    max-autotune the best stock mode, though it ran 1.6x slower than max-autotune-no-cudagraphs. A
    mode without graphs times the plain export; where the result runs under a run mode, that mode's
    gain over the plain export (``run_mode_gain``, interleaved in its process) turns it. The quartiles
    are scaled by the same factor and widened by its own spread where it was timed (``vs_plain``'s
    quartiles; a run mode's gain is one number): the two ratios' log-distances to their quartiles
    add in quadrature, as independent spreads do. None where the factor is unknown (a record from
    before ``vs_plain``): the caller then says less."""
    under = timed.get("under")
    factor = 1.0
    factor_spread = (0.0, 0.0)  # log-distances from the factor down to its first quartile, up to its third
    if under and run_mode is None:
        vs_plain = record.get("vs_plain") or {}
        plain = vs_plain.get("speedup")
        if not plain:
            return None
        factor = 1.0 / float(plain)
        q1, q3 = ((vs_plain.get("comparison") or {}).get(k) for k in ("speedup_q1", "speedup_q3"))
        if isinstance(q1, (int, float)) and isinstance(q3, (int, float)) and 0 < q1 <= plain <= q3:
            factor_spread = (math.log(q3 / plain), math.log(plain / q1))  # 1/plain: its quartiles swap
    elif not under and run_mode and run_mode_gain:
        factor = float(run_mode_gain)
    if factor == 1.0 or not timed.get("speedup"):
        return timed
    speedup = float(timed["speedup"]) * factor
    cmp = dict(timed.get("comparison") or {})
    q1, q3 = cmp.get("speedup_q1"), cmp.get("speedup_q3")
    if isinstance(q1, (int, float)) and isinstance(q3, (int, float)) and 0 < q1 <= timed["speedup"] <= q3:
        down = math.hypot(math.log(timed["speedup"] / q1), factor_spread[0])
        up = math.hypot(math.log(q3 / timed["speedup"]), factor_spread[1])
        cmp["speedup_q1"], cmp["speedup_q3"] = speedup * math.exp(-down), speedup * math.exp(up)
    else:
        for key in ("speedup_q1", "speedup_q3"):
            if isinstance(cmp.get(key), (int, float)):
                cmp[key] = cmp[key] * factor
    return {**timed, "speedup": speedup, "comparison": cmp, "delivered_factor": factor}


def same_ratio(a: Any, b: Any) -> bool:
    """Two ratios that are one number (as stored and read back), not two timings' near-equal results."""
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9)


def speedup_over_default(record: Any) -> float | None:
    """How much faster a stock mode ran than torch.compile's default, timed interleaved in the mode's
    process, where it was timed against the default (nothing exported); None for a failed mode."""
    if not isinstance(record, dict) or record.get("vs_optimized", {}).get("optimized") != "torch.compile":
        return None
    ratio = record["vs_optimized"].get("speedup")  # the mode's time over the default's
    return 1.0 / ratio if ratio else None


def speedup_over_mode(
    record: dict[str, Any],
    mode: str,
    base: str,
    optimized_ms: float | None,
    base_record: Any = None,
    run_mode: str | None = None,
    run_mode_gain: float | None = None,
) -> float | None:
    """kernelopt's speedup over stock ``mode``, from the record of the mode's own process.

    That process times the mode interleaved against what it is given: the export where one was made,
    else torch.compile's default. The interleaved ratio is kernelopt's only when that was kernelopt's
    result: the export, or the default where the search built on it. With nothing exported and the
    search built on ``base`` (or ``base`` delivered as it is), kernelopt's result is ``base``'s own compile:
    1.0 against ``base``; against any other mode, the ratio of the two modes' gains over the default, each
    interleaved in its own process (``base_record``: ``base``'s record); only where one of those is missing,
    the mode's median over the optimized median (two processes, nothing in common). On the H200 a row-L2
    built on max-autotune-no-cudagraphs that kept its baseline was scored 0.62x of that very mode (the
    mode's ratio over the default, read as kernelopt's), and GPT-2 delivered under max-autotune (2.42x the
    default) 0.77x of reduce-overhead (2.32x) from two processes' medians of a 0.3 ms call. The export
    is compared as delivered: under ``run_mode``'s CUDA graphs or without any (:func:`as_delivered`)."""
    timed = against_result(record, base, run_mode, run_mode_gain)
    if timed is not None and timed.get("speedup"):
        return float(timed["speedup"])
    if (record.get("vs_optimized") or {}).get("optimized") == "torch.compile":
        if mode == base:
            return 1.0
        ours, theirs = speedup_over_default(base_record), speedup_over_default(record)
        if ours and theirs:
            return ours / theirs
    if record.get("compiled_ms") is not None and optimized_ms:
        return float(record["compiled_ms"]) / optimized_ms
    return None


def choose_best_stock(
    compiled_ms: float | None,
    speedup_vs_compile: float | None,
    optimized_ms: float | None,
    stock: dict[str, Any],
    base: str = "default",
    run_mode: str | None = None,
    run_mode_gain: float | None = None,
) -> tuple[str, float, float] | None:
    """(mode, its median ms, kernelopt's speedup over it) for the stock mode kernelopt's result is
    least faster than: the default (timed beside the result in the final verification) and each
    mode of ``stock`` (mode -> the record of its own process, or the one-line reason it failed).
    ``base`` names the mode the first three numbers are of (the mode the search built on). Each
    mode's speedup is :func:`speedup_over_mode`'s, of the result as delivered (under ``run_mode``'s
    CUDA graphs, whose gain over the plain result is ``run_mode_gain``, or without any). None when no
    mode has a number."""
    options: list[tuple[float, str, float]] = []
    if compiled_ms is not None and speedup_vs_compile is not None:
        options.append((speedup_vs_compile, base, compiled_ms))
    for mode, record in stock.items():
        if not isinstance(record, dict) or record.get("compiled_ms") is None:
            continue
        measured = speedup_over_mode(record, mode, base, optimized_ms, stock.get(base), run_mode, run_mode_gain)
        if measured is not None and measured > 0:
            options.append((measured, mode, float(record["compiled_ms"])))
    if not options:
        return None
    speedup, mode, ms = min(options)
    return mode, ms, speedup


def rescored(outcome: ProblemOutcome) -> ProblemOutcome:
    """A row scored before :func:`as_delivered` whose best stock mode was read with kernelopt under that
    mode's CUDA graphs, though the result is delivered without any, scored again from the records it
    keeps (``details["rescored"]`` says what it was); every other row as it is. A resumed bench and a
    merge read rows so, and row-L2's 1.17x of max-autotune became 1.31x of max-autotune-no-cudagraphs."""
    stock = outcome.details.get("stock")
    mode = outcome.best_stock_mode
    if not outcome.passed or not isinstance(stock, dict) or mode is None or "rescored" in outcome.details:
        return outcome
    record = stock.get(mode)
    timed = record.get("vs_optimized") if isinstance(record, dict) else None
    run_mode, gain = outcome._delivered
    if not timed or not timed.get("under") or timed.get("optimized") != "kernelopt" or run_mode is not None:
        return outcome
    best = choose_best_stock(None, None, outcome.optimized_ms, stock, outcome.base_mode, run_mode, gain)
    if best is None:
        return outcome
    was = f"{mode} at {outcome.best_stock_speedup or 0:.3f}x, kernelopt timed under its CUDA graphs"
    note = f"best stock mode scored again with the result as delivered, without CUDA graphs (was {was})"
    mode, ms, speedup = best
    return replace(
        outcome,
        best_stock_mode=mode,
        best_stock_ms=ms,
        best_stock_speedup=speedup,
        details={**{k: v for k, v in outcome.details.items() if k != "best_stock_iqr"}, "rescored": note},
    )


def fast_p(outcomes: Sequence[ProblemOutcome], p: float, baseline: str = "compile") -> float:
    """KernelBench's fast_p: the share of ALL problems that are correct with speedup > p."""
    _check_baseline(baseline)
    if not outcomes:
        raise ValueError("fast_p of no problems")
    hits = 0
    for outcome in outcomes:
        speedup = outcome.speedup(baseline)
        if outcome.passed and speedup is not None and speedup > p:
            hits += 1
    return hits / len(outcomes)


def geomean_speedup(outcomes: Iterable[ProblemOutcome], baseline: str = "compile") -> float | None:
    """Geometric mean of the speedups of the correct problems that have one; None if none do."""
    _check_baseline(baseline)
    speedups = [o.speedup(baseline) for o in outcomes if o.passed]
    present = [s for s in speedups if s is not None]
    return geometric_mean(present) if present else None


def slower_than_baseline(outcomes: Iterable[ProblemOutcome], tolerance: float = SLOWER_TOLERANCE) -> list[str]:
    """Correct problems whose optimized model is slower than torch.compile default beyond ``tolerance``.

    kernelopt promises the compiler's baseline back when nothing better passes, so this
    list must be empty; anything in it is a bug worth a look.
    """
    return [
        o.name
        for o in outcomes
        if o.passed
        and o.optimized_ms is not None
        and o.compiled_ms is not None
        and o.optimized_ms > o.compiled_ms * (1.0 + tolerance)
    ]


def against_best_stock(outcomes: Iterable[ProblemOutcome]) -> dict[str, Any]:
    """The suite's target in numbers: the geomean speedup over the best stock mode of the correct problems
    whose Triton kernels take :data:`SEARCHABLE_SHARE` of the compiled time or more (where a kernel search
    can move anything), and every correct problem below :data:`BELOW_BEST_STOCK` of its best stock mode.
    A problem recorded without its share (a results folder older than the field) is counted apart, not
    guessed into either side."""
    scored = [(o, s) for o in outcomes if o.passed and (s := o.speedup("best_stock")) is not None]
    searchable = [(o, s) for o, s in scored if o.triton_share is not None and o.triton_share >= SEARCHABLE_SHARE]
    return {
        "min_triton_share": SEARCHABLE_SHARE,
        "searchable": [o.name for o, _ in searchable],
        "share_unknown": [o.name for o, _ in scored if o.triton_share is None],
        "geomean_searchable": geometric_mean([s for _, s in searchable]) if searchable else None,
        "below": [o.name for o, s in scored if s < BELOW_BEST_STOCK],
        "below_threshold": BELOW_BEST_STOCK,
    }


def threshold_key(p: float) -> str:
    """``0`` → ``"0"``, ``1.5`` → ``"1.5"``: the JSON key of a fast_p threshold."""
    return f"{p:g}"


def not_run(meta: dict[str, Any], outcomes: Sequence[ProblemOutcome]) -> list[str] | None:
    """The suite's problems this bench has no outcome for, in suite order; None where the bench did
    not record its suite's problems (results written before it did)."""
    if "suite_problems" not in meta:
        return None
    ran = {o.name for o in outcomes}
    return [name for name in meta["suite_problems"] if name not in ran]


def cold_host_rows(outcomes: Sequence[ProblemOutcome]) -> list[str]:
    """The correct rows timed before the judge read a forward's host time in a loop
    (:data:`~kernelopt.measure.timer.HOST_READING`): their two-process readings of a forward (gate 4,
    the final check's end to end) held one timed call's host time, read cold (on the H100 0.21-0.67 ms for a
    forward that costs its host 0.10 ms in a loop), so a short forward's row may read differently run again."""
    return [o.name for o in outcomes if o.passed and o.details.get("host_reading") != HOST_READING]


def python_host_rows(outcomes: Sequence[ProblemOutcome]) -> list[str]:
    """The correct rows whose delivered model called one of kernelopt's own ops through its Python host path
    in the judged process (``details.op_hosts``): their gain is what is left after Python's cost at every
    call of the op, so a short forward's row may read higher where the op's C++ path is in place."""
    return [
        o.name
        for o in outcomes
        if o.passed and any(through_python(state) for state in (o.details.get("op_hosts") or {}).values())
    ]


def summarize(outcomes: Sequence[ProblemOutcome]) -> dict[str, Any]:
    """Every suite-level number of the scoreboard, as plain JSON-ready data.

    ``fast_p[baseline][threshold_key(p)]`` and ``geomean_speedup[baseline]`` for each
    baseline in :data:`BASELINES`; fast_p values are None for an empty suite.
    """
    status_counts = {status: 0 for status in STATUSES}
    for outcome in outcomes:
        status_counts[outcome.status] += 1
    evaluations = sum(o.evaluations for o in outcomes)
    gpu_s = math.fsum(o.gpu_s for o in outcomes)
    return {
        "problems": len(outcomes),
        "correct": sum(1 for o in outcomes if o.passed),
        "status_counts": status_counts,
        "fast_p": {
            baseline: {
                threshold_key(p): (fast_p(outcomes, p, baseline) if outcomes else None) for p in FAST_P_THRESHOLDS
            }
            for baseline in BASELINES
        },
        "geomean_speedup": {baseline: geomean_speedup(outcomes, baseline) for baseline in BASELINES},
        "slower_than_baseline": slower_than_baseline(outcomes),
        "against_best_stock": against_best_stock(outcomes),
        "cold_host_rows": cold_host_rows(outcomes),
        "python_host_rows": python_host_rows(outcomes),
        "evaluations": evaluations,
        "gpu_s": gpu_s,
        "evaluations_per_gpu_minute": evaluations / (gpu_s / 60.0) if gpu_s > 0 else None,
    }
