"""Probe: where the graph stage's judging spreads kernelopt's cluster softmax (0.275-0.485 ms for a kernel that
reads ±1 % in one process, ``benchmarks/h100-2026-12-06-spread-probe``).

    PYTHONPATH=src KERNELOPT_WORKER_USER=root python3 scripts/device/judge_spread_probe.py [--problem level1/26_token_log_probs]
        [--options '{"kernelopt.cluster_softmax_bulk": true}']

(On an H200 the effect ran the other way for Triton forwards, a worker's second call in a row slower:
``--problem level1/13_log_softmax_wide --options '{"kernelopt.row_split": 8192}'`` reads that graph
candidate the same ways, ``benchmarks/h200-2026-12-03-split-order``.)

An :class:`~kernelopt.evaluate.session.EvaluationSession` on one example problem, as the graph stage makes it
(the judge here; the reference process and the candidate's runner its workers), then, one JSON line each:

- ``aa_nothing_swapped``: the reference process's compiled model against the runner's, nothing swapped in
  (:func:`~kernelopt.measure.split_timer.compare_split`, as the performance gate times a graph candidate):
  the two processes' own difference;
- ``graph_gate``: the graph candidate of ``--options`` (default ``kernelopt.cluster_softmax_bulk``) through every gate
  (``evaluate_graph``), its performance gate's comparison;
- with that candidate stitched into the runner again: ``installed`` (the gate's timing once more),
  ``runner_alone`` and ``reference_alone`` (each process's readings back to back, no call of the other
  between them) and ``runner_wall`` and ``reference_wall`` (the judge's clock around each of those calls).

Each line gives both sides' min, quartiles and max in ms, the median ratio and its IQR, and the runner's
samples in the order taken.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.evaluate.session import EvaluationSession, ProblemSpec
from kernelopt.measure.split_timer import compare_split

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "problems"
OPTIONS = '{"kernelopt.cluster_softmax_bulk": true}'


def summary(values: Any) -> list[float]:
    s = sorted(values)
    return [round(s[int(q * (len(s) - 1))], 4) for q in (0.0, 0.25, 0.5, 0.75, 1.0)]


def comparison_line(condition: str, comparison: dict[str, Any]) -> None:
    base = comparison["baseline"]["samples_ms"]
    cand = comparison["candidate"]["samples_ms"]
    ratios = sorted(comparison["ratios"])
    n = len(ratios)
    print(json.dumps({
        "condition": condition,
        "baseline_ms": summary(base),
        "candidate_ms": summary(cand),
        "speedup": round(ratios[n // 2], 3),
        "iqr": [round(ratios[n // 4], 3), round(ratios[(3 * n) // 4], 3)],
        "candidate_samples": [round(v, 3) for v in cand],
    }), flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="level1/26_token_log_probs")
    parser.add_argument("--options", default=OPTIONS, help="the graph candidate's compile options, as JSON")
    parser.add_argument("--trials", type=int, default=50)
    args = parser.parse_args()
    options = json.loads(args.options)
    started = time.monotonic()
    session = EvaluationSession(ProblemSpec(problem_path=str(EXAMPLES / f"{args.problem}.py")))
    session.warm_for_models()
    print(json.dumps({"problem": args.problem, "warmed_s": round(time.monotonic() - started, 1)}), flush=True)
    reference, runner = session.reference, session.runner

    def split() -> dict[str, Any]:
        return compare_split(
            reference.timed_model(), runner.timed_model(), trials=args.trials, baseline_remote=True
        ).to_dict()

    comparison_line("aa_nothing_swapped", split())
    result = session.evaluate_graph(0, dict(options), GateSettings(trials=args.trials))
    print(json.dumps({"condition": "graph_gate_verdict", "passed": result["passed"],
                      "reason": str(result.get("reason", ""))[:300]}), flush=True)  # fmt: skip
    if "kernel_comparison" in result:
        comparison_line("graph_gate", result["kernel_comparison"])
    made = session.graph_variants(dict(options))[0]
    if isinstance(made, str):
        print(json.dumps({"condition": "installed", "error": made}), flush=True)
        return
    key, error, _ = runner.build_graph(made.to_dict())
    if error is not None:
        print(json.dumps({"condition": "installed", "error": error}), flush=True)
        return
    runner.set_swaps([], [key])
    comparison_line("installed", split())
    for side, process in (("runner", runner), ("reference", reference)):
        timed = process.timed_model()
        readings, walls = [], []
        for _ in range(args.trials):
            began = time.perf_counter()
            readings.append(timed())
            walls.append((time.perf_counter() - began) * 1000.0)
        samples = [round(v, 3) for v in readings]
        print(json.dumps({"condition": f"{side}_alone", "ms": summary(readings), "samples": samples}))
        print(json.dumps({"condition": f"{side}_wall", "ms": summary(walls)}), flush=True)
    runner.set_swaps([], [])
    comparison_line("aa_after", split())
    print(json.dumps({"spec": asdict(session.spec), "total_s": round(time.monotonic() - started, 1)}), flush=True)
    session.close()


if __name__ == "__main__":
    main()
