"""What the graph stage's probes (:func:`kernelopt.capture.compile_stop.probing`) add to a capture.

    python scripts/probe_cost.py level1/12_softmax_wide level3/03_transformer_block

Each problem at its ``SMALL_SIZES`` is captured twice plain and twice under the probes (fresh
compiles, alternating); printed: each capture's wall time, the time spent in the probes, their counts.
"""

from __future__ import annotations

import sys
import time

import torch

from kernelopt.capture import compat
from kernelopt.capture import compile_stop as stop
from kernelopt.capture.artifact import capture
from kernelopt.evaluate.session import PROBES
from kernelopt.problem.loader import load_problem

spent = [0.0]
_probe_graph = stop.probe_graph


def _timed(graph: torch.fx.Graph) -> int:
    start = time.perf_counter()
    try:
        return _probe_graph(graph)
    finally:
        spent[0] += time.perf_counter() - start


compat.probe_graph = _timed  # compat calls the name it imported

for name in sys.argv[1:]:
    problem = load_problem(f"examples/problems/{name}.py").small()
    model, inputs = problem.build_model(0), problem.make_inputs(0)
    for probed in (False, True, False, True):
        spent[0] = 0.0
        start = time.perf_counter()
        with compat.fresh_compile():
            if probed:
                with stop.probing(PROBES) as counts:
                    capture(model, inputs, {})
            else:
                capture(model, inputs, {})
                counts = None
        wall = time.perf_counter() - start
        print(f"{name} {'probed' if probed else 'plain '} capture {wall:.2f} s, probes {spent[0] * 1e3:.1f} ms {counts}")
