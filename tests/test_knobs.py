"""Compiler-knob candidates: the operator's walk, and the side-by-side evaluation on the CPU."""

from __future__ import annotations

import random
import types
from pathlib import Path

import pytest
from conftest import EXAMPLES

from kernelopt.evaluate.knob_candidate import evaluate_options
from kernelopt.evaluate.session import GateSettings, ProblemSpec
from kernelopt.search.candidate import MODEL_TARGET, Candidate
from kernelopt.search.knobs import KNOBS, CompilerKnobOperator
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext


def node(i: int, options: dict) -> Node:
    cand = Candidate(MODEL_TARGET, "compiler-knobs" if options else "root", options=options)
    return Node(i, 1, MODEL_TARGET, None, cand.operator, cand.key(), cand, 0, "evaluated", 1.0, None, "", None)


def test_greedy_walk_adds_one_knob_and_skips_tried_and_dependent_ones() -> None:
    op = CompilerKnobOperator()
    root = node(1, {})
    ctx = SearchContext(
        target=MODEL_TARGET, nodes=[root, node(2, {"coordinate_descent_tuning": True})], rng=random.Random(0)
    )
    proposals = op.propose(root, ctx, 3)
    assert [c.options for c in proposals] == [
        {"max_autotune": True},
        {"triton.multi_kernel": 1},
        {"triton.cooperative_reductions": True},
    ]
    assert all(len(c.options) == 1 for c in proposals)  # max_autotune_gemm_backends needs max_autotune first
    child = node(3, {"max_autotune": True})
    more = op.propose(child, SearchContext(target=MODEL_TARGET, nodes=[root, child], rng=random.Random(0)), 2)
    assert more[0].options == {"max_autotune": True, "coordinate_descent_tuning": True}
    assert more[1].options == {"max_autotune": True, "max_autotune_gemm_backends": "ATEN,TRITON"}
    assert op.propose(root, SearchContext(target="triton_poi_x_0", nodes=[root], rng=random.Random(0)), 3) == []
    assert len({name for name, _ in KNOBS}) == len(KNOBS)


def test_every_one_setting_graph_variant_is_a_knob_of_the_whole_model_search() -> None:
    """The kernel search runs on a knob winner's compile, not on a graph winner's: the structural choices
    of the graph stage must be in the knob space for options x kernels to cover them."""
    from kernelopt.evaluate.session import OWN_OPTIONS
    from kernelopt.search.graph_variants import GRAPH_OPTIONS

    knobs = set(KNOBS)
    single = [next(iter(o.items())) for o in GRAPH_OPTIONS if len(o) == 1]
    # kernelopt's own row split is no compile option: its candidates exist only as the graph stage
    # rewrites them (tickets for the programs of a row), never as a whole-model compile; its online-softmax
    # rewrite is one (compat.compile_fx_with_inner_hook runs it), so it is a knob too
    assert OWN_OPTIONS == ("kernelopt.row_split",)
    assert ("kernelopt.online_softmax", True) in knobs
    assert {o[0] for o in single if o[0] in OWN_OPTIONS} == set(OWN_OPTIONS)
    assert [o for o in single if o not in knobs and o[0] not in OWN_OPTIONS] == []


def test_side_by_side_evaluation_runs_the_gates_on_cpu() -> None:
    spec = ProblemSpec(str(EXAMPLES / "level1/15_rmsnorm.py"), {"batch_size": 2, "seq_len": 8, "hidden": 64})
    settings = GateSettings(model_seeds=(0, 1), trials=5)
    result = evaluate_options(spec, {"epilogue_fusion": False}, settings, device="cpu")
    gates = {v["gate"]: v for v in result["verdicts"]}
    assert gates["static"]["passed"] and gates["correctness"]["passed"]
    assert gates["model"]["passed"], gates["model"]["reason"]
    assert "performance" in gates and result["kernel_comparison"]["baseline"]["device"].startswith("cpu")
    assert result["passed"] == gates["performance"]["passed"]
    assert result["end_to_end"]["op_hosts"] == {"baseline": {}, "candidate": {}}  # no own op called here


def test_a_whole_model_candidate_refused_at_gate_4_names_its_own_ops_on_pythons_path(monkeypatch) -> None:
    """Both compiles run in the judge's process; where the variant called one of kernelopt's own ops through
    Python, gate 4's refusal says so (the same evidence a graph candidate's refusal gives)."""
    from kernelopt.evaluate import knob_candidate

    python = "Python: the C++ host path did not build or load: no nvcc"
    monkeypatch.setattr(knob_candidate.op_hosts, "read", lambda: {"kernelopt.group_norm": python})
    spec = ProblemSpec(str(EXAMPLES / "level1/15_rmsnorm.py"), {"batch_size": 2, "seq_len": 8, "hidden": 64})
    settings = GateSettings(model_seeds=(0,), trials=5, margin=9.0)  # no variant is 10x faster: refused
    result = evaluate_options(spec, {"epilogue_fusion": False}, settings, device="cpu")
    gate4 = next(v for v in result["verdicts"] if v["gate"] == "performance")
    assert not result["passed"] and not gate4["passed"]
    assert gate4["reason"].endswith(f"the candidate's own ops ran Python's host path: kernelopt.group_norm ({python})")
    assert result["end_to_end"]["op_hosts"]["candidate"] == {"kernelopt.group_norm": python}


def test_a_search_screens_a_whole_model_candidate_and_turns_away_only_a_slower_one(monkeypatch) -> None:
    """As for a graph candidate: a variant slower than the default compile in the short screen is not sent
    through the model gate; one a short run cannot tell from it goes on through every gate."""
    from kernelopt.evaluate import knob_candidate

    spec = ProblemSpec(str(EXAMPLES / "level1/15_rmsnorm.py"), {"batch_size": 2, "seq_len": 8, "hidden": 64})
    real_compare, gated = knob_candidate.compare, []
    monkeypatch.setattr(knob_candidate, "run_model_gate", lambda *a, **k: gated.append(1) or _passed_model())

    def evaluate(screened_speedup: float, screen_trials: int = 3) -> dict:
        def compare(baseline, candidate, *, trials, **kwargs):
            cmp = real_compare(baseline, candidate, trials=trials, **kwargs)
            if trials != screen_trials:
                return cmp
            # the screen ran both compiles; it reads as this much faster (a stand-in clock)
            return types.SimpleNamespace(speedup=screened_speedup, to_dict=lambda: {"speedup": screened_speedup})

        monkeypatch.setattr(knob_candidate, "compare", compare)
        gated.clear()
        settings = GateSettings(model_seeds=(0,), trials=5, screen_trials=screen_trials)
        return evaluate_options(spec, {"epilogue_fusion": False}, settings, device="cpu")

    slow = evaluate(0.03)
    assert slow["verdicts"][-1]["reason"].startswith("screened out: 0.030x in a 3-trial") and not gated
    assert not slow["passed"] and "screen" in slow and "end_to_end" not in slow
    close = evaluate(0.999 + 0.002)
    assert gated and [v["gate"] for v in close["verdicts"]] == ["static", "correctness", "model", "performance"]
    unscreened = evaluate(0.03, screen_trials=0)  # the final check: no screen
    assert gated and "screen" not in unscreened


def test_a_whole_model_candidate_whose_op_torch_computed_is_named_and_not_timed(monkeypatch) -> None:
    """As for a graph candidate: the variant's capture counts kernelopt's op computed by torch instead of
    its kernel (here a stand-in capture that records one), and the model gate refuses it before timing."""
    from kernelopt.capture.rewrites import row_softmax_op
    from kernelopt.evaluate import knob_candidate

    real_capture = knob_candidate.capture

    def capture(model, inputs, options=None, **kwargs):
        compiled = real_capture(model, inputs, options, **kwargs)
        if options and "epilogue_fusion" in options:  # the variant's capture ran the op, and torch computed it
            row_softmax_op.count_fallback("no build for torch.float64")
        return compiled

    monkeypatch.setattr(knob_candidate, "capture", capture)
    monkeypatch.setattr(knob_candidate, "compare", lambda *a, **k: pytest.fail("timed"))
    spec = ProblemSpec(str(EXAMPLES / "level1/15_rmsnorm.py"), {"batch_size": 2, "seq_len": 8, "hidden": 64})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = evaluate_options(spec, {"epilogue_fusion": False}, GateSettings(model_seeds=(0,), trials=5), device="cpu")
    failed = result["verdicts"][-1]
    assert failed["gate"] == "model" and failed["details"]["rule"] == "fallback" and not result["passed"]
    assert failed["reason"] == (
        "kernelopt's own op did not run its kernel in the candidate's process: 1 call(s) computed by torch, "
        "not the kernel: kernelopt.row_softmax: no build for torch.float64"
    )


def _passed_model():
    from kernelopt.verify.verdict import Verdict

    return Verdict("model", True, "stand-in")


def test_knob_search_inside_optimize_on_cpu(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """optimize with compiler-knobs: kernels searched by the scripted worker, knobs in real worker processes."""
    from test_optimize_flow import ScriptedWorker, run_context

    from kernelopt.pipeline import knob_stage
    from kernelopt.pipeline import optimize as opt
    from kernelopt.search.termination import Budget
    from kernelopt.store import Store

    monkeypatch.setattr(knob_stage, "EVAL_DEVICE", "cpu")
    monkeypatch.setattr(knob_stage, "KNOB_EVALUATIONS", 2)
    store = Store(tmp_path / "k.db")
    run_id = store.start_run("optimize", "rmsnorm", "fake", {})
    spec = ProblemSpec(str(EXAMPLES / "level1/15_rmsnorm.py"), {"batch_size": 2, "seq_len": 8, "hidden": 64})
    report = opt._optimize(
        run_context(
            "rmsnorm",
            store,
            run_id,
            ScriptedWorker(final_passes=False),
            spec,
            opt.make_operators(["launch-config", "compiler-knobs"]),
            Budget(max_evaluations=4, patience=None),
            GateSettings(model_seeds=(0,), trials=5),
            1,
            timeout_s=120.0,
        )
    )
    knobs = report.knobs
    assert knobs is not None and knobs["evaluations"] == 2, knobs
    assert knobs["stop_reason"].startswith("evaluation budget")
    evaluated = [n for n in opt.NodeStore(store, run_id).evaluated("<model>") if n.operator == "compiler-knobs"]
    assert [n.candidate.options for n in evaluated] == [{"coordinate_descent_tuning": True}, {"max_autotune": True}]
    for n in evaluated:  # each went through the gates in its own worker; none crashed
        assert n.result.worker_status == "ok", n.result.reason
        assert [v["gate"] for v in n.result.verdicts][:3] == ["static", "correctness", "model"]
    if knobs["used"]:
        assert report.options == knobs["best_options"] and report.speedup_vs_compile > 1.0
    else:
        assert report.options is None and "baseline stays" in report.final_reason


def _knob_answer(options: dict, speedup: float) -> dict:
    """evaluate_knobs' answer for one variant: every gate passed at ``speedup`` (1.0 and below: not faster)."""
    cmp = {
        "speedup": speedup,
        "speedup_q1": speedup - 0.01,
        "speedup_q3": speedup + 0.01,
        "baseline": {"median_ms": 1.0},
        "candidate": {"median_ms": 1.0 / speedup},
    }
    passed = speedup > 1.03
    gates = [{"gate": g, "passed": True, "reason": "ok", "details": {}} for g in ("static", "correctness", "model")]
    gates.append({"gate": "performance", "passed": passed, "reason": f"{speedup}x", "details": {}})
    return {"verdicts": gates, "passed": passed, "options": options, "kernel_comparison": cmp, "gpu_s": 0.5}


@pytest.mark.parametrize(("knob_wins", "times_base"), [(True, True), (True, False), (False, True)])
def test_kernels_are_searched_on_the_compile_the_winning_options_make(
    tmp_path, monkeypatch, knob_wins, times_base
) -> None:
    """Options first, judged against the base compile; a winner's options go into every later capture, the
    kernel search runs on that capture's kernels, and the result over the base is the final verification's
    timing against the base mode's compile in one process; where that compile failed, the product of the
    two interleaved speedups, said as such. A resumed run reads the choice back instead of searching again."""
    from test_optimize_flow import ScriptedWorker, run_context

    from kernelopt.pipeline import knob_stage
    from kernelopt.pipeline import optimize as opt
    from kernelopt.search.termination import Budget
    from kernelopt.store import Store
    from kernelopt.workers import WorkerResult

    class Recording(ScriptedWorker):
        def __init__(self) -> None:
            super().__init__()
            self.specs: list[tuple[str, dict]] = []

        def call(self, target, *args, timeout_s=0, kwargs=None):
            if isinstance(args[0], dict) and "options" in args[0]:
                self.specs.append((target.split(":")[1], dict(args[0]["options"])))
            return super().call(target, *args, timeout_s=timeout_s, kwargs=kwargs)

    gains = {"coordinate_descent_tuning": 1.25 if knob_wins else 1.0, "max_autotune": 1.01}
    knob_calls: list[dict] = []

    def run_isolated(target, spec, options, settings, device, timeout_s, env=None):
        knob_calls.append(dict(options))
        return WorkerResult("ok", _knob_answer(options, gains[next(iter(options))]), "ok", None, 0.5, "")

    monkeypatch.setattr("kernelopt.workers.run_isolated", run_isolated)
    monkeypatch.setattr(knob_stage, "KNOB_EVALUATIONS", 2)
    store = Store(tmp_path / "k.db")
    run_id = store.start_run("optimize", "softmax", "fake", {})
    worker = Recording()
    worker.times_base = times_base

    def once():
        return opt._optimize(
            run_context(
                "softmax",
                store,
                run_id,
                worker,
                opt.ProblemSpec(str(EXAMPLES / "level1/12_softmax_wide.py")),
                opt.make_operators(["launch-config", "compiler-knobs"]),
                Budget(max_evaluations=6, patience=2),
                opt.search_settings(),
                1,
            )
        )

    report = once()
    assert knob_calls == [{"coordinate_descent_tuning": True}, {"max_autotune": True}]
    knobs = report.knobs
    assert knobs["evaluations"] == 2 and knobs["used"] is knob_wins
    kernel_specs = {opts.get("coordinate_descent_tuning") for fn, opts in worker.specs if fn != "analyze_problem"}
    if knob_wins:
        assert kernel_specs == {True}, worker.specs  # every kernel evaluation ran on the options' capture
        assert [fn for fn, _ in worker.specs].count("analyze_problem") == 2  # the base, then the options' compile
        assert report.options == {"coordinate_descent_tuning": True} and not report.on_default
        assert worker.base_options == [{}]  # the final verification timed it against the default compile too
        assert "1.250x over the default compile, timed interleaved) and 1 kernel(s) replaced on top (1.190x)" in (
            report.final_reason
        )
        if times_base:
            assert report.speedup_vs_compile == pytest.approx(1.46)  # measured once, not multiplied
            assert report.speedup_vs_compile_iqr == (1.45, 1.47) and report.vs_base["speedup"] == 1.46
            assert report.optimized_ms == pytest.approx(0.685)
            assert "timed interleaved with it in one process" in report.final_reason
        else:
            assert report.speedup_vs_compile == pytest.approx(1.25 * 1.19)  # options x the kernels on top
            assert report.speedup_vs_compile_iqr is None  # a product of two medians has no IQR
            assert "(the product of the two timings)" in report.final_reason
            assert any(
                "not timed against the base mode's compile" in w and "OutOfMemoryError" in w for w in report.warnings
            )
    else:
        assert kernel_specs == {None} and report.options is None and report.on_default
        assert worker.base_options == [None]  # no options on top: the compile it times against is the base
        assert report.speedup_vs_compile == pytest.approx(1.19)
    assert report.evaluations >= 2 + 1
    before = len(knob_calls)
    again = once()  # resumed: the knob search is read back, not run again
    assert len(knob_calls) == before and again.knobs["used"] is knob_wins and again.options == report.options


def test_the_final_check_times_the_result_against_the_base_modes_compile_in_a_process_of_its_own() -> None:
    """With knob options on top, the verified model is timed against the base mode's compile (a reference
    process compiling ``base_options`` alone), interleaved; a base compile that fails is said, not hidden."""
    import types
    from dataclasses import asdict

    import torch

    from kernelopt.evaluate import worker_targets
    from kernelopt.evaluate.records import FinalCheck
    from kernelopt.evaluate.remote import RemoteRunner
    from kernelopt.verify.verdict import Verdict

    spec = ProblemSpec(str(EXAMPLES / "level1/15_rmsnorm.py"), {"batch_size": 2, "seq_len": 8, "hidden": 64},
                       options={"split_reductions": False})  # fmt: skip
    runner = RemoteRunner(device="cpu", spec=asdict(spec), timeout_s=300)
    session = types.SimpleNamespace(device=torch.device("cpu"), spec=spec, runner=runner)
    try:
        check = FinalCheck(Verdict("model", True, "within 10x"))
        worker_targets._time_against_base(session, {}, 5, check)
        assert check.vs_base is not None and check.vs_base_reason is None
        assert check.vs_base["baseline"]["median_ms"] > 0 and check.vs_base["candidate"]["median_ms"] > 0
        assert FinalCheck.from_dict(check.to_dict()).vs_base == check.vs_base
        broken = FinalCheck(Verdict("model", True, "within 10x"))
        worker_targets._time_against_base(session, {"triton.no_such_option": 1}, 3, broken)
        assert broken.vs_base is None and "base mode's compile failed" in (broken.vs_base_reason or "")
        assert FinalCheck.from_dict(broken.to_dict()).vs_base_reason == broken.vs_base_reason
    finally:
        runner.close()


def test_a_graph_winner_is_searched_on_the_knob_winners_compile_and_the_options_stack(tmp_path, monkeypatch) -> None:
    """Knobs and the graph stage on a model of one graph: the graph variants are compiled and judged on the
    knob winner's compile, a graph winner is promoted on top of it, the kernels are searched on both, and
    the final verification times all of it against the base mode's compile in one process."""
    from test_optimize_flow import GraphWorker, run_context

    from kernelopt.pipeline import knob_stage
    from kernelopt.pipeline import optimize as opt
    from kernelopt.search.termination import Budget
    from kernelopt.store import Store
    from kernelopt.workers import WorkerResult

    def run_isolated(target, spec, options, settings, device, timeout_s, env=None):
        gain = 1.25 if options == {"coordinate_descent_tuning": True} else 1.0
        return WorkerResult("ok", _knob_answer(options, gain), "ok", None, 0.5, "")

    monkeypatch.setattr("kernelopt.workers.run_isolated", run_isolated)
    monkeypatch.setattr(knob_stage, "KNOB_EVALUATIONS", 2)

    def once(operators: list[str], worker: GraphWorker, path: Path):
        store = Store(path)
        return opt._optimize(run_context(
            "softmax", store, store.start_run("optimize", "softmax", "fake", {}), worker,
            opt.ProblemSpec(str(EXAMPLES / "level1/12_softmax_wide.py")), opt.make_operators(operators),
            Budget(max_evaluations=8, patience=2), opt.search_settings(), 1,
        ))  # fmt: skip

    worker = GraphWorker()
    report = once(["compiler-knobs", "graph-variants"], worker, tmp_path / "a.db")
    knob = {"coordinate_descent_tuning": True}
    both = {**knob, "aggressive_fusion": True}
    # the base, the knob winner's compile, then the graph winner's on top of it
    assert worker.analyzed == [{}, knob, both]
    assert report.options == both and report.graphs[0].promoted and report.knobs["used"]
    assert report.speedup_vs_compile == pytest.approx(1.25 * 1.1)
    assert report.final_reason == (
        "verified: the compiler knobs' and graph 0's options {'coordinate_descent_tuning': True, 'aggressive_fusion': "
        "True} (1.375x over the default compile: 1.250x x 1.100x, each timed interleaved against the compile before "
        "it) and no kernel replacement passed on top: 1.375x (the product of the two timings)"
    )

    kernels = GraphWorker()  # with a kernel winner on top: one timing against the base mode's compile decides
    on_top = once(["launch-config", "compiler-knobs", "graph-variants"], kernels, tmp_path / "b.db")
    assert kernels.analyzed == [{}, knob, both] and kernels.base_options == [{}]
    assert on_top.speedup_vs_compile == pytest.approx(1.46) and on_top.options == both
    assert "and 1 kernel(s) replaced on top (1.190x): 1.460x over the default compile, timed interleaved with it" in (
        on_top.final_reason
    )


def test_a_knob_winner_alone_keeps_its_timings_interquartile_range(tmp_path, monkeypatch) -> None:
    """No kernel on top: the result over the base compile is the knob winner's own interleaved timing, so its
    interquartile range stands, and the reason does not call one timing a product; the report keeps the host
    paths of kernelopt's own ops in its judged process."""
    from test_optimize_flow import ScriptedWorker, run_context

    from kernelopt.pipeline import knob_stage
    from kernelopt.pipeline import optimize as opt
    from kernelopt.search.termination import Budget
    from kernelopt.store import Store
    from kernelopt.workers import WorkerResult

    def run_isolated(target, spec, options, settings, device, timeout_s, env=None):
        gain = 1.25 if options == {"coordinate_descent_tuning": True} else 1.0
        answer = _knob_answer(options, gain)
        answer["end_to_end"] = {"op_hosts": {"baseline": {}, "candidate": {"kernelopt.group_norm": "Python: no nvcc"}}}
        return WorkerResult("ok", answer, "ok", None, 0.5, "")

    monkeypatch.setattr("kernelopt.workers.run_isolated", run_isolated)
    monkeypatch.setattr(knob_stage, "KNOB_EVALUATIONS", 2)
    store = Store(tmp_path / "k.db")
    report = opt._optimize(run_context(
        "softmax", store, store.start_run("optimize", "softmax", "fake", {}), ScriptedWorker(),
        opt.ProblemSpec(str(EXAMPLES / "level1/12_softmax_wide.py")), opt.make_operators(["compiler-knobs"]),
        Budget(max_evaluations=6, patience=2), opt.search_settings(), 1,
    ))  # fmt: skip
    assert report.knobs["used"] and not report.winners
    assert report.speedup_vs_compile == pytest.approx(1.25) and report.speedup_vs_compile_iqr == (1.24, 1.26)
    assert report.final_reason.endswith("and no kernel replacement passed on top: 1.250x")
    assert report.knobs["op_hosts"] == report.op_hosts == {"kernelopt.group_norm": "Python: no nvcc"}
