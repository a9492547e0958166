"""The store's cache of verified kernels and ``torch.compile(backend="kernelopt")`` reading it."""

from __future__ import annotations

import sqlite3

import torch
from test_backend import HONEST, KERNEL, Small

from kernelopt.deliver.backend import store_backend
from kernelopt.measure.environment import device_label, triton_version
from kernelopt.pipeline.optimize import _keep_tuned
from kernelopt.pipeline.records import KernelResult, OptimizeReport, Winner
from kernelopt.store import Store
from kernelopt.store.db import MIGRATIONS
from kernelopt.store.tuned import TunedKernel, add_tuned, tuned_for

HERE = {"device": "NVIDIA H200 (cc 9.0, 132 SMs)", "torch_version": "2.11.0+cu130", "triton_version": "3.6.0"}


def test_kernels_are_kept_per_device_and_versions_and_a_new_verification_replaces_the_old(tmp_path) -> None:
    with Store(tmp_path / "k.db") as store:
        add_tuned(store, TunedKernel("a" * 64, "triton_k_0", "old", 1.1), **HERE)
        add_tuned(store, TunedKernel("a" * 64, "triton_k_0", "new", 1.2), **HERE)
        add_tuned(store, TunedKernel("b" * 64, "triton_j_0", "other torch"), **{**HERE, "torch_version": "2.12.0"})
        add_tuned(store, TunedKernel("c" * 64, "triton_i_0", "other gpu"), **{**HERE, "device": "NVIDIA B200"})
        (kept,) = tuned_for(store, **HERE)
    assert (kept.name, kept.source, kept.speedup) == ("triton_k_0", "new", 1.2)


def test_an_optimize_that_delivers_adds_its_winners(tmp_path) -> None:
    report = OptimizeReport("p", 7, "gpu", 1.0, 1.0, 1.0)
    winner = Winner("launch-config", "num_warps 32", "SRC", [], address={"graph": 0, "name": "triton_k_0",
                                                                         "sha256": "d" * 64})
    report.kernels = [KernelResult("triton_k_0", 10.0, 8.0, 1.25, 4, {}, "budget", best=winner),
                      KernelResult("triton_j_1", 5.0, None, 1.0, 4, {}, "budget")]
    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("optimize", "p", "gpu", {})
        _keep_tuned(store, run_id, "gpu", report)
        (kept,) = tuned_for(store, device="gpu", torch_version=str(torch.__version__),
                            triton_version=triton_version())
    assert kept == TunedKernel("d" * 64, "triton_k_0", "SRC", 1.25, run_id)
    report.options = {"max_autotune": True, "coordinate_descent_tuning": True}  # built on another mode
    report.kernels[0] = KernelResult("triton_k_0", 10.0, 8.0, 1.3, 4, {}, "budget", best=Winner(
        "launch-config", "x", "SRC2", [], address={"graph": 0, "name": "triton_k_0", "sha256": "e" * 64}))
    with Store(tmp_path / "k.db") as store:
        _keep_tuned(store, store.start_run("optimize", "p", "gpu", {}), "gpu", report)
        kept_now = tuned_for(store, device="gpu", torch_version=str(torch.__version__), triton_version=triton_version())
    assert kept_now == [kept]  # a default compile would never hold that kernel: not kept for backend="kernelopt"


def test_the_store_backend_takes_what_this_device_verified_and_is_inductor_where_nothing_matches(tmp_path) -> None:
    assert store_backend(tmp_path / "none.db").replacements == []  # no store: exactly Inductor, nothing created
    assert not (tmp_path / "none.db").exists()
    here = {"device": device_label(), "torch_version": str(torch.__version__), "triton_version": triton_version()}
    with Store(tmp_path / "k.db") as store:
        add_tuned(store, TunedKernel(KERNEL.sha256, KERNEL.name, HONEST, 1.3), **here)
    tuned = store_backend(tmp_path / "k.db")
    assert [(r.address.name, r.address.sha256) for r in tuned.replacements] == [(KERNEL.name, KERNEL.sha256)]
    model, x = Small().eval(), torch.randn(2, 16)
    with torch.no_grad():
        torch._dynamo.reset()
        ours = torch.compile(model, backend=tuned)(x)
    torch.testing.assert_close(ours, model(x))
    assert tuned.report.used == {}  # a CPU compiles C++ kernels: the GPU kernel is not there


def test_a_store_older_than_the_cache_reads_as_empty(tmp_path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    for version in (1, 2):
        raw.executescript(f"BEGIN;{MIGRATIONS[version]}\nPRAGMA user_version={version};COMMIT;")
    raw.close()
    with Store(path, read_only=True) as store:
        assert tuned_for(store, **HERE) == []
    assert store_backend(path).replacements == []
