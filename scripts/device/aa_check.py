"""A/A check of gate 4 on the device: the original kernel against itself, in one process and across two.

A judge whose verbatim candidate (the original's own source) measures faster than
the original is biased; this prints where the bias comes from (the config each
build picked, in-process versus cross-process readings).
    python3 scripts/device/aa_check.py [PROBLEM] [--size k=v ...] [--trials N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch

from kernelopt.capture import capture
from kernelopt.capture.snapshot import launch, snapshot_launches
from kernelopt.capture.swap import build_kernel, find_kernel
from kernelopt.evaluate.remote import ReferenceRunner, RemoteRunner
from kernelopt.measure.timer import compare
from kernelopt.problem import load_problem
from kernelopt.problem.layouts import clone_args
from kernelopt.verify.perf_runner import time_kernels


def configs(kernel: object) -> list[str]:
    return [str(getattr(item, "config", item)) for item in getattr(kernel, "launchers", [])]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem", nargs="?", default="examples/problems/level1/15_rmsnorm.py")
    parser.add_argument("--size", action="append", default=["batch_size=8", "seq_len=512", "hidden=1024"])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    # The judge runs in this process, and a root process cannot lend CUDA memory to a worker of another
    # user (kernelopt.workers.identity.check_cuda_lending); the candidates here are our own code.
    os.environ.setdefault("KERNELOPT_WORKER_USER", "root")
    sizes = {k: int(v) for k, v in (item.split("=") for item in args.size)}
    problem = load_problem(args.problem, overrides=sizes)
    model, inputs = problem.build_model(0, "cuda"), problem.make_inputs(0, "cuda")
    artifact = capture(model, inputs)
    kernel = next(k for _, k in artifact.kernels() if k.language == "triton")
    address, var, _ = find_kernel(artifact, kernel.name)
    original = vars(artifact.graphs[address.graph].module)[var]
    snap = snapshot_launches(artifact, inputs, address.graph, var)[0].args
    print(
        "kernel",
        kernel.name,
        "original configs",
        configs(original),
        "of",
        len(getattr(original, "configs", None) or []),
    )
    fresh = build_kernel(kernel.source, kernel.name)
    launch(fresh, clone_args(snap))
    torch.cuda.synchronize()
    print("fresh build in the judge picks", configs(fresh))

    def report(label: str, cmp) -> None:
        print(
            f"{label}: baseline {cmp.baseline.median_ms * 1e3:.2f} us  candidate {cmp.candidate.median_ms * 1e3:.2f} us"
            f"  speedup {cmp.speedup:.4f}"
        )

    a, b = clone_args(snap), clone_args(snap)
    for r in range(args.rounds):
        report(
            f"in-process, two buffers   #{r}",
            compare(lambda: launch(original, a), lambda: launch(original, b), trials=args.trials),
        )
        report(
            f"in-process, one buffer    #{r}",
            compare(lambda: launch(original, a), lambda: launch(original, a), trials=args.trials),
        )
    runner = RemoteRunner(device="cuda")
    runner.register_original(kernel.name, kernel.source, clone_args(snap))
    print("runner calibration overhead ms", [round(x, 4) for x in runner.calibration.overhead_ms])
    key, error, _ = runner.build(kernel.name, kernel.source)
    assert error is None, error
    reference = ReferenceRunner(device="cuda")
    reference.register_original(kernel.name, kernel.source, clone_args(snap))
    for r in range(args.rounds):  # shared rotating sets; the original timed here, then in a clean worker
        for label, ref in (("judge's events", None), ("reference worker", reference)):
            split, _, _ = time_kernels(kernel, original, runner, key, snap, trials=args.trials, reference=ref)
            report(f"gate 4 timing, verbatim, original in the {label} #{r}", split.comparison)
            print("   wall-reported median ms", round(statistics.median(split.unexplained_ms()), 4))
    reference.close()
    runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
