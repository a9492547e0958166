"""Graph candidates in exported files, ``kernelopt.load`` and the backend: carried, read back, and
refused by gate 1 before anything of them is built; the graph-variants operator's proposals."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import torch
from conftest import EXAMPLES, FIXTURES

from kernelopt.capture import capture, parse_output_code
from kernelopt.capture.call_sequence import call_source_of, graph_digest
from kernelopt.capture.graph_swap import GraphCandidate, GraphKernel
from kernelopt.capture.kernel_source import renamed
from kernelopt.deliver.backend import KerneloptBackend
from kernelopt.deliver.export import (
    FORMAT_VERSION,
    check_graphs_static,
    export_model,
    graph_candidates,
    read_export,
    seal,
)
from kernelopt.errors import KerneloptError
from kernelopt.problem import load_problem
from kernelopt.search.candidate import Candidate
from kernelopt.search.graph_variants import GraphVariantOperator, graph_target
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext

_FIXTURE = next(iter(parse_output_code((FIXTURES / "inductor" / "12_softmax_wide.graph0.py").read_text()).kernels.values()))
NAME = f"ko0_{_FIXTURE.name}"
TRITON = renamed(_FIXTURE.source, _FIXTURE.name, NAME)  # an Inductor kernel, under a graph candidate's name
GRAPH = GraphCandidate(
    0, "d" * 64, "def call(self, args):\n    return ()\n",
    (GraphKernel(NAME, "triton", TRITON),), "Inductor with {'aggressive_fusion': True}",
    {"aggressive_fusion": True},
)


def test_an_export_carries_its_graph_candidates_and_a_version_2_file_still_reads(tmp_path) -> None:
    problem = load_problem(EXAMPLES / "level1/15_rmsnorm.py").small()
    path = export_model(tmp_path / "m.kopt.json", problem, [], {"passed": True}, graphs=[GRAPH])
    doc = read_export(path)
    assert doc["format_version"] == FORMAT_VERSION == 3 and graph_candidates(doc) == [GRAPH]
    old = {k: v for k, v in doc.items() if k not in ("graphs", "digest")}
    old["format_version"] = 2
    (tmp_path / "old.kopt.json").write_text(json.dumps(seal(old)))
    assert graph_candidates(read_export(tmp_path / "old.kopt.json")) == []
    future = {**old, "format_version": 4}
    (tmp_path / "future.kopt.json").write_text(json.dumps(seal(future)))
    with pytest.raises(KerneloptError, match="format 4 is not 3"):
        read_export(tmp_path / "future.kopt.json")


def test_an_exported_graph_candidate_is_refused_by_gate_1_before_it_is_built() -> None:
    cpp = dataclasses.replace(GRAPH, kernels=(GraphKernel("ko0_cpp_fused_0", "cpp", "extern \"C\" void kernel() {}"),))
    with pytest.raises(KerneloptError, match="brings Triton kernels only"):
        check_graphs_static("m.kopt.json", [cpp])
    hiding = dataclasses.replace(GRAPH, kernels=(GraphKernel(GRAPH.kernels[0].name, "triton", "import os\n" + TRITON),))
    with pytest.raises(KerneloptError, match="m.kopt.json"):
        check_graphs_static("m.kopt.json", [hiding])
    check_graphs_static("m.kopt.json", [GRAPH])  # the candidate-only rules pass
    with pytest.raises(KerneloptError, match="brings Triton kernels only"):
        KerneloptBackend(graphs=[cpp])  # the backend checks as load does, before any graph compiles


def test_a_graph_candidate_that_hides_work_is_refused_against_the_graph_it_replaces() -> None:
    artifact = capture(torch.nn.Tanh(), [torch.randn(4, 8)])
    source = artifact.graphs[0].source_code
    honest = GraphCandidate(0, graph_digest(source), call_source_of(source), (), "test")
    check_graphs_static("m.kopt.json", [honest], artifact)
    hidden = call_source_of(source).replace("    return (", "    buf0 = torch.tanh(arg0_1)\n    return (")
    with pytest.raises(KerneloptError, match=r"graph 0's call sequence fails the static gate \(torch_op\)"):
        check_graphs_static("m.kopt.json", [dataclasses.replace(honest, call_source=hidden)], artifact)
    with pytest.raises(KerneloptError, match="no graph 3"):
        check_graphs_static("m.kopt.json", [dataclasses.replace(honest, graph=3)], artifact)


def node(id_: int, candidate: Candidate, parent: int | None) -> Node:
    return Node(id_, 1, candidate.target, parent, candidate.operator, candidate.key(), candidate, 0, "pending",
                None, None, None, None)


def test_the_operator_proposes_each_available_option_set_once_from_the_root() -> None:
    target = graph_target(0)
    root = node(1, Candidate(target, "root", options={}), None)
    facts = {"graph_variants": [
        {"options": {"aggressive_fusion": True}, "available": True},
        {"options": {"combo_kernels": True}, "available": False, "reason": "the same call sequence"},
        {"options": {"split_reductions": False}, "available": True},
    ]}
    op = GraphVariantOperator()
    ctx = SearchContext(target=target, nodes=[root], rng=random.Random(0), facts=facts)
    proposed = op.propose(root, ctx, 8)
    assert [c.options for c in proposed] == [{"aggressive_fusion": True}, {"split_reductions": False}]
    assert all(c.target == target and c.operator == "graph-variants" for c in proposed)
    tried = node(2, proposed[0], 1)
    assert [c.options for c in op.propose(root, dataclasses.replace(ctx, nodes=[root, tried]), 8)] == [
        {"split_reductions": False}
    ]
    assert op.propose(tried, ctx, 8) == []  # only from the root
    kernel_ctx = dataclasses.replace(ctx, target="triton_poi_fused_add_0")
    assert op.propose(root, kernel_ctx, 8) == []  # kernels are not graphs


def test_the_backend_says_when_cuda_graph_partitions_left_a_graph_candidate_unused(monkeypatch) -> None:
    """Under reduce-overhead Inductor hands a graph's kernels to a partition CUDA graphs record; a
    candidate made for the plain compile matches no graph then, and the backend's line says why."""
    import sys
    import types

    source = (FIXTURES / "inductor" / "12_softmax_wide.graph0.py").read_text()
    body = call_source_of(source)
    partitioned = source.replace(
        body.splitlines()[1], body.splitlines()[1] + "\n        (buf0,) = self.partitions[0](partition0_args)", 1
    )
    assert "self.partitions[" in call_source_of(partitioned)

    class Compiled:
        source_code = partitioned
        cache_key = "kernelopt_test_partitioned_graph"

    monkeypatch.setitem(sys.modules, "fake." + Compiled.cache_key, types.ModuleType("fake"))
    tuned = KerneloptBackend(graphs=[GRAPH])
    tuned._swap_into(Compiled())
    line = tuned.say_unused()
    assert tuned.report.used == {} and tuned.report.partitioned == 1
    assert line is not None and "graph 0" in line and "CUDA-graph partitions" in line


def test_from_a_passed_candidate_the_operator_adds_one_more_option_set() -> None:
    from kernelopt.search.candidate import EvaluationResult

    target = graph_target(0)
    root = node(1, Candidate(target, "root", options={}), None)
    facts = {"graph_variants": [
        {"options": {"aggressive_fusion": True}, "available": True},
        {"options": {"split_reductions": False}, "available": True},
        {"options": {"combo_kernels": True}, "available": False},
    ]}
    ctx = SearchContext(target=target, nodes=[root], rng=random.Random(0), facts=facts)
    first = Candidate(target, "graph-variants", options={"aggressive_fusion": True})
    passed = dataclasses.replace(node(2, first, 1), result=EvaluationResult(True, 1.05, None, "faster"))
    failed = dataclasses.replace(node(3, Candidate(target, "graph-variants", options={"split_reductions": False}), 1),
                                 result=EvaluationResult.failure("performance", "not faster"))
    op = GraphVariantOperator()
    history = dataclasses.replace(ctx, nodes=[root, passed, failed])
    assert [c.options for c in op.propose(passed, history, 8)] == [{"aggressive_fusion": True, "split_reductions": False}]
    assert op.propose(failed, history, 8) == []  # a failed candidate is no parent


def test_a_graph_variants_kernel_names_follow_from_its_options_alone() -> None:
    from kernelopt.evaluate.session import variant_tag

    tag = variant_tag({"split_reductions": False, "aggressive_fusion": True})
    assert tag == variant_tag({"aggressive_fusion": True, "split_reductions": False})  # order of the options
    assert tag.isidentifier() and tag != variant_tag({"aggressive_fusion": True})


def test_variants_that_drop_copies_and_kernels_are_proposed_first() -> None:
    """The budget may stop before the last option set: a variant that drops a layout copy (a round trip
    through memory) goes first, then the one that writes fewer buffers (an intermediate tensor), then
    the one with fewer kernels; ties keep GRAPH_OPTIONS' order, and a record made before the worker
    counted them keeps its place."""
    target = graph_target(0)
    root = node(1, Candidate(target, "root", options={}), None)
    facts = {"graph_variants": [
        {"options": {"aggressive_fusion": True}, "available": True, "kernels": 3, "copies": 2, "buffers": 3},
        {"options": {"split_reductions": False}, "available": True, "kernels": 4, "copies": 2, "buffers": 3},
        {"options": {"combo_kernels": True}, "available": True, "kernels": 2, "copies": 2, "buffers": 3},
        {"options": {"force_pointwise_cat": True}, "available": True, "kernels": 3, "copies": 2, "buffers": 2},
        {"options": {"layout_optimization": False}, "available": True, "kernels": 1, "copies": 0, "buffers": 1,
         "compiled": {"kernels": 3, "copies": 1, "buffers": 3}},
        {"options": {"shape_padding": False}, "available": False, "reason": "the same call sequence"},
        {"options": {"kernelopt.row_split": 8192}, "available": True, "kernels": 3, "copies": 2, "rereads": 0,
         "buffers": 4, "compiled": {"kernels": 3, "copies": 2, "rereads": 1, "buffers": 2}},
        {"options": {"online_softmax": False}, "available": True, "kernels": 3, "copies": 2, "rereads": 2,
         "buffers": 1},
    ]}
    ctx = SearchContext(target=target, nodes=[root], rng=random.Random(0), facts=facts)
    proposed = GraphVariantOperator().propose(root, ctx, 5)
    assert [c.options for c in proposed] == [
        {"layout_optimization": False}, {"force_pointwise_cat": True}, {"combo_kernels": True},
        {"aggressive_fusion": True}, {"split_reductions": False},
    ]  # a second pass over the rows is a read of them: those that keep more come after
    later = GraphVariantOperator().propose(root, ctx, 7)[5:]
    assert [c.options for c in later] == [{"kernelopt.row_split": 8192}, {"online_softmax": False}]
    assert later[0].note.endswith(": 3 kernels, 2 of them copies, 4 buffers (compiled: 3 kernels, 2 copies, "
                                  "1 second pass over rows, 2 buffers)")
    assert later[1].note.endswith(": 3 kernels, 2 of them copies, 2 second passes over rows, 1 buffer")
    assert proposed[0].note.endswith(": 1 kernel, no copy, 1 buffer (compiled: 3 kernels, 1 copy, 3 buffers)")
    assert proposed[1].note.endswith(": 3 kernels, 2 of them copies, 2 buffers")
    old = {"graph_variants": [{"options": {"b": 1}, "available": True}, {"options": {"a": 1}, "available": True}]}
    again = GraphVariantOperator().propose(root, dataclasses.replace(ctx, facts=old), 3)
    assert [c.options for c in again] == [{"b": 1}, {"a": 1}] and again[0].note.endswith("b=1")


def test_a_variant_that_reduces_a_whole_large_tensor_on_a_few_programs_is_counted_and_proposed_last() -> None:
    """``split_reductions=False`` writes a norm over a whole tensor as one program (the 1 GiB Frobenius norm
    on the H200: 0.03x, and its one evaluation took the graph search 251 s): fewer kernels and buffers, so
    it was proposed first. Counted by its kernels' extents, it now goes after every other variant."""
    from kernelopt.capture.kernel_source import serial_reduction

    rows = (FIXTURES / "inductor" / "10_row_l2_normalize.kernel.py").read_text()
    assert not serial_reduction(rows)  # 32768 outputs: as many programs as the GPU holds
    whole = rows.replace("xnumel = 32768", "xnumel = 1").replace("r0_numel = 65535", "r0_numel = 268435456")
    assert serial_reduction(whole)
    assert not serial_reduction(whole.replace("r0_numel = 268435456", "r0_numel = 65536"))  # small enough for one
    cooperative = whole.replace("@triton_heuristics.reduction(", "@triton_heuristics.cooperative_reduction(")
    assert not serial_reduction(cooperative)  # split across programs that meet at a barrier
    hinted = (whole.replace("    xnumel = 1\n", "").replace("    r0_numel = 268435456\n", "")
              .replace("size_hints={'x': 32768, 'r0_': 65536}", "size_hints={'x': 1, 'r0_': 268435456}"))
    assert "xnumel = 1\n" not in hinted and serial_reduction(hinted)  # dynamic shapes: the extents are hints
    graph = dataclasses.replace(GRAPH, kernels=(GraphKernel("ko1_red", "triton", whole), GraphKernel("ko1_rows", "triton", rows)))
    assert graph.serial == 1  # the one over the whole tensor; the row-wise one is not

    target = graph_target(0)
    root = node(1, Candidate(target, "root", options={}), None)
    facts = {"graph_variants": [
        {"options": {"split_reductions": False}, "available": True, "kernels": 1, "copies": 0, "serial": 1, "buffers": 1},
        {"options": {"combo_kernels": True}, "available": True, "kernels": 2, "copies": 1, "serial": 0, "buffers": 2},
    ]}
    ctx = SearchContext(target=target, nodes=[root], rng=random.Random(0), facts=facts)
    first, last = GraphVariantOperator().propose(root, ctx, 2)
    assert first.options == {"combo_kernels": True} and last.options == {"split_reductions": False}
    assert last.note.endswith(": 1 kernel, no copy, 1 large reduction on few programs, 1 buffer")


def test_a_graph_candidate_counts_the_kernels_that_only_move_data() -> None:
    """The H100/H200 capture of conv + batch norm + ReLU copies the input and the weight to
    channels-last before cuDNN: two of its three kernels are copies; C++ kernels are not read."""
    captured = parse_output_code((FIXTURES / "inductor" / "07_conv2d_bn_relu.graph0.py").read_text())
    kernels = tuple(GraphKernel(f"ko1_{k.name}", "triton", renamed(k.source, k.name, f"ko1_{k.name}"))
                    for k in captured.kernels.values())
    graph = dataclasses.replace(GRAPH, kernels=kernels, call_source=call_source_of(
        (FIXTURES / "inductor" / "07_conv2d_bn_relu.graph0.py").read_text()))
    assert graph.copy_kernels == ["ko1_triton_poi_fused_convolution_0", "ko1_triton_poi_fused_convolution_1"]
    assert graph.buffers == 3  # the two channels-last copies and the output; cuDNN allocates its own
    assert dataclasses.replace(GRAPH, kernels=(GraphKernel("cpp_fused_0", "cpp", "extern void f();"),)).copy_kernels == []


def test_compiling_graph_variants_stops_when_its_time_runs_out(monkeypatch) -> None:
    """A real model can take a minute a compile: past the budget the option sets left are not compiled
    and say why (the first always is); the ones compiled report their kernels, copies and buffers."""
    from kernelopt.evaluate import worker_targets

    clock = [0.0]

    class Session:
        artifact = type("A", (), {"graphs": [0, 1]})()

        def rewrites_found(self, options):  # none of kernelopt's rewrites matched: the order given
            return False

        def graph_variants(self, options):
            clock[0] += 40.0  # each compile takes 40 s
            return ["the same call sequence and kernels", GRAPH]

    monkeypatch.setattr(worker_targets, "_session", lambda spec, peak: Session())
    shapes = {0: {"kernels": 3, "copies": 1, "buffers": 2}}  # graph 1's call cannot be read

    def shape(graph: int) -> dict:
        if graph not in shapes:
            raise ValueError("the output code defines no call function")
        return shapes[graph]

    monkeypatch.setattr(worker_targets, "captured_shape", shape)
    monkeypatch.setattr(worker_targets.time, "monotonic", lambda: clock[0])
    sets = [{"aggressive_fusion": True}, {"combo_kernels": True}, {"split_reductions": False}, {"a": 1}]
    rows = worker_targets.graph_variants({}, sets, None, budget_s=60.0)
    assert [row[1]["available"] for row in rows] == [True, True, False, False]  # 40 s, 80 s: then no more
    assert rows[2][0]["reason"] == rows[3][1]["reason"] == "not compiled: the 60 s for compiling graph variants ran out"
    assert rows[0][1] == {"options": sets[0], "available": True, "reason": None, "kernels": 1, "copies": 0,
                          "rereads": 0, "serial": 0, "buffers": 0, "compiled": None}  # the variant's counts stand alone, the graph's unread
    root = node(1, Candidate(graph_target(1), "root", options={}), None)
    ctx = SearchContext(target=graph_target(1), nodes=[root], rng=random.Random(0), facts={"graph_variants": rows[0][1:]})
    (proposed,) = GraphVariantOperator().propose(root, ctx, 1)
    assert proposed.note.endswith("aggressive_fusion=True: 1 kernel, no copy, 0 buffers")  # what it has, no more
    assert worker_targets.graph_variants({}, sets, None)[3][1]["available"]  # no budget: every set compiled


def test_row_splits_are_compiled_first_where_rows_are_read_twice_and_last_elsewhere() -> None:
    """Compiling stops when its budget runs out: the online softmax, the cluster softmax and the cluster
    L2 norm in the op's shared-memory form, kernelopt's group norm (with Inductor's convolution layouts and
    without), and the row split at two widths (seven option sets) go first where the analysis found kernels that read their rows twice, after every other
    set elsewhere (a graph with no wide reduction compiles the same under them, for the price of a
    compile; a one-graph model's rewrite that finds nothing stops before code generation)."""
    from kernelopt.search.graph_variants import FUSION_OPTIONS, LAYOUT_OPTIONS, REREAD_OPTIONS, option_sets

    rows = [dict(o) for o in REREAD_OPTIONS]
    assert rows[:5] == [  # the op in its shared-memory form only: faster than its register form at every width
        {"kernelopt.online_softmax": True}, {"kernelopt.cluster_softmax_bulk": True},
        {"kernelopt.cluster_norm_bulk": True}, {"kernelopt.cluster_group_norm": True},
        {"kernelopt.cluster_group_norm": True, "layout_optimization": False},
    ]  # fmt: skip
    assert len(rows) == 7 and all(set(o) == {"kernelopt.row_split"} for o in rows[5:])
    assert not any("kernelopt.group_rows" in o for o in rows)  # slower than the stock group norm on the H100
    every = [o for sets in (option_sets(False), option_sets(True, rereads_first=True)) for o in sets]
    assert {"kernelopt.cluster_softmax": True} not in every and {"kernelopt.cluster_norm": True} not in every
    assert option_sets(False) == [dict(o) for o in FUSION_OPTIONS + LAYOUT_OPTIONS] + rows
    assert option_sets(True) == [dict(o) for o in LAYOUT_OPTIONS + FUSION_OPTIONS] + rows
    assert option_sets(False, rereads_first=True) == rows + [dict(o) for o in FUSION_OPTIONS + LAYOUT_OPTIONS]
    assert option_sets(True, rereads_first=True)[:8] == rows + [dict(LAYOUT_OPTIONS[0])]


def test_an_option_set_that_wrote_the_same_code_as_one_judged_is_not_judged_again(monkeypatch) -> None:
    """A greedy walk adds one option set to a passed one; where the added option changes nothing next
    to it, Inductor writes the very code again (its kernels' name prefix aside). The session judges
    the first option set and names it for the second; the first's own re-check, other code, and the
    same code in another graph are judged."""
    import types

    from kernelopt.evaluate import graph_candidate
    from kernelopt.evaluate.session import EvaluationSession, variant_tag

    def variant(options: dict, source: str = TRITON) -> GraphCandidate:
        tag = variant_tag(options)
        kernel = GraphKernel(f"{tag}_{NAME}", "triton", renamed(source, NAME, f"{tag}_{NAME}"))
        call = f"def call(self, args):\n    {tag}_{NAME}.run()\n    return ()\n"
        return dataclasses.replace(GRAPH, kernels=(kernel,), call_source=call, options=options)

    split, both, other = {"kernelopt.row_split": 8192}, {"kernelopt.row_split": 8192, "a": 1}, {"b": 1}
    judged: list[dict] = []
    monkeypatch.setattr(
        graph_candidate, "evaluate_graph", lambda r, src, made, s: judged.append(made.options) or {"passed": False}
    )
    session = object.__new__(EvaluationSession)
    session._judged_graphs, session.restitched = {}, None
    session.artifact = types.SimpleNamespace(graphs=[types.SimpleNamespace(source_code="")] * 2)
    session._graph_variants = {
        repr(sorted(o.items())): [v, v] for o, v in (
            (split, variant(split)), (both, variant(both)), (other, variant(other, TRITON.replace("+", "-"))),
        )
    }
    assert variant(split).digest() != variant(both).digest()
    assert session.evaluate_graph(0, split, None) == {"passed": False}
    again = session.evaluate_graph(0, both, None)
    assert again["passed"] is False and again["gpu_s"] == 0.0
    (verdict,) = again["verdicts"]
    assert verdict["reason"] == (
        "no graph candidate: Inductor wrote the same call and kernels under kernelopt.row_split=8192, judged already"
    )
    assert verdict["details"] == {"rule": "duplicate"}
    session.evaluate_graph(0, split, None)  # the winner's full re-check
    session.evaluate_graph(0, other, None)
    session.evaluate_graph(1, both, None)  # graph 1: not judged under the row split alone yet
    assert judged == [split, split, other, both]


def test_warming_for_models_compiles_and_runs_the_model_in_both_timing_processes() -> None:
    """Before a graph search the candidate's process is calibrated on the model's forward and the reference
    process captures the model and runs it once (its first forward autotunes), in that order."""
    from kernelopt.evaluate.session import EvaluationSession

    calls: list[str] = []

    class Process:
        def __init__(self, name: str) -> None:
            self.name = name

        def calibrate_on_model(self) -> None:
            calls.append(f"{self.name}: calibrate")

        def warm_model(self) -> None:
            calls.append(f"{self.name}: capture")

        def timed_model(self, recorded: bool = False):
            return lambda: calls.append(f"{self.name}: forward{' recorded' if recorded else ''}") or 0.4

    session = object.__new__(EvaluationSession)
    session.runner, session.reference = Process("candidate"), Process("reference")
    session.warm_for_models()
    assert calls == ["candidate: calibrate", "reference: capture", "reference: forward"]



def test_option_sets_whose_rewrite_the_capture_found_something_for_are_compiled_first(monkeypatch) -> None:
    """Conv2d + group norm on the H100 ran out of its 20 s compile budget before the group norm's set (the
    copies' sets first): a set holding a rewrite of kernelopt's that the capture's probes matched is now
    compiled first, the rows still in the order given."""
    from kernelopt.evaluate import worker_targets

    clock, compiled_order = [0.0], []

    class Session:
        artifact = type("A", (), {"graphs": [0]})()

        def rewrites_found(self, options):
            return bool(options.get("kernelopt.group_rows"))

        def graph_variants(self, options):
            compiled_order.append(options)
            clock[0] += 40.0
            return [GRAPH]

    monkeypatch.setattr(worker_targets, "_session", lambda spec, peak: Session())
    monkeypatch.setattr(worker_targets, "captured_shape", lambda graph: {"kernels": 2, "copies": 0, "buffers": 2})
    monkeypatch.setattr(worker_targets.time, "monotonic", lambda: clock[0])
    group = {"kernelopt.group_rows": True, "kernelopt.row_split": 8192}
    sets = [{"layout_optimization": False}, {"combo_kernels": True}, group]
    rows = worker_targets.graph_variants({}, sets, None, budget_s=60.0)
    assert compiled_order == [group, {"layout_optimization": False}]  # 40 s, 80 s: then no more
    assert [row[0]["options"] for row in rows] == sets
    assert [row[0]["available"] for row in rows] == [True, False, True]
