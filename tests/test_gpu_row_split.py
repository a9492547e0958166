"""GPU test of the row split (``kernelopt.capture.row_split``): a log-softmax's graph compiled with
its rows split across programs that meet at a barrier, given tickets, through the gates, with
thousands of rows (far more programs than fit on the device at once, so the programs of a row only
all run because tickets make them). Run on an H200; the speed is printed, not asserted (benchmarks
hold speed)."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from conftest import EXAMPLES

from kernelopt.capture.graph_swap import GraphCandidate
from kernelopt.capture.row_split import ROW_SPLIT_OPTION, uses_tickets

pytestmark = pytest.mark.gpu

CASES = [
    # 2048 rows of 131072: 16 programs a row, 32768 programs in all
    ("level1/13_log_softmax_wide.py", {}, 8192),
    # 1000 rows of 50257 (prime): a masked tail in every row's last part, and a row count no power of two
    ("level1/24_log_softmax_vocab.py", {"batch_size": 1000}, 16384),
]


@pytest.mark.parametrize(("problem", "overrides", "chunk"), CASES, ids=["wide", "vocab"])
def test_a_row_split_graph_passes_the_gates_with_more_programs_than_fit(problem, overrides, chunk, monkeypatch) -> None:
    from kernelopt.evaluate import worker_targets
    from kernelopt.evaluate.gate_settings import GateSettings
    from kernelopt.evaluate.session import ProblemSpec

    # the judge is built in this (root) test process, not in a worker: its candidates' workers run as
    # root too, as CUDA IPC between users is refused (kernelopt.workers.identity)
    monkeypatch.setenv("KERNELOPT_WORKER_USER", "root")
    spec = asdict(ProblemSpec(str(EXAMPLES / problem), overrides))
    settings = asdict(GateSettings(model_seeds=(0, 1, 2), trials=30))
    result = worker_targets.evaluate_graph(spec, 0, {ROW_SPLIT_OPTION: chunk}, settings, None)
    gates = {v["gate"]: v for v in result["verdicts"]}
    print(problem, {g: (v["passed"], v["reason"][:160]) for g, v in gates.items()}, result.get("timings"))
    assert gates["static"]["passed"], gates["static"]
    assert gates["model"]["passed"], gates["model"]  # every row right: each program met its row's others
    assert "performance" in gates
    if result["passed"]:
        made = GraphCandidate.from_dict(result["graph_candidate"])
        assert any(uses_tickets(k.source) for k in made.kernels)


def test_a_search_screen_lets_the_wide_row_split_through_to_every_gate(monkeypatch) -> None:
    """The search's short screen before gate 3 (graph_candidate.GRAPH_SCREEN_MIN_SPEEDUP) turns away only
    a slower call sequence: the row split that won 1.27x on the H200 goes on through all four gates."""
    from kernelopt.evaluate import worker_targets
    from kernelopt.evaluate.gate_settings import GateSettings
    from kernelopt.evaluate.session import ProblemSpec

    monkeypatch.setenv("KERNELOPT_WORKER_USER", "root")
    spec = asdict(ProblemSpec(str(EXAMPLES / "level1/13_log_softmax_wide.py"), {}))
    settings = asdict(GateSettings(model_seeds=(0,), trials=30, screen_trials=10))
    result = worker_targets.evaluate_graph(spec, 0, {ROW_SPLIT_OPTION: 8192}, settings, None)
    print(result.get("screen", {}).get("speedup"), result.get("timings"))
    assert result["screen"]["speedup"] > 1.0
    assert [v["gate"] for v in result["verdicts"]] == ["static", "correctness", "model", "performance"]


GROUP_NORM_CASES = [
    # 512 groups of 8 x 256 x 256, split 64 ways: each group held in registers, one ticketed kernel
    ("level1/16_groupnorm.py", True),
    # a diffusion block's 32 groups of 10 x 64 x 64 in bf16, the rewrite alone: one looped kernel
    ("level2/13_groupnorm_scale_shift_silu.py", False),
]


@pytest.mark.parametrize(("problem", "split"), GROUP_NORM_CASES, ids=["split", "alone"])
def test_a_group_norm_in_its_groups_shape_is_one_kernel_through_every_gate(problem, split, monkeypatch) -> None:
    """A group norm given to Inductor in its groups' shape (kernelopt.capture.rewrites.group_rows), with the
    row split (its statistics as two sums, kernelopt.capture.rewrites.var_sums) or alone: one kernel for the
    statistics and the output, every group right. The speedup is printed (on the H100 both ran slower than
    the stock two kernels, so the graph stage no longer compiles them)."""
    from kernelopt.capture.rewrites.group_rows import GROUP_ROWS_OPTION
    from kernelopt.evaluate import worker_targets
    from kernelopt.evaluate.gate_settings import GateSettings
    from kernelopt.evaluate.session import ProblemSpec

    monkeypatch.setenv("KERNELOPT_WORKER_USER", "root")
    spec = asdict(ProblemSpec(str(EXAMPLES / problem), {}))
    settings = asdict(GateSettings(model_seeds=(0, 1), trials=30))
    options = {GROUP_ROWS_OPTION: True, **({ROW_SPLIT_OPTION: 8192} if split else {})}
    result = worker_targets.evaluate_graph(spec, 0, options, settings, None)
    gates = {v["gate"]: v for v in result["verdicts"]}
    print(problem, {g: (v["passed"], v["reason"][:160]) for g, v in gates.items()}, result.get("timings"))
    assert gates["static"]["passed"], gates["static"]
    assert gates["model"]["passed"], gates["model"]
    if result["passed"]:
        made = GraphCandidate.from_dict(result["graph_candidate"])
        norms = [k for k in made.kernels if k.language == "triton"]
        assert len(norms) == 1 and uses_tickets(norms[0].source) == split
