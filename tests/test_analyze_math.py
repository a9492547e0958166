"""Roofline and Amdahl arithmetic of the analyze report, against hand-computed cases."""

from __future__ import annotations

import pytest

from kernelopt.capture import ArgInfo, Launch
from kernelopt.evaluate.analysis import LaunchReport, build_launch_reports, launch_traffic, summarize_analysis
from kernelopt.measure import Timing

MiB = 1 << 20


def tensor(pos: int, name: str, role: str, shape: tuple, stride: tuple, itemsize: int = 4) -> ArgInfo:
    return ArgInfo(pos, name, role, shape, stride, "float32", "cuda:0", itemsize)


def timing(ms: float) -> Timing:
    return Timing(samples_ms=(ms, ms, ms), device="cuda:0 test", method="cuda-events", l2_flushed=True)


def test_traffic_counts_each_argument_once_by_role() -> None:
    launch = Launch(0, 0, "triton", "k", args=[
        tensor(0, "in_out_ptr0", "readwrite", (1024, 256), (256, 1)),  # 1 MiB read + 1 MiB written
        tensor(1, "in_ptr0", "read", (1024, 256), (0, 1)),  # broadcast row: 256 floats read once
        tensor(2, "out_ptr0", "write", (256, 1024), (1, 256)),  # transposed view: still 1 MiB
        ArgInfo(3, "xnumel", "scalar", value=262144),
    ])
    read, written = launch_traffic(launch)
    assert read == MiB + 256 * 4
    assert written == 2 * MiB


def test_reports_roofline_only_for_triton_and_shares() -> None:
    gemm = Launch(0, 0, "vendor", "extern_kernels.mm", args=[tensor(0, None, "read", (1024, 1024), (1024, 1))])
    epilogue = Launch(1, 0, "triton", "triton_poi_fused_gelu_0", args=[
        tensor(0, "in_ptr0", "read", (1000, 1000), (1000, 1)),
        tensor(1, "out_ptr0", "write", (1000, 1000), (1000, 1)),
    ])
    rows = build_launch_reports([gemm, epilogue], {0: 300.0, 1: 100.0}, peak_gbps=4000.0)
    assert [r.share for r in rows] == [0.75, 0.25]
    assert rows[0].achieved_gbps is None and rows[0].headroom_us is None
    e = rows[1]
    assert e.bytes_read == e.bytes_written == 4_000_000
    assert e.achieved_gbps == pytest.approx(8e6 / 100e-6 / 1e9)  # 80 GB/s
    assert e.pct_of_peak == pytest.approx(2.0)  # percent
    assert e.headroom_us == pytest.approx(100.0 - 2.0)  # 8 MB at 4000 GB/s takes 2 us


def test_amdahl_bound_of_the_model() -> None:
    # 1 ms GEMM (untouchable) + 1 ms Triton kernel moving 2 GB at 4000 GB/s (0.5 ms at roofline).
    gemm = Launch(0, 0, "vendor", "extern_kernels.mm")
    red = Launch(1, 0, "triton", "triton_red_0", args=[
        tensor(0, "in_ptr0", "read", (250_000_000,), (1,)),
        tensor(1, "out_ptr0", "write", (250_000_000,), (1,)),
    ])
    rows = build_launch_reports([gemm, red], {0: 1000.0, 1: 1000.0}, peak_gbps=4000.0)
    report = summarize_analysis("p", "dev", 4000.0, timing(3.0), timing(2.0), rows, device_total_us=2000.0)
    assert rows[1].headroom_us == pytest.approx(500.0)
    assert report.speedup_vs_eager == pytest.approx(1.5)
    assert report.triton_ms == pytest.approx(1.0) and report.triton_headroom_ms == pytest.approx(0.5)
    assert report.amdahl_bound == pytest.approx(2000.0 / 1500.0)
    assert report.unattributed_ms == 0.0


def test_kernel_at_roofline_has_no_headroom_and_bound_one() -> None:
    k = Launch(0, 0, "triton", "triton_poi_0", args=[
        tensor(0, "in_ptr0", "read", (500_000_000,), (1,)),
        tensor(1, "out_ptr0", "write", (500_000_000,), (1,)),
    ])
    rows = build_launch_reports([k], {0: 1000.0}, peak_gbps=4000.0)  # 4 GB in 1 ms = peak
    report = summarize_analysis("p", "dev", 4000.0, timing(1.0), timing(1.0), rows, device_total_us=1000.0)
    assert rows[0].headroom_us == pytest.approx(0.0)
    assert report.amdahl_bound == pytest.approx(1.0)


def test_a_launch_bound_forward_reports_how_busy_the_gpu_is() -> None:
    k = Launch(0, 0, "triton", "triton_poi_0", args=[
        tensor(0, "in_ptr0", "read", (1000,), (1,)),
        tensor(1, "out_ptr0", "write", (1000,), (1,)),
    ])
    rows = build_launch_reports([k], {0: 300.0}, 4000.0)
    # 0.3 ms of kernels in a 1 ms forward: the GPU idled 70 % of the time between launches
    report = summarize_analysis("p", "dev", 4000.0, timing(2.0), timing(1.0), rows, device_total_us=300.0)
    assert report.gpu_busy == pytest.approx(0.3)
    assert report.launch_overhead_bound == pytest.approx(1.0 / 0.3)
    busy = summarize_analysis("p", "dev", 4000.0, timing(2.0), timing(1.0), rows, device_total_us=1000.0)
    assert busy.gpu_busy == pytest.approx(1.0) and busy.launch_overhead_bound == pytest.approx(1.0)


def test_the_traffic_floor_counts_each_piece_of_memory_once() -> None:
    import torch

    from kernelopt.evaluate.analysis import graph_floor_bytes

    model = torch.nn.Linear(8, 4)  # 32 + 4 floats of weights
    model.register_buffer("scale", torch.ones(4))
    model.tied = model.weight  # one weight under two names is read once
    x = torch.randn(2, 8)
    out = torch.randn(2, 4)
    assert graph_floor_bytes(model, [x, 3], [out, out[0]]) == 4 * (16 + 32 + 4 + 4 + 8 + 4)
    # out[0] is a view of out with its own extent: counted as the bytes it names (4 floats)


def test_the_fusion_bound_is_the_compiled_time_over_the_floor_and_only_without_vendor_calls() -> None:
    # Two 1 ms Triton kernels, each moving 4 GB (2 GB in, 2 GB out at 4000 GB/s: 1 ms each at
    # roofline): no kernel has headroom, but the graph itself only moves 4 GB (0.5 ms each way).
    a = Launch(0, 0, "triton", "triton_poi_a_0", args=[
        tensor(0, "in_ptr0", "read", (500_000_000,), (1,)),
        tensor(1, "out_ptr0", "write", (500_000_000,), (1,)),
    ])
    b = Launch(1, 0, "triton", "triton_poi_b_0", args=[
        tensor(0, "in_ptr0", "read", (500_000_000,), (1,)),
        tensor(1, "out_ptr0", "write", (500_000_000,), (1,)),
    ])
    rows = build_launch_reports([a, b], {0: 1000.0, 1: 1000.0}, peak_gbps=4000.0)
    report = summarize_analysis("p", "dev", 4000.0, timing(2.0), timing(2.0), rows, 2000.0, floor_bytes=4_000_000_000)
    assert report.amdahl_bound == pytest.approx(1.0)  # every kernel already at its roofline
    assert report.floor_ms == pytest.approx(1.0)
    assert report.fusion_bound == pytest.approx(2.0)  # the intermediate's write and read are the other half
    gemm = Launch(2, 0, "vendor", "extern_kernels.mm")
    rows = build_launch_reports([gemm, a], {2: 1000.0, 0: 1000.0}, peak_gbps=4000.0)
    mixed = summarize_analysis("p", "dev", 4000.0, timing(2.0), timing(2.0), rows, 2000.0, floor_bytes=4_000_000_000)
    assert mixed.floor_ms == pytest.approx(1.0) and mixed.fusion_bound is None
    assert summarize_analysis("p", "dev", 4000.0, timing(2.0), timing(2.0), rows, 2000.0).floor_ms is None


def test_the_floor_line_says_why_a_mixed_graph_has_no_fusion_bound() -> None:
    from kernelopt.cli.format import floor_lines

    a = Launch(0, 0, "triton", "triton_poi_a_0", args=[tensor(0, "in_ptr0", "read", (1000,), (1,))])
    rows = build_launch_reports([a, Launch(1, 0, "vendor", "extern_kernels.mm")], {0: 10.0, 1: 10.0}, 4000.0)
    mixed = summarize_analysis("p", "dev", 4000.0, timing(1.0), timing(1.0), rows, 20.0, floor_bytes=8000)
    (line,) = floor_lines(mixed)
    assert "0.000 ms" not in line and "no fusion bound: vendor calls run" in line
    assert floor_lines(summarize_analysis("p", "dev", 4000.0, timing(1.0), timing(1.0), rows, 20.0)) == []


def test_stock_modes_are_timed_each_in_its_own_process_and_the_best_is_named() -> None:
    from kernelopt.cli.format import stock_lines
    from kernelopt.pipeline.stock_modes import time_stock_modes
    from kernelopt.report.metrics import speedup_over_default
    from kernelopt.workers import WorkerResult

    calls, caches = [], []

    def run(target, path, mode, seed, trials, exported, overrides, train, timeout_s, env):
        calls.append((target, mode, exported))
        caches.append(env)
        if mode == "max-autotune":
            return WorkerResult("crash", None, "segfault in autotuning", None, 1.0, "")
        ratio = {"max-autotune-no-cudagraphs": 1.05, "reduce-overhead": 0.8}[mode]  # mode's time over the default's
        value = {"compiled_ms": ratio, "vs_optimized": {"speedup": ratio, "optimized": "torch.compile"}}
        return WorkerResult("ok", value, "", None, 1.0, "")

    modes = ["max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune"]
    stock = time_stock_modes("p.py", modes, run=run)
    assert [c[1] for c in calls] == modes and {c[0] for c in calls} == {"kernelopt.pipeline.stock_modes:time_mode"}
    assert all(c[2] is None for c in calls)  # against the default, not an exported result
    from kernelopt.pipeline.evaluator import compile_cache_env, stock_cache_env

    # each mode's process builds into the workers' caches: kernelopt's op is built once, not once a mode;
    # and the modes share one Inductor cache, which a candidate's worker is not handed
    assert caches == [stock_cache_env()] * 3 and "KERNELOPT_CUDA_BUILD_DIR" in caches[0]
    assert caches[0]["TORCHINDUCTOR_CACHE_DIR"] and "TORCHINDUCTOR_CACHE_DIR" not in compile_cache_env()
    assert speedup_over_default(stock["reduce-overhead"]) == pytest.approx(1.25)
    assert speedup_over_default(stock["max-autotune"]) is None  # "crash: segfault in autotuning"
    rows = [LaunchReport(0, 0, "triton", "k", 10.0, 1.0)]
    report = summarize_analysis("p", "dev", 4000.0, timing(1.0), timing(1.0), rows, 10.0)
    assert stock_lines(report) == []  # not asked for
    report.stock = stock
    lines = stock_lines(report)
    assert "  reduce-overhead: 1.250x over the default (0.800 ms in its own process)" in lines
    assert "  max-autotune: not timed against the default (crash: segfault in autotuning)" in lines
    assert lines[-1] == "best stock mode: reduce-overhead (1.250x over the default)"
    report.stock = {"reduce-overhead": {"compiled_ms": 1.2, "vs_optimized": {"speedup": 1.2, "optimized": "torch.compile"}}}
    assert stock_lines(report)[-1] == "best stock mode: the default"
    # slower under CUDA graphs, with the inputs it copies before every replay named (center-then-scale on the H200)
    report.stock["reduce-overhead"]["input_bytes"] = 536_870_912
    assert stock_lines(report)[1] == (
        "  reduce-overhead: 0.833x over the default (1.200 ms in its own process); slower: its CUDA graphs copy "
        "the 537 MB of inputs into their own memory before every replay, about 0.268 ms at the peak copy bandwidth"
    )
    report.stock["reduce-overhead"]["vs_optimized"]["speedup"] = 0.8  # faster than the default: nothing to explain
    assert stock_lines(report)[1].endswith("(1.200 ms in its own process)")


LOOPED_SOFTMAX = '''
@triton.jit
def triton_red_fused__softmax_0(in_ptr0, out_ptr2, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        tmp0 = tl.load(in_ptr0 + r0_offset)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        tmp1 = tl.load(in_ptr0 + r0_offset)
        tl.store(out_ptr2 + r0_offset, tl.exp(tmp1 - tmp0))
'''


def test_a_kernel_that_reads_its_rows_twice_is_counted_and_brings_the_graph_stage() -> None:
    """Inductor's looped softmax reads each row twice (statistics, then the output): at its roofline
    by its arguments' traffic it still has a read to lose, which no launch config removes and a row
    split can (kernelopt.capture.row_split): the analysis counts its time, the graph stage runs."""
    from kernelopt.search.targets import structure_pays

    k = Launch(0, 0, "triton", "triton_red_fused__softmax_0", args=[
        tensor(0, "in_ptr0", "read", (1000,), (1,)), tensor(1, "out_ptr2", "write", (1000,), (1,))])
    one = Launch(1, 0, "triton", "triton_per_fused_sum_1", args=[tensor(0, "in_ptr0", "read", (1000,), (1,))])
    sources = {k.name: LOOPED_SOFTMAX, one.name: LOOPED_SOFTMAX.replace("    for r0_offset in range(0, r0_numel, R0_BLOCK):\n        tmp1", "    if True:\n        tmp1")}
    rows = build_launch_reports([k, one], {0: 30.0, 1: 10.0}, 4000.0, sources)
    assert [r.second_passes for r in rows] == [1, 0]
    report = summarize_analysis("p", "dev", 4000.0, timing(1.0), timing(0.05), rows, 40.0)
    assert report.rereads_ms == pytest.approx(0.03) and report.rereads_share == pytest.approx(0.6)
    why = structure_pays(report.amdahl_bound, report.fusion_bound, report.moves_share, report.rereads_share)
    assert why is not None and "read their rows twice take 60%" in why
    from kernelopt.cli.format import graph_stage_lines

    assert graph_stage_lines(report) == [f"optimize also searches graph variants here (graph_stage auto): {why}"]
    assert structure_pays(1.0, None, 0.0, rereads_share=0.04) is None  # too small a share to pay a compile


def test_a_kernel_reading_its_rows_twice_at_its_roofline_reads_them_again_from_cache() -> None:
    """Counted once, its traffic runs at the peak: the second read cannot have come from memory (the H200's
    bf16 F.normalize over 16384-wide rows, 100.6 % of the copy roofline, whose one-read variants all screened
    at 0.42-0.74x). Its time is not headroom a graph variant can buy, and the analysis says why it is left."""
    from kernelopt.cli.format import graph_stage_lines
    from kernelopt.search.targets import structure_pays

    args = [tensor(0, "in_ptr0", "read", (1 << 20,), (1,)), tensor(1, "out_ptr2", "write", (1 << 20,), (1,))]
    at = Launch(0, 0, "triton", "triton_red_fused__softmax_0", args=args)
    sources = {at.name: LOOPED_SOFTMAX}
    peak = 4000.0  # GB/s: 8 MiB at 2.2 us is 3.8 TB/s, 95 % of it
    rows = build_launch_reports([at], {0: 2.2}, peak, sources)
    assert rows[0].second_passes == 1 and rows[0].pct_of_peak > 90
    report = summarize_analysis("p", "dev", peak, timing(1.0), timing(0.0022), rows, 2.2)
    assert report.rereads_ms == 0.0 and report.rereads_cached_ms == pytest.approx(0.0022)
    assert structure_pays(report.amdahl_bound, report.fusion_bound, report.moves_share, report.rereads_share) is None
    assert graph_stage_lines(report) == [
        "kernels that read their rows twice (0.002 ms) run at 90% or more of the copy roofline counting one read: "
        "their second read comes from cache, so no graph variant that drops it can pay"
    ]
    slow = build_launch_reports([at], {0: 6.0}, peak, sources)  # 35 % of the peak: a read from memory to lose
    report = summarize_analysis("p", "dev", peak, timing(1.0), timing(0.006), slow, 6.0)
    assert report.rereads_ms == pytest.approx(0.006) and report.rereads_cached_ms == 0.0


def test_reread_options_go_first_where_rows_are_read_twice_or_the_graph_is_far_above_its_floor() -> None:
    """The suite's group norm on an H100: two kernels at their rooflines (Amdahl 1.00x) but 1.53x its traffic
    floor; its compile budget ran out before the row split (twenty-fifth session). A graph near its floor
    whose kernels hold the headroom keeps the fusion options first."""
    from kernelopt.search.targets import reread_options_first

    assert reread_options_first(1.0, 1.525, 0.0)
    assert reread_options_first(1.0, None, 0.5)
    assert not reread_options_first(1.0, 1.01, 0.0) and not reread_options_first(1.6, 1.525, 0.0)
    assert not reread_options_first(1.0, None, 0.0)
    assert reread_options_first(1.0, None, 0.0, {"kernelopt.cluster_group_norm": 1})  # own kernels' options first


def test_ops_kernelopts_own_kernels_would_take_bring_the_graph_stage() -> None:
    """level2/13 on the H100 (this session's bench): a small matmul, then a group norm in two kernels, each at
    its roofline and neither passing over its rows twice; its vendor call leaves it without a floor. No
    structure was seen, the graph stage did not run, and the row read 1.02x, though the group-norm op's
    candidate passed gate 4 at 1.23-1.35x there. What the capture's probe of the op's rewrite found brings it."""
    from kernelopt.cli.format import graph_stage_lines
    from kernelopt.search.targets import structure_pays

    assert structure_pays(1.1, None, 0.0, 0.0) is None and structure_pays(1.1, None, 0.0, 0.0, {}) is None
    why = structure_pays(1.1, None, 0.0, 0.0, {"kernelopt.cluster_group_norm": 1})
    assert why == (
        "kernelopt's own kernels can take ops of the graphs (kernelopt.cluster_group_norm: 1): held on chip "
        "across a cluster, which no launch config of Inductor's kernels does"
    )
    k = Launch(0, 0, "triton", "triton_poi_fused_0", args=[tensor(0, "in_ptr0", "read", (1000,), (1,))])
    rows = build_launch_reports([k], {0: 30.0}, 4000.0, {k.name: "def triton_poi_fused_0(): pass"})
    report = summarize_analysis("p", "dev", 4000.0, timing(1.0), timing(0.05), rows, 30.0)
    assert graph_stage_lines(report) == []
    report.own_ops = {"kernelopt.cluster_group_norm": 1}
    assert graph_stage_lines(report) == [f"optimize also searches graph variants here (graph_stage auto): {why}"]
    from kernelopt.evaluate.records import analysis_report_from_dict

    assert analysis_report_from_dict(report.to_dict()).own_ops == {"kernelopt.cluster_group_norm": 1}  # stored
