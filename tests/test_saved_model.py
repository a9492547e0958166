"""A live model and its inputs saved as a problem that worker processes load (kernelopt.optimize(model, inputs))."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
from torch import nn

import kernelopt
from kernelopt.errors import KerneloptError
from kernelopt.problem import load_problem
from kernelopt.problem.saved import check_movable, save_model_problem

SRC = Path(__file__).resolve().parents[1] / "src"


class Gated(nn.Module):  # defined in a test module, not an installed package: travels by value
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.scale = nn.Parameter(torch.full((16,), 0.5))

    def forward(self, x: torch.Tensor, bias: float) -> torch.Tensor:
        return torch.sigmoid(self.proj(x)) * self.scale + bias


def test_the_saved_problem_is_the_users_own_module_with_its_weights(tmp_path, worker_tmp) -> None:
    torch.manual_seed(3)
    model, x = Gated(), torch.randn(4, 8)
    expected = model(x, 0.25)
    path = save_model_problem(model, [x, 0.25], worker_tmp / "bundle")
    facts = check_movable(path)  # a real worker process loads it
    assert facts == {"parameters": sum(p.numel() for p in model.parameters()), "inputs": 2}
    problem = load_problem(path)
    again = problem.build_model(seed=99)  # the seed changes nothing: the weights are the saved ones
    assert type(again).__name__ == "Gated" and list(again.state_dict()) == list(model.state_dict())
    inputs = problem.make_inputs(seed=99)
    torch.testing.assert_close(again(*inputs), expected, rtol=0, atol=0)
    assert model.training  # the user's module is left as it was


def test_a_class_defined_in_a_scripts_main_reaches_a_worker(tmp_path, worker_tmp) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(SRC)!r})
        from torch import nn
        from kernelopt.problem.saved import save_model_problem

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.arange(6.0).reshape(2, 3))
            def forward(self, x):
                return x @ self.w

        path = save_model_problem(Net(), [torch.ones(4, 2)], {str(worker_tmp / "bundle")!r})
        print(path)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip().splitlines()[-1])
    assert check_movable(path)["parameters"] == 6
    problem = load_problem(path)
    out = problem.build_model()(*problem.make_inputs())
    torch.testing.assert_close(out, torch.ones(4, 2) @ torch.arange(6.0).reshape(2, 3))


class HoldsALock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def test_a_model_that_cannot_be_moved_is_refused_in_one_line(tmp_path) -> None:
    with pytest.raises(KerneloptError) as raised:
        save_model_problem(HoldsALock(), [torch.ones(1, 2)], tmp_path / "b")
    message = str(raised.value)
    assert "\n" not in message and "cannot be saved" in message and "lock" in message.lower()
    with pytest.raises(KerneloptError, match="pass a torch.nn.Module"):
        save_model_problem(lambda x: x, [torch.ones(1)], tmp_path / "c")  # type: ignore[arg-type]
    with pytest.raises(KerneloptError, match="pass a list or tuple"):
        save_model_problem(Gated(), {"x": torch.ones(1)}, tmp_path / "d")  # type: ignore[arg-type]


def test_a_saved_model_that_a_worker_cannot_load_is_refused(tmp_path, worker_tmp) -> None:
    path = save_model_problem(Gated(), [torch.ones(1, 8), 0.0], worker_tmp / "bundle")
    (path.parent / "model.pt").write_bytes(b"not a pickle")
    with pytest.raises(KerneloptError, match="cannot be moved to kernelopt's worker processes"):
        check_movable(path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_optimize_on_a_live_model_says_it_needs_a_gpu_before_any_work(tmp_path, worker_tmp) -> None:
    with pytest.raises(KerneloptError, match="needs an NVIDIA GPU"):
        kernelopt.optimize(Gated(), [torch.ones(1, 8), 0.0], workdir=worker_tmp / "bundle")
    assert not (worker_tmp / "bundle").exists()


def test_a_bad_budget_or_effort_is_refused_in_one_line_before_anything_is_saved(worker_tmp) -> None:
    for bad, says in [({"budget": 0}, "argument budget=0: expected a whole number of at least 1"),
                      ({"max_targets": -1}, "argument max_targets=-1"),
                      ({"effort": "fast"}, "argument effort='fast': expected an effort profile")]:
        with pytest.raises(KerneloptError, match=re.escape(says)) as caught:
            kernelopt.optimize(Gated(), [torch.ones(1, 8), 0.0], workdir=worker_tmp / "bundle", **bad)
        assert "\n" not in str(caught.value)
    assert not (worker_tmp / "bundle").exists()


def test_the_result_module_is_the_users_model_compiled_with_the_verified_kernels(tmp_path, worker_tmp) -> None:
    from conftest import EXAMPLES
    from test_backend import HONEST, KERNEL

    from kernelopt.capture.swap import KernelAddress
    from kernelopt.deliver.export import Replacement, export_model, read_export
    from kernelopt.pipeline.live import Optimized
    from kernelopt.pipeline.records import OptimizeReport

    torch.manual_seed(1)
    model, x = Gated().eval(), torch.randn(3, 8)
    path = save_model_problem(model, [x, 0.5], worker_tmp / "bundle")
    report = OptimizeReport("gated", 1, "cpu", 1.0, 1.0, 1.0, final_reason="no candidate passed")
    kept = Optimized(report, path, model)
    assert kept.exported is None
    loaded = kept.load(device="cpu")  # Inductor's compile, nothing swapped, as the baseline file says
    assert loaded.swaps == []
    with torch.no_grad():
        torch.testing.assert_close(loaded(x, 0.5), model(x, 0.5))
    baseline = kept.save(tmp_path / "kept.kopt.json")  # the same script runs when nothing won
    doc = read_export(baseline)  # sealed: its digest checks
    assert doc["replacements"] == [] and doc["verification"] == {"baseline_kept": "no candidate passed"}
    assert kernelopt.backend(baseline).replacements == []  # Inductor's compile exactly
    with torch.no_grad():
        torch._dynamo.reset()
        torch.testing.assert_close(kept.module(x, 0.5), model(x, 0.5))
    problem = load_problem(EXAMPLES / "level1/12_softmax_wide.py").small()
    exported = export_model(tmp_path / "m.kopt.json", problem,
                            [Replacement(KernelAddress(0, KERNEL.name, KERNEL.sha256), HONEST)], {"passed": True})
    report.exported = str(exported)
    saved = Optimized(report, path, model).save(tmp_path / "keep" / "mine.kopt.json")
    assert saved.read_bytes() == exported.read_bytes()  # digest and verification record kept as written
    with pytest.raises(ValueError, match="name the file \\*.kopt.json"):
        Optimized(report, path, model).save(tmp_path / "mine.pt")
    tuned = Optimized(report, path, model).module
    with torch.no_grad():
        torch._dynamo.reset()
        torch.testing.assert_close(tuned(x, 0.5), model(x, 0.5))
    assert tuned is model and list(tuned.state_dict()) == ["scale", "proj.weight", "proj.bias"]  # compiled in place


def test_a_model_in_training_mode_is_saved_in_eval_mode_and_says_so(worker_tmp) -> None:
    import warnings

    from kernelopt.problem.saved import TRAINING_MODE_WARNING

    model = Gated()  # a new module is in training mode
    with pytest.warns(UserWarning, match="the model is in training mode; kernelopt .* in eval mode") as caught:
        path = save_model_problem(model, [torch.ones(1, 8), 0.0], worker_tmp / "a")
    assert str(caught[0].message) == TRAINING_MODE_WARNING
    assert model.training  # the user's module is left as it was
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # in eval mode: nothing to say
        save_model_problem(model.eval(), [torch.ones(1, 8), 0.0], worker_tmp / "b")
    assert path.exists()


def squared_error(out: torch.Tensor) -> torch.Tensor:  # a loss of the user's own, defined in a test module
    return (out - 0.5).pow(2).mean()


def test_a_training_step_of_a_live_model_carries_its_loss_to_every_process(tmp_path, worker_tmp) -> None:
    import warnings

    from kernelopt.problem.training import TrainingStep

    torch.manual_seed(5)
    model, x = Gated().train(), torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # train=True: the model is trained on purpose, no eval-mode warning
        path = save_model_problem(model, [x, 0.25], worker_tmp / "train", train=True, loss_fn=squared_error)
    assert model.training  # the user's module is left as it was
    assert check_movable(path, train=True)["inputs"] == 2  # a real worker loads the model and the loss
    problem = load_problem(path, train=True)
    step = problem.build_model()
    assert isinstance(step, TrainingStep) and step.loss is problem.module.get_loss
    out, *grads = step(*problem.make_inputs())
    model.zero_grad()
    squared_error(model(x, 0.25)).backward()
    named = dict(zip(step.grad_names, grads))
    torch.testing.assert_close(named["proj.weight"], model.proj.weight.grad)
    torch.testing.assert_close(named["scale"], model.scale.grad)
    with pytest.raises(KerneloptError, match="loss_fn is for a training step: pass train=True"):
        save_model_problem(model, [x, 0.25], tmp_path / "a", loss_fn=squared_error)
    with pytest.raises(KerneloptError, match="loss_fn is a int"):
        save_model_problem(model, [x, 0.25], tmp_path / "b", train=True, loss_fn=3)


def test_a_loss_and_model_pickled_by_value_compile_in_a_process_without_their_module(tmp_path) -> None:
    """Dynamo reads an inlined function's globals back by its module's name: a worker has no module of
    the user's (on the H200 the training step of examples/models/train_step_mlp.py failed so)."""
    from conftest import ROOT

    problem = load_problem(ROOT / "examples" / "models" / "train_step_mlp.py").small()
    path = save_model_problem(problem.build_model(0, "cpu"), problem.make_inputs(0, "cpu"), tmp_path / "bundle",
                              train=True, loss_fn=problem.module.get_loss)
    script = textwrap.dedent(
        """
        import sys, torch
        from kernelopt.problem import load_problem
        saved = load_problem(sys.argv[1], train=True)
        step, inputs = saved.build_model(0, "cpu"), saved.make_inputs(0, "cpu")
        eager = step(*inputs)
        got = torch.compile(step, backend="eager")(*inputs)
        assert len(got) == len(eager) == 1 + len(step.grad_names), (len(got), len(eager))
        for g, e in zip(got, eager):
            torch.testing.assert_close(g, e)
        print("compiled", len(got))
        """
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "compiled 9", done.stdout  # the logits and 8 gradients


@pytest.mark.parametrize("call", [kernelopt.analyze, kernelopt.optimize], ids=["analyze", "optimize"])
def test_a_bad_config_store_or_setting_is_one_line_before_anything_is_saved(call, worker_tmp) -> None:
    from kernelopt.config import load_settings

    cases = [({"config": {"effort": "quick"}}, "config is a dict; pass a kernelopt.config.Settings"),
             ({"store": 3}, "argument store=3"),
             ({"effort": "fast"}, "argument effort='fast': expected an effort profile"),
             ({"config": load_settings(), "effort": "fast"}, "argument effort='fast'")]  # fmt: skip
    if call is kernelopt.analyze:
        cases += [({"trials": 0}, "argument analyze_trials=0: expected a whole number of at least 1"),
                  ({"stock_modes": "eager"}, "argument stock_modes='eager': expected torch.compile modes"),
                  ({"stock_modes": 2}, "stock_modes is a int; pass True")]  # fmt: skip
    for bad, says in cases:
        with pytest.raises(KerneloptError, match=re.escape(says)) as caught:
            call(Gated(), [torch.ones(1, 8), 0.0], workdir=worker_tmp / "bundle", **bad)
        assert "\n" not in str(caught.value)
    assert not (worker_tmp / "bundle").exists()


def test_analyze_on_a_live_model_runs_the_file_analysis_with_the_settings_given(tmp_path, worker_tmp, monkeypatch) -> None:
    """The analysis itself needs the GPU: what is checked is what reaches it (the worker's analyze_file)."""
    from kernelopt.config import load_settings
    from kernelopt.pipeline import analyze as analyze_run
    from kernelopt.pipeline import optimize as optimize_run
    from kernelopt.store import Store
    from kernelopt.workers.identity import readable_root, worker_identity

    calls = []

    def analysis(path, store, *, config, stock_modes, train):
        calls.append({"path": path, "store": store.path, "config": config, "stock_modes": stock_modes, "train": train})
        return "the report"

    monkeypatch.setattr(analyze_run, "analyze_file", analysis)
    monkeypatch.setattr(optimize_run, "require_gpu", lambda command: None)
    config = load_settings({"analyze_trials": 7, "store": tmp_path / "mine.db", "cache": worker_tmp / "cache"})
    model, x = Gated().eval(), torch.ones(2, 8)
    assert kernelopt.analyze(model, [x, 0.5], config=config) == "the report"
    (first,) = calls
    assert first["config"].analyze_trials == 7 and first["store"] == tmp_path / "mine.db"  # the config's store
    assert first["path"].is_relative_to(readable_root(worker_tmp / "cache" / "models", worker_identity()))
    assert first["stock_modes"] is False and first["train"] is False
    kernelopt.analyze(model, [x, 0.5], config=config, trials=3, effort="quick", stock_modes="reduce-overhead",
                      store=tmp_path / "other.db", workdir=worker_tmp / "bundle")  # fmt: skip
    second = calls[1]
    assert second["config"].analyze_trials == 3 and second["config"].effort == "quick"
    assert second["config"].stock_modes == "reduce-overhead" and second["stock_modes"] is True
    assert second["store"] == tmp_path / "other.db" and second["path"] == worker_tmp / "bundle" / "problem.py"
    with Store(tmp_path / "given.db") as given:
        kernelopt.analyze(model, [x, 0.5], store=given, stock_modes=True, workdir=worker_tmp / "bundle")
    assert calls[2]["store"] == tmp_path / "given.db" and calls[2]["stock_modes"] is True
    assert calls[2]["config"].stock_modes == load_settings().stock_modes  # True: the setting's modes
