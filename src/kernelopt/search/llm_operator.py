"""The agent loop as a search operator: analyze, plan, code, repair, judge.

It plugs into the search through the same :class:`~kernelopt.search.operators.Operator`
interface as the LLM-free operators, so the selection policy decides where it
spends its calls. Each ``propose``:

1. judges its children evaluated since the last call (before/after timings and
   the gates' verdicts → an experience record in the store's memory);
2. repairs its most recent children that failed a gate, giving the Repairer the
   failing verdict (compile error, mismatch summary, cheat detected);
3. otherwise asks the Planner for one new plan for the parent kernel (with the
   Analyst's diagnosis, retrieved strategy cards, the experience memory and the
   directions already tried) and the Coder for the kernel.

Only source code, shapes, dtypes and measurements reach the LLM. A role that
gives no valid reply, or a request that fails after its retries, costs this
proposal, not the run; a setup error (key, model) stops the run.

Each candidate's plan and each judged node are kept in the store with the run,
so a resumed run repairs with the plan the broken candidate implemented and
judges no node twice.
"""

from __future__ import annotations

import re

from kernelopt.agents.client import for_node
from kernelopt.agents.llm_errors import LLMCallError
from kernelopt.agents.roles import Analyst, Coder, Judge, Planner, Repairer
from kernelopt.agents.roles.base import RoleOutputError, kernel_kind
from kernelopt.agents.roles.coder import SLOT
from kernelopt.agents.roles.models import Analysis, KernelCandidate, Plan
from kernelopt.agents.types import ChatClient
from kernelopt.capture import cuda_toolchain
from kernelopt.capture.output_code import KernelDef, triton_kernel_def
from kernelopt.knowledge import memory
from kernelopt.knowledge.retrieval import hardware_card, retrieve
from kernelopt.search.candidate import Candidate
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext
from kernelopt.store import Store
from kernelopt.verify.verdict import Verdict

NAME = "llm"
PLAN_KEY = "llm_plan:"  # + candidate key: the plan a candidate implements (store measurement)
JUDGED_KEY = "llm_judged:"  # + node id: a node the Judge has recorded
_REPAIR_NOTE = re.compile(r"repair of node (\d+):")


def repair_of(node: Node) -> int | None:
    """The node a repair candidate repairs, read from its note (``... repair of node N: ...``)."""
    if node.operator != NAME or not node.candidate.note:
        return None
    match = _REPAIR_NOTE.search(node.candidate.note)
    return int(match.group(1)) if match else None


class LLMOperator:
    name = NAME

    def __init__(
        self,
        client: ChatClient,
        store: Store | None = None,
        run_id: int | None = None,
        device: str | None = None,
        max_repairs_per_lineage: int = 2,
        target: str = SLOT,
    ) -> None:
        self.client, self.store, self.run_id = client, store, run_id
        self.target = (
            target  # SLOT: a kernel of Inductor's launcher; FILE: a standalone kernel file (ctx.kernel its source)
        )
        self.hardware = hardware_card(device) if device else None
        self.max_repairs = max_repairs_per_lineage
        self._analysis: dict[str, Analysis] = {}
        self._plans: dict[str, Plan] = {}  # candidate key -> the plan it implements
        self._repair_depth: dict[str, int] = {}
        self._repaired: set[int] = set()
        self._judged: set[int] = set()
        self._loaded = False

    # -- what a resumed run finds in the store -------------------------------------------------

    def _load(self) -> None:
        """Plans and judged nodes an earlier process of this run recorded (once per operator)."""
        if self._loaded or self.store is None or self.run_id is None:
            return
        self._loaded = True
        for key, value in self.store.measurements(self.run_id, PLAN_KEY).items():
            self._plans.setdefault(key[len(PLAN_KEY) :], Plan.model_validate(value))
        self._judged |= {int(key[len(JUDGED_KEY) :]) for key in self.store.measurements(self.run_id, JUDGED_KEY)}

    def _keep_plan(self, candidate: Candidate, plan: Plan) -> None:
        key = candidate.key()
        if key not in self._plans and self.store is not None and self.run_id is not None:
            self.store.add_measurement(self.run_id, PLAN_KEY + key, plan.model_dump())
        self._plans[key] = plan

    def _mark_judged(self, node: Node) -> None:
        self._judged.add(node.id)
        if self.store is not None and self.run_id is not None:
            self.store.add_measurement(self.run_id, f"{JUDGED_KEY}{node.id}", True)

    # -- the operator interface --------------------------------------------------------------

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        if ctx.kernel is None or n <= 0:
            return []
        try:
            self._load()
            with for_node(parent.id):  # the transcripts of this proposal name the node it grew from
                self._judge_evaluated(ctx)
                out = self._repairs(ctx, n)
                if not out:
                    new = self._new_plan(parent, ctx)
                    out = [new] if new else []
            return out
        except (RoleOutputError, LLMCallError):
            return []  # a bad reply or a failed request costs this proposal only

    # -- steps -------------------------------------------------------------------------------

    def _analysis_of(self, ctx: SearchContext) -> Analysis:
        assert ctx.kernel is not None  # the LLM operator proposes for kernels, not the whole model
        if ctx.target not in self._analysis:
            facts = ctx.facts
            time_us, min_us = facts.get("time_us"), facts.get("min_time_us")
            roofline = {
                "time_us": time_us,
                "min_time_us": min_us,
                "headroom_us": max(0.0, time_us - min_us) if time_us and min_us else None,
                "pct_of_peak": 100.0 * min_us / time_us if time_us and min_us else None,
                "peak_gbps": facts.get("peak_gbps"),
            }
            self._analysis[ctx.target] = (
                Analyst(self.client)
                .run(ctx.kernel, roofline, ncu_metrics=facts.get("ncu") or None, hardware=self.hardware)
                .output
            )
        return self._analysis[ctx.target]

    def _new_plan(self, parent: Node, ctx: SearchContext) -> Candidate | None:
        assert ctx.kernel is not None
        analysis = self._analysis_of(ctx)
        kind = kernel_kind(ctx.kernel.heuristic)
        base = self._kernel_of(parent, ctx)
        cards = retrieve(
            f"{ctx.kernel.name} {analysis.notes}", analysis.bottleneck, kind, "hopper" if self.hardware else None
        )
        experience = memory.stats(self.store, analysis.bottleneck, kind) if self.store else []
        avoid = memory.to_avoid(self.store, analysis.bottleneck, kind) if self.store else []
        recent = [n.candidate.note.split(":")[0] for n in ctx.nodes if n.operator == NAME and n.candidate.note][-8:]
        plan = (
            Planner(self.client)
            .run(
                analysis, base, cards, experience, avoid, recent, hardware=self.hardware,
                cuda_unavailable=cuda_toolchain.missing(),
            )
            .output
        )  # fmt: skip
        code = (
            Coder(self.client).run(plan, base, hardware=self.hardware, launch=launch_of(ctx), target=self.target).output
        )
        candidate = Candidate(
            ctx.target,
            NAME,
            source=code.source,
            config=parent.candidate.config,
            note=f"{plan.strategy}: {code.summary}",
        )
        self._keep_plan(candidate, plan)
        self._repair_depth[candidate.key()] = 0
        return candidate

    def _repairs(self, ctx: SearchContext, n: int) -> list[Candidate]:
        assert ctx.kernel is not None
        out: list[Candidate] = []
        # What the history says (a resumed run's operator starts with empty memory): which nodes
        # a repair already exists for, and how deep each node sits in its chain of repairs.
        by_id = {x.id: x for x in ctx.nodes}
        repaired = self._repaired | {r for x in ctx.nodes if (r := repair_of(x)) is not None}

        def depth(node: Node) -> int:
            steps, seen = 0, set()
            while (r := repair_of(node)) is not None and r in by_id and r not in seen:
                seen.add(r)
                steps, node = steps + 1, by_id[r]
            return max(steps, self._repair_depth.get(node.key, 0))

        failed = [
            x
            for x in ctx.nodes
            if x.operator == NAME
            and x.result is not None
            and not x.result.passed
            and x.id not in repaired
            and depth(x) < self.max_repairs
        ]
        for node in reversed(failed):
            if len(out) >= n:
                break
            self._repaired.add(node.id)
            result = node.result
            assert result is not None  # ``failed`` holds evaluated nodes only
            verdict = next((Verdict.from_dict(v) for v in result.verdicts if not v["passed"]), None)
            if verdict is None:  # died in the worker: no gate answered
                verdict = Verdict("correctness", False, result.reason)
            plan = self._plans.get(node.key)
            fixed = (
                Repairer(self.client)
                .run(
                    KernelCandidate(source=node.candidate.source or "", summary=node.candidate.note or "candidate"),
                    verdict,
                    ctx.kernel,
                    plan=plan,
                    launch=launch_of(ctx),
                    target=self.target,
                )
                .output
            )
            candidate = Candidate(
                ctx.target,
                NAME,
                source=fixed.source,
                config=node.candidate.config,
                note=f"{plan.strategy if plan else 'repair'}: repair of node {node.id}: {fixed.summary}",
            )
            if plan is not None:
                self._keep_plan(candidate, plan)
            self._repair_depth[candidate.key()] = depth(node) + 1
            out.append(candidate)
        return out

    def _judge_evaluated(self, ctx: SearchContext) -> None:
        assert ctx.kernel is not None
        analysis = self._analysis.get(ctx.target)
        for node in ctx.nodes:
            plan = self._plans.get(node.key)
            if node.operator != NAME or node.result is None or node.id in self._judged or plan is None:
                continue
            self._mark_judged(node)
            result = node.result
            after = (
                {"time_us": result.measurements.get("kernel_time_us")}
                if result.measurements.get("kernel_time_us")
                else None
            )
            verdicts = [Verdict.from_dict(v) for v in result.verdicts]
            record = (
                Judge(self.client)
                .run(
                    plan,
                    ctx.kernel,
                    {"time_us": ctx.facts.get("time_us")},
                    after,
                    verdicts,
                    speedup=result.fitness if result.passed else None,
                    bottleneck=analysis.bottleneck if analysis else None,
                    candidate_summary=node.candidate.note,
                )
                .output
            )
            if self.store is not None:
                memory.record(
                    self.store,
                    self.run_id,
                    record.strategy,
                    analysis.bottleneck if analysis else "unknown",
                    kernel_kind(ctx.kernel.heuristic),
                    record.speedup,
                    record.success,
                    record.model_dump(),
                )

    @staticmethod
    def _kernel_of(parent: Node, ctx: SearchContext) -> KernelDef:
        assert ctx.kernel is not None
        if parent.candidate.source and parent.candidate.source != ctx.root_source:
            try:
                return triton_kernel_def(ctx.kernel.name, parent.candidate.source)
            except (ValueError, SyntaxError):
                pass
        return ctx.kernel


def launch_of(ctx: SearchContext) -> dict[str, str] | None:
    """The launch's arguments as the worker described them (dtypes, shapes, strides, sizes; a kernel
    file's inputs and its slot kernel's arguments), for the Coder and the Repairer."""
    return ctx.facts.get("launch") or (ctx.facts.get("kernel_file") or {}).get("launch") or None
