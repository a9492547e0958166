"""Gate 3 on the device: the re-stitched model against a float64 eager reference.

For each seed: the float64 eager model gives the reference; the unmodified
compiled model gives the baseline error (what Inductor's own fp32 kernels cost
in accuracy); the re-stitched model gives the candidate error. The decision is
``model_gate.judge_model``'s.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from kernelopt.problem import Problem, outputs_as_list
from kernelopt.verify.model_gate import ModelGatePolicy, SeedResult, judge_model, output_stats, relative_error
from kernelopt.verify.verdict import Verdict

DEFAULT_SEEDS = (0, 1, 2)


def _to_double(values: Sequence[Any]) -> list[Any]:
    return [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


@dataclass
class ReferenceCache:
    """Per-seed float64 references and baseline errors, reused across the candidates of a session.

    The reference and the compiled baseline do not change between candidates; only
    references up to ``max_bytes`` in total are kept (float64 outputs can be large).
    """

    max_bytes: int = 8 << 30
    entries: dict[int, tuple[list[torch.Tensor], list[float], list[float], list[float]]] = field(default_factory=dict)
    bytes: int = 0


def _reference(
    problem: Problem, model: torch.nn.Module, run_baseline: Callable[[Sequence[Any]], Any], device: torch.device,
    seed: int, inputs: Sequence[Any], cache: ReferenceCache | None,
) -> tuple[list[torch.Tensor], list[float], list[float], list[float]]:
    if cache is not None and seed in cache.entries:
        return cache.entries[seed]
    model64 = copy.deepcopy(model).double()
    with torch.no_grad():
        refs = [r.detach() for r in outputs_as_list(model64(*_to_double(inputs)), problem.path)]
        base = [o.detach().clone() for o in outputs_as_list(run_baseline(inputs), problem.path)]
    del model64
    entry = (
        refs,
        [relative_error(b, r) for b, r in zip(base, refs)],
        [relative_error(torch.zeros_like(r), r) for r in refs],
        [output_stats(r) for r in refs],
    )
    size = sum(r.numel() * r.element_size() for r in refs)
    if cache is not None and cache.bytes + size <= cache.max_bytes:
        cache.entries[seed] = entry
        cache.bytes += size
    return entry


def run_model_gate(
    problem: Problem,
    model: torch.nn.Module,
    run_baseline: Callable[[Sequence[Any]], Any],
    run_candidate: Callable[[Sequence[Any]], Any],
    device: torch.device,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    policy: ModelGatePolicy | None = None,
    cache: ReferenceCache | None = None,
) -> Verdict:
    """Gate 3: candidate error ≤ policy.max_ratio × the compiled baseline's, against float64 eager."""
    policy = policy or ModelGatePolicy()
    results = []
    for seed in seeds:
        inputs = problem.make_inputs(seed, device)
        refs, base_errors, zero_errors, stats = _reference(problem, model, run_baseline, device, seed, inputs, cache)
        with torch.no_grad():
            cand = [o.detach().clone() for o in outputs_as_list(run_candidate(inputs), problem.path)]
        if len(cand) != len(refs):
            return Verdict("model", False, f"seed {seed}: the re-stitched model returned {len(cand)} outputs, expected {len(refs)}")
        results.append(
            SeedResult(
                seed=seed,
                candidate_errors=[relative_error(c, r) for c, r in zip(cand, refs)],
                baseline_errors=base_errors,
                zero_errors=zero_errors,
                ref_std_over_mean_abs=stats,
            )
        )
        del refs, cand, inputs
    return judge_model(results, policy)
