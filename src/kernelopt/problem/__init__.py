"""The ``problem`` layer: what the user gives us, and inputs for it."""

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
    "Problem",
    "SuiteEntry",
    "apply_distribution",
    "load_problem",
    "load_suite",
    "outputs_as_list",
    "problem_files",
]
