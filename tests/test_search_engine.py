"""The search engine on a toy problem: best found, dedup, failures, termination, policies, registry."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from search_toys import TARGET, FakeEvaluator, StepOperator, landscape, make_engine, x_of

from kernelopt.errors import KerneloptError, StoreError
from kernelopt.search import (
    MODEL_TARGET,
    BeamPolicy,
    Budget,
    Candidate,
    EvaluationResult,
    Node,
    NodeStore,
    SearchState,
    UCBPolicy,
    available_operators,
    make_operators,
    make_policy,
    register_operator,
    stop_reason,
)
from kernelopt.search.operators import unregister_operator
from kernelopt.store import Store


@pytest.fixture
def nodes(tmp_path: Path):
    with Store(tmp_path / "k.db") as store:
        run_id = store.start_run("optimize", "toy", "cpu", {})
        yield NodeStore(store, run_id)


def _xs(nodes: list[Node]) -> list[int]:
    return [x_of(n.candidate.source) for n in nodes]


# -- candidates and results ------------------------------------------------------------


def test_candidate_key_is_the_program_not_its_formatting() -> None:
    a = Candidate(TARGET, "llm", source="def k():\n    x = 1\n    return x\n")
    b = Candidate(TARGET, "other", source="# header\ndef k():\n\n    x = 1   \n    # why\n    return x", note="n")
    c = Candidate(TARGET, "llm", source="def k():\n    x = 2\n    return x\n")
    d = Candidate(TARGET, "llm", source="def k():\nx = 1\nreturn x\n")  # indentation is syntax
    e = Candidate(TARGET, "llm", source="s = '#'\n")
    assert a.key() == b.key()
    assert len({a.key(), c.key(), d.key(), e.key()}) == 4
    assert e.key() != Candidate(TARGET, "llm", source="s = ''\n").key()
    # the same program written differently: trailing comments, quotes, spacing, parentheses
    f = Candidate(TARGET, "llm", source='def k():\n    x = (1)  # one\n    s = "a"\n    return x\n')
    g = Candidate(TARGET, "llm", source="def k():\n    x=1\n    s='a'\n    return  x")
    assert f.key() == g.key() != a.key()
    assert Candidate(TARGET, "llm", source="def k(:\n  # broken\n").key() == Candidate(TARGET, "llm", source="def k(:").key()


def test_candidate_key_covers_options_and_config_canonically() -> None:
    a = Candidate(MODEL_TARGET, "compiler-knobs", options={"b": 1, "a": {"y": 2, "x": 1}})
    b = Candidate(MODEL_TARGET, "compiler-knobs", options={"a": {"x": 1, "y": 2}, "b": 1})
    assert a.key() == b.key() and hash(a) == hash(b)
    assert a.key() != Candidate(MODEL_TARGET, "compiler-knobs", options={"b": 2, "a": {"y": 2, "x": 1}}).key()
    src = Candidate(TARGET, "launch-config", source="x=1", config={"XBLOCK": 64, "num_warps": 4})
    assert src.key() != Candidate(TARGET, "launch-config", source="x=1", config={"XBLOCK": 128, "num_warps": 4}).key()
    with pytest.raises(ValueError, match="JSON-serializable"):
        Candidate(MODEL_TARGET, "compiler-knobs", options={"f": object()})


def test_candidate_and_result_round_trip() -> None:
    cand = Candidate(TARGET, "launch-config", source="x=1", config={"XBLOCK": 64}, note="bigger tile")
    assert Candidate.from_payload(cand.to_payload()) == cand
    result = EvaluationResult(
        passed=True,
        fitness=1.2,
        failed_gate=None,
        reason="speedup\n1.2x",
        verdicts=[{"gate": "static", "passed": True, "reason": "ok", "details": {}}],
        measurements={"gpu_s": 1.5, "kernel_time_us": 80.0},
    )
    assert result.reason == "speedup 1.2x"
    assert EvaluationResult.from_dict(result.to_dict()) == result
    with pytest.raises(ValueError, match="fitness 0.0"):
        EvaluationResult(passed=False, fitness=1.1, failed_gate="performance", reason="")
    with pytest.raises(ValueError, match="finite"):
        EvaluationResult(passed=True, fitness=math.nan, failed_gate=None, reason="")


# -- the node store --------------------------------------------------------------------


def test_node_store_dedup_record_guard_and_queries(nodes: NodeStore) -> None:
    root = nodes.add(Candidate(TARGET, "root", source="x=0"), None, 0)
    assert root is not None and root.status == "pending" and root.is_root
    assert nodes.add(Candidate(TARGET, "step", source="x=0  \n# same"), root.id, 1) is None
    other = nodes.add(Candidate("other_kernel", "root", source="x=0"), None, 0)  # same key, other target: allowed
    assert other is not None
    nodes.record(root.id, EvaluationResult(True, 1.0, None, "baseline"))
    with pytest.raises(StoreError, match="already evaluated"):
        nodes.record(root.id, EvaluationResult(True, 2.0, None, "again"))
    child = nodes.add(Candidate(TARGET, "step", source="x=3"), root.id, 1)
    assert child is not None
    assert [n.id for n in nodes.pending(TARGET)] == [child.id]
    nodes.record(child.id, landscape(3))
    got = nodes.get(child.id)
    assert (got.status, got.fitness, got.failed_gate) == ("evaluated", 0.0, "correctness")
    assert "max abs error" in (got.reason or "") and got.result is not None and not got.result.passed
    assert nodes.best(TARGET).id == root.id
    assert nodes.failures_by_gate(TARGET) == {"correctness": 1}
    assert nodes.targets() == [TARGET, "other_kernel"]
    assert nodes.find(TARGET, child.key).id == child.id


# -- the engine ------------------------------------------------------------------------


def test_finds_the_peak_without_evaluating_the_root_or_any_duplicate(nodes: NodeStore) -> None:
    evaluator = FakeEvaluator()
    events: list = []
    engine = make_engine(nodes, evaluator, Budget(max_evaluations=200, patience=4), events=events)
    outcome = engine.run()

    assert outcome.best is not None and x_of(outcome.best.candidate.source) == 20
    assert outcome.best.fitness == pytest.approx(2.0)
    root = nodes.root(TARGET)
    assert root.operator == "root" and root.fitness == 1.0 and root.status == "evaluated"
    assert root.key not in evaluator.calls
    assert max(evaluator.calls.values()) == 1  # no candidate evaluated twice
    evaluated = nodes.evaluated(TARGET)
    assert sum(evaluator.calls.values()) == len(evaluated) - 1 == outcome.evaluations
    assert len({n.key for n in evaluated}) == len(evaluated)
    assert not nodes.pending(TARGET) and outcome.pending == 0

    kinds = {kind for kind, _ in events}
    assert kinds == {"round", "evaluated", "stopped"}
    assert sum(1 for kind, _ in events if kind == "evaluated") == outcome.evaluations
    assert events[-1][0] == "stopped" and events[-1][1]["reason"] == outcome.stop_reason


def test_failures_keep_gate_and_reason_and_are_counted(nodes: NodeStore) -> None:
    outcome = make_engine(nodes, FakeEvaluator(), Budget(max_evaluations=60, patience=None)).run()
    failed = [n for n in nodes.evaluated(TARGET) if not n.passed]
    expected: dict[str, int] = {}
    for node in failed:
        x = x_of(node.candidate.source)
        gate = "static" if x < 0 else "correctness" if x % 7 == 3 else "performance"
        assert node.failed_gate == gate and node.fitness == 0.0
        assert node.reason and f"x={x}" in node.reason
        expected[gate] = expected.get(gate, 0) + 1
    assert outcome.failures_by_gate == expected
    assert "correctness" in expected  # the landscape guarantees some: x=3 is a neighbour of the root


def test_duplicate_proposals_within_a_round_and_across_rounds_are_dropped(nodes: NodeStore) -> None:
    class Echo:
        """Proposes the same few points, with cosmetic variations, from every parent."""

        name = "echo"

        def propose(self, parent, ctx, n):
            return [
                Candidate(ctx.target, self.name, source="x=5"),
                Candidate(ctx.target, self.name, source="x=5   \n# again"),
                Candidate(ctx.target, self.name, source="x=6"),
                Candidate(ctx.target, self.name, source="x=0"),  # the root itself
            ]

    evaluator = FakeEvaluator()
    outcome = make_engine(nodes, evaluator, Budget(max_evaluations=50), operators=[Echo(), Echo()]).run()
    assert sorted(_xs(nodes.evaluated(TARGET))) == [0, 5, 6]
    assert set(evaluator.calls.values()) == {1} and len(evaluator.calls) == 2
    assert outcome.stop_reason == "search space exhausted: round 2 produced no new candidate"


def test_stops_at_the_evaluation_budget_exactly(nodes: NodeStore) -> None:
    evaluator = FakeEvaluator()
    outcome = make_engine(nodes, evaluator, Budget(max_evaluations=10, patience=None)).run()
    assert outcome.stop_reason == "evaluation budget of 10 reached"
    assert outcome.evaluations == 10 == sum(evaluator.calls.values())
    assert not nodes.pending(TARGET)  # the last round was cut before it was persisted


def test_stops_on_patience(nodes: NodeStore) -> None:
    def flat(x: int) -> EvaluationResult:
        return EvaluationResult(True, 1.1, None, "flat")

    wide = StepOperator(steps=tuple(range(-40, 41)))  # never runs out of new points
    outcome = make_engine(nodes, FakeEvaluator(score=flat), Budget(max_evaluations=None, patience=3), operators=[wide]).run()
    # round 1 improves 1.0 -> 1.1; rounds 2, 3, 4 do not.
    assert outcome.stop_reason == "patience: 3 rounds without improvement"
    assert outcome.rounds == 4


def test_stops_at_the_roofline(nodes: NodeStore) -> None:
    outcome = make_engine(
        nodes, FakeEvaluator(), Budget(max_evaluations=500, patience=None), facts={"min_time_us": 50.0, "time_us": 100.0}
    ).run()
    assert outcome.stop_reason.startswith("best kernel at ") and outcome.stop_reason.endswith("of the roofline (>= 90%)")
    assert outcome.best.fitness >= 1.8  # 50 us / (100 us / fitness) >= 0.9
    # it stopped at the first result that got there
    passed = [n for n in nodes.evaluated(TARGET) if n.passed and not n.is_root]
    assert sum(1 for n in passed if n.fitness >= 1.8) == 1


def test_root_at_the_roofline_stops_before_any_evaluation(nodes: NodeStore) -> None:
    evaluator = FakeEvaluator()
    outcome = make_engine(nodes, evaluator, Budget(), facts={"min_time_us": 95.0, "time_us": 100.0}).run()
    assert outcome.stop_reason == "best kernel at 95% of the roofline (>= 90%)"
    assert outcome.evaluations == 0 and not evaluator.calls and outcome.best.is_root


def test_stops_on_wall_time_with_an_injected_clock(nodes: NodeStore) -> None:
    now = [100.0]

    def tick() -> None:
        now[0] += 1.0  # every evaluation takes a second of the fake clock

    outcome = make_engine(
        nodes, FakeEvaluator(on_each=tick), Budget(max_evaluations=None, max_wall_s=5, patience=None), clock=lambda: now[0]
    ).run()
    assert outcome.stop_reason == "wall-time budget of 5 s reached (5.0 s)"
    assert outcome.evaluations == 5
    assert outcome.pending == len(nodes.pending(TARGET)) > 0  # the rest of the round, for a resume


class ChunkEvaluator(FakeEvaluator):
    """Finishes four nodes per (fake) call, four seconds each call, and can hand over what it holds."""

    def __init__(self, now: list[float]) -> None:
        super().__init__()
        self.now = now

    def __call__(self, batch: list[Node]):
        evaluator = self

        class Results:
            def __init__(self) -> None:
                self.todo, self.held = list(batch), []

            def __iter__(self):
                return self

            def __next__(self):
                if not self.held:
                    if not self.todo:
                        raise StopIteration
                    chunk, self.todo = self.todo[:4], self.todo[4:]
                    evaluator.now[0] += 4.0
                    for node in chunk:
                        evaluator.calls[node.key] += 1
                    self.held = [(node, evaluator.score(x_of(node.candidate.source))) for node in chunk]
                return self.held.pop(0)

            def ready(self):
                held, self.held = self.held, []
                return held

        return Results()


def test_a_budget_stop_mid_batch_still_records_what_the_evaluator_finished(nodes: NodeStore) -> None:
    now = [0.0]
    evaluator = ChunkEvaluator(now)
    outcome = make_engine(nodes, evaluator, Budget(max_evaluations=None, max_wall_s=5, patience=None), clock=lambda: now[0]).run()
    assert outcome.stop_reason == "wall-time budget of 5 s reached (8.0 s)"
    # round 1: one call of 3 (t=4); round 2: the stop came with the first result of its first
    # call (t=8), whose three other results, already paid for, were recorded, not thrown away
    assert outcome.evaluations == 7 == sum(evaluator.calls.values())
    assert len(nodes.evaluated(TARGET)) == 1 + 7
    assert outcome.pending == len(nodes.pending(TARGET))
    # a resume evaluates only what was never evaluated
    again = ChunkEvaluator(now)
    make_engine(nodes, again, Budget(max_evaluations=12, patience=None), clock=lambda: now[0]).run()
    assert not set(again.calls) & set(evaluator.calls) and sum(again.calls.values()) == 5


def test_stops_on_gpu_time(nodes: NodeStore) -> None:
    outcome = make_engine(nodes, FakeEvaluator(), Budget(max_evaluations=None, max_gpu_s=2.0, patience=None)).run()
    assert outcome.stop_reason == "GPU-time budget of 2 s reached (2.0 s)"
    assert outcome.evaluations == 4  # 0.5 GPU-s each


def test_stops_when_the_search_space_is_exhausted(nodes: NodeStore) -> None:
    evaluator = FakeEvaluator()
    outcome = make_engine(
        nodes, evaluator, Budget(max_evaluations=None, patience=None), operators=[StepOperator(limit=6)]
    ).run()
    assert outcome.stop_reason.startswith("search space exhausted: round ")
    assert sorted(_xs(nodes.evaluated(TARGET))) == [0, 1, 2, 3, 4, 5, 6]
    assert set(evaluator.calls.values()) == {1}


def test_a_second_run_resumes_a_stopped_search_without_repeating(nodes: NodeStore) -> None:
    first = FakeEvaluator()
    make_engine(nodes, first, Budget(max_evaluations=8, patience=None)).run()
    second = FakeEvaluator()
    outcome = make_engine(nodes, second, Budget(max_evaluations=20, patience=None)).run()
    assert outcome.evaluations == 20 and sum(second.calls.values()) == 12
    assert not set(first.calls) & set(second.calls)


def test_a_crash_mid_round_resumes_into_the_uninterrupted_search(tmp_path: Path) -> None:
    """Patience is recomputed from the store, and an unfinished round does not count until it is finished."""

    def flat(x: int) -> EvaluationResult:
        return EvaluationResult(True, 1.1, None, "flat")

    def search(store: Store, run_id: int, evaluator: FakeEvaluator):
        wide = StepOperator(steps=tuple(range(-40, 41)))
        return make_engine(NodeStore(store, run_id), evaluator, Budget(max_evaluations=None, patience=3), operators=[wide]).run()

    with Store(tmp_path / "a.db") as store:
        run_id = store.start_run("optimize", "toy", "cpu", {})
        reference = search(store, run_id, FakeEvaluator(score=flat))
        expected = {n.key for n in NodeStore(store, run_id).evaluated(TARGET)}
    assert (reference.stop_reason, reference.rounds) == ("patience: 3 rounds without improvement", 4)

    crashes_at = reference.evaluations - 5  # in the middle of round 4 (12 candidates), the one that exhausts patience
    count = [0]

    def crash() -> None:
        count[0] += 1
        if count[0] == crashes_at:
            raise KeyboardInterrupt  # like a kill: the evaluation in flight is never recorded

    with Store(tmp_path / "b.db") as store:
        run_id = store.start_run("optimize", "toy", "cpu", {})
        with pytest.raises(KeyboardInterrupt):
            search(store, run_id, FakeEvaluator(score=flat, on_each=crash))
        nodes = NodeStore(store, run_id)
        # recorded: the root and the crashes_at - 1 evaluations before the one in flight
        assert len(nodes.evaluated(TARGET)) == crashes_at and len(nodes.pending(TARGET)) == 6
        resumed_evaluator = FakeEvaluator(score=flat)
        resumed = search(store, run_id, resumed_evaluator)
        assert sum(resumed_evaluator.calls.values()) == 6
        assert {n.key for n in nodes.evaluated(TARGET)} == expected and not nodes.pending(TARGET)
    assert (resumed.stop_reason, resumed.rounds, resumed.evaluations) == (
        reference.stop_reason,
        reference.rounds,
        reference.evaluations,
    )


def test_a_changed_original_is_refused_on_resume(nodes: NodeStore) -> None:
    make_engine(nodes, FakeEvaluator(), Budget(max_evaluations=2)).run()
    with pytest.raises(KerneloptError, match="different original kernel"):
        make_engine(nodes, FakeEvaluator(), Budget(max_evaluations=4), root=Candidate(TARGET, "root", source="x=1")).run()


def test_operator_proposing_for_another_target_is_a_bug(nodes: NodeStore) -> None:
    class Stray:
        name = "stray"

        def propose(self, parent, ctx, n):
            return [Candidate("elsewhere", self.name, source="x=1")]

    with pytest.raises(ValueError, match="'elsewhere' while searching"):
        make_engine(nodes, FakeEvaluator(), Budget(), operators=[Stray()]).run()


def test_stop_reason_messages() -> None:
    assert stop_reason(Budget(), SearchState(evaluations=100)) == "evaluation budget of 100 reached"
    assert stop_reason(Budget(), SearchState(evaluations=99)) is None
    state = SearchState(best_time_us=100.0, min_time_us=92.0)
    assert stop_reason(Budget(), state) == "best kernel at 92% of the roofline (>= 90%)"
    assert stop_reason(Budget(), SearchState(best_time_us=100.0, min_time_us=89.0)) is None
    assert stop_reason(Budget(), SearchState(best_time_us=None, min_time_us=89.0)) is None
    assert stop_reason(Budget(), SearchState(rounds_without_improvement=3)) == "patience: 3 rounds without improvement"
    assert stop_reason(Budget(patience=None), SearchState(rounds_without_improvement=30)) is None
    assert stop_reason(Budget(max_wall_s=60), SearchState(wall_s=61.2)) == "wall-time budget of 60 s reached (61.2 s)"
    assert stop_reason(Budget(max_gpu_s=1.5), SearchState(gpu_s=1.5)) == "GPU-time budget of 1.5 s reached (1.5 s)"


# -- policies --------------------------------------------------------------------------


def _node(id_: int, parent: int | None, operator: str, fitness: float, passed: bool = True) -> Node:
    result = (
        EvaluationResult(True, fitness, None, "ok") if passed else EvaluationResult.failure("correctness", "wrong")
    )
    return Node(
        id=id_,
        run_id=1,
        target=TARGET,
        parent_id=parent,
        operator=operator,
        key=f"k{id_}",
        candidate=Candidate(TARGET, operator, source=f"x={id_}"),
        round=0 if parent is None else 1,
        status="evaluated",
        fitness=result.fitness,
        failed_gate=result.failed_gate,
        reason=result.reason,
        result=result,
    )


def test_beam_caps_one_operator_at_half_the_beam() -> None:
    graph = [_node(1, None, "root", 1.0)]
    graph += [_node(10 + i, 1, "launch-config", 2.5 - 0.1 * i) for i in range(6)]
    graph += [_node(20, 1, "compiler-knobs", 1.5), _node(21, 1, "compiler-knobs", 1.4)]
    chosen = BeamPolicy(width=4).select(graph, 4, random.Random(0))
    assert [n.id for n in chosen] == [10, 11, 20, 21]
    undiversified = BeamPolicy(width=4, diversity=False).select(graph, 4, random.Random(0))
    assert [n.operator for n in undiversified] == ["launch-config"] * 4


def test_beam_prefers_distinct_lineages() -> None:
    graph = [
        _node(1, None, "root", 1.0),
        _node(2, 1, "a", 2.0),
        _node(3, 2, "a", 2.5),  # lineage 2
        _node(4, 3, "b", 2.4),  # lineage 2, another operator
        _node(5, 1, "b", 1.2),  # lineage 5
        _node(6, 5, "b", 1.1),  # lineage 5
        _node(7, 1, "c", 1.05),  # lineage 7
        _node(8, 1, "c", 3.0, passed=False),
    ]
    chosen = BeamPolicy(width=4).select(graph, 4, random.Random(0))
    assert [n.id for n in chosen] == [3, 5, 7, 1]  # the best of each lineage, the root being its own
    assert [n.id for n in BeamPolicy(width=4).select(graph, 2, random.Random(0))] == [3, 5]


def test_beam_single_operator_still_fills_and_nothing_passed_falls_back_to_root() -> None:
    graph = [_node(1, None, "root", 1.0)] + [_node(10 + i, 1, "step", 2.0 - 0.1 * i) for i in range(5)]
    chosen = BeamPolicy(width=4).select(graph, 4, random.Random(0))
    # two from "step" (the cap), the root (another operator, its own lineage), then the cap yields
    assert [n.id for n in chosen] == [10, 11, 1, 12]
    failed_root = _node(1, None, "root", 1.0)
    failed_root.result = EvaluationResult.failure("model", "x")  # no node passed at all
    assert [n.id for n in BeamPolicy().select([failed_root, _node(2, 1, "step", 0, passed=False)], 4, random.Random())] == [1]


def test_ucb_scores_match_a_hand_computed_case() -> None:
    graph = [
        _node(1, None, "root", 1.0),
        _node(2, 1, "a", 1.5),
        _node(3, 1, "a", 0.0, passed=False),
        _node(4, 2, "a", 2.0),
    ]
    scores = UCBPolicy(c=1.4).scores(graph)
    ln4 = math.log(4)
    # root: (1 + 1.5 + 0) / 3 + 1.4 * sqrt(ln 4 / 3)
    assert scores[1] == pytest.approx(2.5 / 3 + 1.4 * math.sqrt(ln4 / 3))
    assert scores[1] == pytest.approx(1.7850225, abs=1e-6)
    # node 2: (1.5 + 2.0) / 2 + 1.4 * sqrt(ln 4 / 2) ; node 4: 2.0 + 1.4 * sqrt(ln 4)
    assert scores[2] == pytest.approx(1.75 + 1.4 * math.sqrt(ln4 / 2))
    assert scores[4] == pytest.approx(2.0 + 1.4 * math.sqrt(ln4))
    assert 3 not in scores  # a failed node is never a parent
    assert [n.id for n in UCBPolicy(c=1.4).select(graph, 2, random.Random(0))] == [4, 2]
    # with no exploration, the failed child drags the root's mean under node 2's
    assert [n.id for n in UCBPolicy(c=0.0).select(graph, 3, random.Random(0))] == [4, 2, 1]


def test_engine_runs_with_ucb(nodes: NodeStore) -> None:
    evaluator = FakeEvaluator()
    outcome = make_engine(nodes, evaluator, Budget(max_evaluations=40, patience=None), policy=UCBPolicy()).run()
    assert outcome.evaluations >= 20 and outcome.best.fitness > 1.5
    assert set(evaluator.calls.values()) == {1}


def test_make_policy() -> None:
    assert isinstance(make_policy(), BeamPolicy) and isinstance(make_policy("ucb"), UCBPolicy)
    with pytest.raises(KerneloptError, match="unknown selection policy 'greedy'; available: beam, ucb"):
        make_policy("greedy")


# -- the operator registry -------------------------------------------------------------


def test_operator_registry_and_unknown_names() -> None:
    register_operator("toy-step")(StepOperator)
    try:
        assert "toy-step" in available_operators()
        (op,) = make_operators(["toy-step"])
        assert op.name == "step"
        with pytest.raises(KerneloptError) as info:
            make_operators(["toy-step", "nope"])
        message = str(info.value)
        assert message.startswith("unknown operator nope; available: ") and "toy-step" in message
        assert "\n" not in message
        with pytest.raises(ValueError, match="already registered"):
            register_operator("toy-step")(FakeEvaluator)
    finally:
        unregister_operator("toy-step")
    assert "toy-step" not in available_operators()
