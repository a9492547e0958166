"""GPU tests of standalone Triton kernel files on the H200 (issue 16): the naive softmax optimized,
verified and delivered, the delivery importing in a fresh process, and an autotuned file pinned."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

from kernelopt.pipeline.optimize_file import optimize_file
from kernelopt.search.file_configs import config_sites
from kernelopt.search.nodes import NodeStore
from kernelopt.search.termination import Budget
from kernelopt.store import Store

pytestmark = pytest.mark.gpu
KERNELS = ROOT / "examples" / "kernels"
FRESH = textwrap.dedent(
    """
    import sys, torch
    from kernelopt.problem.kernel_file import load_kernel_file
    k = load_kernel_file(sys.argv[1])
    x = k.make_inputs(3, "cuda")
    torch.testing.assert_close(k.run_entry(x), torch.softmax(x[0], dim=-1))
    print("delivered file ok")
    """
)


def test_a_naive_softmax_is_optimized_verified_and_delivered(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    export = tmp_path / "softmax.kopt.py"
    report = optimize_file(
        KERNELS / "softmax_naive.py", store, budget=Budget(max_evaluations=10, patience=3), export_path=export
    )
    print(report.final_reason, f"{report.speedup:.3f}x", report.speedup_iqr, report.best.note if report.best else None)
    assert store.run(report.run_id).status == "done"
    assert report.best is not None and report.final_reason.startswith("verified")
    assert report.speedup > 1.03 and report.speedup_iqr[0] > 1.0  # four warps for 32768 columns spill
    record = json.loads(Path(report.record or "").read_text())
    assert record["delivered"]["sha256"] == hashlib.sha256(export.read_bytes()).hexdigest()
    assert [v["gate"] for v in record["verdicts"]] == ["static", "correctness", "model", "performance"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", FRESH, str(export)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0 and "delivered file ok" in done.stdout, done.stderr[-2000:]


def test_an_autotuned_file_is_delivered_with_one_pinned_config_or_kept(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    export = tmp_path / "scale_add.kopt.py"
    report = optimize_file(
        KERNELS / "scale_add_autotuned.py", store, budget=Budget(max_evaluations=6, patience=2), export_path=export
    )
    print(report.final_reason, f"{report.speedup:.3f}x", report.best.note if report.best else None)
    assert store.run(report.run_id).status == "done"
    if report.best is None:
        assert not export.exists() and "the original stays" in report.final_reason
    else:
        (site,) = config_sites(export.read_text())
        assert site.kind == "autotune" and len(site.choices) == 1


def test_a_helion_kernel_is_tuned_by_helion_s_autotuner_within_the_budget_and_verified(tmp_path: Path) -> None:
    pytest.importorskip("helion")
    store = Store(tmp_path / "k.db")
    export = tmp_path / "rms.kopt.py"
    report = optimize_file(
        KERNELS / "helion_rms_scale.py",
        store,
        # no stop at the roofline: the example's default config already runs at 94 % of it on the H200, where
        # the autotuner is rightly skipped (a CPU test holds that); here its choice must be run and judged
        budget=Budget(max_evaluations=6, patience=2, max_wall_s=60, roofline_fraction=1.01),
        export_path=export,
    )
    print(
        report.final_reason,
        f"{report.speedup:.3f}x",
        report.helion and {k: report.helion.get(k) for k in ("effort", "seconds", "kernels")},
    )
    assert store.run(report.run_id).status == "done"
    assert report.helion is not None and report.helion["kernels"][0].get("tuned"), report.helion
    assert report.helion["seconds"] < 60 + 60  # within its budget (its compiles may overrun it a little)
    nodes = [n for n in NodeStore(store, report.run_id).nodes("helion_rms_scale") if n.operator == "helion-autotune"]
    assert len(nodes) == 1 and nodes[0].result is not None  # Helion's choice was judged like any candidate
    if report.best is not None:
        assert "helion.Config(" in export.read_text() and report.speedup > 1.0
    else:
        assert not export.exists()


CU = KERNELS / "softmax_naive.cu"


def _verify_cuda(source: str, tmp_path: Path, name: str):
    from kernelopt.api.verify_file import verify_file

    candidate = tmp_path / f"{name}.cu"
    candidate.write_text(source)
    export = tmp_path / f"{name}_kopt.cu"
    report = verify_file(KERNELS / "softmax_naive.py", candidate, Store(tmp_path / "k.db"), export, kernel="softmax_kernel")
    print({v.gate: (v.passed, v.reason[:200]) for v in report.verdicts}, report.kernel_speedup and report.kernel_speedup.get("speedup"))
    return report, export


def test_the_hand_written_cuda_softmax_is_judged_by_every_gate_and_delivered_only_if_faster(tmp_path: Path) -> None:
    """Gates 1 to 3 must pass (it is correct); whether it is faster is the benchmark's to say (on the H200
    its two-pass form ran 1.008x, inside the margin: benchmarks/h200-2026-12-02-graph-candidates; the row
    held in registers is what it runs now), and the delivery follows the verdict: a delivered file loads
    again and runs the CUDA kernel, else nothing is written."""
    import torch

    import kernelopt
    from kernelopt.capture.cuda_slot import CudaSlot

    report, export = _verify_cuda(CU.read_text(), tmp_path, "softmax_cuda")
    assert [v.gate for v in report.verdicts] == ["static", "correctness", "model", "performance"]
    assert all(v.passed for v in report.verdicts[:3]), [v.reason for v in report.verdicts]
    assert report.verdicts[0].details["language"] == "cuda"
    assert "edge cases" in report.verdicts[1].reason  # the final check's cases: NaN, infinities, constant rows
    assert report.kernel_speedup and report.kernel_speedup.get("speedup")  # timed, whatever the outcome
    if not report.passed:
        assert not export.exists() and "speedup" in report.verdicts[3].reason
        return
    record = json.loads(export.with_suffix(".json").read_text())
    assert record["language"] == "cuda" and record["kernel"] == "softmax_kernel"
    assert record["delivered"]["sha256"] == hashlib.sha256(export.read_bytes()).hexdigest()
    module = kernelopt.load_kernel(export)
    assert isinstance(module.softmax_kernel, CudaSlot)
    x = torch.randn(512, 32768, device="cuda")
    torch.testing.assert_close(module.launch(x), torch.softmax(x, dim=-1))


def test_a_cuda_softmax_that_skips_every_other_row_fails_correctness(tmp_path: Path) -> None:
    skipping = (
        CU.read_text()
        .replace("base + static_cast<int64_t>(blockIdx.x) * stride", "base + 2 * static_cast<int64_t>(blockIdx.x) * stride")
        .replace("static_cast<unsigned int>(rows)", "static_cast<unsigned int>((rows + 1) / 2)")
    )
    assert skipping.count("2 * static_cast") == 2 and skipping.count("(rows + 1) / 2") == 1  # both row helpers, the one grid
    report, export = _verify_cuda(skipping, tmp_path, "skipping")
    gates = {v.gate: v for v in report.verdicts}
    assert gates["static"].passed and not gates["correctness"].passed, [v.reason for v in report.verdicts]
    assert gates["correctness"].details.get("rule") != "build" and not report.passed and not export.exists()
