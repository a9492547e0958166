"""A bench goes on with the optimize run a killed worker left unfinished (a problem's time-out), instead of
paying its base mode, analysis, graph variants and judged candidates again."""

from __future__ import annotations

from pathlib import Path

from kernelopt.config import load_settings
from kernelopt.measure.environment import versions
from kernelopt.pipeline import bench_problem
from kernelopt.pipeline.bench_problem import BENCH_RESUMES, unfinished_run
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
