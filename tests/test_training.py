"""Training steps (issue 14, point 4): the step as a model, its capture, and the model gate on gradients.

All on the CPU: Inductor's C++ backend compiles the forward and AOTAutograd's backward the same way it
compiles them for CUDA, so the capture of both graphs, the launches recorded across them and the
gate's comparison of every gradient against float64 run here for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import EXAMPLES
from torch import nn

from kernelopt.capture import capture
from kernelopt.errors import ProblemError
from kernelopt.problem import load_problem
from kernelopt.problem.training import TrainingStep, sum_of_outputs
from kernelopt.verify.model_level import output_labels, run_model_gate

TRAIN_MLP = EXAMPLES.parent / "models" / "train_step_mlp.py"


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.ln = nn.LayerNorm(8)
        self.unused = nn.Linear(2, 2)  # the loss never reaches it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.ln(self.fc(x)))


def test_the_step_returns_outputs_then_every_gradient_as_backward_would() -> None:
    torch.manual_seed(0)
    model, x = Block(), torch.randn(4, 8)
    step = TrainingStep(model)
    with torch.no_grad():  # the gates call models under no_grad: the step turns grad on itself
        out, *grads = step(x)
    assert step.grad_names == ["fc.weight", "fc.bias", "ln.weight", "ln.bias", "unused.weight", "unused.bias"]
    assert model.training and not out.requires_grad
    model.zero_grad()
    model(x).sum().backward()
    for name, grad in zip(step.grad_names, grads):
        expected = dict(model.named_parameters())[name].grad
        torch.testing.assert_close(grad, expected if expected is not None else torch.zeros_like(grad))
    assert not grads[-1].any()  # unreached: zeros, not a missing entry


def test_the_problem_s_loss_hook_is_used_and_bad_models_are_refused_in_one_line(tmp_path: Path) -> None:
    problem = load_problem(TRAIN_MLP, train=True).small()
    assert problem.train and problem.with_sizes(batch=4).train  # the flag survives a resize
    step = problem.build_model(0)
    assert isinstance(step, TrainingStep) and step.loss is problem.module.get_loss
    outputs = step(*problem.make_inputs(0))
    assert len(outputs) == 1 + len(step.grad_names) and outputs[0].shape == (16, 10)
    with pytest.raises(ProblemError, match=r"Dropout with p=0.1.*set p=0"):
        TrainingStep(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)))
    with pytest.raises(ProblemError, match="no parameter that requires grad"):
        TrainingStep(nn.ReLU())
    with pytest.raises(ProblemError, match="define get_loss"):
        sum_of_outputs((torch.arange(3),))
    bad = tmp_path / "bad_loss.py"
    bad.write_text(TRAIN_MLP.read_text().replace("def get_loss(logits):", "get_loss = 3\ndef _unused(logits):"))
    with pytest.raises(ProblemError, match="get_loss is not a function"):
        load_problem(bad, train=True).small().build_model(0)


def test_a_training_step_captures_forward_and_backward_graphs_and_their_launches() -> None:
    problem = load_problem(TRAIN_MLP, train=True).small()
    step, inputs = problem.build_model(0), problem.make_inputs(0)
    artifact = capture(step, inputs)
    forward, backward = artifact.graphs  # the tail after the gradient call has no code: not a graph
    assert forward.placeholders and backward.placeholders == []
    assert backward.kernels, "the backward graph's generated kernels are targets too"
    graphs_launched = {launch.graph for launch in artifact.launches}
    assert graphs_launched == {0, 1}
    expected = TrainingStep(load_problem(TRAIN_MLP, train=True).small().build_model(0).model, problem.module.get_loss)(*inputs)
    got = artifact(*inputs)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_the_model_gate_judges_every_gradient_against_float64() -> None:
    problem = load_problem(TRAIN_MLP, train=True).small()
    step, inputs = problem.build_model(0), problem.make_inputs(0)
    artifact = capture(step, inputs)

    def baseline(xs):
        return artifact(*xs)

    honest = run_model_gate(problem, step, baseline, baseline, torch.device("cpu"), seeds=(0, 1))
    assert honest.passed, honest.reason
    assert "2 seed(s) x 9 output(s)" in honest.reason  # the logits and 8 gradients

    def wrong_grad(xs):  # forward right, one gradient off by 1 %: only the gradient comparison sees it
        out = list(artifact(*xs))
        out[5] = out[5] * 1.01
        return tuple(out)

    verdict = run_model_gate(problem, step, baseline, wrong_grad, torch.device("cpu"), seeds=(0,))
    assert not verdict.passed and "grad of down.weight" in verdict.reason, verdict.reason


def test_outputs_are_named_for_the_gate_s_reasons() -> None:
    assert output_labels(3, ["a", "b"]) == ["output 0", "grad of a", "grad of b"]
    assert output_labels(2, []) == ["output 0", "output 1"]
    assert output_labels(1, ["a", "b"]) == ["output 0"]  # more names than outputs: not a training step's


def test_an_export_of_a_training_step_loads_as_one(tmp_path: Path) -> None:
    from kernelopt.deliver.export import _materialise_problem, export_model, read_export

    problem = load_problem(TRAIN_MLP, train=True).small()
    path = export_model(tmp_path / "t.kopt.json", problem, [], {"note": "test"})
    doc = read_export(path)
    assert doc["problem"]["train"] is True and _materialise_problem(doc).train


def test_a_resumed_run_must_say_train_as_it_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt.errors import KerneloptError
    from kernelopt.pipeline import optimize as opt
    from kernelopt.store import Store

    monkeypatch.setattr(opt, "require_gpu", lambda *a: None)
    store = Store(tmp_path / "k.db")
    run = store.start_run("optimize", "train_step_mlp", "fake", {}, {"train": True})
    with pytest.raises(KerneloptError, match=f"run {run} was started with --train: resume it the same way"):
        opt.optimize(TRAIN_MLP, store, resume_run=run, write_report=False)


def test_the_default_loss_keeps_float64_for_the_reference_step() -> None:
    """The model gate's reference runs the step in float64: a loss cast to fp32 would round it there."""
    x64 = torch.randn(4, 3, dtype=torch.float64)
    assert sum_of_outputs(x64).dtype == torch.float64
    assert sum_of_outputs((torch.randn(2, dtype=torch.bfloat16), torch.randn(2))).dtype == torch.float32
