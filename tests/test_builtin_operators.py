"""The LLM-free operators on a real looped reduction: what they propose, and where they start."""

from __future__ import annotations

import ast
import random
import re

from conftest import FIXTURES

from kernelopt.capture.output_code import triton_kernel_def
from kernelopt.search.builtin_operators import (
    EvictionPolicyOperator,
    LaunchConfigOperator,
    current_eviction,
    expansion_point,
    set_eviction,
)
from kernelopt.search.candidate import Candidate, EvaluationResult
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext

SOURCE = (FIXTURES / "candidates" / "original_reduction.py").read_text()
NAME = "triton_red_fused_add_div_linalg_vector_norm_0"
KERNEL = triton_kernel_def(NAME, SOURCE)
HEURISTIC = {"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16, "num_stages": 1}
TUNED = {"XBLOCK": 2, "R0_BLOCK": 4096, "num_warps": 32, "num_stages": 1}


def node(id_: int, candidate: Candidate, parent: int | None = None, result: EvaluationResult | None = None) -> Node:
    status = "evaluated" if result is not None or parent is None else "pending"
    return Node(id_, 1, NAME, parent, candidate.operator, candidate.key(), candidate, 1, status,
                result.fitness if result else None, result.failed_gate if result else None, result.reason if result else None, result)


ROOT = node(1, Candidate(NAME, "root", source=SOURCE, config=HEURISTIC), result=EvaluationResult(True, 1.0, None, "baseline"))


def context(nodes: list[Node], tuned: dict | None = TUNED) -> SearchContext:
    return SearchContext(NAME, KERNEL, SOURCE, HEURISTIC, nodes, random.Random(0), {"inductor_tuned_config": tuned})


def pinned(source: str) -> dict:
    m = re.search(r"fixed_config\(config=(\{.*?\})", source)
    return ast.literal_eval(m.group(1)) if m else {}


def test_eviction_hints_are_read_and_rewritten_per_load() -> None:
    assert current_eviction(SOURCE) == ("evict_last", "evict_first")  # Inductor's rule for a two-pass reduction
    swapped = set_eviction(SOURCE, (None, "evict_last"))
    assert current_eviction(swapped) == (None, "evict_last")
    assert swapped.count("tl.load(") == SOURCE.count("tl.load(")
    back = set_eviction(swapped, ("evict_last", "evict_first"))
    assert current_eviction(back) == current_eviction(SOURCE)
    strip = re.compile(r",\s*eviction_policy='[a-z_]+'")
    assert strip.sub("", back) == strip.sub("", swapped) == strip.sub("", SOURCE)  # nothing but the hints changed


def test_the_root_expands_from_inductors_tuned_config() -> None:
    ctx = context([ROOT])
    source, config = expansion_point(ROOT, ctx)
    assert config == TUNED and pinned(source) == TUNED
    launch = LaunchConfigOperator().propose(ROOT, ctx, 4)
    assert launch[0].config == TUNED
    assert launch[0].note == "Inductor's coordinate-descent choice (XBLOCK 1->2, R0_BLOCK 2048->4096, num_warps 16->32)"
    # the neighbours are one step from the tuned config, not from the heuristic one
    for cand in launch[1:]:
        steps = sum(cand.config[k] != TUNED[k] for k in TUNED)
        assert steps == 1 and cand.note.endswith("(from Inductor's tuned config)"), cand.config
    eviction = EvictionPolicyOperator().propose(ROOT, ctx, 4)
    assert len(eviction) == 4
    for cand in eviction:
        assert cand.config == TUNED and pinned(cand.source) == TUNED
        assert current_eviction(cand.source) != current_eviction(SOURCE)
        assert cand.note.endswith("(on Inductor's tuned config)")
    assert len({c.key() for c in launch + eviction}) == 8


def test_without_a_tuned_config_or_after_it_failed_the_root_is_expanded_as_it_is() -> None:
    untuned = EvictionPolicyOperator().propose(ROOT, context([ROOT], tuned=None), 2)
    assert all(c.config == HEURISTIC and "fixed_config" not in c.source for c in untuned)
    tuned_node = node(2, Candidate(NAME, "launch-config", source=set_eviction(SOURCE, ("evict_last", "evict_first")), config=TUNED),
                      parent=1, result=EvaluationResult.failure("correctness", "wrong"))
    ctx = context([ROOT, tuned_node])
    source, config = expansion_point(ROOT, ctx)
    assert source == SOURCE and config == HEURISTIC
    assert all(c.config == HEURISTIC and not c.note.endswith(")") for c in EvictionPolicyOperator().propose(ROOT, ctx, 2))


def test_a_non_root_parent_is_expanded_as_it_is() -> None:
    child = node(2, Candidate(NAME, "launch-config", source=SOURCE + "\n# child", config={**HEURISTIC, "num_warps": 8}), parent=1,
                 result=EvaluationResult(True, 1.1, None, "faster"))
    source, config = expansion_point(child, context([ROOT, child]))
    assert source == child.candidate.source and config == child.candidate.config
