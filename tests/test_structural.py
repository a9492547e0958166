"""Structural candidates (issue 13, point 4): one kernel as Inductor writes it under other options.

The matching and renaming run on a real captured kernel (the H200 softmax fixture) and a variant made
from it as Inductor would name it; the operator, the pipeline's once-per-kernel worker call and the
worker target's refusals run here too (the variant compiles themselves need a GPU).
"""

from __future__ import annotations

import random

from conftest import EXAMPLES, FIXTURES

from kernelopt.capture import compat
from kernelopt.capture.output_code import parse_output_code, triton_kernel_def
from kernelopt.capture.variant_kernel import as_replacement, fused_ops, matching_kernel
from kernelopt.search.candidate import Candidate
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext, make_operators
from kernelopt.search.structural import STRUCTURAL_OPTIONS

SOFTMAX = next(iter(parse_output_code((FIXTURES / "inductor" / "12_softmax_wide.graph0.py").read_text()).kernels.values()))
LOOPED = "triton_red_fused__softmax_exp_prepare_softmax_online_sub_3"


def variant(name: str = LOOPED, edit: str = "XBLOCK : tl.constexpr):", to: str = "XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):"):
    """The softmax kernel as a looped reduction would be named and declared (runtime parameters kept)."""
    source = SOFTMAX.source.replace(SOFTMAX.name, name).replace(edit, to)
    return triton_kernel_def(name, source)


def test_what_a_kernel_fused_is_read_from_its_name() -> None:
    assert fused_ops(SOFTMAX.name) == "fused__softmax_exp_prepare_softmax_online_sub"
    assert fused_ops(LOOPED) == fused_ops(SOFTMAX.name)
    assert fused_ops("triton_poi_fused_add_relu_12") == "fused_add_relu" and fused_ops("extern_kernels.mm") is None


def test_the_variant_of_the_same_fused_ops_and_parameters_fills_the_slot_under_the_original_name() -> None:
    looped = variant()
    assert matching_kernel(SOFTMAX, [looped]) is looped
    source = as_replacement(looped, SOFTMAX.name)
    assert f"def {SOFTMAX.name}(" in source and f"'kernel_name': '{SOFTMAX.name}'" in source and LOOPED not in source
    assert "R0_BLOCK : tl.constexpr" in source  # the variant's own structure stays
    other_ops = variant("triton_red_fused_add_3")
    other_params = variant(edit="in_ptr0, out_ptr2, xnumel, r0_numel", to="in_ptr0, in_ptr1, out_ptr2, xnumel, r0_numel")
    assert matching_kernel(SOFTMAX, [other_ops, other_params]) is None
    unchanged = triton_kernel_def(SOFTMAX.name, SOFTMAX.source)
    assert matching_kernel(SOFTMAX, [unchanged]) is None  # the options changed nothing here: no candidate


def test_every_structural_option_is_one_this_torch_knows() -> None:
    assert compat.has_inductor_option("triton.persistent_reductions") and not compat.has_inductor_option("triton.nope")
    for options in STRUCTURAL_OPTIONS:
        assert all(compat.has_inductor_option(name) for name in options), options


def node(id_: int, parent: int | None, candidate: Candidate) -> Node:
    return Node(id_, 1, SOFTMAX.name, parent, candidate.operator, str(id_), candidate, 0, "evaluated", None, None, None,
                None)


def _ctx(variants, nodes=()) -> SearchContext:
    return SearchContext(target=SOFTMAX.name, kernel=SOFTMAX, root_source=SOFTMAX.source, nodes=list(nodes),
                         rng=random.Random(0), facts={"structural_variants": variants})


def test_the_operator_proposes_each_new_variant_from_the_root_only() -> None:
    (op,) = make_operators(["structural"])
    root = node(1, None, Candidate(SOFTMAX.name, "root", source=SOFTMAX.source))
    looped = as_replacement(variant(), SOFTMAX.name)
    variants = [{"options": {"triton.persistent_reductions": False}, "source": looped},
                {"options": {"split_reductions": False}, "source": None, "reason": "no kernel with the same ..."}]
    (candidate,) = op.propose(root, _ctx(variants), 4)
    assert candidate.source == looped and "triton.persistent_reductions=False" in candidate.note
    tried = node(2, 1, Candidate(SOFTMAX.name, "structural", source=looped))
    assert op.propose(root, _ctx(variants, [root, tried]), 4) == []  # already evaluated
    assert op.propose(tried, _ctx(variants, [root, tried]), 4) == []  # a child of a variant: nothing new


def test_the_pipeline_asks_the_worker_once_per_kernel_and_evaluates_the_variants(tmp_path) -> None:
    from test_optimize_flow import ScriptedWorker, ok, run_context

    from kernelopt.pipeline import optimize as opt
    from kernelopt.search.termination import Budget
    from kernelopt.store import Store

    looped = as_replacement(variant(), SOFTMAX.name)

    class Worker(ScriptedWorker):
        def __init__(self) -> None:
            super().__init__()
            self.sources: list[str] = []
            self.asked: list[list[dict]] = []

        def call(self, target, *args, timeout_s=0, kwargs=None):
            fn = target.split(":")[1]
            if fn == "structural_variants":
                self.asked.append(args[3])
                return ok([{"options": {"triton.persistent_reductions": False}, "source": looped, "reason": None}])
            if fn == "evaluate_candidates":
                self.sources += list(args[2])
            return super().call(target, *args, timeout_s=timeout_s, kwargs=kwargs)

    store = Store(tmp_path / "k.db")
    run_id = store.start_run("optimize", "softmax", "fake", {})
    worker = Worker()
    opt._optimize(run_context("softmax", store, run_id, worker, opt.ProblemSpec(str(EXAMPLES / "level1/12_softmax_wide.py")),
                              opt.make_operators(["structural"]), Budget(max_evaluations=3, patience=1),
                              opt.search_settings(), 1))
    assert worker.asked == [[dict(o) for o in STRUCTURAL_OPTIONS]]
    assert looped in worker.sources
    key = f"structural/{SOFTMAX.name}"
    assert store.measurements(run_id, key)[key]["variants"][0]["source"] == looped  # kept for a resumed run


def test_the_worker_target_says_why_a_variant_gives_no_candidate(monkeypatch) -> None:
    """On the CPU Inductor writes C++ kernels: no Triton kernel matches, and an option this torch does not
    know is refused before any compile; both come back as reasons, never as an exception."""
    import torch

    from kernelopt.capture import capture
    from kernelopt.evaluate import worker_targets
    from kernelopt.problem import load_problem

    problem = load_problem(EXAMPLES / "level1/12_softmax_wide.py").small()
    model, inputs = problem.build_model(0), problem.make_inputs(0)
    captured = capture(model, inputs)

    class Session:
        spec = worker_targets.ProblemSpec(str(problem.path))
        compile_variant = worker_targets.EvaluationSession.compile_variant  # the model, inputs and spec only

        def __init__(self) -> None:
            self.model, self.inputs, self.artifact = model, inputs, captured

        def kernel(self, name):
            return None, None, SOFTMAX

    monkeypatch.setattr(worker_targets, "_session", lambda spec, peak: Session())
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    out = worker_targets.structural_variants({}, SOFTMAX.name, None, [{"triton.nope": 1}, {"split_reductions": False}])
    assert out[0] == {"options": {"triton.nope": 1}, "source": None, "reason": "this torch has no option triton.nope"}
    assert out[1]["source"] is None and "no kernel with the same fused operations" in out[1]["reason"]
