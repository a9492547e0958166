"""Where one candidate's evaluation spends its time, function by function (GPU).

    PYTHONPATH=src python3 scripts/profile_gates.py PROBLEM [--kernel NAME] [--size batch_size=2048]
        [--final] [--top 30] [--out profile.txt]

One evaluation session (as ``optimize`` builds it); the kernel's own source goes
through the four gates as a candidate (it passes gates 1-3 and fails the
performance gate's margin, so every gate runs), once to warm the session (the
float64 references are cached per session) and once under cProfile. Prints the
stage timings of both and the functions with the most cumulative time of the
second: on a GPU, time a function spends waiting for the device shows up in the
call that synchronizes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import time
from dataclasses import replace

from kernelopt.evaluate.session import EvaluationSession, ProblemSpec, final_settings, search_settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("problem")
    ap.add_argument("--kernel")
    ap.add_argument("--size", action="append", default=[], help="NAME=INT override of the problem's sizes")
    ap.add_argument("--final", action="store_true", help="the winners' full re-check settings instead of the search's")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out")
    args = ap.parse_args()
    # The judge runs in this process, and a root process cannot lend CUDA memory to a worker of another
    # user (kernelopt.workers.identity.check_cuda_lending); the candidates here are our own code.
    os.environ.setdefault("KERNELOPT_WORKER_USER", "root")
    sizes = {k: int(v) for k, v in (s.split("=", 1) for s in args.size)}
    started = time.monotonic()
    session = EvaluationSession(ProblemSpec(os.path.abspath(args.problem), sizes), compile_workers=0)
    launches = [ln for ln in session.artifact.launches if ln.kind == "triton"]
    name = args.kernel or max(launches, key=lambda ln: sum(a.itemsize for a in ln.args)).name
    _, _, kernel = session.kernel(name)
    session.snapshots(name)
    setup_s = time.monotonic() - started
    settings = search_settings()
    settings = final_settings(settings) if args.final else replace(settings, screen_trials=0)
    lines = [f"{session.problem.name}: kernel {name}; session set up in {setup_s:.1f} s; settings {settings.to_dict()}"]
    first = session.evaluate(name, kernel.source, settings)
    lines.append(f"first evaluation (warms the session): {json.dumps(first['timings'])}")
    profiler = cProfile.Profile()
    profiler.enable()
    second = session.evaluate(name, kernel.source, settings)
    profiler.disable()
    lines.append(f"second evaluation: {json.dumps(second['timings'])}")
    lines.append("verdicts: " + "; ".join(f"{v['gate']} {'passed' if v['passed'] else 'failed'}" for v in second["verdicts"]))
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("cumulative").print_stats(args.top)
    lines.append(stream.getvalue())
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    session.close()


if __name__ == "__main__":
    main()
