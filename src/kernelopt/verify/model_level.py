"""Gate 3 on the device: the re-stitched model against a float64 eager reference.

For each seed: the float64 eager model gives the reference; the unmodified
compiled model gives the baseline error (what Inductor's own fp32 kernels cost
in accuracy); the re-stitched model gives the candidate error. The decision is
``model_gate.judge_model``'s.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelopt.config import default_of
from kernelopt.problem import Problem, outputs_as_list
from kernelopt.verify.model_gate import ModelGatePolicy, SeedResult, judge_model, output_stats, relative_error
from kernelopt.verify.verdict import Verdict

DEFAULT_SEEDS: tuple[int, ...] = default_of("model_seeds")  # gate 3's seeds (kernelopt.config)


def double_copy(values: Sequence[Any]) -> list[Any]:
    """Copies of ``values`` with floating tensors in float64 (always copies: the eager model may write
    to its inputs, and the baseline and the candidate run on these inputs afterwards)."""
    return [
        (v.to(torch.float64, copy=True) if v.is_floating_point() else v.clone()) if isinstance(v, torch.Tensor) else v
        for v in values
    ]


@dataclass
class ReferenceCache:
    """Per-seed inputs, float64 references and baseline errors, reused across a session's candidates.

    None of them changes between candidates. Inputs are kept on the device because a
    problem's ``get_inputs`` builds them on the CPU (seconds for gigabyte tensors);
    each candidate runs on a fresh copy, so one that writes to its inputs cannot
    change what the next one sees. Only up to ``max_bytes`` in total are kept.
    """

    max_bytes: int = 8 << 30
    entries: dict[int, tuple[list[torch.Tensor], list[float], list[float], list[float]]] = field(default_factory=dict)
    inputs: dict[int, list[Any]] = field(default_factory=dict)
    bytes: int = 0

    def keep(self, size: int) -> bool:
        """Reserve ``size`` bytes if they fit."""
        if self.bytes + size > self.max_bytes:
            return False
        self.bytes += size
        return True


def _tensor_bytes(values: Sequence[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _fresh(values: Sequence[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def seed_inputs(problem: Problem, seed: int, device: torch.device, cache: ReferenceCache | None) -> list[Any]:
    """A fresh copy of the problem's inputs for ``seed``, built once per session when the cache allows."""
    if cache is not None and seed in cache.inputs:
        return _fresh(cache.inputs[seed])
    inputs = problem.make_inputs(seed, device)
    if cache is not None and cache.keep(_tensor_bytes(inputs)):
        cache.inputs[seed] = _fresh(inputs)
    return inputs


def _reference(
    problem: Problem,
    model: torch.nn.Module,
    run_baseline: Callable[[Sequence[Any]], Any],
    device: torch.device,
    seed: int,
    inputs: Sequence[Any],
    cache: ReferenceCache | None,
) -> tuple[list[torch.Tensor], list[float], list[float], list[float]]:
    if cache is not None and seed in cache.entries:
        return cache.entries[seed]
    model64 = copy.deepcopy(model).double()
    with torch.no_grad():  # one pass at a time: the float64 inputs are gone before the baseline runs
        refs = [r.detach() for r in outputs_as_list(model64(*double_copy(inputs)), problem.path)]
        del model64
        base = [o.detach().clone() for o in outputs_as_list(run_baseline(_fresh(inputs)), problem.path)]
    entry = (
        refs,
        [relative_error(b, r) for b, r in zip(base, refs)],
        # an all-zero output as a broadcast view: no float64 tensor of the output's size
        [relative_error(torch.zeros((), dtype=r.dtype, device=r.device).expand(r.shape), r) for r in refs],
        [output_stats(r) for r in refs],
    )
    del base
    if cache is not None and cache.keep(_tensor_bytes(refs)):
        cache.entries[seed] = entry
    return entry


def output_labels(count: int, grad_names: Sequence[str]) -> list[str]:
    """A name per output for the gate's reasons: a training step's last outputs are its gradients."""
    plain = count - len(grad_names) if 0 < len(grad_names) <= count else count
    return [f"output {i}" for i in range(plain)] + [f"grad of {n}" for n in grad_names[: count - plain]]


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
    grads = list(getattr(model, "grad_names", []))  # a training step returns its gradients last
    for seed in seeds:
        inputs = seed_inputs(problem, seed, device, cache)
        refs, base_errors, zero_errors, stats = _reference(problem, model, run_baseline, device, seed, inputs, cache)
        with torch.no_grad():
            cand = [o.detach().clone() for o in outputs_as_list(run_candidate(inputs), problem.path)]
        if len(cand) != len(refs):
            return Verdict(
                "model", False, f"seed {seed}: the re-stitched model returned {len(cand)} outputs, expected {len(refs)}"
            )
        results.append(
            SeedResult(
                seed=seed,
                candidate_errors=[relative_error(c, r) for c, r in zip(cand, refs)],
                baseline_errors=base_errors,
                zero_errors=zero_errors,
                ref_std_over_mean_abs=stats,
                labels=output_labels(len(refs), grads),
            )
        )
        del refs, cand, inputs
    return judge_model(results, policy)
