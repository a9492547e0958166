"""Evaluations per GPU-minute of launch-config candidates, with and without the compile pool (GPU).

    PYTHONPATH=src python3 scripts/throughput.py PROBLEM [--kernel NAME] [--candidates 24]
        [--workers 0,8] [--size batch_size=2048] [--json out.json]

One evaluation session (the model captured once, as ``optimize`` does); for each
compile-pool size in --workers, a disjoint set of --candidates launch configs
nearest Inductor's choice goes through the search's gates (a timing screen,
then gates 2-4 with one seed each) as one batch. Triton's
cache starts empty (a fresh TRITON_CACHE_DIR) so every candidate really
compiles. Prints wall time, evaluations per minute and the median seconds of
each stage; the GPU is held for the whole batch, so the batch's wall time is
the GPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kernelopt-throughput-triton-")

from kernelopt.capture.kernel_source import pin_launch_config
from kernelopt.evaluate.session import EvaluationSession, ProblemSpec, search_settings
from kernelopt.search.launch_configs import config_distance, launch_config_space


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("problem")
    ap.add_argument("--kernel")
    ap.add_argument("--candidates", type=int, default=24)
    ap.add_argument("--workers", default="0,8")
    ap.add_argument("--size", action="append", default=[], help="NAME=INT override of the problem's sizes")
    ap.add_argument("--json")
    args = ap.parse_args()
    # The judge runs in this process, and a root process cannot lend CUDA memory to a worker of another
    # user (kernelopt.workers.identity.check_cuda_lending); the candidates here are our own code.
    os.environ.setdefault("KERNELOPT_WORKER_USER", "root")
    sizes = {k: int(v) for k, v in (s.split("=", 1) for s in args.size)}
    counts = [int(w) for w in args.workers.split(",")]
    session = EvaluationSession(ProblemSpec(os.path.abspath(args.problem), sizes), compile_workers=0)
    launches = [ln for ln in session.artifact.launches if ln.kind == "triton"]
    name = args.kernel or max(launches, key=lambda ln: sum(a.itemsize for a in ln.args)).name
    _, _, kernel = session.kernel(name)
    chosen = next(ln.config for ln in launches if ln.name == name) or {}
    space = sorted((c for c in launch_config_space(kernel, include_stages=True) if c != chosen),
                   key=lambda c: (config_distance(c, chosen), json.dumps(c, sort_keys=True)))
    session.snapshots(name)  # once per session in optimize too: not part of any batch
    settings = search_settings()  # the gates as optimize's search runs them (screen first)
    print(f"{session.problem.name}: kernel {name}, Inductor chose {chosen}; {len(space)} configs in the space")
    rows = []
    for i, workers in enumerate(counts):
        configs = space[i * args.candidates : (i + 1) * args.candidates]
        sources = [pin_launch_config(kernel.source, name, c) for c in configs]
        session.pool.close()
        session.pool = type(session.pool)(workers)
        session.pool.start()
        time.sleep(0 if workers == 0 else 15)  # pool processes import torch before the clock starts, as in a run
        started = time.monotonic()
        results = session.evaluate_batch(name, sources, settings)
        wall = time.monotonic() - started
        stages = sorted({k for r in results for k in r["timings"]})
        medians = {k: statistics.median(r["timings"].get(k, 0.0) for r in results) for k in stages}
        row = {"workers": workers, "candidates": len(results), "wall_s": wall,
               "evaluations_per_gpu_minute": 60 * len(results) / wall,
               "passed": sum(r["passed"] for r in results), "median_stage_s": medians,
               "screened_out": sum("screened out" in (r["verdicts"][-1]["reason"] if r["verdicts"] else "") for r in results),
               "warm_problems": sorted({r["warm_problem"] for r in results if "warm_problem" in r}),
               "failures": [r["verdicts"][-1]["reason"][:160] + " " + str(r["verdicts"][-1].get("details", {}).get("capture_difference"))[:700] for r in results
                            if r["verdicts"] and not r["passed"] and "screened out" not in r["verdicts"][-1]["reason"]]}
        rows.append(row)
        print(f"compile workers {workers}: {len(results)} candidates in {wall:.1f} s = "
              f"{row['evaluations_per_gpu_minute']:.0f} evaluations per GPU-minute, {row['passed']} passed, "
              f"{row['screened_out']} screened out; "
              "median s " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items()))
        for failure in row["failures"][:4]:
            print("  failed:", failure)
        if row["warm_problems"]:
            print("  warm-up problems:", row["warm_problems"][:3])
    session.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"problem": session.problem.name, "kernel": name, "sizes": sizes, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
