"""A problem's group norm variants as the graph stage compiles them (``kernelopt.group_rows``, with or
without the row split and ``kernelopt.var_sums``), each kernel's registers and spills read from its
launcher, its speed from the stage's 10-trial interleaved screen, then under other warps. A session's
first screen also pays for warming its processes: read it as a warm-up, not a speed.

    python3 scripts/device/group_norm_probe.py level1/16_groupnorm 8192,8192s,16384s 4,16,32

Items: elements a program (0: the rewrite alone), ``s`` for the statistics as two sums; warps are tried
on the ``s`` items. Since 99e553e every row split's compile writes sums, so ``8192`` and ``8192s`` are one
form; the twenty-sixth session's table (benchmarks/h100-2026-12-06-suite-modes) was read at c957dc4.
Run on the device with KERNELOPT_WORKER_USER=root and the wheels on PYTHONPATH (gpu_check.sh's set-up)."""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path

from kernelopt.capture.graph_swap import build_graph_kernels
from kernelopt.capture.rewrites.group_rows import GROUP_ROWS_OPTION
from kernelopt.capture.rewrites.var_sums import VAR_SUMS_OPTION
from kernelopt.capture.row_split import ROW_SPLIT_OPTION
from kernelopt.evaluate import worker_targets
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.evaluate.graph_candidate import evaluate_graph
from kernelopt.evaluate.session import ProblemSpec

problem, chunks, warps = sys.argv[1], sys.argv[2].split(","), [int(w) for w in sys.argv[3].split(",") if w]
spec = asdict(ProblemSpec(str((Path("examples/problems") / f"{problem}.py").resolve()), {}))
t0 = time.time()
s = worker_targets._session(spec, None)
print("session", round(time.time() - t0, 1), "s; kernels:", list(s.artifact.graphs[0].kernels), flush=True)
settings = GateSettings(model_seeds=(0,), trials=20, screen_trials=10, memcheck=False)
src = s.artifact.graphs[0].source_code


def regs(cand):
    out = []
    try:
        for name, k in build_graph_kernels(cand).items():
            k.precompile()
            out += [(name[-30:], getattr(run, "n_regs", None), getattr(run, "n_spills", None)) for run in k.launchers]
    except Exception as exc:
        out.append(f"regs: {type(exc).__name__}: {exc}"[:200])
    return out


def judge(label, cand):
    t = time.time()
    r = evaluate_graph(s.restitched, src, cand, settings)
    scr = (r.get("screen") or {}).get("comparison", {}).get("speedup")
    perf = (r.get("kernel_comparison") or {}).get("speedup")
    last = r["verdicts"][-1] if r["verdicts"] else {}
    print(
        label,
        "screen",
        scr and round(scr, 3),
        "perf",
        perf and round(perf, 3),
        last.get("gate"),
        last.get("passed"),
        (last.get("reason") or "")[:120],
        round(time.time() - t, 1),
        "s",
        flush=True,
    )


for item in chunks:
    chunk, sums = int(item.rstrip("s")), item.endswith("s")
    opts = {
        GROUP_ROWS_OPTION: True,
        **({VAR_SUMS_OPTION: True} if sums else {}),
        **({ROW_SPLIT_OPTION: chunk} if chunk else {}),
    }
    t = time.time()
    made = s.graph_variants(opts)[0]
    print("variant", opts, round(time.time() - t, 1), "s", flush=True)
    if isinstance(made, str):
        print("  none:", made)
        continue
    for k in made.kernels:
        m = re.search(r"fixed_config\(config=(\{.*?\})", k.source)
        print("  kernel", k.name, m and m.group(1), flush=True)
    print("  regs", regs(made), flush=True)
    judge(f"  {item} as chosen", made)
    if not chunk or not sums:
        continue
    for w in warps:
        cand = dataclasses.replace(
            made,
            kernels=tuple(
                dataclasses.replace(k, source=re.sub(r"'num_warps': \d+", f"'num_warps': {w}", k.source))
                for k in made.kernels
            ),
        )
        print("  regs", w, regs(cand), flush=True)
        judge(f"  {item} warps {w}", cand)
print("total", round(time.time() - t0, 1), "s")
