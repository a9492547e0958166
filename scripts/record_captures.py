"""Record real Inductor captures on a GPU as CPU test fixtures.

Run on a CUDA machine:
    PYTHONPATH=src python3 scripts/record_captures.py OUTDIR examples/problems/level1/12_softmax_wide.py ...
For each problem (at its SMALL_SIZES, so files stay small) it writes
``<stem>.graph<N>.py`` (the wrapper source Inductor generated), ``<stem>.launches.json``
(the recorded launches) and ``<stem>.events.json`` (profiler event records of an
instrumented run, for the attribution arithmetic).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from kernelopt.capture import LaunchSink, capture
from kernelopt.capture.recorder import LAUNCH_LABEL_PREFIX
from kernelopt.measure.attribution import profile_records
from kernelopt.measure.environment import versions
from kernelopt.problem import load_problem


def record(problem_path: str, outdir: Path) -> None:
    problem = load_problem(problem_path).small()
    stem = Path(problem_path).stem
    model = problem.build_model(0, "cuda")
    inputs = problem.make_inputs(0, "cuda")
    artifact = capture(model, inputs)
    for graph in artifact.graphs:
        (outdir / f"{stem}.graph{graph.index}.py").write_text(graph.source_code)
    sink = LaunchSink(record_args=False, label=True)
    with artifact.instrumented(sink):

        def call() -> None:
            sink.begin_call()
            artifact(*inputs)

        records = profile_records(call, iterations=3)
    meta = {"problem": problem_path, "sizes": problem.overrides, "versions": versions(), "iterations": 3,
            "label_prefix": LAUNCH_LABEL_PREFIX}
    (outdir / f"{stem}.launches.json").write_text(
        json.dumps({"meta": meta, "launches": [ln.to_dict() for ln in artifact.launches]}, indent=1)
    )
    (outdir / f"{stem}.events.json").write_text(
        json.dumps({"meta": meta, "events": [r.to_dict() for r in records]}, indent=0)
    )
    print(f"{stem}: {len(artifact.graphs)} graph(s), {len(artifact.launches)} launches, {len(records)} events")


def main() -> None:
    outdir = Path(sys.argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    assert torch.cuda.is_available(), "record_captures.py needs a CUDA GPU"
    for path in sys.argv[2:]:
        record(path, outdir)


if __name__ == "__main__":
    main()
