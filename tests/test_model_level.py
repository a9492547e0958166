"""Gate 3's runner on the CPU: float64 references, the baseline's own error, and the reference cache."""

from __future__ import annotations

import torch

from conftest import EXAMPLES
from kernelopt.problem import load_problem
from kernelopt.verify.model_level import ReferenceCache, run_model_gate

SIZES = {"batch_size": 2, "seq_len": 8, "hidden": 64}


def setup():
    problem = load_problem(EXAMPLES / "level1/15_rmsnorm.py", overrides=SIZES)
    model = problem.build_model(0, "cpu")
    calls = {"baseline": 0}

    def baseline(xs):
        calls["baseline"] += 1
        with torch.no_grad():
            return model(*xs)

    return problem, model, baseline, calls


def test_equal_candidate_passes_and_biased_one_fails() -> None:
    problem, model, baseline, _ = setup()
    same = run_model_gate(problem, model, baseline, baseline, torch.device("cpu"))
    assert same.passed and same.gate == "model"
    biased = run_model_gate(problem, model, baseline, lambda xs: baseline(xs) * 1.0005, torch.device("cpu"))
    assert not biased.passed and "compiled baseline" in biased.reason


def test_reference_cache_computes_each_seed_once() -> None:
    problem, model, baseline, calls = setup()
    cache = ReferenceCache()

    def candidate(xs):
        with torch.no_grad():
            return model(*xs)

    for _ in range(3):
        assert run_model_gate(problem, model, baseline, candidate, torch.device("cpu"), seeds=(0, 1), cache=cache).passed
    assert calls["baseline"] == 2 and set(cache.entries) == {0, 1}
    tiny = ReferenceCache(max_bytes=16)  # too small to keep anything: recomputed every time, still right
    run_model_gate(problem, model, baseline, candidate, torch.device("cpu"), seeds=(0,), cache=tiny)
    assert tiny.entries == {} and tiny.bytes == 0
