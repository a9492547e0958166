"""The program Nsight Compute profiles: capture a problem, warm up, run one forward in an NVTX range.

    python -m kernelopt.evaluate.ncu_probe SPEC_JSON

``SPEC_JSON`` is a :class:`~kernelopt.evaluate.session.ProblemSpec` as JSON. Only the
forward inside the ``kernelopt_profile`` range is profiled, so first-call
autotuning launches of the same kernel are not.
"""

from __future__ import annotations

import json
import sys

import torch

from kernelopt.capture import capture
from kernelopt.measure.ncu import PROFILE_RANGE
from kernelopt.problem import load_problem


def main(argv: list[str]) -> None:
    spec = json.loads(argv[1])
    problem = load_problem(spec["problem_path"], overrides=spec.get("overrides") or None, train=bool(spec.get("train")))
    model = problem.build_model(spec.get("seed", 0), "cuda")
    inputs = problem.make_inputs(spec.get("seed", 0), "cuda")
    artifact = capture(model, inputs, spec.get("options") or {})
    for _ in range(2):
        artifact(*inputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(PROFILE_RANGE)
    artifact(*inputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main(sys.argv)
