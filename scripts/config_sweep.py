"""Time pinned launch configs of one generated kernel against Inductor's choice (GPU).

    PYTHONPATH=src python3 scripts/config_sweep.py PROBLEM [--kernel NAME] [--out best.py] [--limit N]
        [--mode max-autotune-no-cudagraphs] [--options '{"kernelopt.online_softmax": true}'] [--evictions]

Captures the problem at full size, snapshots the kernel's real arguments, then
for the --limit configs of ``launch_config_space`` nearest Inductor's own choice
(distance in log2 steps per field, as coordinate descent moves): checks
the pinned kernel against the original on the snapshot and times it interleaved
with the original (L2 flushed), all in this one process: the configs are
Inductor's own source, pinned; `kernelopt verify` judges across processes. Prints a table and writes the
fastest correct candidate's source to --out, ready for ``kernelopt verify``. ``--mode`` and
``--options`` compile the problem as that mode (and those options) would; ``--evictions`` also times
every eviction-hint assignment of the kernel's loads on Inductor's own config (what the
eviction-policy operator searches), to see whether a kernel the kernel search never reaches holds any.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time

import torch

from kernelopt.capture import capture, compat
from kernelopt.capture.kernel_source import pin_launch_config
from kernelopt.capture.snapshot import launch, snapshot_launches
from kernelopt.capture.swap import SwapError, build_kernel, find_kernel
from kernelopt.measure import compare
from kernelopt.problem import load_problem
from kernelopt.search.builtin_operators import POLICIES, current_eviction, set_eviction
from kernelopt.search.launch_configs import config_distance, launch_config_space
from kernelopt.verify.subkernel import as_launcher, run_case


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("problem")
    ap.add_argument("--kernel")
    ap.add_argument("--out", default="best_candidate.py")
    ap.add_argument("--limit", type=int, default=24)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--mode", default="default")
    ap.add_argument("--options", default="{}")
    ap.add_argument("--evictions", action="store_true")
    args = ap.parse_args()
    problem = load_problem(args.problem)
    model = problem.build_model(0, "cuda")
    inputs = problem.make_inputs(0, "cuda")
    options = {**compat.mode_options(args.mode), **json.loads(args.options)}
    artifact = capture(model, inputs, options)
    name = args.kernel or max(
        (ln for ln in artifact.launches if ln.kind == "triton"), key=lambda ln: sum(a.itemsize for a in ln.args)
    ).name
    address, var, kernel = find_kernel(artifact, name)
    snap = snapshot_launches(artifact, inputs, address.graph, var)[0].args
    original = vars(artifact.graphs[address.graph].module)[var]
    chosen = next(ln.config for ln in artifact.launches if ln.name == name) or {}
    variants = [("config", c) for c in launch_config_space(kernel, include_stages=True) if c != chosen]
    random.Random(0).shuffle(variants)  # ties in distance: a fixed, arbitrary order
    variants.sort(key=lambda v: config_distance(v[1], chosen))
    variants = variants[: args.limit]
    current = current_eviction(kernel.source)
    if args.evictions and 0 < len(current) <= 6:
        pinned = pin_launch_config(kernel.source, name, chosen) if chosen else kernel.source
        for policies in itertools.product(POLICIES, repeat=len(current)):
            if policies != current:
                variants.append(("eviction", policies))
    print(f"{name} under {options}: Inductor chose {chosen}, loads {current}; timing {len(variants)} variants")
    best = (1.0, None, None)
    t0 = time.time()
    for what, cfg in variants:
        if what == "config":
            source = pin_launch_config(kernel.source, name, cfg)
        else:
            source = set_eviction(pinned, cfg)
        try:
            cand = build_kernel(source, name)
            ok = run_case(kernel, as_launcher(original), as_launcher(cand), "snapshot", snap)
        except (SwapError, RuntimeError) as exc:
            print(f"  {cfg}: does not build/run: {str(exc)[:80]}")
            continue
        if not ok.passed:
            print(f"  {cfg}: WRONG: {ok.reason[:100]}")
            continue
        cmp = compare(lambda: launch(original, snap), lambda: launch(cand, snap), trials=args.trials)  # noqa: B023
        print(f"  {cfg}: {cmp.speedup:.3f}x  ({cmp.baseline.median_ms * 1e3:.1f} -> {cmp.candidate.median_ms * 1e3:.1f} us)")
        if cmp.speedup > best[0]:
            best = (cmp.speedup, cfg, source)
    print(f"swept in {time.time() - t0:.1f} s; best {best[1]} at {best[0]:.3f}x")
    if best[2] is not None:
        with open(args.out, "w") as f:
            f.write(best[2])
        print(f"wrote {args.out}  (kernel {name})")
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
