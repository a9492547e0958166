"""GPU tests of kernelopt optimize on our example problems (run on an H200)."""

from __future__ import annotations

import time

import pytest
from conftest import EXAMPLES

from kernelopt.config import load_settings
from kernelopt.deliver.export import load
from kernelopt.pipeline.optimize import optimize
from kernelopt.search.termination import Budget
from kernelopt.store import Store

pytestmark = pytest.mark.gpu

CASES = {
    "level1/10_row_l2_normalize.py": {"batch_size": 2048},
    "level1/12_softmax_wide.py": {"batch_size": 1024},
    "level1/15_rmsnorm.py": {"batch_size": 8},
}
# The kernel search's claims are tested on the default compile; the base-mode choice (it can move the
# baseline to max-autotune-no-cudagraphs, whose tuned kernels leave row-L2 at 2048 rows no 3 % to win)
# on the small rmsnorm, where it costs one short process.
BASE_MODE = {"level1/15_rmsnorm.py": "auto"}


def progress(kind: str, data: dict) -> None:
    """Printed (run with -s) so a slow or stuck GPU run still shows how far it got."""
    if kind in ("stage", "targets", "stopped", "evaluated"):
        keep = {k: data.get(k) for k in ("stage", "kernel", "operator", "passed", "fitness", "failed_gate", "reason", "targets")}
        print(f"[{time.strftime('%H:%M:%S')}] {kind}: { {k: v for k, v in keep.items() if v is not None} }", flush=True)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("optimize")
    store = Store(tmp / "k.db")
    out = {}
    for rel, sizes in CASES.items():
        config = load_settings({"base_mode": BASE_MODE.get(rel, "default")})
        out[rel] = optimize(EXAMPLES / rel, store, budget=Budget(max_evaluations=8, patience=2), max_targets=1,
                            sizes=sizes, export_path=tmp / f"{rel.replace('/', '_')}.kopt.json", on_event=progress,
                            config=config)
    return store, out


@pytest.mark.parametrize("rel", sorted(CASES))
def test_optimize_is_never_slower_than_the_baseline(reports, rel) -> None:
    store, out = reports
    report = out[rel]
    assert store.run(report.run_id).status == "done"
    if report.exported:
        assert report.final_reason.startswith("verified")
        assert report.speedup_vs_compile > 1.0
        assert report.speedup_vs_compile_iqr[0] > 1.0  # the whole middle half of the rounds was faster
        assert all(k.best is None or k.speedup > 1.03 for k in report.kernels)
    else:
        assert report.speedup_vs_compile == 1.0 and report.optimized_ms == report.compiled_ms
    for k in report.kernels:
        assert k.evaluations > 0 and k.stop_reason


def test_the_base_mode_was_timed_and_the_run_built_on_it(reports) -> None:
    from kernelopt.capture.compat import mode_options

    store, out = reports
    report = out["level1/15_rmsnorm.py"]
    base = store.measurements(report.run_id, "base_mode")["base_mode"]
    record = base["stock"]["max-autotune-no-cudagraphs"]
    assert isinstance(record, dict), record  # timed in its own process, against the default
    assert report.base_mode == base["mode"] and report.base_mode_reason == base["reason"]
    assert (report.options or {}) == {**mode_options(report.base_mode), **(report.options or {})}
    print("base mode", report.base_mode, "-", report.base_mode_reason)


def test_a_real_improvement_where_analyze_shows_headroom(reports) -> None:
    """Row-L2 reads its rows twice: the graph stage, run first, holds them on chip (2.11x on the H100), and
    its options become the compile, leaving no kernel worth a search; else a searched kernel wins."""
    _, out = reports
    report = out["level1/10_row_l2_normalize.py"]
    assert report.exported and report.speedup_vs_compile > 1.05, report.final_reason
    loaded = load(report.exported)
    promoted = [g for g in report.graphs if g.promoted]
    if promoted:
        assert report.options is not None and all(report.options.get(k) == v for k, v in promoted[0].best["options"].items())
    else:
        (kernel,) = report.kernels
        assert kernel.best is not None and kernel.speedup > 1.05, (kernel, report.final_reason)
        assert loaded.swaps and loaded.swaps[0].source == kernel.best.source
    throughput = [r.evaluations_per_gpu_minute for r in out.values() if r.evaluations_per_gpu_minute]
    print("evaluations per GPU-minute:", [f"{t:.0f}" for t in throughput])


def test_inductor_tuned_config_leaves_the_captured_kernel_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search's first proposal: Inductor's coordinate-descent config, tuned on a private copy."""
    # The judge is built in this (maybe root) process, which cannot lend CUDA memory to a worker of
    # another user; only Inductor's own kernel runs in the worker.
    monkeypatch.setenv("KERNELOPT_WORKER_USER", "root")
    from kernelopt.capture import compat
    from kernelopt.evaluate.session import EvaluationSession, ProblemSpec

    session = EvaluationSession(ProblemSpec(str(EXAMPLES / "level1/10_row_l2_normalize.py"), {"batch_size": 1024}), compile_workers=0)
    (launch,) = [ln for ln in session.artifact.launches if ln.kind == "triton"]
    address, var, _ = session.kernel(launch.name)
    live = vars(session.artifact.graphs[address.graph].module)[var]
    before = compat.chosen_config(live)
    tuned = session.inductor_tuned_config(launch.name)
    assert tuned is not None and {"XBLOCK", "R0_BLOCK", "num_warps"} <= set(tuned), tuned
    assert compat.chosen_config(live) == before and not live.inductor_meta.get("coordinate_descent_tuning")
    print("Inductor heuristic", before, "coordinate descent", tuned)
    session.close()
