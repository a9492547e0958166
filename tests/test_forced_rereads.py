"""The inputs a forward reads twice whatever fuses it (``kernelopt.evaluate.forced_rereads``): traced from
our example problems at full size on meta tensors, and the floor and fusion bound that count them."""

from __future__ import annotations

import pytest
import torch
from conftest import EXAMPLES

from kernelopt.evaluate.forced_rereads import held_on_chip, merged, reshaped, traced_rereads
from kernelopt.problem import load_problem

HELD = held_on_chip(4)  # the widest statistic of float32 elements the chip holds


def _on_meta(name: str):
    problem = load_problem(EXAMPLES / f"{name}.py")
    with torch.device("meta"):
        model = problem.module.Model(*problem.module.get_init_inputs()).eval()  # as build_model gives it
        inputs = problem.module.get_inputs()
    return model, inputs


@pytest.mark.parametrize(
    ("name", "statistic"),
    [
        ("level1/11_frobenius_normalize", 16 * 64 * 512 * 512),  # the sum over the whole tensor
        ("level1/22_center_then_scale", 16384 * 8192),  # a column mean, then each row's scale of the centred rows
    ],
)
def test_a_statistic_wider_than_the_chip_reads_its_input_twice(name: str, statistic: int) -> None:
    model, inputs = _on_meta(name)
    found = traced_rereads(model, inputs)
    (x,) = inputs
    assert found.bytes == x.numel() * x.element_size()
    (line,) = found.lines
    assert line.startswith(("x read twice", "logits read twice")) and f"{statistic:,} of its elements" in line


@pytest.mark.parametrize(
    "name",
    [
        "level1/14_layernorm",  # rows of 4096: held on chip
        "level1/13_log_softmax_wide",  # 131072: exactly what a cluster holds
        "level1/24_log_softmax_vocab",
        "level1/26_token_log_probs",  # logsumexp over 128256
        "level1/10_row_l2_normalize",
        "level1/09_mean_outer_dim",  # a statistic alone: its input is not needed again
        "level1/20_cumsum",
        "level1/23_transpose_residual",
        "level1/17_batchnorm_eval",  # running statistics: parameters, not statistics of the input
        "level1/16_groupnorm",  # groups of 8 x 256 x 256 float32 (2 MB): the group-norm op's reread form's
        "level3/02_self_attention",  # matmuls: not elementwise, passed on without dimensions
    ],
)
def test_statistics_the_chip_holds_and_other_graphs_read_their_inputs_once(name: str) -> None:
    model, inputs = _on_meta(name)
    assert traced_rereads(model, inputs).bytes == 0


def test_the_limit_is_the_chip_and_a_wider_row_reads_twice() -> None:
    softmax = torch.nn.Softmax(dim=-1)
    assert traced_rereads(softmax, [torch.empty(4, HELD, device="meta")]).bytes == 0
    assert traced_rereads(softmax, [torch.empty(4, 2 * HELD, device="meta")]).bytes == 4 * 2 * HELD * 4
    assert traced_rereads(softmax, [torch.empty(4, 2 * HELD, device="meta")], on_chip=4 * HELD).bytes == 0


def test_the_chip_holds_a_row_as_it_is_stored_in_the_shared_memory_form() -> None:
    """The op's shared-memory form holds float32 rows of 229344 and 16-bit rows of 458688, each read once;
    the group-norm op's 16 blocks of 65 KB a little more (float32 266176, 16-bit 532352), its reread form
    groups of 4 MB in L2 (float32 1048576, 16-bit 2097152), and no float64."""
    from kernelopt.capture.rewrites import group_norm_op
    from kernelopt.capture.rewrites.row_softmax_op import max_columns

    assert max_columns(True, 4) == 229344 and max_columns(True, 2) == 458688
    assert group_norm_op.max_columns(4) == 266176 and group_norm_op.max_columns(2) == 532352
    assert group_norm_op.reread_columns(4) == 1048576 and group_norm_op.reread_columns(2) == 2097152
    assert (held_on_chip(8), held_on_chip(4), held_on_chip(2)) == (131072, 1048576, 2097152)  # 131072: ON_CHIP
    softmax = torch.nn.Softmax(dim=-1)
    assert traced_rereads(softmax, [torch.empty(4, 458688, device="meta", dtype=torch.bfloat16)]).bytes == 0
    assert traced_rereads(softmax, [torch.empty(4, 229344, device="meta")]).bytes == 0


def test_a_group_norm_s_groups_wider_than_l2_holds_are_read_twice() -> None:
    """The group-norm op's reread form reads groups up to 4 MB a second time from L2, not memory (the suite's
    groups of 8 x 256 x 256 float32, 2 MB, among them); wider groups (8 MB here) are read twice from memory
    by any kernel, so their second read is forced and no graph stage is sent after it."""
    norm = torch.nn.GroupNorm(8, 256, device="meta")
    x = torch.empty(2, 256, 256, 256, device="meta")  # groups of 32 x 256 x 256: 2097152 elements
    found = traced_rereads(norm, [x])
    assert found.bytes == x.numel() * 4 and f"{32 * 256 * 256:,} of its elements" in found.lines[0]
    suite = torch.empty(2, 64, 256, 256, device="meta")  # level1/16's groups of 524288: the reread form's
    assert traced_rereads(torch.nn.GroupNorm(8, 64, device="meta"), [suite]).bytes == 0
    small = torch.empty(2, 64, 128, 128, device="meta")  # groups of 131072: held, read once
    assert traced_rereads(norm, [small]).bytes == 0
    conv_norm = torch.empty(2, 128, 128, 128, device="meta")  # level2/09's groups of 262144: the group-norm op's
    assert traced_rereads(torch.nn.GroupNorm(8, 128, device="meta"), [conv_norm]).bytes == 0


def test_a_permuted_statistic_is_followed_to_the_input_s_own_dimensions() -> None:
    class ColumnsThenRows(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            t = x.t()  # the rows of t are x's columns
            return t / t.sum(dim=-1, keepdim=True)

    # t's rows span x's first dimension, 1200000 elements of stride 8: more than the chip holds
    wide = 1_200_000
    assert traced_rereads(ColumnsThenRows(), [torch.empty(wide, 8, device="meta")]).bytes == wide * 8 * 4
    assert traced_rereads(ColumnsThenRows(), [torch.empty(8, wide, device="meta")]).bytes == 0


def test_a_model_export_cannot_trace_keeps_the_once_read_floor_and_says_why() -> None:
    class DataDependent(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if x.sum() > 0 else x  # a branch on a value

    found = traced_rereads(DataDependent(), [torch.randn(4, 4)])
    assert found.bytes == 0
    (line,) = found.lines
    assert line.startswith("second reads not counted: torch.export could not trace the model")


def test_intervals_merge_and_reshapes_split_and_join_them() -> None:
    assert merged([(8, 64), (1, 8), (128, 256)]) == ((1, 64), (128, 256))
    rows_cols = ((8192, 16384 * 8192), (1, 8192))
    assert reshaped(rows_cols, (16384, 8192), (16384 * 8192,)) == ((1, 16384 * 8192),)
    assert reshaped(rows_cols, (16384, 8192), (16384, 2, 4096)) == ((8192, 16384 * 8192), (4096, 8192), (1, 4096))
    transposed = ((1, 8192), (8192, 16384 * 8192))  # x.t(): its rows walk x's columns
    assert reshaped(transposed, (8192, 16384), (8192 * 16384,)) is None  # not one run of x's index


def test_the_floor_counts_a_forced_second_read_and_the_fusion_bound_drops_with_it() -> None:
    from kernelopt.capture import ArgInfo, Launch
    from kernelopt.cli.format import floor_lines
    from kernelopt.evaluate.analysis import build_launch_reports, summarize_analysis
    from kernelopt.evaluate.forced_rereads import ForcedRereads
    from kernelopt.measure import Timing
    from kernelopt.search.targets import structure_pays

    def timing(ms: float) -> Timing:
        return Timing(samples_ms=(ms, ms, ms), device="cuda:0 test", method="cuda-events", l2_flushed=True)

    # A Frobenius norm as Inductor compiles it: 1 GB read for the sum, then read again and written: 1.5 ms
    # at 2000 GB/s. Its once-read floor (in and out) is 1 ms: 1.5x "above its floor" for nothing.
    gigabyte = 1_000_000_000
    launch = Launch(0, 0, "triton", "triton_red_a_0", args=[
        ArgInfo(0, "in_ptr0", "read", (gigabyte // 4,), (1,), "float32", "cuda:0", 4),
    ])  # fmt: skip
    rows = build_launch_reports([launch], {0: 1500.0}, peak_gbps=2000.0)
    once = summarize_analysis("p", "dev", 2000.0, timing(3.0), timing(1.5), rows, 1500.0, floor_bytes=2 * gigabyte)
    assert once.fusion_bound == pytest.approx(1.5) and once.reread_bytes == 0
    assert structure_pays(1.0, once.fusion_bound, 0.0) is not None  # today's graph stage: for nothing
    rereads = ForcedRereads(gigabyte, ["x read twice (1e+03 MB more): ..."])
    twice = summarize_analysis(
        "p", "dev", 2000.0, timing(3.0), timing(1.5), rows, 1500.0, floor_bytes=2 * gigabyte, rereads=rereads
    )
    assert twice.floor_bytes == 3 * gigabyte and twice.reread_bytes == gigabyte
    assert twice.fusion_bound == pytest.approx(1.0)
    assert structure_pays(1.0, twice.fusion_bound, 0.0) is None
    first, note = floor_lines(twice)
    assert "and 1e+03 MB of inputs a second time" in first and note.strip() == rereads.lines[0]


def test_tracing_runs_nothing_of_the_model_and_changes_none_of_its_state() -> None:
    """The analysis traces the user's own model object: a training batch norm's running statistics (a
    statistic over the batch, 1200000 rows: its input is read twice) stay as they were."""
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(8), torch.nn.ReLU()).train()
    x = torch.randn(1_200_000, 8) * 5 + 3
    mean, batches = model[0].running_mean.clone(), model[0].num_batches_tracked.clone()
    assert traced_rereads(model, [x]).bytes == x.numel() * 4
    assert torch.equal(model[0].running_mean, mean) and torch.equal(model[0].num_batches_tracked, batches)


def test_an_expanded_input_and_a_graph_that_cannot_be_read_are_not_fatal(monkeypatch) -> None:
    from kernelopt.evaluate import forced_rereads

    row = torch.empty(1, 2 * HELD, device="meta").expand(4, 2 * HELD)  # a stride of 0: one row's memory
    found = traced_rereads(torch.nn.Softmax(dim=-1), [row])
    assert found.lines and all(line.startswith("input read twice") for line in found.lines)

    def unforeseen(graph, inputs, on_chip):
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(forced_rereads, "forced_rereads", unforeseen)
    (line,) = traced_rereads(torch.nn.Softmax(dim=-1), [row]).lines
    assert line == "second reads not counted: the traced graph could not be read (IndexError: tuple index out of range)"


class _VectorNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.linalg.vector_norm(x, 2.0, dim=-1, keepdim=True)  # its ord comes before its dim


class _VarMean(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)  # two outputs
        return (x - mean) / var


@pytest.mark.parametrize("model", [_VectorNorm(), _VarMean()])
def test_a_reduction_s_dimensions_are_read_by_its_schema(model: torch.nn.Module) -> None:
    wide = torch.empty(4, 1_200_000, device="meta")
    assert traced_rereads(model, [wide]).bytes == wide.numel() * 4  # a row of 1200000: read twice
    assert traced_rereads(model, [torch.empty(1_200_000, 4, device="meta")]).bytes == 0  # rows of 4


def test_an_elementwise_overload_of_a_reduction_s_name_is_not_a_reduction() -> None:
    """``aten.max.other`` (two tensors, elementwise) shares ``max``'s name with the reductions: a graph
    written by hand, as core ATen may keep it."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernelopt.evaluate.forced_rereads import forced_rereads

    graph = torch.fx.Graph()
    with FakeTensorMode():
        x_value, y_value = torch.empty(4, 2 * HELD), torch.empty(4, 2 * HELD)
        x, y = graph.placeholder("x"), graph.placeholder("y")
        x.meta["val"], y.meta["val"] = x_value, y_value
        both = graph.call_function(torch.ops.aten.max.other, (x, y))
        both.meta["val"] = torch.ops.aten.max.other(x_value, y_value)
        total = graph.call_function(torch.ops.aten.sum.default, (x,))  # a reduction of all of x
        total.meta["val"] = torch.ops.aten.sum.default(x_value)
        scaled = graph.call_function(torch.ops.aten.div.Tensor, (both, total))
        scaled.meta["val"] = torch.ops.aten.div.Tensor(both.meta["val"], total.meta["val"])
    graph.output(both)
    assert forced_rereads(graph, {"x": x_value, "y": y_value}) == []
    graph.erase_node(next(n for n in graph.nodes if n.op == "output"))
    graph.output(scaled)  # x elementwise over its own sum: read twice; y only elementwise: once
    (reread,) = forced_rereads(graph, {"x": x_value, "y": y_value})
    assert reread.name == "x" and reread.statistic_elements == 4 * 2 * HELD
