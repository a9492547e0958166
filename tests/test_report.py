"""``kernelopt report``: pages rendered from recorded runs (a CPU store fixture) and bench results.

The runs come from ``report_runs.py``: the public optimize() on the CPU with a scripted
worker and LLM server. What is checked is what a reader relies on: the numbers in the
summary, each chart's data (the derived "after" times, node colours by verdict, the
winning path, fast_p), the diffs, the agents' plans and cost, that untrusted text stays
text, and that a report which cannot be written never fails the run that wanted it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from report_runs import FIXTURE_DEVICE, INJECTION, RecordedRuns, record_runs
from typer.testing import CliRunner

from kernelopt.cli.main import app
from kernelopt.errors import KerneloptError
from kernelopt.report import report_beside, try_write, write_bench_report, write_run_report
from kernelopt.report.bench_data import load_bench
from kernelopt.report.figures import VERDICT_COLORS, bench_figures, fast_p_grid
from kernelopt.report.metrics import fast_p, summarize
from kernelopt.report.run_data import PLAN_KEY, load_run
from kernelopt.report.tree_layout import tree_layout
from kernelopt.search.nodes import NodeStore
from kernelopt.store import Store

ROOT = Path(__file__).resolve().parents[1]
H200_SUITE = ROOT / "benchmarks" / "h200-2026-11-30-suite"
_BLOB = re.compile(r'<script type="application/json" id="(figure|records)-([\w-]+)">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> RecordedRuns:
    return record_runs(tmp_path_factory.mktemp("recorded"))


def blobs(page: str, kind: str) -> dict[str, object]:
    """The page's JSON blocks of one kind (``figure`` or ``records``), parsed, by id."""
    return {key: json.loads(text) for found, key, text in _BLOB.findall(page) if found == kind}


def trace(figure: dict, name: str) -> dict:
    (found,) = [t for t in figure["data"] if t.get("name") == name]
    return found


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


# -- an optimize run -------------------------------------------------------------------------


def test_optimize_writes_its_report_beside_the_export(recorded: RecordedRuns) -> None:
    assert recorded.search_report == recorded.store.parent / "search.report.html"
    assert report_beside("out/model.kopt.json") == Path("out/model.report.html")
    page = recorded.search_report.read_text()
    assert page.startswith("<!doctype html>") and "kernelopt: 12_softmax_wide" in page
    assert f"optimize run {recorded.search} · done" in page  # rendered after the run was finished


def test_the_summary_has_every_speedup_with_its_spread_and_both_bounds(recorded: RecordedRuns) -> None:
    page = recorded.agent_report.read_text()
    for text in (
        "1.190×",  # over torch.compile, from the final verification
        "IQR 1.180–1.200× (final verification)",
        "1.490×",  # over eager
        "IQR 1.470–1.510×",
        "not timed: kernelopt optimize --stock-modes (or kernelopt bench) times every stock mode beside it",
        "1.250×",  # torch.compile over eager in the analysis, with each side's spread
        "eager ±0.4 % (IQR/median), compiled ±0.3 % (IQR/median)",
        "1.50×",  # Amdahl
        "1.02×",  # launch overhead
        "GPU busy 98 % of the forward",
        FIXTURE_DEVICE,
        "verified: 1 kernel(s) replaced",
    ):
        assert text in page, text
    with Store(recorded.store) as store:
        torch_version = store.run(recorded.agent).versions["torch"]
    assert f"version: torch</td><td>{torch_version}</td>" in page


def test_the_time_breakdown_puts_the_replaced_kernel_at_its_verified_speedup(recorded: RecordedRuns) -> None:
    figures = blobs(recorded.search_report.read_text(), "figure")
    assert list(figures) == ["time-by-kind", "time-by-kernel", "roofline", "search-1"]
    by_kind = figures["time-by-kind"]
    before, after = trace(by_kind, "triton")["x"]
    assert before == pytest.approx(784.0)  # the softmax (780 µs) and a tiny kernel (4 µs)
    assert after == pytest.approx(780.0 / 1.2 + 4.0)  # the softmax re-checked at 1.2x, the tiny one as it was
    assert trace(by_kind, "aten")["x"] == [6.0, 6.0]
    assert trace(by_kind, "outside kernels")["x"] == pytest.approx([10.0, 10.0])  # 800 µs measured, 790 attributed
    roofline = figures["roofline"]
    peak = trace(roofline, "measured copy peak 4000 GB/s")["y"]
    assert peak == [4000.0, 4000.0]
    (after_gbps,) = trace(roofline, "kernelopt")["y"]
    (before_gbps,) = [y for y, name in zip(trace(roofline, "torch.compile")["y"], trace(roofline, "torch.compile")["text"])
                      if name.startswith("triton_per")]
    assert after_gbps == pytest.approx(1.2 * before_gbps)


def test_the_search_tree_colours_nodes_by_verdict_and_marks_the_winning_path(recorded: RecordedRuns) -> None:
    page = recorded.search_report.read_text()
    tree = blobs(page, "figure")["search-1"]
    records = blobs(page, "records")["search-1"]
    with Store(recorded.store) as store:
        nodes = NodeStore(store, recorded.search)
        (target,) = nodes.targets()
        stored = nodes.nodes(target)
        delivered = store.measurements(recorded.search, "report")["report"]["kernels"][0]["best"]["node"]
    failed = {gate: {n.id for n in stored if n.failed_gate == gate} for gate in ("correctness", "performance", "static")}
    for gate, ids in failed.items():
        assert ids, f"the fixture should fail some node at the {gate} gate"
        marks = trace(tree, f"failed: {gate} gate")
        assert set(marks["customdata"]) == ids and marks["marker"]["color"] == VERDICT_COLORS[gate]
    assert trace(tree, "delivered")["customdata"] == [delivered]
    path = trace(tree, "winning path")
    assert len(path["x"]) == 3  # root → winner: one edge (and its gap)
    assert set(records) == {str(n.id) for n in stored}  # every node is clickable
    wrong = records[str(min(failed["correctness"]))]
    assert wrong["verdict"] == "correctness" and [g["gate"] for g in wrong["gates"]] == ["static", "correctness"]
    assert wrong["gates"][1] == {"gate": "correctness", "passed": False, "reason": "correctness failed"}
    assert records[str(delivered)]["config"]["num_warps"] == 32 and records[str(delivered)]["speedup"] == 1.2


def test_each_replaced_kernel_shows_its_diff_against_inductors(recorded: RecordedRuns) -> None:
    page = recorded.search_report.read_text()
    added = re.findall(r'<span class="add">(.*?)</span>', page)
    removed = re.findall(r'<span class="del">(.*?)</span>', page)
    assert any("fixed_config(config={&#x27;XBLOCK&#x27;: 1, &#x27;num_warps&#x27;: 32" in line for line in added), added
    assert any("persistent_reduction(" in line for line in removed)  # Inductor's heuristic gave way to the pin
    agent = recorded.agent_report.read_text()
    assert any("FAST_MARKER = 1" in line for line in re.findall(r'<span class="add">(.*?)</span>', agent))


def test_an_agent_run_shows_its_plans_cost_and_transcripts(recorded: RecordedRuns) -> None:
    page = recorded.agent_report.read_text()
    data = load_run_of(recorded, recorded.agent)
    roles = [t.role for t in data.transcripts]
    assert roles == ["analyst", "planner", "coder", "judge", "repairer", "planner", "coder"]
    for t in data.transcripts:
        assert f"#{t.id} {t.role} (openai-compatible:scripted-coder, node #" in page
    (kernel,) = data.kernels
    assert kernel.replaced and kernel.operator == "llm" and kernel.speedup == pytest.approx(1.3)  # the repair won
    assert "<td>wide-row-warps</td><td>num_warps 32 on the 65536-wide rows</td>" in page
    assert page.count("<td>wide-row-warps</td>") == 2  # the broken candidate and its repair share the plan
    # 7 exchanges of 1800 / 450 tokens at the fixture's $1 / $4 per million
    assert "<td class=num>12600</td><td class=num>3150</td><td class=num>$0.0252</td>" in page


def load_run_of(recorded: RecordedRuns, run_id: int):
    with Store(recorded.store) as store:
        return load_run(store, run_id)


def test_untrusted_text_stays_text(recorded: RecordedRuns) -> None:
    """Kernel source, gate reasons and LLM text carrying </script><script>alert(1)</script> cannot leave their element."""
    page = recorded.agent_report.read_text()
    assert INJECTION not in page and "<script>alert" not in page
    escaped = "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"
    assert page.count(escaped) >= 3  # in the diff, the winner's note, the transcripts
    figures, records = blobs(page, "figure"), blobs(page, "records")
    assert page.count("<script") == 2 + len(figures) + len(records)  # plotly.js, the blocks, the boot script
    reasons = [g["reason"] for r in records["search-1"].values() for g in r["gates"]]
    assert any(INJECTION in reason for reason in reasons)  # kept whole as data, shown with textContent


def test_a_killed_run_shows_what_it_recorded(recorded: RecordedRuns, tmp_path: Path) -> None:
    with Store(recorded.store) as store:
        page = write_run_report(store, recorded.killed, tmp_path / "killed.html").read_text()
    assert "This run has not finished: the run did not finish (running)" in page
    tree = blobs(page, "figure")["search-1"]
    assert len(trace(tree, "pending")["customdata"]) == 1
    assert "path" not in " ".join(t.get("name") or "" for t in tree["data"])  # nothing passed: no winning path
    assert "Replaced kernels" not in page


def test_an_analyze_run_shows_where_the_time_goes_without_a_search(tmp_path: Path) -> None:
    from report_runs import _analysis

    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("analyze", "12_softmax_wide", "cpu", {"torch": "x"})
        store.add_measurement(run_id, "analysis", _analysis())
        store.finish_run(run_id)
        page = write_run_report(store, run_id, tmp_path / "a.html").read_text()
    assert list(blobs(page, "figure")) == ["time-by-kind", "time-by-kernel", "roofline"]
    assert "an analyze run: no search" in page and "has not finished" not in page
    assert trace(blobs(page, "figure")["time-by-kind"], "triton")["y"] == ["torch.compile (analysed)"]  # no after
    assert 'id="search"' not in page
    # a record from before copies were told apart: no copy kind, no claim either way
    assert "copy" not in [t["name"] for t in blobs(page, "figure")["time-by-kind"]["data"]]
    assert "Data movement only" not in page and "only moves data" not in page


def _analyze_page(tmp_path: Path, analysis: dict) -> str:
    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("analyze", "12_softmax_wide", "cpu", {"torch": "x"})
        store.add_measurement(run_id, "analysis", analysis)
        store.finish_run(run_id)
        return write_run_report(store, run_id, tmp_path / f"a{run_id}.html").read_text()


def _optimize_page(tmp_path: Path, report: dict) -> str:
    """The page of an optimize run that recorded the fixture's analysis and ``report``."""
    from report_runs import _analysis

    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("optimize", "12_softmax_wide", "cpu", {})
        store.add_measurement(run_id, "analysis", _analysis())
        store.add_measurement(run_id, "report", report)
        store.finish_run(run_id)
        return write_run_report(store, run_id, tmp_path / f"o{run_id}.html").read_text()


def test_an_analyze_run_shows_which_kernels_only_move_data_and_their_share(tmp_path: Path) -> None:
    from report_runs import _analysis

    analysis = _analysis()
    copy = {**analysis["launches"][2], "moves_only": True}  # triton_poi_tiny_1, launched twice
    analysis["launches"] = [*analysis["launches"][:2], copy, {**copy, "index": 3, "time_us": 6.0}]
    analysis.update(moves_ms=0.010, moves_launches=2)
    page = _analyze_page(tmp_path, analysis)
    figures = blobs(page, "figure")
    assert trace(figures["time-by-kind"], "copy")["x"] == [10.0] and trace(figures["time-by-kind"], "triton")["x"] == [780.0]
    assert "[copy] triton_poi_tiny_1" in figures["time-by-kernel"]["data"][0]["y"]
    line = "2 launches, 0.01 ms (1.3 % of the GPU time)"  # 10 of 796 µs
    assert f"<td>data movement only</td><td>{line}; see where the time goes</td>" in page
    assert "<h3>Data movement only</h3>" in page and line in page
    assert "<td>triton_poi_tiny_1</td><td class=num>2</td><td class=num>10.0</td><td class=num>1.3</td>" in page
    none = _analyze_page(tmp_path, {**_analysis(), "moves_ms": 0.0, "moves_launches": 0})
    assert "No generated kernel only moves data" in none and "data movement only</td>" not in none
    assert "graph stage</td>" not in page and "graph stage</td>" not in none  # 1.3 %: below the 5 % that brings it


def test_an_analyze_page_says_where_optimize_would_search_graph_variants_unasked(tmp_path: Path) -> None:
    """As ``kernelopt analyze`` prints it: copies at 5 % of the compiled forward's time or more bring the
    graph stage (the graph_stage setting at auto)."""
    from report_runs import _analysis

    analysis = {**_analysis(), "moves_ms": 0.1 * _analysis()["compiled_ms"], "moves_launches": 1}
    page = _analyze_page(tmp_path, analysis)
    assert "<td>graph stage</td><td>optimize would also search graph variants here: kernels that only move data " \
        "take 10% of the compiled forward&#x27;s time" in page
    # and where the capture's probes found ops kernelopt's own kernels would take (level2/13's group norm)
    page = _analyze_page(tmp_path, {**_analysis(), "own_ops": {"kernelopt.cluster_group_norm": 1}})
    assert "optimize would also search graph variants here: kernelopt&#x27;s own kernels can take ops of the " \
        "graphs (kernelopt.cluster_group_norm: 1)" in page


def test_a_compiler_knob_search_is_drawn_with_its_delivered_options(tmp_path: Path) -> None:
    from report_runs import _analysis

    from kernelopt.search.candidate import MODEL_TARGET, Candidate, EvaluationResult

    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("optimize", "12_softmax_wide", "cpu", {})
        store.add_measurement(run_id, "analysis", _analysis())
        nodes = NodeStore(store, run_id)
        root = nodes.add(Candidate(MODEL_TARGET, "root", options={}), None, 0)
        won = nodes.add(Candidate(MODEL_TARGET, "compiler-knobs", options={"max_autotune": True}), root.id, 1)
        lost = nodes.add(Candidate(MODEL_TARGET, "compiler-knobs", options={"epilogue_fusion": False}), root.id, 1)
        nodes.record(root.id, EvaluationResult(True, 1.0, None, "baseline"))
        nodes.record(won.id, EvaluationResult(True, 1.1, None, "faster end to end"))
        nodes.record(lost.id, EvaluationResult.failure("model", "error 40x the compiled baseline's"))
        knobs = {"used": True, "best_options": {"max_autotune": True}, "speedup": 1.1, "evaluations": 2}
        store.add_measurement(run_id, "report", {"final_reason": "verified: Inductor options", "kernels": [],
                                                 "knobs": knobs, "speedup_vs_compile": 1.1})
        store.finish_run(run_id)
        data = load_run(store, run_id)
        page = write_run_report(store, run_id, tmp_path / "k.html").read_text()
    (tree,) = data.trees
    assert tree.target == MODEL_TARGET and tree.winner == won.id and tree.delivered
    assert "<h3>the whole model (Inductor options)</h3>" in page
    records = blobs(page, "records")["search-1"]
    assert records[str(won.id)]["options"] == {"max_autotune": True} and records[str(lost.id)]["verdict"] == "model"
    assert ("best {&#x27;max_autotune&#x27;: True} at 1.100× (adopted: the kernels were searched on its compile; "
            "2 evaluations)") in page


def test_a_graph_candidate_search_is_listed_and_drawn(tmp_path: Path) -> None:
    from report_runs import _analysis

    from kernelopt.search.candidate import Candidate, EvaluationResult
    from kernelopt.search.graph_variants import graph_target

    target = graph_target(0)
    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("optimize", "12_softmax_wide", "cpu", {})
        store.add_measurement(run_id, "analysis", _analysis())
        nodes = NodeStore(store, run_id)
        root = nodes.add(Candidate(target, "root", options={}), None, 0)
        won = nodes.add(Candidate(target, "graph-variants", options={"aggressive_fusion": True}), root.id, 1)
        nodes.record(root.id, EvaluationResult(True, 1.0, None, "baseline"))
        nodes.record(won.id, EvaluationResult(True, 1.07, None, "faster end to end"))
        graph = {"graph": 0, "speedup": 1.07, "evaluations": 1, "failures_by_gate": {"performance": 2},
                 "stop_reason": "search space exhausted", "final_check": "passed again with model seeds [0, 1, 2]",
                 "note": "graph regenerated by Inductor with aggressive_fusion=True",
                 "best": {"graph": 0, "kernels": [{"name": "ko0_a"}, {"name": "ko0_b"}]}}
        why = "kernels that only move data take 25% of the compiled forward's time: no launch config removes a layout copy"
        store.add_measurement(run_id, "report", {"final_reason": "verified: 0 kernel(s) replaced, 1 graph",
                                                 "kernels": [], "graphs": [graph], "speedup_vs_compile": 1.07,
                                                 "graph_stage": why})
        store.finish_run(run_id)
        data = load_run(store, run_id)
        page = write_run_report(store, run_id, tmp_path / "k.html").read_text()
    import html

    assert f"Searched without --operators naming graph-variants: {html.escape(why)}." in page  # escaped as stored text
    (outcome,) = data.graphs
    assert outcome.replaced and outcome.kernels == 2 and outcome.speedup == 1.07
    assert "<td>graph 0</td>" in page and "aggressive_fusion=True (2 kernels of its own)" in page
    assert "graph 0: its whole call sequence (graph candidates)</h3>" in page
    assert "performance 2" in page and "passed again with model seeds [0, 1, 2]" in page


def test_a_run_the_report_does_not_cover_is_a_one_line_error(recorded: RecordedRuns, tmp_path: Path) -> None:
    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("verify", "p", "cpu", {})
        with pytest.raises(KerneloptError, match="is a verify run; kernelopt report covers optimize and analyze"):
            write_run_report(store, run_id, tmp_path / "r.html")
    result = _runner().invoke(app, ["report", "42", "--store", str(tmp_path / "k.db")])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        f"kernelopt: error: no run 42 in {tmp_path / 'k.db'}; list runs with kernelopt runs"
    ]
    missing = _runner().invoke(app, ["report", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no bench results here (expected results.json)" in missing.stderr


def test_cli_report_writes_the_page_and_prints_its_path(recorded: RecordedRuns, tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    result = _runner().invoke(app, ["report", str(recorded.search), "--store", str(recorded.store), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"report: {out}"
    assert blobs(out.read_text(), "figure").keys() == blobs(recorded.search_report.read_text(), "figure").keys()
    bad = _runner().invoke(app, ["report", str(recorded.search), "--store", str(recorded.store), "--figures",
                                 str(tmp_path / "f"), "--format", "gif"])
    assert bad.exit_code == 2 and "--format gif: choose one of svg, png" in bad.stderr


def test_the_plan_key_is_the_llm_operators() -> None:
    pytest.importorskip("pydantic")
    from kernelopt.search.llm_operator import PLAN_KEY as OPERATORS

    assert PLAN_KEY == OPERATORS


def test_tree_layout_centres_parents_over_their_children() -> None:
    positions = tree_layout([(1, None), (2, 1), (3, 1), (4, 2), (5, 2), (6, 3), (9, 7)])
    assert positions[4] == (0.0, 2) and positions[5] == (1.0, 2) and positions[6] == (2.0, 2)
    assert positions[2] == (0.5, 1) and positions[3] == (2.0, 1) and positions[1] == (1.25, 0)
    assert positions[9] == (3.0, 0)  # a parent the run does not hold: laid out as a root of its own
    deep = tree_layout([(i, i - 1 if i else None) for i in range(5000)])  # a long repair lineage, no recursion limit
    assert deep[4999] == (0.0, 4999)


# -- a failed rendering ---------------------------------------------------------------------


def test_a_report_that_cannot_be_written_never_fails_the_optimize_run(tmp_path: Path, monkeypatch) -> None:
    from report_runs import PROBLEM, FixtureWorker, _stand_ins

    from kernelopt.pipeline import optimize as opt
    from kernelopt.search.termination import Budget

    def broken(*args, **kwargs):
        raise RuntimeError("the figure module fell over\nsecond line")

    monkeypatch.setattr(opt, "write_run_report", broken)  # the name optimize calls
    events: list = []
    with Store(tmp_path / "k.db") as store, _stand_ins(FixtureWorker()):
        report = opt.optimize(
            PROBLEM, store, operators=["launch-config"], budget=Budget(max_evaluations=3), max_targets=1,
            export_path=tmp_path / "m.kopt.json", timeout_s=60.0, on_event=lambda kind, data: events.append((kind, data)),
        )
        assert store.run(report.run_id).status == "done"
    assert report.report_path is None and not (tmp_path / "m.report.html").exists()
    (line,) = [d["message"] for kind, d in events if kind == "warning" and "HTML report" in d["message"]]
    assert line == (
        f"the HTML report of run {report.run_id} could not be written (RuntimeError: the figure module fell over); "
        f"try again with kernelopt report {report.run_id}"
    )
    assert line in report.warnings
    with Store(tmp_path / "k.db") as store, _stand_ins(FixtureWorker()):  # and --no-report writes nothing
        skipped = opt.optimize(PROBLEM, store, operators=["launch-config"], budget=Budget(max_evaluations=1),
                               export_path=tmp_path / "n.kopt.json", timeout_s=60.0, write_report=False)
    assert skipped.report_path is None and not list(tmp_path.glob("n.report.html"))


def test_a_missing_plotly_says_what_to_install() -> None:
    def missing() -> Path:
        raise ModuleNotFoundError("No module named 'plotly'")

    path, error = try_write(missing, "run 3", "try again with kernelopt report 3")
    assert path is None and error == (
        "the HTML report of run 3 could not be written (ModuleNotFoundError: No module named 'plotly'); "
        "pip install plotly, then try again with kernelopt report 3"
    )


# -- a bench ---------------------------------------------------------------------------------


def test_a_bench_writes_its_report_beside_the_results(tmp_path: Path) -> None:
    from test_bench import FAST, _bench, _suite

    odd = {**FAST, "optimized_ms": 0.8, "reason": f"kept the baseline {INJECTION}"}
    suite = _suite(tmp_path / "suite", {"01_fast": FAST, "02_odd": odd, "03_raises": "raise", "04_broken": None})
    report = _bench(suite, tmp_path / "out")
    assert report.report_path == tmp_path / "out" / "report.html" and report.report_error is None
    assert report.to_dict()["files"]["report"] == str(report.report_path)
    page = report.report_path.read_text()
    for name in ("level1/01_fast", "level1/02_odd", "level1/03_raises", "level1/04_broken"):
        assert f"<td>{name}</td>" in page, name
    assert "RuntimeError: fake failure inside the target" in page and "defines no get_inputs" in page
    assert INJECTION not in page and "kept the baseline &lt;/script&gt;" in page
    fast_row, *_, broken_row = report.outcomes  # evaluations, then the worker's seconds; none where no worker ran
    assert "<th class=num>wall s</th>" in page and fast_row.worker_s and broken_row.worker_s is None
    assert f"<td class=num>{fast_row.evaluations}</td><td class=num>{fast_row.worker_s:.0f}</td>" in page
    assert f"<td class=num>{broken_row.evaluations}</td><td class=num>—</td>" in page
    figures = blobs(page, "figure")
    assert list(figures) == ["fast-p", "speedups", "per-problem"]
    data = load_bench(report.results_dir)
    for baseline, name in (("compile", "vs torch.compile"), ("eager", "vs eager")):
        curve = trace(figures["fast-p"], name)
        assert curve["y"] == [100 * fast_p(data.outcomes, p, baseline) for p in curve["x"]]
    compile_curve = trace(figures["fast-p"], "vs torch.compile")
    assert compile_curve["x"] == fast_p_grid([2.0, 1.25]) and compile_curve["y"][0] == 50.0  # 2 of 4 correct
    box = trace(figures["speedups"], "vs torch.compile")
    assert sorted(box["y"]) == [1.25, 2.0] and sorted(box["text"]) == ["level1/01_fast", "level1/02_odd"]


def test_bench_no_report_and_a_broken_renderer(tmp_path: Path, monkeypatch) -> None:
    from test_bench import FAST, TARGET, TESTS_DIR, _suite

    from kernelopt.pipeline import bench_results

    suite = _suite(tmp_path / "suite", {"01_fast": FAST})
    args = ["bench", str(suite), "--worker-target", TARGET, "--worker-path", str(TESTS_DIR)]
    quiet = _runner().invoke(app, [*args, "--out", str(tmp_path / "a"), "--no-report"])
    assert quiet.exit_code == 0, quiet.output
    assert (tmp_path / "a" / "results.json").exists() and not (tmp_path / "a" / "report.html").exists()
    shown = _runner().invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert f"report: {tmp_path / 'b' / 'report.html'}" in shown.stdout

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(bench_results, "write_bench_report", broken)  # the name the bench calls
    failed = _runner().invoke(app, [*args, "--out", str(tmp_path / "c")])
    assert failed.exit_code == 0, failed.output  # the scoreboard stands
    assert (tmp_path / "c" / "results.json").exists()
    (line,) = [line for line in failed.stderr.splitlines() if "HTML report" in line]
    assert line == (
        f"warning: the HTML report of the bench in {tmp_path / 'c'} could not be written (OSError: disk full); "
        f"try again with kernelopt report {tmp_path / 'c'}"
    )


def test_the_h200_suite_report(tmp_path: Path) -> None:
    """The committed 36-problem H200 bench renders whole: every row, the scoreboard's own summary."""
    page = write_bench_report(H200_SUITE / "results.json", tmp_path / "h200.html").read_text()
    data = load_bench(H200_SUITE)
    assert len(data.outcomes) == 36 and data.summary == {**summarize(data.outcomes), "not_run": None}  # no suite list then
    table = page.split('id="problems"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 1 + 36
    assert "NVIDIA H200 (cc 9.0, 132 SMs)" in page
    assert f"{data.summary['geomean_speedup']['compile']:.3f}×" in page
    assert "<td>level1/10_row_l2_normalize</td>" in page and "<td class=num>1.083× (1.080–1.085)</td>" in page
    assert set(blobs(page, "figure")) == set(bench_figures(data))


def test_bench_report_cli_on_a_results_file_and_a_bad_one(tmp_path: Path) -> None:
    out = tmp_path / "b.html"
    result = _runner().invoke(app, ["report", str(H200_SUITE / "results.json"), "-o", str(out)])
    assert result.exit_code == 0 and result.stdout.strip() == f"report: {out}" and out.stat().st_size > 1_000_000
    bad = tmp_path / "results.json"
    bad.write_text('{"meta": {}, "outcomes": [{"name": "x"}]}')
    broken = _runner().invoke(app, ["report", str(tmp_path)])
    assert broken.exit_code == 2
    assert broken.stderr.strip() == (
        f"kernelopt: error: {bad} is not a readable bench results file (ValueError: outcome lacks path, status); "
        "write one with kernelopt bench or bench-merge"
    )


# -- figures as files --------------------------------------------------------------------------


def test_exporting_figures_without_kaleido_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    from kernelopt.report.export import export_figures

    monkeypatch.setitem(sys.modules, "kaleido", None)  # as if it were not installed
    with pytest.raises(KerneloptError) as caught:
        export_figures(bench_figures(load_bench(H200_SUITE)), tmp_path, "png")
    assert str(caught.value) == (
        "exporting figures as PNG needs kaleido and a Chrome or Chromium: pip install 'kernelopt[images]' "
        "(and apt-get install chromium)"
    )
    assert not list(tmp_path.iterdir())


def test_figures_export_as_svg_for_slides(recorded: RecordedRuns, tmp_path: Path) -> None:
    """The page's figures as files (kaleido driving the machine's Chromium): the same charts, as SVG."""
    pytest.importorskip("kaleido")
    from headless import find_chromium

    if find_chromium() is None:
        pytest.skip("no chromium binary on PATH for kaleido (apt-get install chromium; .ci/run installs it)")
    out = tmp_path / "figures"
    result = _runner().invoke(
        app, ["report", str(recorded.agent), "--store", str(recorded.store), "-o", str(tmp_path / "r.html"),
              "--figures", str(out), "--format", "svg"],
    )
    assert result.exit_code == 0, result.output
    names = ["time-by-kind", "time-by-kernel", "roofline", "search-1"]
    assert [line.removeprefix("figure: ") for line in result.stdout.splitlines()[1:]] == [str(out / f"{n}.svg") for n in names]
    tree = (out / "search-1.svg").read_text()
    assert tree.startswith("<svg") and 'width="1100"' in tree and "Search graph of" in tree


def test_an_optimize_run_timed_against_the_stock_modes_shows_the_best(recorded: RecordedRuns) -> None:
    """A report with the stock modes timed (optimize --stock-modes) fills the card with the measured ratio."""
    from dataclasses import replace

    from kernelopt.report.run_data import load_run
    from kernelopt.report.run_page import render_run

    with Store(recorded.store) as store:
        data = load_run(store, recorded.agent)
    data = replace(data, summary=replace(data.summary, best_stock_mode="reduce-overhead", best_stock_speedup=1.07))
    page = render_run(data, {})
    assert "1.070×" in page and "reduce-overhead, timed in its own process" in page
    assert "not timed: kernelopt optimize --stock-modes" not in page
    failed = replace(data, summary=replace(data.summary, best_stock_mode="default", best_stock_speedup=1.3,
                                           stock_untimed=["max-autotune: crash: worker died"]))
    page = render_run(failed, {})  # a best of modes that were not timed says so (seen on the H200)
    assert "default, timed in its own process; not timed: max-autotune: crash: worker died" in page
    based = replace(data, summary=replace(data.summary, base_mode="max-autotune-no-cudagraphs",
                                          base_mode_reason="it ran 1.200x faster than the default"))
    page = render_run(based, {})
    assert "vs torch.compile (max-autotune-no-cudagraphs)" in page
    assert "max-autotune-no-cudagraphs: it ran 1.200x faster than the default" in page


def test_a_run_page_says_which_cuda_graph_mode_its_export_runs_under(tmp_path: Path) -> None:
    from report_runs import _analysis

    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("optimize", "12_softmax_wide", "cpu", {})
        store.add_measurement(run_id, "analysis", _analysis())
        store.add_measurement(run_id, "report", {"final_reason": "no candidate passed; delivered: the stock mode "
                                                 "reduce-overhead as it is", "kernels": [], "exported": "m.kopt.json",
                                                 "run_mode": "reduce-overhead", "base_mode": "reduce-overhead"})
        store.finish_run(run_id)
        page = write_run_report(store, run_id, tmp_path / "r.html").read_text()
        plain = _analyze_page(tmp_path, _analysis())
    assert "<td>runs under</td><td>mode=reduce-overhead (CUDA graphs), recorded in the export" in page
    assert "runs under</td>" not in plain and "as delivered" not in page  # the mode itself: no product
    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("optimize", "12_softmax_wide", "cpu", {})
        store.add_measurement(run_id, "analysis", _analysis())
        store.add_measurement(run_id, "report", {"final_reason": "verified", "kernels": [], "exported": "m.kopt.json",
                                                 "speedup_vs_compile": 1.2, "run_mode": "reduce-overhead",
                                                 "run_mode_gain": 1.5})  # fmt: skip
        store.finish_run(run_id)
        graphed = write_run_report(store, run_id, tmp_path / "g.html").read_text()
    assert "<td>as delivered</td><td>1.800x over the base compile: 1.200x times the graphs&#x27; 1.500x" in graphed


def test_a_run_page_shows_the_final_verification_as_cuda_graph_replays(tmp_path: Path) -> None:
    replays = {"graphs_gain": 2.4, "speedup": 1.07, "q1": 1.06, "q3": 1.08, "noise": 0.01, "beyond_noise": True}
    page = _optimize_page(tmp_path, {"final_reason": "verified", "kernels": [], "exported": "m.kopt.json",
                                     "speedup_vs_compile": 1.01, "as_replays": replays})  # fmt: skip
    assert (
        "<td>as CUDA-graph replays</td><td>as CUDA-graph replays: 1.070x over the base compile&#x27;s replays "
        "(IQR 1.060-1.080); the base compile&#x27;s own replays ran 2.400x its forward" in page
    )


def test_a_run_page_says_which_host_path_the_delivered_models_own_ops_took(tmp_path: Path) -> None:
    """The report's ``op_hosts`` (the delivered model's own ops in its judged process): shown as it is, and
    where one went through Python, what that costs a short forward's reading."""
    def page_for(op_hosts: dict | None) -> str:
        return _optimize_page(tmp_path, {"final_reason": "verified", "kernels": [], "exported": "m.kopt.json",
                                         "speedup_vs_compile": 1.2, "op_hosts": op_hosts})  # fmt: skip

    cpp = page_for({"kernelopt.group_norm": "C++: 1 plan(s) kept, 80 call(s) launched from C++, 0 handed to Python's path"})
    assert "<td>kernelopt&#x27;s own ops</td><td>kernelopt.group_norm: C++: 1 plan(s) kept, 80 call(s) launched" in cpp
    assert "Python&#x27;s path paid it" not in cpp
    python = page_for({"kernelopt.group_norm": "Python: the C++ host path did not build or load: no nvcc"})
    assert "kernelopt.group_norm: Python: the C++ host path did not build or load: no nvcc (each call of an op on " \
        "Python&#x27;s path paid it on the host" in python
    assert "own ops</td>" not in page_for(None) and "own ops</td>" not in page_for({})  # none delivered, or older records


def test_an_analyze_page_counts_an_input_read_twice_in_the_floor(tmp_path: Path) -> None:
    """The fusion bound's card says when the floor holds an input's second read (forced_rereads)."""
    from report_runs import _analysis

    twice = _analyze_page(tmp_path, {**_analysis(), "fusion_bound": 1.02, "reread_bytes": 1_073_741_824})
    assert "compiled over the traffic floor (inputs, weights, outputs moved once; 1.07e+03 MB of inputs twice" in twice
    once = _analyze_page(tmp_path, {**_analysis(), "fusion_bound": 1.5})
    assert "compiled over the traffic floor (inputs, weights, outputs moved once)" in once and "twice" not in once


def test_a_bench_report_reads_its_results_file_once_of_either_kind(tmp_path: Path, monkeypatch) -> None:
    """Which kind of bench the results are (model problems or kernel files) is read from the document the
    report then renders, not from a second parse of a file that can be megabytes."""
    from kernelopt.report.results_folder import FILE_SUITE
    from kernelopt.report.write import bench_view

    files = tmp_path / "files"
    files.mkdir()
    (files / "results.json").write_text(json.dumps({"meta": {"input": FILE_SUITE, "suite": "k"}, "outcomes": []}))
    reads: list[str] = []
    read_text = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self.name) or read_text(self, *a, **k))
    source, figures, _ = bench_view(H200_SUITE)
    assert reads == ["results.json"] and source == H200_SUITE / "results.json" and figures
    reads.clear()
    source, _, render = bench_view(files)
    assert reads == ["results.json"] and source == files / "results.json"
    assert "kernel" in render({}).lower()
