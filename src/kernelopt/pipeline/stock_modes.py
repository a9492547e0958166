"""The stock ``torch.compile`` modes a user could have picked, each timed in a fresh process of its own.

``kernelopt bench`` times every mode of the ``stock_modes`` setting against kernelopt's result
and scores against the best (:func:`~kernelopt.report.metrics.choose_best_stock`);
``kernelopt analyze --stock-modes`` times them against the default, so a user sees before any
search whether a stock mode already beats it. One process per mode: CUDA-graph trees and
max-autotune's caches must not meet another mode's compile.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from kernelopt.deliver.export import export_model, record_run_mode
from kernelopt.pipeline.records import OptimizeReport
from kernelopt.problem import Problem, load_problem
from kernelopt.report.metrics import choose_best_stock, speedup_over_default
from kernelopt.workers import WorkerResult, run_isolated
from kernelopt.workers.identity import lent_copy, worker_identity

MODE_TIMEOUT_S = 1800.0
MODE_TRIALS = 20
SEARCH_BASES = ("default", "max-autotune-no-cudagraphs")
"""The stock modes a search can start from: the capture and the swap do not run under CUDA graphs yet,
so ``reduce-overhead`` and ``max-autotune`` are not bases; the verified kernels are timed under them
through the backend (:func:`optimized_for`), and the result runs under one where it is faster there
(:func:`settle_run_mode`)."""
BASE_MODES = ("auto", *SEARCH_BASES)
# a mode faster than the default by more than this median gain is built on even inside its noise
BASE_TIE = 0.01
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def time_mode(
    problem_path: str,
    mode: str,
    seed: int,
    trials: int,
    exported: str | None = None,
    overrides: dict[str, Any] | None = None,
    train: bool = False,
    device: str = "cuda",
) -> dict[str, Any]:
    """Eager against ``torch.compile(mode=...)``, interleaved, in this (fresh) process; then
    that compiled model against kernelopt's (``exported``, under this mode's CUDA graphs where it
    has them: :func:`optimized_for`; or torch.compile's default when nothing was delivered),
    interleaved too, so the scoreboard's ratio against this mode is measured in one process
    rather than read off two processes' medians; under a CUDA-graph mode, also the plain export
    against it under the mode's graphs (``vs_plain``), the evidence :func:`run_mode_for` reads.
    Calls of kernelopt's own op that torch computed in this process are named (``fallbacks``): the
    times beside them are torch's computation's, not the kernel's."""
    import torch

    from kernelopt.capture import compat
    from kernelopt.capture.rewrites import row_softmax_op
    from kernelopt.measure import compare

    problem = load_problem(problem_path, overrides=overrides or None, train=train)
    model = problem.build_model(seed, device)
    inputs = problem.make_inputs(seed, device)

    def run(m: Any) -> Callable[[], Any]:
        def call() -> Any:
            with torch.no_grad():
                return m(*inputs)

        return call

    def warmed(m: Any) -> Any:  # compiled (and CUDA-graph trees recorded) before any timing
        run(m)()
        return m

    hits, started = compat.compile_cache_hits(), time.perf_counter()
    compiled = warmed(torch.compile(model, mode=mode))
    # what the mode's first call cost, and whether Inductor's cache (stock_cache_env) held its compile
    compile_record = {"s": time.perf_counter() - started, "cache_hits": compat.compile_cache_hits() - hits}
    cmp = compare(run(model), run(compiled), trials=trials, include_host=True)
    out: dict[str, Any] = {
        "eager_ms": cmp.baseline.median_ms,
        "compiled_ms": cmp.candidate.median_ms,
        "comparison": cmp.to_dict(),
        "compile": compile_record,
    }
    if mode in CUDA_GRAPH_MODES:  # what its CUDA-graph trees copy into their own memory before every replay
        out["input_bytes"] = sum(x.nbytes for x in inputs if isinstance(x, torch.Tensor))

    def against_result() -> None:
        """Into ``out``: the mode's compile against kernelopt's result (``vs_optimized``) and, under a
        CUDA-graph mode, the plain export against it under the mode's graphs (``vs_plain``); or why not."""
        try:
            ours, under = optimized_for(problem, seed, exported, mode, device)
            vs = compare(run(compiled), run(warmed(ours)), trials=trials, include_host=True)
        except Exception as exc:
            out["vs_optimized_error"] = _one_line(exc)
            return
        out["vs_optimized"] = {
            "speedup": vs.speedup,
            "noise": vs.noise,
            "mode_ms": vs.baseline.median_ms,
            "optimized_ms": vs.candidate.median_ms,
            "optimized": "kernelopt" if exported else "torch.compile",
            "under": under,  # the CUDA-graph mode kernelopt's kernels ran under too, or None
            "comparison": vs.to_dict(),
        }
        if exported and under is not None:  # the run mode's evidence: the export plain against it under graphs
            try:
                plain = warmed(optimized_for(problem, seed, exported, "default", device)[0])
                graphed = compare(run(plain), run(ours), trials=trials, include_host=True)
            except Exception as exc:
                out["vs_plain_error"] = _one_line(exc)
                return
            out["vs_plain"] = {"speedup": graphed.speedup, "noise": graphed.noise, "comparison": graphed.to_dict()}

    before = Counter(row_softmax_op.FALLBACKS)
    try:
        against_result()
    finally:  # one count over every timing of kernelopt's result in this process
        if fell_back := row_softmax_op.fallbacks_since(before):
            out["fallbacks"] = fell_back
    return out


def _one_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def optimized_for(
    problem: Any, seed: int, exported: str | None, mode: str, device: str = "cuda"
) -> tuple[Any, str | None]:
    """kernelopt's result as a user of ``mode`` runs it, and the CUDA-graph mode it runs under (or None).

    Against a CUDA-graph mode (``reduce-overhead``, ``max-autotune``) the verified kernels run under that
    mode's CUDA graphs, through the backend (``torch.compile(model, backend=kernelopt.backend(path),
    mode=mode)``): the capture cannot run under CUDA graphs yet, but its replacements can, and a user of
    that mode would run them so. Otherwise the exported model as ``kernelopt.load`` rebuilds it; with
    nothing exported, torch.compile's default."""
    import torch

    from kernelopt.deliver.backend import backend
    from kernelopt.deliver.export import load

    if exported and mode in CUDA_GRAPH_MODES:
        model = problem.build_model(seed, device)
        return torch.compile(model, backend=backend(exported), mode=mode, dynamic=False), mode
    if exported:
        return load(exported, device=device), None
    return torch.compile(problem.build_model(seed, device)), None


def time_stock_modes(
    problem_path: str,
    modes: Sequence[str],
    exported: str | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    *,
    seed: int = 0,
    trials: int = MODE_TRIALS,
    overrides: dict[str, Any] | None = None,
    run: Callable[..., WorkerResult] = run_isolated,
    train: bool = False,
    known: dict[str, Any] | None = None,
    on_timed: Callable[[str, Any], None] | None = None,
) -> dict[str, Any]:
    """mode -> the record of its own process (:func:`time_mode`), or the one line saying why it has none.
    The path travels resolved: the mode's process runs in a folder of its own (a relative path named
    no file there, so on an H200 every mode of ``optimize --stock-modes`` failed). ``known``: records
    this very timing already produced (the base-mode stage's, when nothing was exported), kept
    instead of compiling the mode again. ``on_timed(mode, record)`` hears each mode as soon as its
    process ends (a bench keeps it in the store, so a worker killed later does not lose it).
    ``exported`` is lent to the modes' workers, which may run as another user
    (:func:`~kernelopt.workers.identity.lent_copy`)."""
    from kernelopt.pipeline.evaluator import stock_cache_env

    problem_path = str(Path(problem_path).resolve())
    # the workers' build caches: a result that calls kernelopt's own op builds it once, not in every mode's
    # process (each mode's fresh temp folder cost a 50-60 s nvcc build on the H200 and cut a problem's time-out);
    # and one Inductor cache, so a mode compiled once (the base-mode stage's) is not compiled and autotuned again
    caches = stock_cache_env()
    with lent_copy(exported, worker_identity()) if exported else nullcontext(None) as readable:
        exported = str(readable) if readable else None  # the mode's worker may be another user
        stock: dict[str, Any] = {}
        for mode in modes:
            if isinstance((known or {}).get(mode), dict):
                stock[mode] = (known or {})[mode]
                continue
            if on_event is not None:
                on_event("stage", {"stage": f"{mode} baseline"})
            timed = run(
                f"{__name__}:time_mode",
                problem_path,
                mode,
                seed,
                trials,
                exported,
                overrides or {},
                train,
                timeout_s=MODE_TIMEOUT_S,
                env=caches,
            )
            stock[mode] = timed.value if timed.ok else f"{timed.status}: {timed.reason}"
            if on_timed is not None:
                on_timed(mode, stock[mode])
        return stock


def reused_stock(report: OptimizeReport) -> dict[str, Any] | None:
    """The base-mode stage's records where they are what the stock timing would measure again: each
    mode against torch.compile's default, which is what a run that exported nothing is compared with."""
    return report.base_stock if report.exported is None else None


def graph_gain(report: OptimizeReport, stock: dict[str, Any], mode: str) -> float | None:
    """How much faster kernelopt's result ran under CUDA-graph ``mode`` than without graphs, from that
    mode's record in ``stock``; None where the record cannot say.

    With an export, the mode's process timed the export under the mode's CUDA graphs against the plain
    export, interleaved (``vs_plain``; where a record lacks it, the plain export's time is the final
    verification's, two processes, and only the margin covers that). With nothing exported, the result
    is the base mode's compile, and each mode's process timed the mode against the default,
    interleaved, as the base mode's did: the ratio of the two gains."""
    record = stock.get(mode)
    if not isinstance(record, dict) or not record.get("vs_optimized"):
        return None
    if report.exported and isinstance(record.get("vs_plain"), dict):  # interleaved in the mode's process
        gain = record["vs_plain"].get("speedup")
        return float(gain) if gain else None
    if report.exported:  # an older record
        timed = record["vs_optimized"]
        plain = report.optimized_ms or report.compiled_ms  # the export without CUDA graphs
        under = timed.get("optimized_ms") if timed.get("optimized") == "kernelopt" else None
        return plain / under if plain and under else None
    base = 1.0 if report.base_mode == "default" else speedup_over_default(stock.get(report.base_mode))
    mode_gain = speedup_over_default(record)
    return mode_gain / base if mode_gain and base else None


def run_mode_for(report: OptimizeReport, stock: dict[str, Any], margin: float) -> str | None:
    """The CUDA-graph mode kernelopt's result should run under, or None: the one whose records show
    it faster, by more than ``margin``, than the result as it runs without CUDA graphs (:func:`graph_gain`)."""
    best, best_gain = None, 1.0 + margin
    for mode in CUDA_GRAPH_MODES:
        gain = graph_gain(report, stock, mode)
        if gain is not None and gain > best_gain:
            best, best_gain = mode, gain
    return best


def settle_run_mode(
    report: OptimizeReport,
    stock: dict[str, Any],
    problem: Callable[[], Problem],
    export_to: str | Path | None,
    margin: float,
    seed: int = 0,
    cuda_graphs: str = "auto",
) -> str | None:
    """Where a CUDA-graph mode runs kernelopt's result faster (:func:`run_mode_for`), deliver it so,
    unless the ``cuda_graphs`` setting is ``off`` (the result is then scored against that mode as it is).

    An export records the mode (``kernelopt.backend(path)`` then compiles under it unasked): it runs as
    the mode's process timed it. With nothing exported, kernelopt's result becomes that stock mode as it
    is, written to ``export_to`` as an export with no replacement (``problem`` loads the problem it
    holds, only then), and the report's numbers become that
    mode's: its compile is the result, so the search's base is that mode (1.0x over it) and the
    default's speedup is the mode's own over it, interleaved in its process. The search built on a
    mode without CUDA graphs (the capture does not run under them); the best stock mode, where it is
    one with CUDA graphs, is what kernelopt starts from, so its result is never slower than it."""
    mode = run_mode_for(report, stock, margin)
    if mode is None:
        return None
    if cuda_graphs == "off":
        report.final_reason += f"; {mode} ran it faster, not delivered (cuda_graphs=off)"
        return None
    if report.exported:
        record_run_mode(report.exported, mode)
        report.final_reason += f"; runs under mode={mode} (CUDA graphs), recorded in the export"
        report.run_mode_gain = graph_gain(report, stock, mode)
    elif export_to is not None:
        kept = report.final_reason
        report.exported = str(export_model(export_to, problem(), [], {"baseline_kept": kept}, seed=seed, run_mode=mode))
        ms = float(stock[mode]["compiled_ms"])
        report.base_mode, report.base_mode_reason = mode, f"{mode} ran fastest of the stock modes; nothing beat it"
        report.compiled_ms = report.final_compiled_ms = report.optimized_ms = ms
        report.speedup_vs_compile, report.speedup_vs_compile_iqr = 1.0, None
        report.options = {}
        report.final_reason = f"{kept}; delivered: the stock mode {mode} as it is (an export with no replacement)"
    else:
        return None
    report.run_mode = mode
    return mode


def best_stock_for(report: OptimizeReport, stock: dict[str, Any]) -> tuple[str, float, float] | None:
    """(mode, ms, speedup) of the best stock mode against an optimize run's result: the mode the search
    built on (the default unless ``base_mode`` chose another) as the final verification timed it, and
    every mode of ``stock``, each for the result as delivered (``OptimizeReport.delivered_vs_compile``,
    :func:`~kernelopt.report.metrics.as_delivered`)."""
    return choose_best_stock(
        report.final_compiled_ms or report.compiled_ms,
        report.delivered_vs_compile[0],
        report.optimized_ms or report.compiled_ms,
        stock,
        base=report.base_mode,
        run_mode=report.run_mode,
        run_mode_gain=report.run_mode_gain,
    )


def choose_base_mode(stock: dict[str, Any]) -> tuple[str, str]:
    """(mode, why in one line): the stock mode the search starts from, given each candidate mode's
    record timed against the default in its own process (:func:`time_stock_modes` with no export).

    A mode other than the default is chosen when it beat the default by more than the noise of that
    interleaved comparison, or by more than ``BASE_TIE`` even inside a wide noise: the scoreboard
    reads the best stock mode by its median, so a noisy 1.03x left to the default would score
    kernelopt's result 0.97x of that mode (H200, 2026-12-03: max over a middle dimension). The
    search then captures what that mode compiles, so kernelopt's result builds on it instead of
    racing it. Within ``BASE_TIE`` the default stays (its kernels also serve the ``kernelopt``
    backend's cache). A mode that failed or did not clear the line leaves the default, and the line
    says which and why."""
    best, best_gain, notes, caveat = "default", 1.0, [], ""
    for mode, record in stock.items():
        if mode not in SEARCH_BASES or mode == "default":
            continue
        gain = speedup_over_default(record)
        if gain is None:
            reason = record if isinstance(record, str) else record.get("vs_optimized_error", "not timed")
            notes.append(f"{mode} could not be timed against the default ({str(reason).splitlines()[0]})")
            continue
        noise = float(record["vs_optimized"].get("noise") or 0.0)
        if gain > 1.0 + min(noise, BASE_TIE) and gain > best_gain:
            best, best_gain = mode, gain
            inside = f"; within its noise (±{noise * 100:.1f}%), but more than {BASE_TIE * 100:.0f}% by its median"
            caveat = inside if gain <= 1.0 + noise else ""
        else:
            notes.append(f"{mode} ran {gain:.3f}x the default's speed, within its noise (±{noise * 100:.1f}%)")
    if best != "default":
        return (
            best,
            f"{best} ran {best_gain:.3f}x faster than the default, timed interleaved: the search builds on it{caveat}",
        )
    return "default", "; ".join(notes) or "no other mode to start from"


def untimed_modes(stock: dict[str, Any]) -> list[str]:
    """One line per mode that has no number (``mode: why``), so a summary never names a best of modes
    that were not timed."""
    return [f"{mode}: {record}" for mode, record in stock.items() if not isinstance(record, dict)]
