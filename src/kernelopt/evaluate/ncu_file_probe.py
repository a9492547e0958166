"""The program Nsight Compute profiles for a kernel file: load it, warm up, run ``launch`` once in an NVTX range.

    python -m kernelopt.evaluate.ncu_file_probe SPEC_JSON

``SPEC_JSON`` is a :class:`~kernelopt.evaluate.file_session.FileSpec` as JSON. The kernel-file
counterpart of :mod:`kernelopt.evaluate.ncu_probe`: the warm-up calls take the JIT compile and
any ``@triton.autotune`` benchmarking, so only the one call inside the ``kernelopt_profile``
range is profiled. It runs the user's file, so it is started only under ncu inside an evaluation
worker (:func:`kernelopt.evaluate.file_targets.file_ncu_metrics`), never in kernelopt's own process.
On the CPU (the tests: Triton's interpreter) there is no NVTX; the calls run without the range.
"""

from __future__ import annotations

import json
import sys

import torch

from kernelopt.measure.ncu import PROFILE_RANGE
from kernelopt.problem.kernel_file import load_kernel_file
from kernelopt.problem.layouts import clone_args

WARMUP_CALLS = 2


def main(argv: list[str]) -> None:
    spec = json.loads(argv[1])
    file = load_kernel_file(spec["path"], spec.get("overrides") or None)
    device = str(spec.get("device") or "cuda")
    inputs = file.make_inputs(int(spec.get("seed", 0)), device)
    cuda = device.startswith("cuda")
    for _ in range(WARMUP_CALLS):
        file.run_entry(clone_args(inputs))
    run = clone_args(inputs)  # a file that writes its inputs in place sees the same values each call
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(PROFILE_RANGE)
    file.run_entry(run)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main(sys.argv)
