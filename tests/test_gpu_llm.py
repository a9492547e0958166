"""GPU test of the agent loop (run on an H200 with the llm wheels carried).

A scripted OpenAI-compatible server plays the LLM: the Coder's first kernel
leaves outputs unwritten; the Repairer, shown the correctness gate's report,
returns the same kernel pinned to a launch config measured faster on the H200
(32 warps for the row-L2 kernel). optimize must reject the first, verify the
second through all four gates, stitch it and report the speedup.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("openai")

from adversarial import unwritten_output  # noqa: E402
from conftest import EXAMPLES  # noqa: E402
from kernelopt.pipeline.optimize import optimize  # noqa: E402
from kernelopt.capture import capture  # noqa: E402
from kernelopt.capture.kernel_source import pin_launch_config  # noqa: E402
from kernelopt.problem import load_problem  # noqa: E402
from kernelopt.search.termination import Budget  # noqa: E402
from kernelopt.store import Store  # noqa: E402
from llm_servers import Reply, ScriptedLLMServer  # noqa: E402

pytestmark = pytest.mark.gpu

PROBLEM = EXAMPLES / "level1/10_row_l2_normalize.py"
SIZES = {"batch_size": 8192}


def test_agent_repairs_verifies_and_stitches(tmp_path) -> None:
    problem = load_problem(PROBLEM, overrides=SIZES)
    artifact = capture(problem.build_model(0, "cuda"), problem.make_inputs(0, "cuda"))
    (launch,) = [l for l in artifact.launches if l.kind == "triton"]
    kernel = next(k for _, k in artifact.kernels() if k.name == launch.name)
    fast = pin_launch_config(kernel.source, kernel.name, {**launch.config, "num_warps": 32})
    del artifact

    def reply(obj: dict) -> Reply:
        return Reply(text=json.dumps(obj))

    server = ScriptedLLMServer("openai").start()
    try:
        server.enqueue(
            reply({"bottleneck": "memory-bound", "evidence": ["43% of peak"], "headroom_us": 100.0, "notes": "two passes"}),
            reply({"strategy": "wide-row-warps", "change": "32 warps", "expected_effect": "-15%", "evidence": ["wide rows"]}),
            reply({"source": unwritten_output(kernel.source), "summary": "32 warps"}),
            reply({"strategy": "wide-row-warps", "what_worked": "no", "why": "no store", "apply_when": "wide rows",
                   "avoid_when": "-", "speedup": None, "success": False}),
            reply({"source": fast, "summary": "store restored, 32 warps"}),
        )
        store = Store(tmp_path / "k.db")
        report = optimize(PROBLEM, store, operators=(), llm=f"openai-compatible:scripted@{server.base_url}",
                          budget=Budget(max_evaluations=2, patience=3), max_targets=1, sizes=SIZES,
                          export_path=tmp_path / "m.kopt.json")
    finally:
        server.stop()
    (k,) = report.kernels
    assert k.failures_by_gate == {"correctness": 1}, k
    assert k.best is not None and k.best.operator == "llm" and k.speedup > 1.03, k
    assert report.final_reason.startswith("verified") and report.speedup_vs_compile > 1.0
    assert report.exported and report.llm_usage["calls"] == 5
    print(f"agent round: kernel {k.speedup:.3f}x, model {report.speedup_vs_compile:.3f}x over torch.compile")
    from kernelopt.cli.format import transcript_text
    from kernelopt.store.llm_records import transcripts

    exchanges = transcripts(store.connection, report.run_id)
    assert [t.role for t in exchanges] == ["analyst", "planner", "coder", "judge", "repairer"]
    if os.environ.get("KERNELOPT_TEST_OUT"):  # the device script keeps the round's transcript
        text = "\n\n".join(transcript_text(t, 1500) for t in exchanges)
        Path(os.environ["KERNELOPT_TEST_OUT"], "llm_round_transcript.txt").write_text(text)
