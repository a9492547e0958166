"""A wide row split across programs that meet at a barrier (``kernelopt.capture.row_split``), on
Inductor's own cooperative reductions as the H200 wrote them for log-softmax 2048 x 131072 and
group norm 64 x 64 x 256 x 256 (``scripts/device/row_split_probe.py``): the rewrite gives programs
tickets, keeps the barrier Inductor's with its leader by ticket, launches an ordinary grid with the
chosen config pinned, gives the call a counter slot, and passes gate 1; the ticketed kernel runs in
Triton's interpreter (one program a row there: the interpreter runs programs one after another, so
a barrier between several would never open; the GPU test runs several)."""

from __future__ import annotations

import ast
import dataclasses
import re

import pytest
import torch
from conftest import FIXTURES

from kernelopt.capture import compat
from kernelopt.capture.call_sequence import call_source_of
from kernelopt.capture.graph_swap import GraphCandidate, GraphKernel, captured_shape, rereads
from kernelopt.capture.output_code import parse_output_code
from kernelopt.capture.row_split import RowSplitError, is_cooperative, row_split, ticketed, uses_tickets, with_counter
from kernelopt.verify.static_wrapper import check_static_wrapper

LOG_SOFTMAX = (FIXTURES / "inductor" / "13_log_softmax_wide.row_split.graph0.py").read_text()
GROUP_NORM = (FIXTURES / "inductor" / "16_groupnorm.row_split.graph0.py").read_text()
SOFTMAX = (FIXTURES / "inductor" / "12_softmax_wide.graph0.py").read_text()  # persistent, not cooperative
CONFIG = {"XBLOCK": 1, "RSPLIT": 16, "num_warps": 16, "num_stages": 1}


def _candidate(module_source: str) -> GraphCandidate:
    kernels = tuple(GraphKernel(k.name, k.language, k.source) for k in parse_output_code(module_source).kernels.values())
    return GraphCandidate(0, "digest", call_source_of(module_source), kernels, "test")


def _body(source: str, name: str) -> str:
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(source, fn) or ""


def test_a_cooperative_reduction_gets_tickets_its_barrier_and_a_pinned_ordinary_launch() -> None:
    candidate = _candidate(LOG_SOFTMAX)
    (kernel,) = candidate.kernels
    assert is_cooperative(kernel.source, kernel.name) and not uses_tickets(kernel.source)
    source = ticketed(kernel.source, kernel.name, CONFIG, 2048)
    body = _body(source, kernel.name)
    assert "tl.program_id" not in body  # a program's work follows its ticket, not its place in the grid
    assert "kernelopt_ticket = tl.atomic_add(sem_ptr + 2048, 1" in body and uses_tickets(source)
    assert "rsplit_id = kernelopt_ticket % RSPLIT" in body and "xoffset = kernelopt_xblock * XBLOCK" in body
    assert "tl.atomic_xchg(sem_ptr + 2048, 0" in body  # the last ticket sets the counter back to zero
    # Inductor's barrier, inlined: the leader is the ticket's first part, and it waits on this row's semaphore
    assert "x_grid_barrier" not in body and "kernelopt_sem = sem_ptr + kernelopt_xblock" in body
    assert "tl.where(rsplit_id == 0, tl.full([], 0x80000000, tl.uint32) - (RSPLIT - kernelopt_one)" in body
    assert "'launch_cooperative_grid': False" in source and "'launch_cooperative_grid': True" not in source
    assert re.search(r"triton_heuristics\.fixed_config\(config=\{'XBLOCK': 1, 'RSPLIT': 16, 'num_warps': 16", source)
    assert "@triton_heuristics.cooperative_reduction" not in source


def test_the_call_gets_one_more_semaphore_for_the_counter_and_passes_gate_1() -> None:
    made = row_split(_candidate(LOG_SOFTMAX), {_candidate(LOG_SOFTMAX).kernels[0].name: CONFIG})
    assert "semaphores_cuda_0 = empty_strided_cuda((2049, ), (1, ), torch.uint32)" in made.call_source
    assert "semaphores_cuda_0.zero_()" in made.call_source
    verdict = check_static_wrapper(made.call_source, original_source=LOG_SOFTMAX, candidate_kernels=made.kernel_names)
    assert verdict.passed, verdict.details.get("violations")
    assert made.digest() != _candidate(LOG_SOFTMAX).digest()
    with pytest.raises(RowSplitError, match="0 semaphores buffers"):
        with_counter(call_source_of(SOFTMAX))
    twice = made.call_source.replace("semaphores_cuda_0.zero_()", "semaphores_cuda_0.zero_()\n" + (
        "        semaphores_cuda_1 = empty_strided_cuda((8, ), (1, ), torch.uint32)"))
    with pytest.raises(RowSplitError, match="2 semaphores buffers"):
        with_counter(twice)


def test_the_row_split_graph_passes_gate_1_whole_and_a_cheat_in_its_kernel_does_not() -> None:
    from kernelopt.verify.static_graph import check_static_graph

    candidate = _candidate(LOG_SOFTMAX)
    made = row_split(candidate, {candidate.kernels[0].name: CONFIG})
    verdict = check_static_graph(made, original_source=LOG_SOFTMAX)
    assert verdict.passed, verdict.details
    (kernel,) = made.kernels
    cheat = kernel.source.replace("tmp15 = tmp13 - tmp14", "tmp15 = torch.log_softmax(tmp0, 1)")
    refused = check_static_graph(dataclasses.replace(made, kernels=(GraphKernel(kernel.name, "triton", cheat),)),
                                 original_source=LOG_SOFTMAX)
    assert not refused.passed


def test_only_the_cooperative_kernels_of_a_graph_are_rewritten_and_each_needs_its_config() -> None:
    candidate = _candidate(GROUP_NORM)
    names = candidate.kernel_names
    cooperative = [n for n in names if "unk" in n]
    assert len(names) == 2 and len(cooperative) == 1
    made = row_split(candidate, {cooperative[0]: {**CONFIG, "RSPLIT": 32}})
    by_name = {k.name: k for k in made.kernels}
    assert uses_tickets(by_name[cooperative[0]].source)
    other = next(n for n in names if n not in cooperative)
    assert by_name[other] == next(k for k in candidate.kernels if k.name == other)  # the pointwise kernel as it was
    assert "semaphores_cuda_0 = empty_strided_cuda((513, )" in made.call_source
    with pytest.raises(RowSplitError, match="no launch config"):
        row_split(candidate, {})
    with pytest.raises(RowSplitError, match="no cooperative reduction"):
        row_split(_candidate(SOFTMAX), {})


def test_a_kernel_this_rewrite_does_not_recognise_is_refused_not_guessed() -> None:
    (kernel,) = _candidate(LOG_SOFTMAX).kernels
    (persistent,) = _candidate(SOFTMAX).kernels
    source = kernel.source
    cases = {
        "without RSPLIT": (source, {"XBLOCK": 1}),
        "from tl.program_id\\(0\\) once": (source.replace("rsplit_id = tl.program_id(0)", "rsplit_id = 0"), CONFIG),
        "third grid dimension": (source.replace("xoffset = tl.program_id(1)", "xoffset = tl.program_id(2)"), CONFIG),
        "no barrier": (source.replace("triton_helpers.x_grid_barrier(sem_ptr + tl.program_id(1))", "pass"), CONFIG),
        "not launched as a cooperative grid": (
            source.replace("'launch_cooperative_grid': True", "'launch_cooperative_grid': False"),
            CONFIG,
        ),
    }
    for why, (text, config) in cases.items():
        with pytest.raises(RowSplitError, match=why):
            ticketed(text, kernel.name, config, 2048)
    with pytest.raises(RowSplitError, match="not a cooperative reduction"):
        ticketed(persistent.source, persistent.name, CONFIG, 2048)


def _interpretable(source: str, rows: int, width: int) -> str:
    """The ticketed kernel at a small size, for Triton's interpreter: Inductor's compile-time helpers
    (``constexpr_next_power_of_2``, libdevice) do not run there, so their values are written in."""
    source = source.replace("triton_helpers.set_driver_to_gpu()", "").replace("131072", str(width))
    source = source.replace("xnumel = 2048", f"xnumel = {rows}").replace("libdevice.exp(", "tl.exp(")
    source = source.replace("tl_math.log(", "tl.log(")
    source = re.sub(r"R0_BLOCK: tl.constexpr = .*", f"R0_BLOCK: tl.constexpr = {width}", source)
    return re.sub(r"RSPLIT_NEXT_POWER_OF_2: tl.constexpr = .*", "RSPLIT_NEXT_POWER_OF_2: tl.constexpr = 1", source)


def test_the_ticketed_kernel_computes_log_softmax_by_ticket_and_leaves_the_counter_at_zero() -> None:
    (kernel,) = _candidate(LOG_SOFTMAX).kernels
    rows, width = 8, 256
    source = _interpretable(ticketed(kernel.source, kernel.name, {**CONFIG, "RSPLIT": 1}, rows), rows, width)
    launcher = getattr(compat.load_source_module(source), kernel.name)
    x = torch.randn(rows, width)
    out = torch.full_like(x, float("nan"))
    semaphores = torch.zeros(rows + 1, dtype=torch.uint32)
    workspace = torch.empty(4 * 4 * rows * 64, dtype=torch.uint8)
    launcher.fn[(1, rows)](x, out, semaphores, workspace, rows, width, XBLOCK=1, RSPLIT=1)
    torch.testing.assert_close(out, torch.log_softmax(x, dim=-1))
    assert int(semaphores.sum()) == 0  # the counter taken to 8 and set back to zero by the last ticket


def test_a_looped_two_pass_kernel_counts_as_a_second_pass_and_a_row_split_as_none() -> None:
    looped = GraphKernel("k", "triton", "def k():\n    for r0_offset in range(0, 8, 2):\n        pass\n"
                         "    for r0_offset in range(0, 8, 2):\n        pass\n")
    assert rereads([looped]) == 1 and rereads([GraphKernel("c", "cpp", looped.source)]) == 0
    assert rereads(_candidate(LOG_SOFTMAX).kernels) == 0
    from kernelopt.capture.artifact import CapturedGraph

    graph = CapturedGraph(index=0, cache_key="k", source_code=LOG_SOFTMAX, placeholders=[], module=None,
                          output_code=parse_output_code(LOG_SOFTMAX))
    assert captured_shape(graph) == {"kernels": 1, "copies": 0, "rereads": 0, "serial": 0, "buffers": 3}


def test_a_session_compiles_a_row_split_under_its_hooks_and_pins_the_config_inductor_chose(monkeypatch) -> None:
    """The worker's side (CPU: Inductor writes C++ here, so the split changes nothing and says so):
    the option is kernelopt's, not refused as an unknown Inductor option, and compiles under
    compat.row_split_compile with wide var_means as two sums; a variant's cooperative kernels get the config their first run chose,
    read by the name they have in the variant's own module."""
    import contextlib
    import types

    from conftest import EXAMPLES

    from kernelopt.capture import capture
    from kernelopt.capture.kernel_source import renamed
    from kernelopt.capture.row_split import ROW_SPLIT_OPTION
    from kernelopt.evaluate import session as session_module
    from kernelopt.evaluate.session import EvaluationSession, ProblemSpec, variant_tag
    from kernelopt.problem import load_problem

    entered = []

    @contextlib.contextmanager
    def row_split_compile(chunk, wide):
        entered.append(chunk)
        yield

    monkeypatch.setattr(compat, "row_split_compile", row_split_compile)
    spec = ProblemSpec(str(EXAMPLES / "level1/13_log_softmax_wide.py"), {"batch_size": 4, "vocab": 4096})
    problem = load_problem(spec.problem_path, overrides=spec.overrides)
    s = object.__new__(EvaluationSession)
    s.spec, s.device, s._graph_variants = spec, torch.device("cpu"), {}
    s.model, s.inputs = problem.build_model(0, s.device), problem.make_inputs(0, s.device)
    s.artifact = capture(s.model, s.inputs, {})
    compiled_with = []

    def recorded_capture(model, inputs, compile_options, **kwargs):  # type: ignore[no-untyped-def]
        compiled_with.append(dict(compile_options))
        return capture(model, inputs, compile_options, **kwargs)

    monkeypatch.setattr(session_module, "capture", recorded_capture)
    options = {ROW_SPLIT_OPTION: 8192}
    assert s.graph_variants(options) == ["the same call sequence and kernels, or other parameters or outputs"]
    assert entered == [8192]
    # a wide var_mean as two sums under every row split (kernelopt.capture.rewrites.var_sums); the split is
    # kernelopt's own, never an Inductor option
    assert compiled_with == [{"kernelopt.var_sums": True}]
    assert s.compile_variant({**options, "no_such_option": 1}, "t") == "this torch has no option no_such_option"

    # a variant whose kernel is cooperative: pinned to what its launcher chose
    (kernel,) = _candidate(LOG_SOFTMAX).kernels
    tag = variant_tag(options)
    made = dataclasses.replace(_candidate(LOG_SOFTMAX), kernels=(
        GraphKernel(f"{tag}_{kernel.name}", "triton", renamed(kernel.source, kernel.name, f"{tag}_{kernel.name}")),))
    chosen = types.SimpleNamespace(kwargs={"XBLOCK": 1, "RSPLIT": 16}, num_warps=8, num_stages=1)
    launcher = types.SimpleNamespace(launchers=[types.SimpleNamespace(config=chosen)])
    variant = types.SimpleNamespace(module=types.SimpleNamespace(**{kernel.name: launcher}))
    split = session_module._row_split(made, variant, tag)
    assert isinstance(split, GraphCandidate) and uses_tickets(split.kernels[0].source)
    assert "config={'XBLOCK': 1, 'RSPLIT': 16, 'num_warps': 8, 'num_stages': 1}" in split.kernels[0].source
    nothing = session_module._row_split(made, types.SimpleNamespace(module=types.SimpleNamespace()), tag)
    assert nothing == f"no row split: no launch config for {tag}_{kernel.name}"
