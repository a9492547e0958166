"""Recorded runs for the report tests and the committed example report: a store made on the CPU.

The public :func:`kernelopt.pipeline.optimize.optimize` runs for real (store, search
engine, operators, LLM client over HTTP, final checks, export, the report written
beside it); only the GPU is stood in for: the evaluation worker is scripted
(``ScriptedWorker`` of ``test_optimize_flow``: num_warps 32 is 1.2x faster, XBLOCK
>= 4 is wrong) and the LLM is a scripted local OpenAI-compatible server. The
analysis it returns is made up for the fixture and says so in its device name:
these are not measurements, and no report built from them may be read as one.

Three runs: ``search`` (launch configs and eviction hints, one kernel replaced),
``agent`` (the same operators and the LLM agents, whose repaired kernel wins; their
plans and transcripts, and text written to break out of the page), ``killed``
(stopped after its analysis and a few nodes, never finished).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from conftest import EXAMPLES
from test_optimize_flow import SOFTMAX, ScriptedWorker, ok, verdicts

from kernelopt.pipeline import optimize as opt
from kernelopt.search.candidate import Candidate, EvaluationResult
from kernelopt.search.nodes import NodeStore
from kernelopt.search.termination import Budget
from kernelopt.store import Store

PROBLEM = EXAMPLES / "level1" / "12_softmax_wide.py"
FIXTURE_DEVICE = "CPU test fixture (scripted worker: made-up numbers, not a measurement)"
INJECTION = "</script><script>alert(1)</script>"
MODEL = "scripted-coder"
BROKEN = SOFTMAX.source.replace("triton_helpers.set_driver_to_gpu()", "triton_helpers.set_driver_to_gpu()\nBROKEN_MARKER = 1")
FIXED = SOFTMAX.source.replace(
    "triton_helpers.set_driver_to_gpu()", f"triton_helpers.set_driver_to_gpu()\nFAST_MARKER = 1  # {INJECTION}"
)
UNSAFE = SOFTMAX.source.replace("triton_helpers.set_driver_to_gpu()", "triton_helpers.set_driver_to_gpu()\nimport os")


@dataclass(frozen=True)
class RecordedRuns:
    store: Path
    search: int
    agent: int
    killed: int
    search_report: Path  # the HTML page optimize wrote beside its export
    agent_report: Path
    agent_export: Path | None


class FixtureWorker(ScriptedWorker):
    """A fuller analysis than the optimize tests need (vendor, aten and Triton launches with their traffic),
    and the LLM's kernels: BROKEN_MARKER fails correctness, FAST_MARKER passes at 1.3x."""

    def call(self, target, *args, timeout_s=0, kwargs=None):
        if target.endswith(":analyze_problem"):
            self.calls.append("analyze_problem")
            return ok(_analysis())
        outcome = super().call(target, *args, timeout_s=timeout_s, kwargs=kwargs)
        if target.endswith(":verify_together") and outcome.value.get("vs_eager"):
            outcome.value["vs_eager"].update(speedup_q1=1.47, speedup_q3=1.51)  # the spread a real timing has
        return outcome

    def _one(self, source: str, recheck: bool = False) -> dict:
        if "BROKEN_MARKER" in source:
            v = verdicts(("static", True), ("correctness", False))
            v[-1]["reason"] = f"seed 1: out_ptr2: 4096 elements NaN where the original wrote finite values {INJECTION}"
            return {"passed": False, "verdicts": v, "gpu_s": 0.2}
        if "FAST_MARKER" in source:
            cmp = {"speedup": 1.3, "speedup_q1": 1.29, "speedup_q3": 1.31, "baseline": {"median_ms": 0.78},
                   "candidate": {"median_ms": 0.6}}
            gates = [("static", True), ("correctness", True), ("model", True), ("performance", True)]
            return {"passed": True, "verdicts": verdicts(*gates), "kernel_comparison": cmp, "gpu_s": 0.5}
        if "import os" in source or ("evict_last" in source and "evict_first" not in source):
            return {"passed": False, "verdicts": verdicts(("static", False)), "gpu_s": 0.0}
        return super()._one(source, recheck)


def _analysis() -> dict:
    softmax_bytes = 2 * 4096 * 65536 * 4
    return {
        "problem": "12_softmax_wide", "device": FIXTURE_DEVICE, "peak_gbps": 4000.0,
        "eager_ms": 1.0, "eager_spread": 0.004, "compiled_ms": 0.8, "compiled_spread": 0.003,
        "speedup_vs_eager": 1.25, "attributed_ms": 0.79, "unattributed_ms": 0.0, "triton_ms": 0.784,
        "triton_headroom_ms": 0.27, "amdahl_bound": 1.5, "gpu_busy": 0.98, "launch_overhead_bound": 1.02,
        "versions": {"torch": "fixture"},
        "launches": [
            {"index": 0, "graph": 0, "kind": "aten", "name": "aten.copy_", "time_us": 6.0, "share": 0.008},
            {"index": 1, "graph": 0, "kind": "triton", "name": SOFTMAX.name, "time_us": 780.0, "share": 0.987,
             "bytes_read": softmax_bytes // 2, "bytes_written": softmax_bytes // 2,
             "achieved_gbps": softmax_bytes / 780e3, "pct_of_peak": 100 * softmax_bytes / 780e3 / 4000.0,
             "headroom_us": 270.0},
            {"index": 2, "graph": 0, "kind": "triton", "name": "triton_poi_tiny_1", "time_us": 4.0, "share": 0.005,
             "bytes_read": 4 << 20, "bytes_written": 4 << 20, "achieved_gbps": (8 << 20) / 4e3,
             "pct_of_peak": 100 * (8 << 20) / 4e3 / 4000.0, "headroom_us": 1.9},
        ],
        "kernels": {SOFTMAX.name: {"source": SOFTMAX.source, "heuristic": SOFTMAX.heuristic, "graph": 0}},
        "configs": {SOFTMAX.name: {"XBLOCK": 1, "num_warps": 16, "num_stages": 1}},
    }


@contextlib.contextmanager
def _stand_ins(worker: ScriptedWorker) -> Iterator[None]:
    """optimize() with the scripted worker in place of the GPU's persistent evaluation worker."""

    @contextlib.contextmanager
    def persistent(env=None):
        yield worker

    with mock.patch.object(opt, "require_gpu", lambda: None), mock.patch.object(opt, "PersistentWorker", persistent):
        yield


def _reply(obj: dict):
    from llm_servers import Reply

    return Reply(text=json.dumps(obj), input_tokens=1800, output_tokens=450)


def _agent_replies() -> list:
    analysis = {"bottleneck": "memory-bound", "evidence": ["65 % of the copy peak", "two passes over each row"],
                "headroom_us": 270.0, "notes": f"one pass would do {INJECTION}"}
    plan = {"strategy": "wide-row-warps", "change": "num_warps 32 on the 65536-wide rows",
            "expected_effect": "-15 % from more loads in flight", "evidence": ["rows of 65536 floats"],
            "risks": ["register pressure"]}
    judged = {"strategy": "wide-row-warps", "what_worked": "nothing: an unwritten output", "why": "a mask bug",
              "apply_when": "wide rows", "avoid_when": "never", "speedup": None, "success": False}
    second = {"strategy": "evict-first-streaming", "change": "evict_first on the loads read once",
              "expected_effect": "-5 % from less L2 pressure", "evidence": ["each element is read once"], "risks": []}
    return [
        _reply(analysis),
        _reply(plan),
        _reply({"source": BROKEN, "summary": "32 warps"}),
        _reply(judged),
        _reply({"source": FIXED, "summary": f"fixed the store mask {INJECTION}"}),
        _reply(second),
        _reply({"source": UNSAFE, "summary": "evict_first on the loads"}),
    ]


def record_runs(directory: Path) -> RecordedRuns:
    """Make the three runs in ``directory/kernelopt.db`` (reports and exports beside it)."""
    from llm_servers import ScriptedLLMServer

    directory.mkdir(parents=True, exist_ok=True)
    db = directory / "kernelopt.db"
    with Store(db) as store:
        with _stand_ins(FixtureWorker()):
            search = opt.optimize(
                PROBLEM, store, operators=["launch-config", "eviction-policy"],
                budget=Budget(max_evaluations=14, patience=3), max_targets=2,
                export_path=directory / "search.kopt.json", timeout_s=60.0,
            )
        server = ScriptedLLMServer("openai").start()
        try:
            server.enqueue(*_agent_replies())
            config = directory / "llm.toml"
            config.write_text(f'[prices."{MODEL}"]\ninput_per_mtok = 1.0\noutput_per_mtok = 4.0\n')
            with _stand_ins(FixtureWorker()):
                agent = opt.optimize(
                    PROBLEM, store, operators=["launch-config", "eviction-policy"],
                    budget=Budget(max_evaluations=14, patience=3), max_targets=1,
                    export_path=directory / "agent.kopt.json", timeout_s=60.0,
                    llm=f"openai-compatible:{MODEL}@{server.base_url}", llm_config=config,
                )
        finally:
            server.stop()
        killed = _killed_run(store)
    assert search.report_path and agent.report_path, (search.warnings, agent.warnings)
    return RecordedRuns(
        db, search.run_id, agent.run_id, killed, Path(search.report_path), Path(agent.report_path),
        Path(agent.exported) if agent.exported else None,
    )


def _killed_run(store: Store) -> int:
    """A run that stopped after its analysis and three evaluations (a kill -9 leaves exactly this)."""
    run_id = store.start_run("optimize", "12_softmax_wide", "cpu", {"torch": "fixture"}, {"operators": ["launch-config"]})
    store.add_measurement(run_id, "analysis", _analysis())
    nodes = NodeStore(store, run_id)
    root = nodes.add(Candidate(SOFTMAX.name, "root", source=SOFTMAX.source), None, 0)
    assert root is not None
    nodes.record(root.id, EvaluationResult(True, 1.0, None, "baseline"))
    for i, gate in enumerate(("correctness", None, "performance")):
        config = {"XBLOCK": 1, "num_warps": 4 << i, "num_stages": 1}
        child = nodes.add(Candidate(SOFTMAX.name, "launch-config", source=SOFTMAX.source, config=config,
                                    note=f"num_warps {4 << i}"), root.id, 1)
        assert child is not None
        if gate is not None:
            nodes.record(child.id, EvaluationResult.failure(gate, f"{gate} failed"))
    return run_id
