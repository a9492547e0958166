"""The ``problem`` layer: what the user gives us, and inputs for it."""

from __future__ import annotations

from kernelopt.problem.edges import EDGE_DISTRIBUTIONS, check_edge_names, edge_like_layout
from kernelopt.problem.inputs import DISTRIBUTIONS, apply_distribution
from kernelopt.problem.loader import (
    Problem,
    SuiteEntry,
    load_problem,
    load_suite,
    outputs_as_list,
    problem_files,
)

__all__ = [
    "DISTRIBUTIONS",
    "EDGE_DISTRIBUTIONS",
    "Problem",
    "SuiteEntry",
    "apply_distribution",
    "check_edge_names",
    "edge_like_layout",
    "load_problem",
    "load_suite",
    "outputs_as_list",
    "problem_files",
]
