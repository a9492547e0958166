"""The CUDA-graph mode a result runs under: chosen from the stock modes' records, recorded in the export,
applied by the backend unasked; with nothing exported, the best stock mode delivered as it is (issue 13:
kernelopt's result is never slower than a stock mode the user could have picked)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import torch
from conftest import EXAMPLES

import kernelopt
from kernelopt.deliver.export import export_model, read_export, record_run_mode
from kernelopt.pipeline import bench_problem
from kernelopt.pipeline.records import OptimizeReport
from kernelopt.pipeline.stock_modes import best_stock_for, run_mode_for, settle_run_mode
from kernelopt.problem import load_problem

RO, MA = "reduce-overhead", "max-autotune-no-cudagraphs"
PROBLEM = EXAMPLES / "level1" / "12_softmax_wide.py"


def _against_default(mode_ms: float, default_ms: float) -> dict[str, Any]:
    """A mode's record timed with nothing exported: the mode against torch.compile's default."""
    ratio = mode_ms / default_ms
    return {"compiled_ms": mode_ms, "vs_optimized": {"speedup": ratio, "mode_ms": mode_ms, "optimized_ms": default_ms,
                                                      "optimized": "torch.compile", "under": None,
                                                      "comparison": {"speedup_q1": ratio * 0.98, "speedup_q3": ratio * 1.02}}}


def _against_export(mode_ms: float, ours_ms: float, under: str | None) -> dict[str, Any]:
    """A mode's record timed against the export (under that mode's CUDA graphs for a CUDA-graph mode)."""
    return {"compiled_ms": mode_ms, "vs_optimized": {"speedup": mode_ms / ours_ms, "mode_ms": mode_ms,
                                                      "optimized_ms": ours_ms, "optimized": "kernelopt", "under": under,
                                                      "comparison": {}}}


def test_an_export_runs_under_the_cuda_graph_mode_that_ran_it_faster_beyond_the_margin() -> None:
    report = OptimizeReport("p", 1, "H200", 2.0, 1.0, 1.0, speedup_vs_compile=1.25, optimized_ms=0.8, exported="p.kopt.json")
    stock = {RO: _against_export(0.5, 0.45, RO), "max-autotune": _against_export(0.6, 0.7, "max-autotune"),
             MA: _against_export(0.9, 0.8, None)}
    assert run_mode_for(report, stock, 0.03) == RO  # 0.45 under its graphs against 0.8 without
    close = {RO: _against_export(0.85, 0.79, RO)}  # 1.3 % faster: inside the margin, the plain export stays
    assert run_mode_for(report, close, 0.03) is None
    assert run_mode_for(report, {RO: "crash: x", "max-autotune": {"compiled_ms": 0.4}}, 0.03) is None


def test_the_run_mode_reads_the_export_plain_against_graphed_in_the_mode_s_own_process() -> None:
    """The mode's process times the plain export against it under graphs, interleaved (``vs_plain``): that,
    not the final verification's median from another process, decides; an older record falls back."""
    report = OptimizeReport("p", 1, "H200", 2.0, 1.0, 1.0, speedup_vs_compile=1.25, optimized_ms=0.8, exported="p.kopt.json")
    across = _against_export(0.5, 0.45, RO)  # 0.8 / 0.45 across two processes: 1.78x
    assert run_mode_for(report, {RO: across}, 0.03) == RO
    assert run_mode_for(report, {RO: {**across, "vs_plain": {"speedup": 1.02}}}, 0.03) is None  # in one process: 2 %
    assert run_mode_for(report, {RO: {**across, "vs_plain": {"speedup": 1.5}}}, 0.03) == RO


def test_with_nothing_exported_the_result_is_its_base_and_a_cuda_graph_mode_must_beat_that() -> None:
    kept = OptimizeReport("p", 1, "H200", 2.0, 1.0, 1.0)  # on the default, nothing exported
    stock = {RO: _against_default(0.5, 1.0), "max-autotune": _against_default(0.55, 1.0), MA: _against_default(0.9, 1.0)}
    assert run_mode_for(kept, stock, 0.03) == RO  # 2.0x the default's speed
    on_ma = OptimizeReport("p", 1, "H200", 2.0, 0.6, 1.0, base_mode=MA)
    slow_ro = {RO: _against_default(0.95, 1.0), MA: _against_default(0.6, 1.0)}  # the base already beats it
    assert run_mode_for(on_ma, slow_ro, 0.03) is None
    assert run_mode_for(on_ma, {**slow_ro, "max-autotune": _against_default(0.3, 1.0)}, 0.03) == "max-autotune"


def test_a_recorded_run_mode_is_sealed_and_the_backend_compiles_under_it_unless_the_user_names_one(tmp_path) -> None:
    problem = load_problem(PROBLEM).small()
    path = export_model(tmp_path / "m.kopt.json", problem, [], {"passed": True}, options={"max_autotune": False})
    assert "run_mode" not in read_export(path) and kernelopt.backend(path).compile_options() == {"max_autotune": False}
    record_run_mode(path, RO)
    assert read_export(path)["run_mode"] == RO  # the digest was renewed: read_export checks it
    tuned = kernelopt.backend(path)
    assert tuned.compile_options() == {"max_autotune": False, "triton.cudagraphs": True}
    assert "triton.cudagraphs" not in tuned.compile_options("default")  # the user's mode wins, even the default
    doc = json.loads(path.read_text())
    doc["run_mode"] = "max-autotune"  # a mode changed by hand breaks the seal like any other edit
    path.write_text(json.dumps(doc))
    with pytest.raises(kernelopt.KerneloptError, match="does not match its digest"):
        kernelopt.backend(path)


def test_load_says_in_one_line_that_it_does_not_apply_the_run_mode(tmp_path, caplog) -> None:
    problem = load_problem(PROBLEM).small()
    path = export_model(tmp_path / "m.kopt.json", problem, [], {"passed": True}, run_mode=RO)
    with caplog.at_level(logging.WARNING, logger="kernelopt.deliver.export"):
        loaded = kernelopt.load(path, device="cpu")
    x = problem.make_inputs(0, "cpu")
    torch.testing.assert_close(loaded(*x), problem.build_model(0, "cpu")(*x))
    said = [r.getMessage() for r in caplog.records if "runs fastest under" in r.getMessage()]
    assert len(said) == 1 and "mode='reduce-overhead'" in said[0] and "kernelopt.backend(" in said[0]


def test_with_nothing_exported_the_best_stock_mode_is_delivered_as_it_is_and_scored_as_kernelopt_s(tmp_path) -> None:
    """A launch-bound model whose CUDA-graph mode runs 2x the default: kernelopt found no faster kernel, so
    its result is that stock mode, exported with no replacement; scored 1.0x over it (was 0.5x)."""
    problem = load_problem(PROBLEM).small()
    report = OptimizeReport("p", 1, "H200", 3.0, 1.0, 1.0, final_compiled_ms=1.0, optimized_ms=None,
                            final_reason="no candidate passed all four gates faster than the compiler: the baseline stays")
    stock = {MA: _against_default(0.98, 1.0), RO: _against_default(0.5, 1.0), "max-autotune": _against_default(0.52, 1.0)}
    assert best_stock_for(report, stock)[:3:2] == (RO, 0.5)  # before: kernelopt at half the speed of a stock mode
    target = tmp_path / "models" / "p.kopt.json"
    target.parent.mkdir()
    assert settle_run_mode(report, stock, lambda: problem, target, 0.03) == RO
    doc = read_export(target)
    assert doc["run_mode"] == RO and doc["replacements"] == [] and doc["graphs"] == [] and doc["options"] == {}
    assert doc["verification"]["baseline_kept"].startswith("no candidate passed")
    assert report.exported == str(target) and report.run_mode == RO and report.base_mode == RO
    assert "delivered: the stock mode reduce-overhead as it is" in report.final_reason
    assert kernelopt.backend(target).compile_options() == {"triton.cudagraphs": True}  # exactly the stock mode
    best = best_stock_for(report, stock)
    assert best is not None and (best[0], best[2]) == (RO, 1.0)
    default_ms, gain, spread = bench_problem.default_baseline(report, stock)
    assert (default_ms, gain) == (1.0, pytest.approx(2.0)) and spread is not None and spread[0] < 2.0 < spread[1]


def test_nothing_is_delivered_without_a_place_to_write_it_and_nothing_changes(tmp_path) -> None:
    problem = load_problem(PROBLEM).small()
    report = OptimizeReport("p", 1, "H200", 3.0, 1.0, 1.0)
    stock = {RO: _against_default(0.5, 1.0)}
    assert settle_run_mode(report, stock, lambda: problem, None, 0.03) is None
    assert (report.exported, report.run_mode, report.base_mode) == (None, None, "default")



def test_cuda_graphs_off_delivers_no_run_mode_and_says_which_mode_was_faster(tmp_path, monkeypatch) -> None:
    """A user whose inputs change shape or address between calls cannot replay a CUDA graph: the setting keeps
    the result off them, and the report says what that costs."""
    from kernelopt.config import load_settings

    problem = load_problem(PROBLEM).small()
    exported = export_model(tmp_path / "m.kopt.json", problem, [], {"passed": True})
    report = OptimizeReport("p", 1, "H200", 2.0, 1.0, 1.0, speedup_vs_compile=1.25, optimized_ms=0.8,
                            exported=str(exported), final_reason="verified")  # fmt: skip
    stock = {RO: _against_export(0.5, 0.45, RO)}
    assert settle_run_mode(report, stock, lambda: problem, None, 0.03, cuda_graphs="off") is None
    assert "run_mode" not in read_export(exported) and report.run_mode is None
    assert report.final_reason == "verified; reduce-overhead ran it faster, not delivered (cuda_graphs=off)"
    monkeypatch.setenv("KERNELOPT_CUDA_GRAPHS", "never")
    with pytest.raises(kernelopt.KerneloptError, match="KERNELOPT_CUDA_GRAPHS.*auto, off"):
        load_settings()
    monkeypatch.setenv("KERNELOPT_CUDA_GRAPHS", "off")
    assert load_settings().cuda_graphs == "off"


def test_an_export_delivered_under_a_run_mode_keeps_the_graphs_gain_from_the_mode_s_process(tmp_path) -> None:
    """The row's "vs torch.compile" is the plain export's; what the user runs is that times the graphs' gain,
    the ratio the mode's own process timed interleaved (vs_plain), kept for the CLI line and the bench row."""
    problem = load_problem(PROBLEM).small()
    exported = export_model(tmp_path / "m.kopt.json", problem, [], {"passed": True})
    report = OptimizeReport("p", 1, "H200", 2.0, 1.0, 1.0, speedup_vs_compile=1.25, optimized_ms=0.8,
                            exported=str(exported), final_reason="verified")  # fmt: skip
    stock = {RO: {**_against_export(0.5, 0.45, RO), "vs_plain": {"speedup": 1.5}}}
    assert settle_run_mode(report, stock, lambda: problem, None, 0.03) == RO
    assert report.run_mode_gain == 1.5 and read_export(exported)["run_mode"] == RO
    kept = OptimizeReport("p", 1, "H200", 3.0, 1.0, 1.0)  # nothing exported: the mode itself is the result
    assert settle_run_mode(kept, {RO: _against_default(0.5, 1.0)}, lambda: problem, tmp_path / "k.kopt.json", 0.03)
    assert kept.run_mode == RO and kept.run_mode_gain is None  # its numbers are the mode's own: no product


def _row_l2_on_the_h200() -> dict[str, Any]:
    """Row-L2 (32768 x 65535 fp32, 8.6 GB in) on the H200, 2026-12-03: each mode's process timed the plain
    export (5.79 ms) against it; the CUDA-graph modes ran it under their graphs, which copy the input before
    every replay (10.59 ms), and timed that against the plain export too (vs_plain)."""
    def graphed(mode_ms: float, ours_ms: float, mode: str, plain: float) -> dict[str, Any]:
        record = _against_export(mode_ms, ours_ms, mode)
        record["vs_optimized"]["comparison"] = {"speedup_q1": mode_ms / ours_ms * 0.999, "speedup_q3": mode_ms / ours_ms * 1.001}
        return {**record, "vs_plain": {"speedup": plain}}

    return {"default": _against_export(9.362, 5.793, None), MA: _against_export(7.595, 5.794, None),
            RO: graphed(14.170, 10.578, RO, 0.5468), "max-autotune": graphed(12.379, 10.592, "max-autotune", 0.5470)}


def test_the_best_stock_mode_is_scored_against_the_result_as_delivered_not_under_another_mode_s_graphs() -> None:
    """The scoreboard named max-autotune the best stock mode at 1.17x: kernelopt's kernels under its graphs. The
    result is delivered without graphs (none ran it faster), so against max-autotune it is 2.14x; the best stock
    mode is max-autotune-no-cudagraphs, 1.31x, which ran 1.6x faster than max-autotune."""
    from kernelopt.report.metrics import ProblemOutcome, against_result, choose_best_stock

    stock = _row_l2_on_the_h200()
    report = OptimizeReport("row-l2", 1, "H200", 8.29, 7.61, 1.0, base_mode=MA, speedup_vs_compile=1.31, optimized_ms=5.79,
                            exported="m.kopt.json", final_reason="verified")  # fmt: skip
    best = best_stock_for(report, stock)
    assert best is not None and best[0] == MA and best[2] == pytest.approx(1.31)  # was max-autotune at 1.169x
    delivered = against_result(stock["max-autotune"], MA)
    assert delivered is not None and delivered["speedup"] == pytest.approx(12.379 / 10.592 / 0.5470)  # 2.14x
    assert delivered["comparison"]["speedup_q1"] < delivered["speedup"] < delivered["comparison"]["speedup_q3"]
    # under a run mode the CUDA-graph modes' ratios stand as timed, and the plain ones take the graphs' gain
    graphed = choose_best_stock(7.61, 1.31, 5.79, stock, base=MA, run_mode="max-autotune", run_mode_gain=0.547)
    assert graphed is not None and graphed[0] == MA and graphed[2] == pytest.approx(7.595 / 5.794 * 0.547)
    # a record from before vs_plain cannot say what the delivered result does against it: two processes' medians
    old = {**stock["max-autotune"]}
    del old["vs_plain"]
    assert against_result(old, MA) is None
    assert choose_best_stock(None, None, 5.79, {"max-autotune": old}, base=MA)[1:] == (12.379, pytest.approx(12.379 / 5.79))
    row = ProblemOutcome.from_dict({"name": "p", "path": "p.py", "status": "ok", "correct": True, "base_mode": MA,
                                    "best_stock_mode": "max-autotune", "best_stock_speedup": delivered["speedup"],
                                    "details": {"stock": stock, "run_mode": None}})
    low, high = row.speedup_spread("best_stock")
    assert low == pytest.approx(delivered["comparison"]["speedup_q1"]) and high > 2.0


def test_vs_the_default_an_export_under_a_run_mode_is_scored_as_it_runs_there() -> None:
    """The default's process timed the plain export (1.25x); delivered under reduce-overhead, whose graphs ran the
    export 1.5x its plain speed in their own process, the row says 1.875x (was the plain 1.25x)."""
    report = OptimizeReport("p", 1, "H200", 2.0, 1.0, 1.0, speedup_vs_compile=1.25, speedup_vs_compile_iqr=(1.2, 1.3),
                            optimized_ms=0.8, exported="m.kopt.json", final_reason="verified",
                            run_mode=RO, run_mode_gain=1.5)  # fmt: skip
    ms, gain, spread = bench_problem.default_baseline(report, {})  # built on the default: the final verification's
    assert (ms, gain) == (1.0, pytest.approx(1.875)) and spread == (pytest.approx(1.8), pytest.approx(1.95))
    report.base_mode = MA  # built on another mode: the default's own process, against the plain export
    ms, gain, _ = bench_problem.default_baseline(report, {"default": _against_export(1.0, 0.8, None)})
    assert gain == pytest.approx(1.25 * 1.5)
    report.run_mode = None
    assert bench_problem.default_baseline(report, {"default": _against_export(1.0, 0.8, None)})[1] == pytest.approx(1.25)
    report.base_mode, report.run_mode = "default", RO  # the final verification's plain ratio takes the gain too
    best = best_stock_for(report, {RO: {**_against_export(0.72, 0.45, RO), "vs_plain": {"speedup": 1.5}}})
    assert best is not None and best[0] == RO and best[2] == pytest.approx(1.6)  # not the default at its plain 1.25x


def test_a_row_scored_under_another_mode_s_graphs_is_scored_again_when_its_results_are_read(tmp_path) -> None:
    """The suite's results on main held row-L2 at 1.169x of max-autotune; a resumed bench or a merge reads it
    as 1.31x of max-autotune-no-cudagraphs and says what it was. A row delivered under a run mode stays."""
    from kernelopt.pipeline.bench_results import read_results, write_results
    from kernelopt.report.metrics import ProblemOutcome

    def row(run_mode: str | None) -> ProblemOutcome:
        return ProblemOutcome.from_dict({
            "name": "level1/10_row_l2_normalize", "path": "p.py", "status": "ok", "correct": True, "optimized_ms": 5.79,
            "base_mode": MA, "best_stock_mode": "max-autotune", "best_stock_ms": 12.379, "best_stock_speedup": 1.1687,
            "details": {"stock": _row_l2_on_the_h200(), "run_mode": run_mode, "exported": "m.kopt.json"}})  # fmt: skip

    write_results(tmp_path, {"suite": "examples/problems"}, [row(None), ProblemOutcome.from_dict(
        {**row("max-autotune").to_dict(), "name": "level1/other"})])  # fmt: skip
    again, graphed = read_results(tmp_path / "results.json")["outcomes"]
    assert (again.best_stock_mode, again.best_stock_ms) == (MA, 7.595)
    assert again.best_stock_speedup == pytest.approx(7.595 / 5.794)
    assert "was max-autotune at 1.169x, kernelopt timed under its CUDA graphs" in again.details["rescored"]
    assert (graphed.best_stock_mode, graphed.best_stock_speedup) == ("max-autotune", 1.1687)  # runs under it: as timed
    assert "rescored" not in graphed.details
    from kernelopt.report.bench_data import load_bench

    page_row = load_bench(tmp_path).outcomes[0]  # kernelopt report reads it the same way
    assert page_row.best_stock_mode == MA and "rescored" in page_row.details
    replays = {"graphs_gain": 2.4, "speedup": 1.07, "q1": 1.06, "q3": 1.08, "beyond_noise": True}
    graphed.details.update(run_mode_gain=1.5, as_replays=replays)
    write_results(tmp_path, {"suite": "examples/problems"}, [again, graphed])
    notes = (tmp_path / "results.md").read_text().split("## Notes")[1]
    assert "- level1/10_row_l2_normalize: best stock mode scored again with the result as delivered" in notes
    assert "- level1/other: runs under mode=max-autotune (CUDA graphs), 1.500x its plain speed there" in notes
    assert "- level1/other: as CUDA-graph replays: 1.070x over max-autotune-no-cudagraphs's replays" in notes


def test_the_delivered_ratio_carries_the_spread_of_the_factor_that_turned_it() -> None:
    """Against max-autotune row-L2 is 1.169x under its graphs (IQR 0.1 % each way) and the graphs ran the
    export at 0.547x its plain speed, with an IQR of its own: the delivered 2.14x is as unsure as both."""
    import math

    from kernelopt.report.metrics import as_delivered

    record = _row_l2_on_the_h200()["max-autotune"]
    timed = record["vs_optimized"]
    alone = as_delivered(timed, record, None, None)  # vs_plain without quartiles: the ratio's own spread, scaled
    assert alone is not None
    assert alone["comparison"]["speedup_q1"] == pytest.approx(timed["comparison"]["speedup_q1"] / 0.5470)
    assert alone["comparison"]["speedup_q3"] == pytest.approx(timed["comparison"]["speedup_q3"] / 0.5470)
    record = {**record, "vs_plain": {"speedup": 0.5470, "comparison": {"speedup_q1": 0.5360, "speedup_q3": 0.5600}}}
    both = as_delivered(timed, record, None, None)
    assert both is not None and both["speedup"] == pytest.approx(alone["speedup"])
    q1, q3, s = both["comparison"]["speedup_q1"], both["comparison"]["speedup_q3"], both["speedup"]
    assert q1 < alone["comparison"]["speedup_q1"] and q3 > alone["comparison"]["speedup_q3"]  # wider, both ways
    own_down, own_up = math.log(1.001 / 0.999) / 2, math.log(1.001 / 0.999) / 2  # about 0.1 % each way
    assert math.log(s / q1) == pytest.approx(math.hypot(math.log(timed["speedup"] / timed["comparison"]["speedup_q1"]),
                                                        math.log(0.5600 / 0.5470)))  # fmt: skip
    assert math.log(q3 / s) == pytest.approx(math.hypot(math.log(timed["comparison"]["speedup_q3"] / timed["speedup"]),
                                                        math.log(0.5470 / 0.5360)))  # fmt: skip
    assert math.log(s / q1) > own_down and math.log(q3 / s) > own_up
