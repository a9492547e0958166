"""A whole-model (compiler-knob) candidate on the GPU: the search's screen, then the gates it lets through."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

pytestmark = pytest.mark.gpu


def test_a_whole_model_candidate_is_screened_on_the_gpu_then_judged_or_turned_away() -> None:
    from kernelopt.evaluate.knob_candidate import GRAPH_SCREEN_MIN_SPEEDUP, evaluate_options
    from kernelopt.evaluate.session import GateSettings, ProblemSpec

    spec = ProblemSpec(str(EXAMPLES / "level1/15_rmsnorm.py"), {"batch_size": 16})
    settings = GateSettings(model_seeds=(0,), trials=20, screen_trials=6)
    result = evaluate_options(spec, {"triton.persistent_reductions": False}, settings)
    screen = result["screen"]
    print(screen["speedup"], [(v["gate"], v["passed"], v["reason"][:100]) for v in result["verdicts"]])
    assert screen["baseline"]["device"].startswith("cuda") and len(screen["baseline"]["samples_ms"]) == 6
    gates = [v["gate"] for v in result["verdicts"]]
    if screen["speedup"] < GRAPH_SCREEN_MIN_SPEEDUP:
        assert gates[-1] == "performance" and "model" not in gates and not result["passed"]
    else:
        assert gates == ["static", "correctness", "model", "performance"]
