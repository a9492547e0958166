"""GPU test of gate 1's wrapper rules against Inductor's own CUDA call sequences (run on an H200):
every example problem, forward and, where it trains, backward."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

pytestmark = pytest.mark.gpu


def _trainable(path) -> bool:
    from kernelopt.errors import ProblemError
    from kernelopt.problem import load_problem

    try:
        load_problem(path, train=True).small().build_model(0, "cpu")
    except ProblemError:  # no parameter that requires grad: nothing to train
        return False
    return True


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("level*/*.py")), ids=lambda p: p.stem)
def test_inductors_own_cuda_call_sequences_pass_gate_1(path) -> None:
    """Every example problem's graphs as Inductor writes them for CUDA, forward and (where trainable)
    backward, pass gate 1's wrapper rules: what the rules refuse there, every graph candidate of that
    model is refused too (the CPU test holds C++ wrappers; this one the Triton ones, with their
    streams, device guards and the CUDA attention fallbacks)."""
    from kernelopt.capture import capture
    from kernelopt.capture.call_sequence import call_source_of
    from kernelopt.problem import load_problem
    from kernelopt.verify.static_wrapper import check_static_wrapper

    for train in (False, True) if _trainable(path) else (False,):
        small = load_problem(path, train=train).small()
        model, inputs = small.build_model(0, "cuda"), small.make_inputs(0, "cuda")
        for graph in capture(model, inputs, {}).graphs:
            verdict = check_static_wrapper(call_source_of(graph.source_code), original_source=graph.source_code)
            assert verdict.passed, (path.stem, train, graph.index, verdict.details.get("violations"))
