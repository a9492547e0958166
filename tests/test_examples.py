"""The example problem suite under ``examples/problems`` loads, runs and is sized right.

Every problem runs on the CPU at its ``SMALL_SIZES``; at full size we only count
bytes, building inputs and parameters as meta tensors so nothing is allocated.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelopt.problem import Problem, load_problem, problem_files

SUITE = Path(__file__).resolve().parents[1] / "examples" / "problems"
FILES = problem_files(SUITE)
IDS = [str(p.relative_to(SUITE).with_suffix("")) for p in FILES]

MIN_BYTES = 100 * 2**20  # several times a 50-60 MB L2
MAX_BYTES = 16 * 2**30  # leaves room for outputs and intermediates on one GPU


def _tensor_bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def full_size_bytes(problem: Problem) -> int:
    """Bytes of inputs plus parameters and buffers at full size, without allocating them."""
    inputs = problem.raw_inputs(0, "meta")
    with torch.device("meta"):
        model = problem.model_class(*problem.init_inputs(0))
    return _tensor_bytes(inputs) + _tensor_bytes(list(model.parameters()) + list(model.buffers()))


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_problem_runs_small_and_is_not_degenerate(path: Path) -> None:
    problem = load_problem(path)
    assert isinstance(problem.module.SMALL_SIZES, dict) and problem.module.SMALL_SIZES
    outputs = problem.small().check("cpu")
    assert outputs
    for out in outputs:
        assert out.numel() > 1, f"{path.name}: output of shape {tuple(out.shape)} is too small to check"
        values = out.double()
        assert torch.isfinite(values).all(), f"{path.name}: non-finite output"
        spread = values.std().item()
        scale = values.abs().mean().item()
        assert spread > 1e-3 * max(scale, 1e-12), f"{path.name}: output is near-constant (std {spread:.3g})"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_full_size_is_several_times_l2(path: Path) -> None:
    nbytes = full_size_bytes(load_problem(path))
    assert MIN_BYTES <= nbytes <= MAX_BYTES, f"{path.name}: inputs + parameters are {nbytes / 2**20:.0f} MiB"


def test_suite_covers_every_level() -> None:
    levels = [p.relative_to(SUITE).parts[0] for p in FILES]
    assert len(FILES) >= 24
    assert {"level1", "level2", "level3"} <= set(levels)
    assert levels.count("level3") >= 2


def test_inputs_follow_the_seed() -> None:
    problem = load_problem(SUITE / "level2" / "10_bmm_scale_softmax.py").small()
    first = problem.make_inputs(seed=3)
    again = load_problem(problem.path).small().make_inputs(seed=3)
    other = problem.make_inputs(seed=4)
    assert len(first) == len(again) == len(other) == 2
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not any(torch.equal(a, b) for a, b in zip(first, other))


def test_small_sizes_shrink_the_constants() -> None:
    problem = load_problem(SUITE / "level1" / "10_row_l2_normalize.py")
    small = problem.small()
    assert problem.sizes["dim"] == 65535
    assert small.sizes["dim"] == problem.module.SMALL_SIZES["dim"]
    (x,) = small.raw_inputs(0)
    assert tuple(x.shape) == (small.sizes["batch_size"], small.sizes["dim"])
