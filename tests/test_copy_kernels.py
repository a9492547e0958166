"""Which generated kernels only move data (layout copies, transposes, concatenations), read from real
captures and from kernels written to the same shape; and how analyze counts their time apart."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from kernelopt.capture import parse_output_code
from kernelopt.capture.copy_kernels import moves_only
from kernelopt.capture.recorder import Launch
from kernelopt.evaluate.analysis import build_launch_reports, summarize_analysis

BLOCK = parse_output_code((FIXTURES / "inductor" / "03_transformer_block.graph0.py").read_text())
KERNELS = {k.name: k.source for k in BLOCK.kernels.values()}

CAT = """
@triton.jit
def triton_poi_fused_cat_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex % 96
    x1 = xindex // 96
    tmp3 = x0 < 64
    tmp4 = tl.load(in_ptr0 + (x0 + 64*x1), tmp3 & xmask, other=0.0)
    tmp6 = x0 >= 64
    tmp9 = tl.load(in_ptr1 + ((-64) + x0 + 32*x1), tmp6 & xmask, other=0.0)
    tmp10 = tl.where(tmp3, tmp4, tmp9)
    tl.store(out_ptr0 + (xindex), tmp10.to(tl.float16), xmask)
"""


def test_the_transpose_before_a_matmul_is_a_mover_and_the_bias_adds_and_norms_are_not() -> None:
    found = {name: moves_only(source, name) for name, source in KERNELS.items()}
    assert found.pop("triton_poi_fused_clone_transpose_view_5") is True  # bmm output to the next mm's layout
    assert found and not any(found.values()), found  # the q/k/v permutes add a bias: compute, as is the rest


@pytest.mark.parametrize(
    ("edit", "moves"),
    [
        (lambda s: s, True),  # a cat: a choice between two loads, cast on the way out
        (lambda s: s.replace("tl.where(tmp3, tmp4, tmp9)", "tl.where(tmp3, tmp4, tmp9 * 2.0)"), False),
        (lambda s: s.replace("tl.where(tmp3, tmp4, tmp9)", "tl.where(tmp3, tmp4, 0.0)"), True),  # padding
        (lambda s: s.replace("tmp10.to(tl.float16)", "tl.exp(tmp10)"), False),
        (lambda s: s.replace("tl.store(out_ptr0 + (xindex), tmp10.to(tl.float16), xmask)", "pass"), False),  # none
        (lambda s: s.replace("tmp10 = tl.where", "tmp10 = tl.sum(tmp4, 0) + tl.where"), False),
    ],
)
def test_a_kernel_moves_data_only_while_each_stored_value_is_a_loaded_one(edit, moves: bool) -> None:
    assert moves_only(edit(CAT), "triton_poi_fused_cat_0") is moves


def test_a_name_not_in_the_source_or_a_source_that_does_not_parse_is_no_mover() -> None:
    assert not moves_only(CAT, "another_kernel") and not moves_only("def (", "triton_poi_fused_cat_0")


def test_analyze_counts_the_movers_time_apart() -> None:
    launches = [Launch(0, 0, "triton", "triton_poi_fused_clone_transpose_view_5"), Launch(1, 0, "vendor", "extern_kernels.mm"),
                Launch(2, 0, "triton", "triton_poi_fused_addmm_gelu_view_7")]  # fmt: skip
    rows = build_launch_reports(launches, {0: 30.0, 1: 50.0, 2: 20.0}, 4000.0, KERNELS)
    assert [r.moves_only for r in rows] == [True, False, False]
    assert not any(r.moves_only for r in build_launch_reports(launches, {0: 30.0}, 4000.0))  # no sources: unknown

    class Timing:
        median_ms, rel_spread = 0.1, 0.01

    report = summarize_analysis("p", "gpu", 4000.0, Timing, Timing, rows, 100.0)
    assert (report.moves_launches, report.moves_ms) == (1, pytest.approx(0.03))
    from kernelopt.cli.format import summary_lines

    line = next(s for s in summary_lines(report) if s.startswith("data movement only"))
    assert "1 launches, 0.030 ms (30% of GPU time)" in line
    # 0.03 of the compiled 0.1 ms moves data: optimize's graph stage runs without being named, and analyze says so
    assert report.moves_share == pytest.approx(0.3)
    (stage,) = [s for s in summary_lines(report) if s.startswith("optimize also searches graph variants")]
    assert "take 30% of the compiled forward's time" in stage
    quiet = summarize_analysis("p", "gpu", 4000.0, Timing, Timing, rows[1:], 100.0)
    assert not [s for s in summary_lines(quiet) if s.startswith("optimize also searches graph variants")]


def test_the_analysis_table_says_how_many_times_a_kernel_loops_over_its_rows() -> None:
    """A looped softmax that computes its max and its sum apart reads each row three times; the
    table's passes column says so beside % peak (which counts bytes moved once)."""
    from rich.console import Console

    from kernelopt.cli.format import analysis_table

    loop = "    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):\n        pass\n"
    sources = {"triton_red_fused__log_softmax_0": "def k():\n" + loop * 3, "triton_poi_fused_add_1": "def k():\n"}
    launches = [
        Launch(0, 0, "triton", "triton_red_fused__log_softmax_0"),
        Launch(1, 0, "triton", "triton_poi_fused_add_1"),
    ]
    rows = build_launch_reports(launches, {0: 80.0, 1: 20.0}, 4000.0, sources)
    assert [r.second_passes for r in rows] == [2, 0]

    class Timing:
        median_ms, rel_spread = 0.1, 0.01

    console = Console(width=200, record=True)
    console.print(analysis_table(summarize_analysis("p", "gpu", 4000.0, Timing, Timing, rows, 100.0)))
    lines = console.export_text().splitlines()

    def last_cell(marker: str) -> str:
        (line,) = [line for line in lines if marker in line]
        return [cell.strip() for cell in line.replace("┃", "│").split("│")][-2]

    assert last_cell("headroom") == "passes"
    assert last_cell("log_softmax") == "3" and last_cell("fused_add") == ""
