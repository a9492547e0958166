"""A graph variant under kernelopt's own compile options whose rewrites find nothing to change stops
before Inductor's code generation (``kernelopt.capture.compile_stop.stop_where_unchanged``): the
variant would be the graph as compiled, and under max-autotune its compile costs tens of seconds. CPU:
which compiles stop, what the variant then says, and that the stop leaves nothing behind."""

from __future__ import annotations

import os

import pytest
import torch
from conftest import EXAMPLES

from kernelopt.capture import capture, compat
from kernelopt.capture.compile_stop import NothingRewritten, rewritten_nothing, stop_where_unchanged
from kernelopt.capture.rewrites.cluster_softmax import CLUSTER_SOFTMAX_OPTION
from kernelopt.capture.rewrites.online_softmax import ONLINE_SOFTMAX_OPTION
from kernelopt.evaluate.session import EvaluationSession, ProblemSpec, probed_capture


class Scaled(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2


class Temperature(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x / 0.7, dim=-1)


class Broken(torch.nn.Module):
    """Two graphs: a softmax with a temperature, then (after a graph break) no softmax at all."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.log_softmax(x / 0.7, dim=-1)
        torch._dynamo.graph_break()
        return torch.relu(y) * 2


def session_of(model: torch.nn.Module, x: torch.Tensor, probed: bool = False) -> EvaluationSession:
    """A session over ``model`` without a problem file (what ``graph_variants`` reads of one); ``probed``:
    captured as a session captures, with what each of kernelopt's options would change in each graph."""
    s = object.__new__(EvaluationSession)
    s.spec, s.device, s._graph_variants = ProblemSpec("unused.py", {}), torch.device("cpu"), {}
    s.model, s.inputs = model, [x]
    with compat.fresh_compile():
        if probed:
            s.artifact, s._probed = probed_capture(model, [x], {})
        else:
            s.artifact = capture(model, [x], {})
    return s


@pytest.fixture
def stopped_dirs(monkeypatch) -> list[list[str]]:
    """Every list of folders :func:`compat.stopped_compile_dirs` collected, as the session used them."""
    seen: list[list[str]] = []
    original = compat.stopped_compile_dirs

    def recorded():  # type: ignore[no-untyped-def]
        manager = original()

        class Recording:
            def __enter__(self) -> list[str]:
                kept = manager.__enter__()
                seen.append(kept)
                return kept

            def __exit__(self, *exc: object) -> bool | None:
                return manager.__exit__(*exc)

        return Recording()

    monkeypatch.setattr(compat, "stopped_compile_dirs", recorded)
    return seen


@pytest.mark.parametrize("option", [ONLINE_SOFTMAX_OPTION, CLUSTER_SOFTMAX_OPTION])
def test_a_one_graph_variant_with_nothing_to_rewrite_is_not_compiled_and_leaves_no_cache(option, stopped_dirs) -> None:
    x = torch.randn(8, 64)
    s = session_of(Scaled(), x)
    (reason,) = s.graph_variants({option: True})
    assert isinstance(reason, str) and reason.startswith("not compiled: ")
    assert "found nothing to rewrite: Inductor would compile the graph as it is" in reason
    # Inductor keeps a failed compile's temporary cache folder and logs where: the stop was ours, so the
    # session removed it (an Inductor that no longer logs it so fails here, loudly)
    (kept,) = stopped_dirs
    assert kept and not any(os.path.exists(folder) for folder in kept)


def test_a_one_graph_variant_the_rewrite_changes_is_compiled() -> None:
    x = torch.randn(8, 64)
    s = session_of(Temperature(), x)
    (made,) = s.graph_variants({ONLINE_SOFTMAX_OPTION: True})
    assert not isinstance(made, str)  # the graph candidate of the rewritten softmax


def test_a_model_of_two_graphs_is_compiled_whole_where_one_graph_has_nothing_to_rewrite() -> None:
    """With more than one graph the stop would lose the graph that holds what the rewrite is for."""
    x = torch.randn(8, 64)
    s = session_of(Broken(), x)
    assert len(s.artifact.graphs) == 2
    softmax, tail = s.graph_variants({ONLINE_SOFTMAX_OPTION: True})
    assert not isinstance(softmax, str)
    assert tail == "the same call sequence and kernels, or other parameters or outputs"


def test_only_a_compile_in_the_context_stops_and_only_where_the_graph_computes_something() -> None:
    x = torch.randn(8, 64)
    with compat.fresh_compile():
        artifact = capture(Scaled(), [x], {ONLINE_SOFTMAX_OPTION: True})  # no context: compiled as asked
    torch.testing.assert_close(artifact.compiled(x), torch.relu(x) * 2)
    with pytest.raises(Exception) as raised, stop_where_unchanged(), compat.fresh_compile():
        capture(Scaled(), [x], {ONLINE_SOFTMAX_OPTION: True})
    stop = rewritten_nothing(raised.value)  # Dynamo and Inductor wrap the pass's error
    assert isinstance(stop, NothingRewritten) and "rewrite_for_online_softmax" in str(stop)
    with stop_where_unchanged(), compat.fresh_compile():
        artifact = capture(Temperature(), [x], {ONLINE_SOFTMAX_OPTION: True})
    torch.testing.assert_close(artifact.compiled(x), torch.log_softmax(x / 0.7, dim=-1))


def test_the_example_layernorm_has_nothing_for_either_softmax_option() -> None:
    """examples/problems/level1/14_layernorm.py at its small sizes: a wide reduction (the graph stage
    compiles the softmax options for it) and no softmax."""
    from kernelopt.problem import load_problem

    small = load_problem(str(EXAMPLES / "level1/14_layernorm.py")).small()
    model, (x,) = small.build_model(0, torch.device("cpu")), small.make_inputs(0, torch.device("cpu"))
    s = session_of(model, x)
    for option in (ONLINE_SOFTMAX_OPTION, CLUSTER_SOFTMAX_OPTION):
        (reason,) = s.graph_variants({option: True})
        assert isinstance(reason, str) and reason.startswith("not compiled: "), reason


class Softmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


COUNTS: list[int] = []


def count_wide(graph: torch.fx.Graph) -> int:
    """A post-grad pass that records the row split's probe on the graph Inductor hands it, changing nothing."""
    from kernelopt.capture.row_split import wide_reductions

    COUNTS.append(wide_reductions(graph))
    return 0


def probed(fn, x: torch.Tensor) -> int:
    """The probe's count on ``fn``'s post-grad graph as Inductor writes it for ``x``."""
    COUNTS.clear()
    compat.reset_dynamo()
    with compat.post_grad_pass(count_wide), compat.fresh_compile():
        torch.compile(fn)(x)
    (count,) = COUNTS
    return count


def test_the_row_split_probe_counts_every_operation_that_could_reduce_4096_elements_into_one() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from kernelopt.capture.row_split import WIDE, wide_reductions

    assert WIDE == 4096  # compat.row_split_compile's threshold for a cooperative reduction
    assert probed(lambda x: torch.relu(x) * 2, torch.randn(8, 8192)) == 0
    assert probed(lambda x: torch.softmax(x, -1), torch.randn(8, 2048)) == 0
    assert probed(lambda x: torch.softmax(x, -1), torch.randn(8, 4096)) == 2  # its max and its sum
    assert probed(lambda x: torch.log_softmax(x / 0.7, -1), torch.randn(8, 8192)) >= 2  # a scaled one: more
    assert probed(lambda x: x.sum(), torch.randn(64, 64)) == 1  # a whole tensor of 4096
    assert probed(lambda x: x.mean(0), torch.randn(8192, 2)) >= 1  # a column, not a row
    assert probed(lambda x: torch.nn.functional.layer_norm(x, (8192,)), torch.randn(4, 8192)) >= 1  # var_mean
    assert probed(lambda x: torch.nn.functional.layer_norm(x, (2048,)), torch.randn(4, 2048)) == 0
    # generous where it cannot tell: a node a rewrite added carries no recorded value, and counts
    graph = make_fx(lambda x: torch.relu(x) * 2, tracing_mode="fake")(torch.randn(8, 16)).graph
    assert wide_reductions(graph) == 0
    (relu,) = [n for n in graph.nodes if n.op == "call_function" and "relu" in str(n.target)]
    relu.meta.pop("val")
    assert wide_reductions(graph) == 2  # relu itself, and the product that reads it


@pytest.mark.parametrize(("width", "compiled"), [(2048, False), (8192, True)])
def test_a_one_graph_row_split_variant_without_a_wide_reduction_is_not_compiled(width, compiled, stopped_dirs) -> None:
    """The row split's compile makes every reduction of 4096 elements or more cooperative and changes
    nothing else: a softmax 2048 wide stops after the post-grad pass (on the H200 such a compile took
    about 35 s under max-autotune); one 8192 wide is compiled (on the CPU, as C++: the same kernels)."""
    from kernelopt.capture.row_split import ROW_SPLIT_OPTION

    x = torch.randn(4, width)
    s = session_of(Softmax(), x)
    (made,) = s.graph_variants({ROW_SPLIT_OPTION: 8192})
    if compiled:
        assert made == "the same call sequence and kernels, or other parameters or outputs"
    else:
        assert made == (
            "not compiled: kernelopt.capture.rewrites.var_sums.rewrite_for_var_sums,"
            "kernelopt.capture.row_split.wide_reductions found nothing to rewrite: "
            "Inductor would compile the graph as it is"
        )  # the split's compile writes a wide var_mean as two sums: none here either
        (kept,) = stopped_dirs
        assert not any(os.path.exists(folder) for folder in kept)


class TwoGraphs(torch.nn.Module):
    """Two graphs (a graph break between them), neither with a softmax; the first reduces rows 2048 wide."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x - x.amax(dim=-1, keepdim=True)
        torch._dynamo.graph_break()
        return torch.relu(y) * 2


def no_compile(monkeypatch, s: EvaluationSession) -> list[dict]:
    """Every compile the session would start, refused and recorded."""
    asked: list[dict] = []

    def refused(options, tag):  # type: ignore[no-untyped-def]
        asked.append(options)
        raise AssertionError(f"compiled {options}")

    monkeypatch.setattr(s, "compile_variant", refused)
    return asked


def test_a_variant_of_kernelopts_options_that_change_no_graph_of_several_is_not_compiled(monkeypatch) -> None:
    """The capture's post-grad graphs were given to each option's rewrite (on copies): where none changes
    any graph, the variant is left out before any compile, as a one-graph model's compile is stopped."""
    from kernelopt.capture.row_split import ROW_SPLIT_OPTION

    s = session_of(TwoGraphs(), torch.randn(4, 2048), probed=True)
    assert len(s.artifact.graphs) == 2 and s._probed is not None and len(s._probed) == 2
    asked = no_compile(monkeypatch, s)
    for options in ({ONLINE_SOFTMAX_OPTION: True}, {ROW_SPLIT_OPTION: 8192}):
        (name,) = options
        first, second = s.graph_variants(options)
        assert first == second == (
            f"not compiled: {name} found nothing to rewrite in any of the 2 graphs: Inductor would compile each as it is"
        )
    # beside an option of Inductor's (or the row split), a rewrite that changes nothing leaves that option
    # alone, a variant of its own: not compiled either
    (first, _) = s.graph_variants({ONLINE_SOFTMAX_OPTION: True, "triton.prefer_nd_tiling": True})
    assert first == (
        f"not compiled: {ONLINE_SOFTMAX_OPTION} found nothing to rewrite in any of the 2 graphs: the other options "
        "alone compile it so"
    )
    assert asked == []


def test_an_option_of_inductors_beside_a_rewrite_that_changes_a_graph_is_compiled(monkeypatch) -> None:
    """What an option of Inductor's changes is not probed: beside a rewrite that counts something, or alone,
    the set is compiled."""
    s = session_of(Broken(), torch.randn(8, 64), probed=True)
    assert s._probed is not None and s._probed[0][ONLINE_SOFTMAX_OPTION] == 1
    no_compile(monkeypatch, s)
    assert s.unchanged_by({ONLINE_SOFTMAX_OPTION: True, "triton.prefer_nd_tiling": True}) is None
    assert s.unchanged_by({"triton.prefer_nd_tiling": True}) is None
    with pytest.raises(AssertionError, match="compiled"):
        s.graph_variants({ONLINE_SOFTMAX_OPTION: True, "triton.prefer_nd_tiling": True})


def test_a_variant_is_compiled_where_a_probe_counts_something_or_cannot_say(monkeypatch) -> None:
    from kernelopt.capture.row_split import ROW_SPLIT_OPTION

    wide = session_of(TwoGraphs(), torch.randn(4, 8192), probed=True)  # its first graph's max: 8192 wide
    assert wide._probed is not None and wide._probed[0][ROW_SPLIT_OPTION] == 1
    assert wide._probed[1][ROW_SPLIT_OPTION] == 0
    assert wide.unchanged_by({ROW_SPLIT_OPTION: 8192}) is None
    softmax = session_of(Broken(), torch.randn(8, 64), probed=True)
    assert softmax._probed is not None and softmax._probed[0][ONLINE_SOFTMAX_OPTION] == 1
    assert softmax.unchanged_by({ONLINE_SOFTMAX_OPTION: True}) is None
    made, _ = softmax.graph_variants({ONLINE_SOFTMAX_OPTION: True})
    assert not isinstance(made, str)  # compiled, and its first graph rewritten
    unknown = session_of(TwoGraphs(), torch.randn(4, 2048), probed=True)
    assert unknown._probed is not None
    unknown._probed[1][ONLINE_SOFTMAX_OPTION] = None  # a rewrite that could not run in the capture
    assert unknown.unchanged_by({ONLINE_SOFTMAX_OPTION: True}) is None
    unknown._probed = None  # counts that could not be matched to the graphs
    assert unknown.unchanged_by({ONLINE_SOFTMAX_OPTION: True}) is None


def test_probing_leaves_the_capture_as_it_was_and_a_failing_probe_says_unknown(caplog) -> None:
    from kernelopt.capture.compile_stop import probing

    x = torch.randn(8, 64)

    def fails(graph: torch.fx.Graph) -> int:
        raise RuntimeError("no nvcc here")

    def erases(graph: torch.fx.Graph) -> int:  # a rewrite changes its copy only
        for node in reversed(list(graph.nodes)):
            if node.op == "call_function" and not node.users:
                graph.erase_node(node)
        return 1

    with compat.fresh_compile():
        plain = capture(Temperature(), [x], {})
    with compat.fresh_compile(), probing({"fails": fails, "erases": erases}) as counts:
        probed = capture(Temperature(), [x], {})
    assert counts == [{"fails": None, "erases": 1}]
    why = [r.getMessage() for r in caplog.records if r.name == "kernelopt.capture.compile_stop"]
    assert why == ["probe fails failed on graph 0, so its variant is compiled: RuntimeError: no nvcc here"]
    def code(artifact) -> list[str]:  # each graph's code but its first line, the compile's number
        return [g.source_code.split("\n", 1)[1] for g in artifact.graphs]

    assert probed.graphs[0].source_code.startswith("# AOT ID: ")
    assert code(probed) == code(plain)
    torch.testing.assert_close(probed.compiled(x), torch.log_softmax(x / 0.7, dim=-1))


def test_a_users_own_post_grad_pass_keeps_its_place_and_the_probes_say_nothing() -> None:
    """Inductor takes one custom pre-pass: where the user set one, the capture runs it, not the probes,
    and with no counts every variant is compiled as before."""
    import torch._inductor.config as inductor_config

    ran: list[int] = []

    class UsersPass:
        def __call__(self, graph: torch.fx.Graph) -> None:
            ran.append(len(graph.nodes))

        def uuid(self) -> str:
            return "the user's"

    # Inductor's own patch, not monkeypatch: a config module's attribute deleted on undo is gone for good
    with inductor_config.patch({"post_grad_custom_pre_pass": UsersPass()}):
        s = session_of(TwoGraphs(), torch.randn(4, 2048), probed=True)
    assert inductor_config.post_grad_custom_pre_pass is None
    assert len(ran) == 2 and s._probed is None
    assert s.unchanged_by({ONLINE_SOFTMAX_OPTION: True}) is None


def test_the_group_norm_row_split_is_left_out_where_no_group_norm_is(monkeypatch) -> None:
    """{group_rows, row_split} on a graph with a wide row but no group norm would compile as the row split
    alone does, a variant of its own: left out from the capture's probes."""
    from kernelopt.capture.rewrites.group_rows import GROUP_ROWS_OPTION
    from kernelopt.capture.row_split import ROW_SPLIT_OPTION

    wide = session_of(TwoGraphs(), torch.randn(4, 8192), probed=True)
    assert wide._probed is not None and wide._probed[0][ROW_SPLIT_OPTION] == 1
    assert all(row[GROUP_ROWS_OPTION] == 0 for row in wide._probed)
    asked = no_compile(monkeypatch, wide)
    first, second = wide.graph_variants({GROUP_ROWS_OPTION: True, ROW_SPLIT_OPTION: 8192})
    assert first == second and first.startswith(f"not compiled: {GROUP_ROWS_OPTION} found nothing to rewrite")
    assert asked == [] and wide.unchanged_by({ROW_SPLIT_OPTION: 8192}) is None
    # what the worker compiles first: sets whose own rewrite the probes matched (the row split's count aside)
    assert not wide.rewrites_found({GROUP_ROWS_OPTION: True, ROW_SPLIT_OPTION: 8192})
    assert not wide.rewrites_found({ROW_SPLIT_OPTION: 8192})
    softmax = session_of(Broken(), torch.randn(8, 64), probed=True)
    assert softmax.rewrites_found({ONLINE_SOFTMAX_OPTION: True, "triton.prefer_nd_tiling": True})
    softmax._probed = None  # counts that could not be matched to the graphs: nothing known to come first
    assert not softmax.rewrites_found({ONLINE_SOFTMAX_OPTION: True})


def test_the_ops_kernelopts_own_kernels_would_take_are_counted_from_the_probes() -> None:
    """The analysis keeps, by option, what each rewrite handing ops to kernelopt's own kernels found in the
    capture (the graph stage runs for it): summed over graphs, a probe that failed counted as nothing, and
    Inductor-only rewrites (the online softmax) left out. On this CPU the cluster rewrites find nothing."""
    from kernelopt.capture.rewrites.cluster_group_norm import CLUSTER_GROUP_NORM_OPTION
    from kernelopt.capture.rewrites.cluster_softmax import CLUSTER_SOFTMAX_BULK_OPTION, CLUSTER_SOFTMAX_OPTION

    s = object.__new__(EvaluationSession)
    s._probed = [
        {CLUSTER_GROUP_NORM_OPTION: 1, CLUSTER_SOFTMAX_BULK_OPTION: 0, ONLINE_SOFTMAX_OPTION: 2},
        {CLUSTER_GROUP_NORM_OPTION: None, CLUSTER_SOFTMAX_BULK_OPTION: 2, CLUSTER_SOFTMAX_OPTION: 2},
    ]
    assert s.own_ops_found() == {CLUSTER_GROUP_NORM_OPTION: 1, CLUSTER_SOFTMAX_BULK_OPTION: 2, CLUSTER_SOFTMAX_OPTION: 2}
    s._probed = None  # a training step's counts could not be matched to its graphs
    assert s.own_ops_found() == {}
    softmax = session_of(Broken(), torch.randn(8, 64), probed=True)
    assert softmax._probed is not None and softmax._probed[0][ONLINE_SOFTMAX_OPTION] == 1
    assert softmax.own_ops_found() == {}
