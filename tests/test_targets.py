"""Target selection: ranked by headroom, every skip explained."""

from __future__ import annotations

import pytest

from kernelopt.search.targets import select_targets


def row(kind, name, t, headroom=None, pct=None):
    return {"kind": kind, "name": name, "time_us": t, "headroom_us": headroom, "pct_of_peak": pct}


def test_ranking_and_skips() -> None:
    rows = [
        row("vendor", "extern_kernels.mm", 6000.0),
        row("triton", "k_small", 50.0, 40.0, 20.0),  # 0.5 % of 10 ms
        row("triton", "k_done", 1000.0, 50.0, 95.0),  # at the roofline
        row("triton", "k_big", 2000.0, 1500.0, 25.0),
        row("triton", "k_mid", 950.0, 300.0, 68.0),
    ]
    targets, skipped = select_targets(rows, total_us=10_000.0)
    assert [t.name for t in targets] == ["k_big", "k_mid"]
    assert targets[0].gain_bound == pytest.approx(10_000 / 8_500)
    reasons = {s.name: s.reason for s in skipped}
    assert "kept as the compiler made it" in reasons["extern_kernels.mm"]
    assert "0.5% of the time" in reasons["k_small"]
    assert "95% of the copy roofline" in reasons["k_done"]


def test_repeated_launches_of_one_kernel_add_up() -> None:
    rows = [row("triton", "k", 60.0, 30.0, 50.0), row("triton", "k", 60.0, 30.0, 50.0)]
    targets, _ = select_targets(rows, total_us=1000.0)
    assert targets[0].time_us == 120.0 and targets[0].headroom_us == 60.0 and targets[0].share == pytest.approx(0.12)


def test_headroom_the_kernel_search_cannot_reach_is_named() -> None:
    from kernelopt.search.targets import headroom_elsewhere

    # kernels at their rooflines (1.02x) in a graph at twice its traffic floor, GPU busy throughout
    (fusion,) = headroom_elsewhere(amdahl=1.02, fusion=2.0, launch_overhead=1.0, gpu_busy=1.0)
    assert "2.00x its traffic floor" in fusion and "only fusion can buy" in fusion
    # a launch-bound forward: the GPU idles two thirds of the time
    (launch,) = headroom_elsewhere(amdahl=1.0, fusion=None, launch_overhead=3.0, gpu_busy=1 / 3)
    assert "busy 33%" in launch and "3.00x" in launch
    # nothing worth a line: the kernels' own headroom explains the floor, and the GPU is busy
    assert headroom_elsewhere(amdahl=1.95, fusion=2.0, launch_overhead=1.05, gpu_busy=0.95) == []
    assert headroom_elsewhere(amdahl=1.0, fusion=1.05, launch_overhead=1.0, gpu_busy=1.0) == []


def test_a_name_two_graphs_share_is_not_searched() -> None:
    """A training step's forward and backward may both hold a kernel of one name; the worker addresses
    kernels by name, so neither is searched (one must never be timed against the other)."""
    rows = [
        {**row("triton", "triton_poi_fused_add_0", 3000.0, 2000.0, 30.0), "graph": 0},
        {**row("triton", "triton_poi_fused_add_0", 3000.0, 2000.0, 30.0), "graph": 1},
        {**row("triton", "triton_red_fused_sum_1", 3000.0, 2000.0, 30.0), "graph": 1},
        {**row("triton", "triton_red_fused_sum_1", 1000.0, 500.0, 30.0), "graph": 1},  # one graph, twice: fine
    ]
    targets, skipped = select_targets(rows, total_us=10_000.0)
    assert [t.name for t in targets] == ["triton_red_fused_sum_1"]
    (repeat,) = [s for s in skipped if s.name == "triton_poi_fused_add_0"]
    assert "repeats in graphs [0, 1]" in repeat.reason


def test_a_copy_at_its_roofline_is_skipped_with_the_only_gain_named() -> None:
    copy = {**row("triton", "k_copy", 1000.0, 40.0, 96.0), "moves_only": True}
    mixed = [{**copy, "name": "k_mixed"}, {**row("triton", "k_mixed", 1000.0, 40.0, 96.0), "moves_only": False}]
    _, skipped = select_targets([copy, *mixed, row("triton", "k_math", 1000.0, 40.0, 96.0)], total_us=10_000.0)
    reasons = {s.name: s.reason for s in skipped}
    assert "only moves data" in reasons["k_copy"] and "graph-variants" in reasons["k_copy"]
    assert "only moves data" not in reasons["k_math"] and "only moves data" not in reasons["k_mixed"]
