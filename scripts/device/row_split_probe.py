"""Probe: a row split across several cooperating programs, each holding its part of the row in registers.

Inductor writes a wide-row normalization (softmax, log-softmax, group norm, row L2) as a looped
reduction that reads the row twice, because one program's registers cannot hold it. Under its
cooperative reductions, kept persistent, RSPLIT programs share a row: each loads its part once, the
programs exchange partial results through a workspace and a barrier, and the output comes from
registers. This probe compiles a problem that way (``kernelopt.capture.compat.row_split_compile``:
about CHUNK elements a program, the grid launched as an ordinary one, without the tickets
``kernelopt.capture.row_split`` adds) and times it against the default compile.

    python3 scripts/device/row_split_probe.py PROBLEM.py CHUNK [CHUNK ...]

One JSON line per chunk: both compiles timed interleaved in this process (``kernelopt.measure.compare``,
L2 flushed, 30 rounds: medians and quartiles in ms, the speedup), the medians of each side by the side
that ran just before it (``after``: a gate's AB / BA rounds run each side after itself half the time and
after the other half the time, and a user's loop runs it after itself), the split's largest absolute
error against eager, and its output code written to $OUT. Without a GPU it is a dry run (Inductor writes
C++ there, and nothing is split; ``PROBE_SIZES`` takes a JSON object of the problem's sizes for it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from kernelopt.capture import capture, compat
from kernelopt.capture.artifact import separate_code
from kernelopt.capture.row_split import WIDE
from kernelopt.measure import compare
from kernelopt.measure.split_timer import time_call
from kernelopt.problem import load_problem, outputs_as_list

# Runs of one side, then alternation: every (side, side before) pair many times, in one process.
ORDER = "DDDDSSSSDSDSDSDS" * 6


def after(calls: dict[str, object], device: str) -> dict[str, list[float]]:
    """Median and quartiles (ms) of each side's calls, keyed ``side|side before``."""
    seen: dict[str, list[float]] = {}
    previous = ""
    for side in ORDER:
        ms = time_call(calls[side], device=device, include_host=True)  # type: ignore[arg-type]
        if previous:
            seen.setdefault(f"{side}|{previous}", []).append(ms)
        previous = side
    out = {}
    for key, values in sorted(seen.items()):
        values.sort()
        n = len(values)
        out[key] = [round(values[n // 2], 4), round(values[n // 4], 4), round(values[(3 * n) // 4], 4), n]
    return out


def main() -> None:
    path, chunks = Path(sys.argv[1]), [int(c) for c in sys.argv[2:]]
    out = Path(os.environ.get("OUT", "/tmp"))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # PROBE_SIZES='{"batch_size": 8, "vocab": 1024}': a small dry run on the CPU
    problem = load_problem(path, json.loads(os.environ.get("PROBE_SIZES", "null")))
    model, inputs = problem.build_model(0, device), problem.make_inputs(0, device)
    with torch.no_grad():
        expected = outputs_as_list(model(*inputs))
    default = capture(model, inputs)
    for chunk in chunks:
        row = {"problem": path.stem, "chunk": chunk}
        try:
            with compat.row_split_compile(chunk, WIDE):
                split = capture(separate_code(model, f"row_split_{chunk}"), inputs, reset=False)
        except Exception as exc:
            print(json.dumps({**row, "error": f"{type(exc).__name__}: {exc}"[:400]}), flush=True)
            continue
        for graph in split.graphs:
            (out / f"{path.stem}_chunk{chunk}_graph{graph.index}.py").write_text(graph.source_code)
        got = outputs_as_list(split(*inputs))
        row["max_abs_err"] = max((g.float() - e.float()).abs().max().item() for g, e in zip(got, expected))
        timed = compare(
            lambda: default(*inputs), lambda s=split: s(*inputs), device=device, trials=30, include_host=True
        )
        for side, timing in (("default", timed.baseline), ("split", timed.candidate)):
            row[f"{side}_ms"] = [round(timing.median_ms, 4), round(timing.q1_ms, 4), round(timing.q3_ms, 4)]
        row["speedup"] = [round(timed.speedup, 3), round(timed.speedup_q1, 3), round(timed.speedup_q3, 3)]
        row["after"] = after({"D": lambda: default(*inputs), "S": lambda s=split: s(*inputs)}, device)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
