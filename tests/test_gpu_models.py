"""Every example model through optimize on the H200, then loaded again in a fresh process through the
user's own ``torch.compile(model, backend=kernelopt.backend(path))`` (issue 14's done criterion).

Each model runs at its full size (the files are sized for one H200) with a small search budget; the
fresh process rebuilds the model from the problem file with the same seed, as a user's script would
build their own instance, and compares the tuned compile against eager at the model's dtype.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelopt.config import load_settings
from kernelopt.pipeline.optimize import optimize
from kernelopt.search.termination import Budget
from kernelopt.store import Store

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "examples" / "models"
NEEDS = {"gpt2_bf16": "transformers", "llama_decoder_bf16": "transformers", "timm_resnet": "timm"}
TRAIN = {"train_step_mlp"}

FRESH = textwrap.dedent(
    """
    import sys, torch, kernelopt
    from kernelopt.problem import load_problem
    from kernelopt.verify.tolerance import tolerance_for
    path, export, train = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    problem = load_problem(path, train=train)
    model, inputs = problem.build_model(0, "cuda"), problem.make_inputs(0, "cuda")
    with torch.no_grad():
        expected = model(*inputs)
        tuned = kernelopt.backend(export)
        got = torch.compile(model, backend=tuned, dynamic=False)(*inputs)
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    for e, g in zip(expected, got):
        tol = tolerance_for(e.dtype)
        torch.testing.assert_close(g, e, rtol=tol.rtol * 10, atol=tol.atol * 10)  # vs eager: Inductor's own error too
    print("used", dict(tuned.report.used))
    """
)


@pytest.mark.parametrize("name", sorted(p.stem for p in MODELS.glob("*.py")))
def test_each_example_model_optimizes_and_loads_in_a_fresh_process(name: str, tmp_path: Path) -> None:
    if name in NEEDS and importlib.util.find_spec(NEEDS[name]) is None:
        pytest.skip(f"needs {NEEDS[name]}")
    store = Store(tmp_path / "k.db")
    export = tmp_path / f"{name}.kopt.json"
    report = optimize(
        MODELS / f"{name}.py",
        store,
        budget=Budget(max_evaluations=4, patience=1),
        max_targets=1,
        export_path=export,
        config=load_settings({"base_mode": "default"}),
        write_report=False,
        train=name in TRAIN,
    )
    assert store.run(report.run_id).status == "done"
    print(name, report.final_reason, f"{report.speedup_vs_compile:.3f}x", [k.name for k in report.kernels])
    if not report.exported:
        assert report.speedup_vs_compile == 1.0  # the baseline stays: nothing to load
        return
    assert report.speedup_vs_compile > 1.0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", FRESH, str(MODELS / f"{name}.py"), str(export), "1" if name in TRAIN else "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "used {'" in done.stdout, done.stdout  # at least one verified kernel ran in the user's compile
