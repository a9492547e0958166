"""The compile pool: candidates compile in parallel processes; their failures never cost a verdict."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest
import worker_targets

from kernelopt.evaluate.compile_pool import CompilePool, default_workers


@pytest.fixture(autouse=True)
def importable_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned pool processes import the stand-ins by module name, from this directory."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))


def test_jobs_of_a_batch_run_at_the_same_time(tmp_path: Path) -> None:
    (tmp_path / "expected").write_text("3")
    with closing(CompilePool(3, warm=worker_targets.warm_meet)) as pool:
        futures = pool.submit([(str(tmp_path), "a"), None, (str(tmp_path), "b"), (str(tmp_path), "c")])
        assert futures[1] is None
        outcomes = [pool.wait(f, 60) for f in futures]
    assert [problem for _, problem in outcomes] == [None, "not submitted", None, None]
    pids = {p.name.split(".")[1] for p in tmp_path.iterdir() if p.name != "expected"}
    assert len(pids) == 3  # three processes, each holding one job until all had arrived


def test_a_candidates_compile_error_is_kept_and_the_pool_lives_on() -> None:
    with closing(CompilePool(1, warm=worker_targets.warm_reject)) as pool:
        (future,) = pool.submit([("bad source", "k")])
        waited, problem = pool.wait(future, 60)
        assert problem == "SyntaxError: candidate k does not compile"
        assert waited >= 0 and pool.broken == 0


def test_a_dead_compile_process_replaces_the_pool(tmp_path: Path) -> None:
    with closing(CompilePool(1, warm=worker_targets.warm_die)) as pool:
        (future,) = pool.submit([("x", "k")])
        assert pool.wait(future, 60)[1] == "compile process died"
        assert pool.broken == 1
        pool._warm = worker_targets.warm_meet  # the next batch gets a fresh pool
        (tmp_path / "expected").write_text("1")
        (again,) = pool.submit([(str(tmp_path), "k")])
        assert pool.wait(again, 60)[1] is None


def test_start_is_idempotent() -> None:
    with closing(CompilePool(1, warm=worker_targets.warm_quick)) as pool:
        pool.start()
        first = pool._executor
        pool.start()
        assert first is not None and pool._executor is first


def test_no_workers_means_no_pool() -> None:
    pool = CompilePool(0)
    assert pool.submit([("x", "k")]) == [None]
    assert pool.wait(None, 1) == (0.0, "not submitted")
    pool.start()
    assert pool._executor is None


def test_compile_workers_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt.errors import KerneloptError
    from kernelopt.workers.environment import worker_env

    monkeypatch.setenv("KERNELOPT_COMPILE_WORKERS", "3")
    assert default_workers() == 3
    assert worker_env("/tmp")["KERNELOPT_COMPILE_WORKERS"] == "3"  # reaches the evaluation worker
    monkeypatch.setenv("KERNELOPT_COMPILE_WORKERS", "many")
    with pytest.raises(KerneloptError, match="KERNELOPT_COMPILE_WORKERS='many': expected a whole number"):
        default_workers()


def test_no_pool_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNELOPT_COMPILE_WORKERS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    assert default_workers() == 0  # measured on the H200: the pool did not pay for launch-config candidates


def test_a_queued_job_is_compiled_by_the_session_not_waited_for(tmp_path: Path) -> None:
    import time

    with closing(CompilePool(1, warm=worker_targets.warm_hold)) as pool:
        busy, queued = pool.submit([(str(tmp_path), "a"), (str(tmp_path), "b")])
        deadline = time.monotonic() + 60
        while not (tmp_path / "started.a").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pool.wait(queued, 60) == (0.0, "not started: compiled in the session")
        assert queued.future is None  # never sent to the pool
        (tmp_path / "release").touch()
        assert pool.wait(busy, 60)[1] is None  # a job already compiling is worth waiting for
        assert not (tmp_path / "started.b").exists()


def test_queued_jobs_go_to_the_pool_as_processes_come_free() -> None:
    import time

    with closing(CompilePool(1, warm=worker_targets.warm_quick)) as pool:
        handles = pool.submit([("x", "a"), ("y", "b"), ("z", "c")])
        assert handles[0].future is not None and handles[2].future is None  # one at a time
        deadline = time.monotonic() + 60
        while any(h.future is None or not h.future.done() for h in handles) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [pool.wait(h, 10)[1] for h in handles] == [None, None, None]  # each fed by the one before


def test_the_pool_says_when_its_processes_have_started() -> None:
    import time

    with closing(CompilePool(2, warm=worker_targets.warm_quick)) as pool:
        pool.start()
        assert not pool.warmed_up  # spawning and importing take far longer than this line
        deadline = time.monotonic() + 60
        while not pool.warmed_up and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pool.warmed_up  # a start-up no-op finished: a process is ready to compile
        pool._replace()
        assert not pool.warmed_up  # a replaced pool starts from scratch


def test_a_replaced_pools_late_start_up_does_not_count_for_the_new_one() -> None:
    # The old pool's second no-op can finish after _replace: CI once saw warmed_up
    # turn True again on a pool whose processes had not started.
    with closing(CompilePool(2, warm=worker_targets.warm_quick)) as pool:
        old = pool._generation
        pool._replace()
        pool._count(old)  # a callback of the replaced pool, arriving late
        assert not pool.warmed_up
        pool._count(pool._generation)
        assert pool.warmed_up
