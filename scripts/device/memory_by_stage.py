"""GPU memory the judge holds at each stage of one evaluation, as a multiple of the problem's own bytes
(a device diagnostic, not a test):

    python3 scripts/device/memory_by_stage.py [PROBLEM] [--size k=v ...]

Runs the verbatim original through the four gates with ``kernelopt verify``'s default settings in
this process and prints, at every stage the session announces, what torch has allocated here (now
and at peak) and what each GPU process holds (nvidia-smi), so a gate that copies the problem too
often shows as a jump.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import torch

GB = 1024**3


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem", nargs="?", default="examples/problems/level1/10_row_l2_normalize.py")
    parser.add_argument("--size", action="append", default=["batch_size=4096"])
    args = parser.parse_args(argv)
    # The judge runs in this process; a root process cannot lend CUDA memory to a worker of another user.
    os.environ.setdefault("KERNELOPT_WORKER_USER", "root")
    from kernelopt.evaluate import session as S
    from kernelopt.evaluate.one_candidate import EvaluationRequest

    sizes = {k: int(v) for k, v in (s.split("=", 1) for s in args.size)}
    unit = [1.0]

    def report(name: str) -> None:
        torch.cuda.synchronize()
        now, peak = torch.cuda.memory_allocated() / GB, torch.cuda.max_memory_allocated() / GB
        smi = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.replace("\n", "; ")
        print(f"{name:14s} judge now {now:7.2f} GB ({now / unit[0]:5.1f}x)  peak {peak:7.2f} GB ({peak / unit[0]:5.1f}x)  | {smi}", flush=True)

    real_stage = S.stage
    S.stage = lambda name: (real_stage(name), report(name))[0]
    session = S.EvaluationSession(S.ProblemSpec(os.path.abspath(args.problem), sizes), compile_workers=0)
    unit[0] = sum(t.untyped_storage().nbytes() for t in session.inputs if isinstance(t, torch.Tensor)) / GB
    print(f"problem inputs {unit[0]:.2f} GB (the unit below)")
    report("after capture")
    launches = [launch for launch in session.artifact.launches if launch.kind == "triton"]
    name = max(launches, key=lambda launch: sum(a.itemsize for a in launch.args)).name
    _, _, kernel = session.kernel(name)
    session.snapshots(name)
    report("snapshots")
    req = EvaluationRequest(args.problem, name, kernel.source)
    settings = S.GateSettings(req.kernel_seeds, req.model_seeds, req.trials, req.margin, req.max_error_ratio)
    result = session.evaluate(name, kernel.source, settings)
    report("done")
    print("verdicts:", "; ".join(f"{v['gate']} {'passed' if v['passed'] else 'failed: ' + v['reason'][:80]}" for v in result["verdicts"]))
    session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
