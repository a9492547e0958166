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


def test_inputs_built_once_per_seed_and_a_mutating_candidate_cannot_poison_them() -> None:
    problem, model, baseline, _ = setup()
    cache = ReferenceCache()
    built = {"n": 0}
    make_inputs = problem.make_inputs

    def counting(seed, device="cpu", distribution="given"):
        built["n"] += 1
        return make_inputs(seed, device, distribution)

    problem.make_inputs = counting  # type: ignore[method-assign]

    def vandal(xs):
        out = baseline(xs)
        for x in xs:
            x.mul_(1000.0)  # writes into the inputs it was handed
        return out

    def honest(xs):
        with torch.no_grad():
            return model(*xs)

    assert run_model_gate(problem, model, baseline, vandal, torch.device("cpu"), seeds=(0, 1), cache=cache).passed
    assert run_model_gate(problem, model, baseline, honest, torch.device("cpu"), seeds=(0, 1), cache=cache).passed
    assert built["n"] == 2 and set(cache.inputs) == {0, 1}
    assert torch.equal(cache.inputs[0][0], make_inputs(0, "cpu")[0])  # the kept copy is untouched
