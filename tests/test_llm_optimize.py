"""A full agent round through optimize: the real OpenAI SDK over HTTP to a scripted local server.

The LLM's Coder first returns a kernel the gates reject; the Repairer, shown the
failing verdict, returns a correct faster one; the search verifies it, stitches it
and reports the speedup. The GPU evaluation worker is scripted (CPU test); the
same flow runs on the H200 in the GPU tests.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pydantic")  # the optional llm extra; the GPU machine runs without it unless carried

from conftest import EXAMPLES, FIXTURES
from llm_servers import Reply, ScriptedLLMServer
from test_optimize_flow import ScriptedWorker, ok, run_context, verdicts

from kernelopt.agents.factory import make_client
from kernelopt.capture import parse_output_code
from kernelopt.knowledge import memory
from kernelopt.pipeline import optimize as opt
from kernelopt.search.llm_operator import LLMOperator
from kernelopt.search.termination import Budget
from kernelopt.store import Store

SOFTMAX = next(iter(parse_output_code((FIXTURES / "inductor" / "12_softmax_wide.graph0.py").read_text()).kernels.values()))
BROKEN = SOFTMAX.source.replace("triton_helpers.set_driver_to_gpu()", "triton_helpers.set_driver_to_gpu()\nBROKEN_MARKER = 1")
FIXED = SOFTMAX.source.replace("triton_helpers.set_driver_to_gpu()", "triton_helpers.set_driver_to_gpu()\nFAST_MARKER = 1")


class MarkerWorker(ScriptedWorker):
    def call(self, target, *args, timeout_s=0, kwargs=None):
        if target.endswith(":kernel_facts"):  # as the session describes its recorded launch
            self.calls.append("kernel_facts")
            return ok({"min_time_us": 500.0, "launch": {"in_ptr0": "float32[4096, 8192] strides (8192, 1)", "r0_numel": "8192"}})
        return super().call(target, *args, timeout_s=timeout_s, kwargs=kwargs)

    def _one(self, source: str, recheck: bool = False) -> dict:
        if "BROKEN_MARKER" in source:
            v = verdicts(("static", True), ("correctness", False))
            v[-1]["reason"] = "seed 1, distribution neg: out_ptr2: 4096 elements NaN where the original wrote finite values"
            return {"passed": False, "verdicts": v, "gpu_s": 0.2}
        cmp = {"speedup": 1.3, "speedup_q1": 1.29, "speedup_q3": 1.31, "baseline": {"median_ms": 0.78}, "candidate": {"median_ms": 0.6}}
        gates = [("static", True), ("correctness", True), ("model", True), ("performance", True)]
        return {"passed": True, "verdicts": verdicts(*gates), "kernel_comparison": cmp, "gpu_s": 0.5}


def reply(obj: dict) -> Reply:
    return Reply(text=json.dumps(obj), input_tokens=1000, output_tokens=200)


@pytest.fixture
def server():
    s = ScriptedLLMServer("openai").start()
    yield s
    s.stop()


def test_broken_then_repaired_kernel_is_verified_and_stitched(tmp_path, server) -> None:
    server.enqueue(
        reply({"bottleneck": "memory-bound", "evidence": ["65% of peak bandwidth"], "headroom_us": 270.0, "notes": "two passes"}),
        reply({"strategy": "wide-row-warps", "change": "num_warps 32", "expected_effect": "-5%", "evidence": ["wide rows"], "risks": []}),
        reply({"source": BROKEN, "summary": "32 warps"}),
        reply({"strategy": "wide-row-warps", "what_worked": "nothing: unwritten output", "why": "mask bug",
               "apply_when": "wide rows", "avoid_when": "never", "speedup": None, "success": False}),
        reply({"source": FIXED, "summary": "fixed the store mask"}),
    )
    store = Store(tmp_path / "k.db")
    run_id = store.start_run("optimize", "softmax", "fake", {})
    client = make_client(f"openai-compatible:kernel-coder@{server.base_url}", store=store, run_id=run_id)
    operator = LLMOperator(client, store, run_id, device="NVIDIA H200")
    worker = MarkerWorker()
    report = opt._optimize(run_context(
        "softmax", store, run_id, worker, opt.ProblemSpec(str(EXAMPLES / "level1/12_softmax_wide.py")),
        [operator], Budget(max_evaluations=2, patience=3), opt.GateSettings(), 1,
    ))
    (kernel,) = report.kernels
    assert kernel.failures_by_gate == {"correctness": 1}
    assert kernel.best is not None and kernel.best.operator == "llm" and "FAST_MARKER" in kernel.best.source
    assert "repair of node" in kernel.best.note
    assert "inductor_tuned_config" not in worker.calls  # no launch-config operator: no coordinate descent to seed it
    assert report.final_reason.startswith("verified") and report.speedup_vs_compile == pytest.approx(1.19)
    # The repairer saw the failing gate's report.
    repair_request = server.requests[4].body
    assert "NaN where the original wrote finite values" in json.dumps(repair_request)
    # The Coder and the Repairer saw the recorded launch's arguments (dtypes, shapes, strides, sizes).
    for request in (server.requests[2].body, repair_request):
        assert "in_ptr0: float32[4096, 8192] strides (8192, 1)" in json.dumps(request) and "r0_numel: 8192" in json.dumps(request)
    # Only source, shapes and measurements went out: no tensor data, and every call is in the transcripts.
    rows = store.connection.execute("SELECT role, model, input_tokens FROM transcripts ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["analyst", "planner", "coder", "judge", "repairer"]
    # Each exchange names the search node its proposal grew from.
    nodes = {row[0] for row in store.connection.execute("SELECT id FROM nodes").fetchall()}
    linked = [row[0] for row in store.connection.execute("SELECT node_id FROM transcripts ORDER BY id").fetchall()]
    assert all(n in nodes for n in linked), (linked, nodes)
    assert all(r[1] == "kernel-coder" and r[2] == 1000 for r in rows)
    usage = client.usage()
    assert usage.calls == 5 and usage.input_tokens == 5000 and usage.output_tokens == 1000
    # The judge's record is in the experience memory, as a failure of that strategy.
    (stat,) = memory.stats(store, "memory-bound", "reduction") or memory.stats(store, "memory-bound", None)
    assert stat.strategy == "wide-row-warps" and stat.tries == 1 and stat.successes == 0


class RepairOnlyClient:
    """Answers every call as the Repairer would; counts the calls."""

    def __init__(self) -> None:
        self.roles: list[str] = []

    def complete(self, messages, *, role="", max_tokens=4096, temperature=0.2):
        from kernelopt.agents.types import Completion

        self.roles.append(role)
        return Completion(text=json.dumps({"source": FIXED, "summary": "fixed"}), provider="fake", model="m")


def _failed_llm_node(node_id: int, note: str):
    from kernelopt.search.candidate import Candidate, EvaluationResult
    from kernelopt.search.nodes import Node

    candidate = Candidate(SOFTMAX.name, "llm", source=BROKEN + f"\n# {node_id}\n", note=note)
    verdict = {"gate": "correctness", "passed": False, "reason": "unwritten output", "details": {}}
    result = EvaluationResult.failure("correctness", "unwritten output", verdicts=[verdict])
    return Node(node_id, 1, SOFTMAX.name, 1, "llm", candidate.key(), candidate, 1, "evaluated", 0.0, "correctness",
                "unwritten output", result)


def test_a_resumed_llm_operator_repairs_nothing_twice_and_keeps_the_depth_limit() -> None:
    """A resumed run's operator has no memory: the history's notes say what was repaired already."""
    from kernelopt.search.operators import SearchContext

    history = [
        _failed_llm_node(5, "s: 32 warps"),
        _failed_llm_node(6, "s: repair of node 5: fix"),
        _failed_llm_node(7, "s: repair of node 6: fix again"),  # depth 2: the limit
        _failed_llm_node(8, "t: other plan"),
    ]
    client = RepairOnlyClient()
    operator = LLMOperator(client, max_repairs_per_lineage=2)
    ctx = SearchContext(target=SOFTMAX.name, kernel=SOFTMAX, root_source=SOFTMAX.source, nodes=history)
    (repair,) = operator._repairs(ctx, 4)
    assert "repair of node 8:" in repair.note and client.roles == ["repairer"]


def test_a_resumed_llm_operator_repairs_with_the_stored_plan_and_judges_no_node_twice(tmp_path) -> None:
    from kernelopt.agents.roles.models import Plan
    from kernelopt.search.operators import SearchContext
    from kernelopt.store import Store

    store = Store(tmp_path / "k.db")
    run_id = store.start_run("optimize", "softmax", "fake", {})
    plan = Plan(strategy="wide-row-warps", change="32 warps", expected_effect="-15%", evidence=["wide rows"])
    first = LLMOperator(RepairOnlyClient(), store=store, run_id=run_id)
    broken = _failed_llm_node(5, "wide-row-warps: 32 warps")
    first._keep_plan(broken.candidate, plan)  # as _new_plan does when it proposes the candidate
    first._mark_judged(broken)  # judged before the kill

    client = RepairOnlyClient()
    resumed = LLMOperator(client, store=store, run_id=run_id)  # a fresh process: nothing in memory
    ctx = SearchContext(target=SOFTMAX.name, kernel=SOFTMAX, root_source=SOFTMAX.source, nodes=[broken])
    (repair,) = resumed.propose(broken, ctx, 1)
    assert repair.note.startswith("wide-row-warps: repair of node 5:")  # the plan survived the restart
    assert client.roles == ["repairer"]  # no judge call: node 5 was judged before the kill
    assert resumed._plans[repair.key()] == plan
    assert set(store.measurements(run_id, "llm_plan:")) == {f"llm_plan:{broken.key}", f"llm_plan:{repair.key()}"}
