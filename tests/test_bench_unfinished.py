"""A bench goes on with the optimize run a killed worker left unfinished (a problem's time-out), instead of
paying its base mode, analysis, graph variants and judged candidates again."""

from __future__ import annotations

from pathlib import Path

from kernelopt.config import load_settings
from kernelopt.measure.environment import versions
from kernelopt.pipeline import bench_problem
from kernelopt.pipeline.bench_problem import BENCH_RESUMES, finished_run, unfinished_run
from kernelopt.pipeline.records import OptimizeReport
from kernelopt.store import Store


def _run(store: Store, path: Path, sizes: dict | None = None, *, recorded_path: bool = True, **stack) -> int:
    args = {"sizes": sizes or {}, **({"path": str(path.resolve())} if recorded_path else {})}
    return store.start_run("optimize", path.stem, "fake", {**versions(), **stack}, args)


def test_the_latest_unfinished_run_of_the_problem_at_its_sizes_is_gone_on_with(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    problem, other = tmp_path / "11_frob.py", tmp_path / "12_other.py"
    assert unfinished_run(store, str(problem), None) is None  # nothing run yet
    killed = _run(store, problem)
    _run(store, other)  # another problem's unfinished run is not this one's
    _run(store, problem, {"batch_size": 2})  # nor one at other sizes
    assert unfinished_run(store, str(problem), None) == killed
    assert unfinished_run(store, str(problem), {"batch_size": 2}) not in (None, killed)
    # a run of another file that shares the name (another level's folder) is not this one's
    twin = tmp_path / "level2" / "11_frob.py"
    assert unfinished_run(store, str(twin), None) is None
    # the latest run of the problem finished: nothing to go on with, an older unfinished one included
    store.finish_run(_run(store, problem), "done")
    assert unfinished_run(store, str(problem), None) is None


def test_a_run_under_another_stack_is_not_gone_on_with_but_one_of_other_kernelopt_code_is(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    problem = tmp_path / "11_frob.py"
    _run(store, problem, torch="2.0.0")  # timings taken under another torch mean something else
    assert unfinished_run(store, str(problem), None) is None
    fixed = _run(store, problem, kernelopt_source="0123abcd")  # a fix between two device calls
    assert unfinished_run(store, str(problem), None) == fixed


def test_a_run_from_before_paths_were_recorded_matches_by_name(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    problem = tmp_path / "11_frob.py"
    old = _run(store, problem, recorded_path=False)
    assert unfinished_run(store, str(problem), None) == old


def test_a_bench_problem_resumes_the_killed_run_and_at_most_so_often(monkeypatch, tmp_path: Path) -> None:
    store_path = tmp_path / "k.db"
    problem = tmp_path / "11_frob.py"
    with Store(store_path) as store:
        killed = _run(store, problem)
    given: list[int | None] = []

    def fake_optimize(path, store, **kwargs):
        given.append(kwargs["resume_run"])
        raise bench_problem.KerneloptError("stop here")  # killed again, in effect: the run stays unfinished

    monkeypatch.setattr(bench_problem, "optimize", fake_optimize)
    settings = load_settings({"store": str(store_path)}, env={})
    for _ in range(BENCH_RESUMES + 1):
        row = bench_problem.bench_problem(str(problem), {"settings": settings.values(), "name": "level1/11_frob"})
        assert row["status"] == "run_error"
    # resumed BENCH_RESUMES times, each counted in the store; then the problem starts afresh
    assert given == [killed] * BENCH_RESUMES + [None]
    with Store(store_path) as store:
        assert len(store.measurements(killed, "bench_resume:")) == BENCH_RESUMES


def test_a_resumed_problem_says_which_run_it_went_on_with(monkeypatch, tmp_path: Path) -> None:
    from kernelopt.workers import WorkerResult

    store_path = tmp_path / "k.db"
    problem = tmp_path / "11_frob.py"
    with Store(store_path) as store:
        killed = _run(store, problem)
    report = OptimizeReport("11_frob", killed, "fake", 2.0, 1.0, 1.0, speedup_vs_compile=1.0, final_reason="kept")
    monkeypatch.setattr(bench_problem, "optimize", lambda *a, **k: report)
    monkeypatch.setattr(bench_problem, "run_isolated", lambda *a, **k: WorkerResult("crash: x", None, "", None, 1.0, ""))
    settings = load_settings({"store": str(store_path), "stock_modes": "max-autotune-no-cudagraphs"}, env={})
    row = bench_problem.bench_problem(str(problem), {"settings": settings.values(), "name": "level1/11_frob"})
    assert row["details"]["resumed"] == killed and row["details"]["run_id"] == killed
    assert row["details"]["resumed_after_cut"] is False
    from kernelopt.report.metrics import ProblemOutcome
    from kernelopt.report.scoreboard import problem_notes

    assert f"went on with run {killed}, which a time-out had cut short" in problem_notes(ProblemOutcome.from_dict(row))
    with Store(store_path) as store:
        stopped = _run(store, problem)  # a run the bench's slot stopped: its worker is told so
    options = {"settings": settings.values(), "name": "level1/11_frob", "after_cut": True}
    cut = bench_problem.bench_problem(str(problem), options)
    assert cut["details"]["resumed"] == stopped and cut["details"]["resumed_after_cut"] is True
    assert f"went on with run {stopped}, which the end of the bench's --slot had stopped" in problem_notes(
        ProblemOutcome.from_dict(cut)
    )


# -- a run its worker finished before the time-out killed it (while timing the stock modes) --------------


def _finished_bench_run(tmp_path: Path, monkeypatch, stock_modes: str, crash_on: str | None):
    """A bench problem whose optimize run finishes and exports, then whose worker dies timing ``crash_on``
    (the time-out's SIGKILL, in effect: the exception leaves the process before any outcome is written)."""
    from kernelopt.workers import WorkerResult

    store_path, problem, export_dir = tmp_path / "k.db", tmp_path / "11_frob.py", tmp_path / "models"
    export_dir.mkdir(exist_ok=True)
    calls: dict[str, list] = {"optimize": [], "modes": [], "crash": [crash_on]}

    def fake_optimize(path, store, **kwargs):
        calls["optimize"].append(kwargs["resume_run"])
        run_id = store.start_run("optimize", "11_frob", "fake", versions(), {
            "sizes": {}, "path": str(problem.resolve()), "operators": list(kwargs["operators"]),
            "budget": bench_problem.asdict(kwargs["budget"]),
        })  # fmt: skip
        Path(kwargs["export_path"]).write_text('{"replacements": 1}')
        report = OptimizeReport("11_frob", run_id, "fake", 2.0, 1.0, 1.0, speedup_vs_compile=1.25,
                                speedup_vs_compile_iqr=(1.2, 1.3), optimized_ms=0.8, final_reason="verified: 1 kernel",
                                exported=str(kwargs["export_path"]), skipped=[("k", "why")])  # fmt: skip
        store.add_measurement(run_id, "report", report.to_dict())
        store.finish_run(run_id)
        return report

    def fake_mode(target, path, mode, *args, **kwargs):
        calls["modes"].append(mode)
        if mode in calls["crash"]:
            raise SystemExit("killed by the bench's time-out")
        record = {"compiled_ms": 1.0, "vs_optimized": {"optimized": "kernelopt", "mode_ms": 1.0, "optimized_ms": 0.8}}
        return WorkerResult("ok", record, "", None, 1.0, "")

    monkeypatch.setattr(bench_problem, "optimize", fake_optimize)
    monkeypatch.setattr(bench_problem, "run_isolated", fake_mode)
    settings = load_settings({"store": str(store_path), "stock_modes": stock_modes}, env={})
    options = {"settings": settings.values(), "name": "11_frob", "export_dir": str(export_dir), "budget": 4}
    return store_path, problem, options, calls


def test_a_run_finished_before_the_kill_is_taken_with_the_stock_modes_timed_so_far(monkeypatch, tmp_path: Path) -> None:
    import pytest

    modes = "max-autotune-no-cudagraphs,reduce-overhead"
    store_path, problem, options, calls = _finished_bench_run(tmp_path, monkeypatch, modes, "reduce-overhead")
    with pytest.raises(SystemExit):
        bench_problem.bench_problem(str(problem), options)
    assert calls["optimize"] == [None] and calls["modes"] == ["max-autotune-no-cudagraphs", "reduce-overhead"]
    calls["modes"].clear()
    calls["crash"].clear()
    monkeypatch.setattr(bench_problem, "optimize", lambda *a, **k: pytest.fail("a finished run is searched again"))
    row = bench_problem.bench_problem(str(problem), options)  # the retry: no crash this time
    # only the mode the killed worker had not finished is timed again; the report reads back whole
    assert calls["modes"] == ["reduce-overhead"]
    details = row["details"]
    assert details["taken"] == details["run_id"] and details["resumed"] is None
    assert details["stock_taken"] == ["max-autotune-no-cudagraphs"]
    assert set(details["stock"]) == {"max-autotune-no-cudagraphs", "reduce-overhead"}
    assert row["status"] == "ok" and row["optimized_ms"] == 0.8 and row["reason"] == "verified: 1 kernel"
    assert details["speedup_vs_compile_iqr"] == (1.2, 1.3)
    # the scoreboard says the row's numbers came from two workers
    from kernelopt.report.metrics import ProblemOutcome
    from kernelopt.report.scoreboard import problem_notes

    notes = problem_notes(ProblemOutcome.from_dict({**row, "details": details}))
    assert any(f"run {details['taken']} had finished" in n and "kept: max-autotune-no-cudagraphs" in n for n in notes)


def test_a_rerun_takes_no_finished_run_and_searches_again(monkeypatch, tmp_path: Path) -> None:
    """bench --rerun asks for a new measurement of a finished problem: the run behind its earlier row,
    which a retry would take, is searched again instead."""
    store_path, problem, options, calls = _finished_bench_run(tmp_path, monkeypatch, "reduce-overhead", None)
    first = bench_problem.bench_problem(str(problem), options)
    assert calls["optimize"] == [None] and first["details"]["taken"] is None
    again = bench_problem.bench_problem(str(problem), options)  # a plain retry would take the finished run
    assert calls["optimize"] == [None] and again["details"]["taken"] == first["details"]["run_id"]
    rerun = bench_problem.bench_problem(str(problem), {**options, "rerun": True})
    assert calls["optimize"] == [None, None] and rerun["details"]["taken"] is None
    assert rerun["details"]["run_id"] != first["details"]["run_id"]


def test_a_finished_run_is_not_taken_by_another_bench_other_search_or_a_changed_export(monkeypatch, tmp_path: Path) -> None:
    import pytest

    store_path, problem, options, calls = _finished_bench_run(tmp_path, monkeypatch, "reduce-overhead", "reduce-overhead")
    with pytest.raises(SystemExit):
        bench_problem.bench_problem(str(problem), options)
    with Store(store_path) as store:
        run_id = store.runs("optimize")[-1].id
        search = {"operators": store.run(run_id).args["operators"], "budget": store.run(run_id).args["budget"]}
        here = str(tmp_path / "models")
        assert finished_run(store, str(problem), None, here, search)[0].run_id == run_id
        assert finished_run(store, str(problem), None, str(tmp_path / "other_bench"), search) is None
        assert finished_run(store, str(problem), None, None, search) is None  # no export folder: nothing to tie it to
        assert finished_run(store, str(problem), None, here, {**search, "budget": {"max_evaluations": 99}}) is None
        assert finished_run(store, str(problem), {"batch_size": 2}, here, search) is None
        assert finished_run(store, str(problem), None, here, {**search, "llm": "openai:gpt-4o"}) is None  # no LLM then
        # the export changed after the run finished (a mode recorded in it while delivering): start afresh
        (tmp_path / "models" / "11_frob.kopt.json").write_text('{"replacements": 1, "run_mode": "reduce-overhead"}')
        assert finished_run(store, str(problem), None, here, search) is None


def test_the_report_reads_back_from_its_dict() -> None:
    from kernelopt.pipeline.records import GraphResult, KernelResult, Winner

    winner = Winner("launch-config", "note", "src", [{"gate": "static"}], node=3, config={"XBLOCK": 8})
    report = OptimizeReport(
        "p", 1, "dev", 2.0, 1.0, 1.5,
        kernels=[KernelResult("k", 10.0, 8.0, 1.25, 4, {"performance": 1}, "budget", best=winner)],
        graphs=[GraphResult(0, 1.1, 2, {}, "done", best={"options": {"a": 1}})],
        skipped=[("k2", "too small")], speedup_vs_compile_iqr=(1.1, 1.3), exported="/x.kopt.json",
    )  # fmt: skip
    import json

    back = OptimizeReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert back == report and back.kernels[0].best == winner


# -- kernel files --------------------------------------------------------------------------------------


def test_a_kernel_files_run_and_a_problems_run_of_one_name_are_never_taken_for_each_other(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    problem, kernel = tmp_path / "problems" / "softmax.py", tmp_path / "kernels" / "softmax.py"
    file_run = store.start_run("optimize", "softmax", "fake", versions(), {"input": "triton", "path": str(kernel.resolve()), "sizes": {}})
    assert unfinished_run(store, str(problem), None) is None  # a problem of the same name: not its run
    assert unfinished_run(store, str(kernel), None, kernel_file=True) == file_run
    problem_run = _run(store, problem, recorded_path=False)  # an old problem run, matched by name
    assert unfinished_run(store, str(problem), None) == problem_run
    assert unfinished_run(store, str(kernel), None, kernel_file=True) == file_run
    # a kernel file's run from before paths were recorded is not matched by its name
    store.start_run("optimize", "softmax", "fake", versions(), {"input": "triton", "sizes": {}})
    assert unfinished_run(store, str(kernel), None, kernel_file=True) == file_run


def test_a_kernel_file_its_time_out_cut_goes_on_with_its_run(monkeypatch, tmp_path: Path) -> None:
    from kernelopt.pipeline import bench_file

    store_path, kernel = tmp_path / "k.db", tmp_path / "softmax.py"
    kernel.write_text("import triton\n")
    monkeypatch.setattr(bench_file, "file_kind", lambda path: "triton")
    with Store(store_path) as store:
        killed = store.start_run("optimize", "softmax", "fake", versions(), {"input": "triton", "path": str(kernel.resolve()), "sizes": {}})
    given: list[int | None] = []

    def fake_optimize_file(path, store, **kwargs):
        given.append(kwargs["resume_run"])
        raise bench_problem.KerneloptError("cut again")

    monkeypatch.setattr(bench_file, "optimize_file", fake_optimize_file)
    settings = load_settings({"store": str(store_path)}, env={})
    for _ in range(BENCH_RESUMES + 1):
        row = bench_file.bench_kernel_file(str(kernel), {"settings": settings.values(), "name": "softmax"})
        assert row["status"] == "run_error"
    assert given == [killed] * BENCH_RESUMES + [None]


def test_a_run_the_bench_stopped_at_its_slots_end_is_gone_on_with_uncounted(tmp_path: Path) -> None:
    """A cut at a slot's end says nothing about the run: its resume is recorded apart and does not count
    toward BENCH_RESUMES, and it is gone on with even after the killed worker's resumes ran out."""
    from kernelopt.pipeline.bench_problem import AFTER_CUT, resume_unfinished

    store = Store(tmp_path / "k.db")
    problem = tmp_path / "11_frob.py"
    run = _run(store, problem)
    assert resume_unfinished(store, str(problem), None, after_cut=True) == run
    assert len(store.measurements(run, AFTER_CUT)) == 1 and not store.measurements(run, "bench_resume:")
    for _ in range(BENCH_RESUMES):
        assert resume_unfinished(store, str(problem), None) == run  # a killed worker's: counted
    assert unfinished_run(store, str(problem), None) is None  # its resumes ran out: afresh
    assert resume_unfinished(store, str(problem), None, after_cut=True) == run  # but a cut run goes on
    assert len(store.measurements(run, AFTER_CUT)) == 2
    assert len(store.measurements(run, "bench_resume:")) == BENCH_RESUMES
