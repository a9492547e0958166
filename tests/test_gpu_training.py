"""A training step on the H200: a backward kernel through the four gates, gradients judged against float64."""

from __future__ import annotations

import pytest
from adversarial import CHEATS, HONEST
from conftest import EXAMPLES

from kernelopt.capture import capture
from kernelopt.capture.swap import find_kernel
from kernelopt.evaluate.one_candidate import EvaluationRequest, verify_candidate
from kernelopt.problem import load_problem

pytestmark = pytest.mark.gpu

TRAIN_MLP = EXAMPLES.parent / "models" / "train_step_mlp.py"
SIZES = {"batch": 2048, "width": 1024, "classes": 512}


@pytest.fixture(scope="module")
def backward_kernel():
    problem = load_problem(TRAIN_MLP, overrides=SIZES, train=True)
    step, inputs = problem.build_model(0, "cuda"), problem.make_inputs(0, "cuda")
    artifact = capture(step, inputs)
    assert len(artifact.graphs) == 2, [g.index for g in artifact.graphs]
    launched = [ln for ln in artifact.launches if ln.kind == "triton" and ln.graph == 1]
    assert launched, "the backward graph launched no generated kernel"
    name = max(launched, key=lambda ln: sum(a.itemsize for a in ln.args)).name  # the most traffic
    _, _, kernel = find_kernel(artifact, name, graph=1)  # names repeat across graphs: address by graph
    return name, kernel


def evaluate(kernel_name, source):
    req = EvaluationRequest(problem_path=str(TRAIN_MLP), kernel=kernel_name, candidate_source=source, overrides=SIZES,
                            graph=1, trials=20, train=True)
    result = verify_candidate(req, timeout_s=300)
    return result, {v["gate"]: v for v in result["verdicts"]}


def test_a_backward_kernel_verbatim_passes_correctness_and_the_gradient_gate(backward_kernel) -> None:
    name, kernel = backward_kernel
    result, verdicts = evaluate(name, HONEST["verbatim"](kernel.source))
    for gate in ("static", "correctness", "model"):
        assert verdicts[gate]["passed"], result["verdicts"]
    assert "grad" in str(verdicts["model"]["details"]) or "output(s)" in verdicts["model"]["reason"]
    assert "performance" in verdicts and not verdicts["performance"]["passed"]  # not faster than itself
    print(name, verdicts["model"]["reason"])


def test_a_backward_kernel_that_skips_its_stores_is_rejected(backward_kernel) -> None:
    name, kernel = backward_kernel
    transform, gate = CHEATS["unwritten_output"]
    try:
        candidate = transform(kernel.source)
    except ValueError as exc:
        pytest.skip(f"unwritten_output does not apply to {name}: {exc}")
    result, verdicts = evaluate(name, candidate)
    assert not result["passed"] and not verdicts[gate]["passed"], result["verdicts"]
