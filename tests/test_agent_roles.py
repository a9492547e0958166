"""The five LLM roles against a scripted chat client: happy paths, repair, prompt versions, data guard."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("pydantic")  # the optional llm extra; the GPU machine runs without it unless carried

from kernelopt.agents.roles import (
    ROLES,
    Analysis,
    Analyst,
    Coder,
    Experience,
    Judge,
    KernelCandidate,
    Plan,
    Planner,
    Repairer,
    RoleOutputError,
    TensorInPromptError,
    assert_no_tensors,
    collapsed_strategies,
    json_objects,
    load_prompt,
)
from kernelopt.agents.roles.base import repair_message
from kernelopt.agents.types import Completion, Message
from kernelopt.capture.output_code import KernelDef, parse_kernels
from kernelopt.knowledge import hardware_card, memory, retrieve
from kernelopt.measure.roofline import Roofline
from kernelopt.store import Store
from kernelopt.verify.verdict import Verdict

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "inductor"
PROMPTS = Path(__file__).resolve().parent.parent / "src" / "kernelopt" / "agents" / "prompts"


@dataclass
class ScriptedClient:
    """A ChatClient that answers with queued strings and records every request."""

    replies: list[str]
    calls: list[dict] = field(default_factory=list)

    def complete(
        self, messages: list[Message], *, role: str = "", max_tokens: int = 4096, temperature: float = 0.2
    ) -> Completion:
        self.calls.append({"messages": list(messages), "role": role})
        if not self.replies:
            raise AssertionError("the scripted client ran out of replies")
        return Completion(self.replies.pop(0), provider="scripted", model="fake-1", input_tokens=10, output_tokens=5, cost_usd=0.01)

    def user_text(self, call: int = -1) -> str:
        return "\n".join(m.content for m in self.calls[call]["messages"] if m.role == "user")


@pytest.fixture(scope="module")
def kernel() -> KernelDef:
    (kernel,) = parse_kernels((FIXTURES / "15_rmsnorm.graph0.py").read_text()).values()
    return kernel


@pytest.fixture
def roofline() -> dict:
    return {**Roofline(bytes_read=8704, bytes_written=8192, time_us=4.1, peak_gbps=4300.0).to_dict(), "share_pct": 12.5}


ANALYSIS = {
    "bottleneck": "latency-bound",
    "evidence": ["4.1 us for 16.9 KB: 4.1 GB/s, 0.1 % of the 4300 GB/s peak", "xnumel = 16 rows: 16 programs at most"],
    "headroom_us": 2.0,
    "notes": "no hardware counters; the grid is far smaller than 132 SMs",
}
PLAN = {
    "strategy": "Small grid latency",
    "change": "one row per program with XBLOCK=1 and num_warps=1 via fixed_config",
    "expected_effect": "16 programs instead of 1: about 1.5x on 4.1 us",
    "evidence": ["xnumel = 16", "0.1 % of peak"],
    "risks": ["launch overhead dominates"],
}


def _reply(obj: dict, prose: bool = True) -> str:
    body = json.dumps(obj, indent=2)
    return f"Here is my answer.\n```json\n{body}\n```\nThanks." if prose else body


def _candidate_source(kernel: KernelDef, comment: str = "# tuned") -> str:
    return kernel.source.replace("@triton.jit\n", f"{comment}\n@triton.jit\n", 1)


# -- happy paths ------------------------------------------------------------------------------------


def test_analyst_happy_path_without_counters(kernel: KernelDef, roofline: dict) -> None:
    client = ScriptedClient([_reply(ANALYSIS)])
    result = Analyst(client).run(kernel, roofline, ncu_metrics={}, hardware=hardware_card("NVIDIA H200"),
                                 launch={"in_ptr0": "float32[16, 128] stride (128, 1)", "xnumel": 16})
    assert isinstance(result.output, Analysis)
    assert result.output.bottleneck == "latency-bound" and result.output.headroom_us == 2.0
    assert result.repairs == 0 and result.role == "analyst" and result.cost_usd == pytest.approx(0.01)
    call = client.calls[0]
    assert call["role"] == "analyst"
    system, user = call["messages"]
    assert system.role == "system" and user.role == "user"
    assert '"headroom_us"' in system.content and '"properties"' in system.content  # the JSON schema is shown
    assert kernel.source.strip() in user.content
    assert "no hardware counters" in user.content
    assert "kernel time: 4.1 us" in user.content and "measured peak copy bandwidth: 4,300 GB/s" in user.content
    assert "share of the model's GPU time: 12.5 %" in user.content
    assert "in_ptr0: float32[16, 128] stride (128, 1)" in user.content
    assert "NVIDIA H200" in user.content and "4.2-4.3 TB/s" in user.content


def test_analyst_shows_counters_when_present(kernel: KernelDef, roofline: dict) -> None:
    client = ScriptedClient([_reply(ANALYSIS, prose=False)])
    Analyst(client).run(kernel, roofline, ncu_metrics={"dram__throughput.avg.pct_of_peak_sustained_elapsed": 3.2})
    user = client.user_text()
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed = 3.2" in user
    assert "no hardware counters" not in user
    assert "no spec card for this device" in user


def test_analyst_rejects_headroom_beyond_the_kernel_time(kernel: KernelDef, roofline: dict) -> None:
    client = ScriptedClient([_reply({**ANALYSIS, "headroom_us": 50.0}), _reply(ANALYSIS)])
    result = Analyst(client).run(kernel, roofline)
    assert result.repairs == 1
    assert "headroom_us: 50.0 exceeds the kernel time of 4.1 us" in client.calls[1]["messages"][-1].content


def test_planner_happy_path_uses_cards_experience_and_avoid(kernel: KernelDef, tmp_path: Path) -> None:
    with Store(tmp_path / "k.db") as store:
        run = store.start_run("optimize", "p", "NVIDIA H200", {})
        memory.record(store, run, "small-grid-latency", "latency-bound", "persistent_reduction", 1.3, True,
                      {"what_worked": "one row per program", "apply_when": "xnumel < SMs", "avoid_when": "large grids"})
        for _ in range(2):
            memory.record(store, run, "split-long-rows", "latency-bound", "persistent_reduction", 0.8, False, {})
        experience = memory.stats(store, "latency-bound", "persistent_reduction")
        avoid = memory.to_avoid(store, "latency-bound", "persistent_reduction")
        lessons = memory.recent(store, 5, "latency-bound", "persistent_reduction")
    cards = retrieve("small grid few rows", "latency-bound", "persistent_reduction", "hopper")
    client = ScriptedClient([_reply(PLAN)])
    result = Planner(client).run(Analysis(**ANALYSIS), kernel, cards, experience, avoid, recent=["masks-every-access"],
                                 lessons=lessons, hardware=hardware_card("NVIDIA H200"))
    plan = result.output
    assert isinstance(plan, Plan) and plan.strategy == "small-grid-latency"  # normalised
    user = client.user_text()
    assert "(strategy id: small-grid-latency)" in user and "## When not to apply" in user
    assert "| small-grid-latency | 1 | 1 | 1.30x |" in user and "| split-long-rows | 2 | 0 | - |" in user
    assert "Avoid (tried here at least 2 times, never verified faster): split-long-rows" in user
    assert "Apply when: xnumel < SMs" in user
    assert "- masks-every-access" in user
    assert "Diversity required" not in user


def test_coder_happy_path_states_the_launcher_contract(kernel: KernelDef) -> None:
    source = _candidate_source(kernel)
    client = ScriptedClient([_reply({"source": source, "summary": "pinned one row per program"})])
    result = Coder(client).run(Plan(**PLAN), kernel, hardware=hardware_card("NVIDIA H200"))
    assert isinstance(result.output, KernelCandidate) and result.output.source == source.strip("\n") + "\n"
    system = client.calls[0]["messages"][0].content
    assert "(in_ptr0, in_ptr1, out_ptr1, xnumel, r0_numel)" in system
    assert "@triton_heuristics.persistent_reduction(...)" in system
    assert "A mask on every `tl.load` and `tl.store`" in system and "Accumulate in fp32" in system
    assert "No PyTorch calls" in system
    assert "one row per program with XBLOCK=1" in client.user_text()


def test_coder_contract_violation_goes_back_for_repair(kernel: KernelDef) -> None:
    renamed = _candidate_source(kernel).replace("in_ptr1, out_ptr1", "weight_ptr, out_ptr1", 1)
    fenced = "```python\n" + _candidate_source(kernel) + "```"  # a fenced source inside the JSON string
    client = ScriptedClient([_reply({"source": renamed, "summary": "s"}), _reply({"source": fenced, "summary": "s"})])
    result = Coder(client).run(Plan(**PLAN), kernel)
    assert result.repairs == 1 and result.calls[0].error is not None
    feedback = client.calls[1]["messages"][-1].content
    assert "must take the runtime parameters (in_ptr0, in_ptr1, out_ptr1, xnumel, r0_numel) in this order" in feedback
    assert not result.output.source.startswith("```") and "@triton.jit" in result.output.source


def test_repairer_happy_path_shows_the_trimmed_gate_report(kernel: KernelDef) -> None:
    broken = KernelCandidate(source=_candidate_source(kernel), summary="first try")
    verdict = Verdict("correctness", False, "seed 1: out_ptr1 differs (max abs error 0.41)",
                      {"cases": [{"seed": i, "max_abs": 0.41} for i in range(40)], "log": "x" * 5000})
    fixed = _candidate_source(kernel, "# fixed mask")
    client = ScriptedClient([_reply({"source": fixed, "summary": "restored the row mask"})])
    result = Repairer(client).run(broken, verdict, kernel, plan=Plan(**PLAN))
    assert result.output.summary == "restored the row mask"
    user = client.user_text()
    assert "## Failing gate: correctness" in user and "max abs error 0.41" in user
    assert "28 more" in user and "chars cut" in user and "x" * 5000 not in user
    assert "# tuned" in user  # the failed candidate is shown
    with pytest.raises(ValueError, match="nothing to repair"):
        Repairer(client).run(broken, Verdict("static", True, "ok"), kernel)


def test_judge_records_facts_not_claims(kernel: KernelDef, tmp_path: Path) -> None:
    claim = {"strategy": "something else", "what_worked": "rows spread over SMs", "why": "16 programs",
             "apply_when": "xnumel < SMs", "avoid_when": "large grids", "speedup": 9.9, "success": True}
    passed = [Verdict(g, True, "ok") for g in ("static", "correctness", "model", "performance")]
    client = ScriptedClient([_reply(claim)])
    result = Judge(client).run(Plan(**PLAN), kernel, {"time_us": 4.0}, {"time_us": 3.2}, passed, bottleneck="latency-bound")
    exp = result.output
    assert isinstance(exp, Experience)
    assert (exp.strategy, exp.success, exp.speedup) == ("small-grid-latency", True, pytest.approx(1.25))
    assert "measured speedup: 1.250x" in client.user_text() and "- performance: pass: ok" in client.user_text()

    failed = [Verdict("static", True, "ok"), Verdict("correctness", False, "seed 0 differs")]
    client = ScriptedClient([_reply(claim)])
    exp = Judge(client).run(Plan(**PLAN), kernel, {"time_us": 4.0}, None, failed).output
    assert (exp.success, exp.speedup) == (False, None)
    assert "not timed" in client.user_text() and "- correctness: FAIL: seed 0 differs" in client.user_text()

    with Store(tmp_path / "k.db") as store:  # the caller stores it through the knowledge layer
        memory.record(store, None, exp.strategy, "latency-bound", "persistent_reduction", exp.speedup, exp.success,
                      exp.model_dump())
        (stats,) = memory.stats(store, "latency-bound", "persistent_reduction")
        assert (stats.strategy, stats.tries, stats.successes) == ("small-grid-latency", 1, 0)


# -- repair loop -------------------------------------------------------------------------------------


def test_malformed_json_then_valid_is_one_repair_round(kernel: KernelDef, roofline: dict) -> None:
    client = ScriptedClient(["I think it is memory-bound {because of the loads", _reply(ANALYSIS)])
    result = Analyst(client).run(kernel, roofline)
    assert result.repairs == 1 and len(client.calls) == 2
    first, second = result.calls
    assert first.error == "the reply holds no JSON object" and second.error is None
    repair = client.calls[1]["messages"]
    assert repair[-2] == Message("assistant", "I think it is memory-bound {because of the loads")
    assert repair[-1] == Message("user", repair_message(first.error))
    assert repair[-1].content == (
        "Your last reply was not valid: the reply holds no JSON object. Reply with only the JSON object."
    )


def test_schema_violation_sends_the_validation_error_back(kernel: KernelDef, roofline: dict) -> None:
    invalid = {**ANALYSIS, "bottleneck": "io-bound"}
    del invalid["evidence"]
    client = ScriptedClient([_reply(invalid), _reply(ANALYSIS)])
    Analyst(client).run(kernel, roofline)
    feedback = client.calls[1]["messages"][-1].content
    assert feedback.startswith("Your last reply was not valid: ")
    assert "bottleneck: Input should be 'memory-bound'" in feedback and "evidence: Field required" in feedback
    assert feedback.endswith("Reply with only the JSON object.")


def test_always_malformed_raises_after_max_repairs(kernel: KernelDef, roofline: dict) -> None:
    client = ScriptedClient(["nope"] * 5)
    with pytest.raises(RoleOutputError) as info:
        Analyst(client, max_repairs=2).run(kernel, roofline)
    assert len(client.calls) == 3  # the first request and two repairs
    message = str(info.value)
    assert "\n" not in message and "analyst" in message and "3 attempts" in message and "analyst v1" in message

    client = ScriptedClient(["nope"] * 5)
    with pytest.raises(RoleOutputError):
        Analyst(client, max_repairs=0).run(kernel, roofline)
    assert len(client.calls) == 1


def test_json_extraction_tolerates_fences_prose_and_raw_newlines() -> None:
    assert list(json_objects('Sure! {"a": 1} and then {"b": 2}')) == [{"a": 1}, {"b": 2}]
    assert next(json_objects('text {not json} ```json\n{"a": 2}\n``` {"a": 3}')) == {"a": 2}
    assert next(json_objects('{"source": "line one\nline two"}')) == {"source": "line one\nline two"}
    assert list(json_objects("[1, 2]")) == []


# -- planner diversity -----------------------------------------------------------------------------


def test_collapse_detection() -> None:
    assert collapsed_strategies(["a", "b", "a", "b"]) == ["a", "b"]
    assert collapsed_strategies(["c", "d", "a", "a", "a", "a"]) == ["a"]
    assert collapsed_strategies(["a", "b", "c", "a"]) == []  # three distinct strategies
    assert collapsed_strategies(["a", "a"]) == []  # too few plans to call it a collapse
    assert collapsed_strategies(["A b", "a-b", "a_b", "c"]) == ["a-b", "c"]  # names normalised
    assert collapsed_strategies([Plan(**PLAN)] * 4) == ["small-grid-latency"]


def _plan_prompt(kernel: KernelDef, recent: list) -> str:
    client = ScriptedClient([_reply(PLAN)])
    Planner(client).run(Analysis(**ANALYSIS), kernel, cards=[], recent=recent)
    return client.user_text()


def test_planner_adds_a_diversity_instruction_only_when_plans_collapse(kernel: KernelDef) -> None:
    collapsed = _plan_prompt(kernel, ["eviction-policy-two-pass", "welford-norms"] * 2)
    assert "## Diversity required" in collapsed
    assert "Recent plans collapsed onto eviction-policy-two-pass, welford-norms" in collapsed
    assert "NOT one of these" in collapsed

    for recent in ([], ["eviction-policy-two-pass"], ["a", "b", "c", "d"], ["a", "a", "a"]):
        assert "Diversity required" not in _plan_prompt(kernel, recent), recent


# -- prompt files and data guard ---------------------------------------------------------------------


def test_prompts_carry_their_version_into_every_call(kernel: KernelDef, roofline: dict) -> None:
    for role in ROLES:
        header = (PROMPTS / f"{role}.md").read_text().split("---")[1]
        assert f"version: {load_prompt(role).version}" in header
    client = ScriptedClient(["bad", _reply(ANALYSIS)])
    result = Analyst(client).run(kernel, roofline)
    prompt = load_prompt("analyst")
    assert result.prompt_version == prompt.version == "1"
    for call, record in zip(client.calls, result.calls):
        assert call["messages"][0].content.startswith(
            f"<!-- kernelopt prompt: analyst version: {prompt.version} digest: {prompt.digest} -->"
        )
        assert (record.prompt_version, record.prompt_digest) == (prompt.version, prompt.digest)


def test_every_role_prompt_renders_its_version_header(kernel: KernelDef, roofline: dict) -> None:
    candidate = KernelCandidate(source=_candidate_source(kernel), summary="s")
    contexts = {
        Analyst: lambda r: r.run(kernel, roofline),
        Planner: lambda r: r.run(Analysis(**ANALYSIS), kernel, cards=[]),
        Coder: lambda r: r.run(Plan(**PLAN), kernel),
        Repairer: lambda r: r.run(candidate, Verdict("static", False, "line 3: imports os"), kernel),
        Judge: lambda r: r.run(Plan(**PLAN), kernel, {"time_us": 1.0}, None, []),
    }
    replies = {
        Analyst: ANALYSIS, Planner: PLAN, Coder: {"source": candidate.source, "summary": "s"},
        Repairer: {"source": candidate.source, "summary": "s"},
        Judge: {"strategy": "x", "what_worked": "w", "why": "y", "apply_when": "a", "avoid_when": "b", "success": False},
    }
    for role_cls, run in contexts.items():
        client = ScriptedClient([_reply(replies[role_cls])])
        run(role_cls(client))
        assert client.calls[0]["role"] == role_cls.name
        assert f"kernelopt prompt: {role_cls.name} version: " in client.calls[0]["messages"][0].content


def test_a_tensor_in_the_context_raises_before_anything_is_sent(kernel: KernelDef, roofline: dict) -> None:
    client = ScriptedClient([_reply(ANALYSIS)])
    with pytest.raises(TensorInPromptError, match=r"context\['launch'\]\['in_ptr0'\] is a torch.Tensor"):
        Analyst(client).run(kernel, roofline, launch={"in_ptr0": torch.zeros(4, 4)})
    with pytest.raises(TensorInPromptError, match="never tensor data"):
        Analyst(client).run(kernel, roofline, ncu_metrics={"m": torch.tensor(1.0)})
    with pytest.raises(TensorInPromptError, match="ndarray"):
        Analyst(client).run(kernel, {**roofline, "samples": [np.ones(3)]})
    assert client.calls == []

    @dataclass
    class Holder:
        values: tuple

    with pytest.raises(TensorInPromptError, match=r"ctx\.values\[1\]"):
        assert_no_tensors(Holder((1, torch.ones(2))), "ctx")
    assert_no_tensors({"shape": (16, 128), "dtype": "float32", "time_us": 4.1, "size": torch.Size([2])})


# -- the language of a rewrite: Triton, or CUDA C++ in the Triton kernel's slot ---------------------

ROW_L2_CU = Path(__file__).resolve().parent.parent / "examples" / "cuda" / "10_row_l2_normalize.cu"
CUDA_PLAN = {**PLAN, "strategy": "l2-resident-rows", "language": "cuda",
             "change": "one block per SM walks the rows; the second pass reads each row from L2"}


@pytest.fixture(scope="module")
def row_l2() -> KernelDef:
    from kernelopt.capture.output_code import triton_kernel_def

    source = (FIXTURES / "10_row_l2_normalize.kernel.py").read_text()
    return triton_kernel_def("triton_red_fused_div_linalg_vector_norm_0", source)


def test_a_plan_names_its_language_triton_unless_it_says_cuda() -> None:
    assert Plan(**PLAN).language == "triton" and Plan(**CUDA_PLAN).language == "cuda"
    with pytest.raises(Exception, match="language"):
        Plan(**{**PLAN, "language": "rust"})
    assert "language: triton unless the change needs what Triton cannot express" in (PROMPTS / "planner.md").read_text()


def test_a_cuda_plan_gets_the_slot_contract_and_a_triton_reply_goes_back(row_l2: KernelDef) -> None:
    triton_reply = _reply({"source": _candidate_source(row_l2), "summary": "a Triton rewrite"})
    cuda_reply = _reply({"source": ROW_L2_CU.read_text(), "summary": "rows walked per SM"})
    client = ScriptedClient([triton_reply, cuda_reply])
    result = Coder(client).run(Plan(**CUDA_PLAN), row_l2)
    system = client.calls[0]["messages"][0].content
    assert "with CUDA C++" in system and "The CUDA C++ slot contract" in system
    assert "(in_ptr0, out_ptr1, xnumel, r0_numel)" in system and "getCurrentCUDAStream" in system
    assert "The launcher contract" not in system  # the Triton contract is not shown for a CUDA plan
    assert result.repairs == 1
    assert "the plan asks for CUDA C++: its first line must be `// kernelopt: cuda`" in client.calls[1]["messages"][-1].content
    assert result.output.source.startswith("// kernelopt: cuda")


def test_a_cuda_reply_that_breaks_the_slot_goes_back_with_gate_one_s_reason(row_l2: KernelDef) -> None:
    wrong = ROW_L2_CU.read_text().replace("auto stream = at::cuda::getCurrentCUDAStream();", "cudaStream_t stream = 0;")
    client = ScriptedClient([_reply({"source": wrong, "summary": "s"}), _reply({"source": ROW_L2_CU.read_text(), "summary": "s"})])
    result = Coder(client).run(Plan(**CUDA_PLAN), row_l2)
    assert result.repairs == 1 and "current stream" in client.calls[1]["messages"][-1].content


def test_a_cuda_candidate_is_repaired_in_cuda_from_nvcc_s_error(row_l2: KernelDef) -> None:
    broken = KernelCandidate(source=ROW_L2_CU.read_text().replace("acc = fmaf(v, v, acc);", "acc = fmaf(vv, v, acc);"),
                             summary="first try")
    verdict = Verdict("correctness", False, 'candidate does not compile: kernel.cu(27): error: identifier "vv" is undefined',
                      {"rule": "build"})
    client = ScriptedClient([_reply({"source": ROW_L2_CU.read_text(), "summary": "fixed the typo"})])
    result = Repairer(client).run(broken, verdict, row_l2, plan=Plan(**CUDA_PLAN))
    system, user = client.calls[0]["messages"][0].content, client.user_text()
    assert "The CUDA C++ slot contract" in system and "nvcc's first error is in the reason" in system
    assert "```cpp\n// kernelopt: cuda" in user and 'identifier "vv" is undefined' in user
    assert result.output.source.startswith("// kernelopt: cuda")


def test_a_prompt_s_digest_covers_the_files_its_includes_include() -> None:
    from kernelopt.agents.roles.base import _includes

    body = (PROMPTS / "coder.md").read_text()
    assert _includes(body) == ["_contract.md", "_contract_cuda.md", "_contract_file.md"]


# -- CUDA C++ for a kernel file's kernel: the Coder is no longer held to Triton for files -----------

SOFTMAX_FILE = Path(__file__).resolve().parent.parent / "examples" / "kernels" / "softmax_naive.py"
SOFTMAX_CU = SOFTMAX_FILE.with_suffix(".cu")


@pytest.fixture(scope="module")
def softmax_file() -> KernelDef:
    from kernelopt.capture.output_code import triton_kernel_def

    return triton_kernel_def("softmax_kernel", SOFTMAX_FILE.read_text())  # as optimize_file shows a file


def test_a_kernel_file_s_cuda_plan_gets_the_file_slot_contract_and_a_python_reply_goes_back(softmax_file) -> None:
    from kernelopt.agents.roles.coder import FILE

    client = ScriptedClient([
        _reply({"source": SOFTMAX_FILE.read_text(), "summary": "the file again"}),
        _reply({"source": SOFTMAX_CU.read_text(), "summary": "two passes, one block per row"}),
    ])
    result = Coder(client).run(Plan(**CUDA_PLAN), softmax_file, target=FILE)
    system = client.calls[0]["messages"][0].content
    assert "kernel of a standalone Triton kernel file, `softmax_kernel`, with CUDA C++" in system
    assert "The CUDA C++ slot contract" in system and "(x_ptr, y_ptr, n_cols, x_stride, y_stride)" in system
    assert "The file's own `launch` is kept byte for byte" in system and "compute your own grid" in system
    assert "The kernel-file contract" not in system and "in_ptr*" not in system
    assert result.repairs == 1 and "first line must be `// kernelopt: cuda`" in client.calls[1]["messages"][-1].content
    assert result.output.source == SOFTMAX_CU.read_text()


def test_a_kernel_file_s_cuda_reply_that_skips_rows_goes_back_with_gate_one_s_reason(softmax_file) -> None:
    from kernelopt.agents.roles.coder import FILE

    skipping = SOFTMAX_CU.read_text().replace("  MaxSum acc{", "  if (blockIdx.x & 1) return;\n  MaxSum acc{", 1)
    client = ScriptedClient([_reply({"source": skipping, "summary": "s"}), _reply({"source": SOFTMAX_CU.read_text(), "summary": "s"})])
    result = Coder(client).run(Plan(**CUDA_PLAN), softmax_file, target=FILE)
    assert result.repairs == 1 and "if (blockIdx.x & 1) return" in client.calls[1]["messages"][-1].content


def test_a_kernel_file_s_triton_plan_keeps_the_file_contract_and_refuses_cuda(softmax_file) -> None:
    from kernelopt.agents.roles.coder import FILE

    client = ScriptedClient([
        _reply({"source": SOFTMAX_CU.read_text(), "summary": "C++"}),
        _reply({"source": SOFTMAX_FILE.read_text().replace("num_warps=4", "num_warps=8"), "summary": "8 warps"}),
    ])
    result = Coder(client).run(Plan(**PLAN), softmax_file, target=FILE)
    system = client.calls[0]["messages"][0].content
    assert "The kernel-file contract" in system and "The CUDA C++ slot contract" not in system
    assert "the plan asks for a Triton kernel file, not CUDA C++" in client.calls[1]["messages"][-1].content
    assert "num_warps=8" in result.output.source


def test_a_kernel_file_s_cuda_candidate_is_repaired_in_cuda_for_its_slot(softmax_file) -> None:
    from kernelopt.agents.roles.coder import FILE

    broken = KernelCandidate(source=SOFTMAX_CU.read_text().replace("acc.max = v;", "acc.max = vv;"), summary="first")
    verdict = Verdict("correctness", False, 'candidate for softmax_kernel does not compile: k.cu(40): error: identifier "vv"',
                      {"rule": "build"})
    client = ScriptedClient([_reply({"source": SOFTMAX_CU.read_text(), "summary": "fixed"})])
    result = Repairer(client).run(broken, verdict, softmax_file, plan=Plan(**CUDA_PLAN), target=FILE)
    system, user = client.calls[0]["messages"][0].content, client.user_text()
    assert "the kernel `softmax_kernel` of a user's standalone Triton kernel file, in CUDA C++" in system
    assert "The file's own `launch` is kept byte for byte" in system and "nvcc's first error" in system
    assert 'identifier "vv"' in user and result.output.source == SOFTMAX_CU.read_text()


def test_the_planner_plans_triton_on_a_machine_that_cannot_build_cuda(kernel: KernelDef) -> None:
    """No nvcc here (pip's PyTorch on a GPU machine): the prompt says so, and a CUDA plan is sent back to be
    planned again in Triton (its change too, not only its language), rather than a candidate that cannot
    build, a repair that cannot fix it, and their calls; a Planner that keeps to CUDA fails as an invalid
    reply does."""
    from kernelopt.agents.roles.base import RoleOutputError

    why = "no nvcc at /usr/local/cuda/bin/nvcc (PyTorch's CUDA_HOME is /usr/local/cuda): install the CUDA toolkit"
    triton_plan = {**PLAN, "change": "one Triton program per row, rows held in registers"}
    client = ScriptedClient([_reply({**PLAN, "language": "cuda", "change": "warp shuffles in CUDA C++"}),
                             _reply(triton_plan)])  # fmt: skip
    plan = Planner(client).run(Analysis(**ANALYSIS), kernel, cards=[], cuda_unavailable=why).output
    assert plan.language == "triton" and plan.change == triton_plan["change"] and len(client.calls) == 2
    assert f"language: triton only. This machine cannot build CUDA C++ ({why})." in client.calls[0]["messages"][0].content
    repair = client.calls[1]["messages"][-1].content
    assert f"this machine cannot build CUDA C++ ({why}): give the plan for a Triton kernel" in repair
    stubborn = ScriptedClient([_reply({**PLAN, "language": "cuda"})] * 3)
    with pytest.raises(RoleOutputError, match="cannot build CUDA C"):
        Planner(stubborn).run(Analysis(**ANALYSIS), kernel, cards=[], cuda_unavailable=why)
    able = ScriptedClient([_reply({**PLAN, "language": "cuda"})])
    assert Planner(able).run(Analysis(**ANALYSIS), kernel, cards=[]).output.language == "cuda"
    assert "triton only" not in able.calls[0]["messages"][0].content
