"""Roofline, traffic and Amdahl arithmetic against hand-computed values."""

from __future__ import annotations

import json
import math

import pytest
import torch

from kernelopt.measure import Roofline, amdahl_bound, geometric_mean, tensor_traffic_bytes

GIB = 2**30


def _traffic(t: torch.Tensor) -> int:
    return tensor_traffic_bytes(t.shape, t.stride(), t.element_size())


# --------------------------------------------------------------------------- tensor traffic


def test_traffic_contiguous() -> None:
    assert tensor_traffic_bytes((4, 8), (8, 1), 4) == 4 * 8 * 4


def test_traffic_broadcast_counts_once() -> None:
    base = torch.randn(8)
    view = base.expand(1000, 8)
    assert view.stride() == (0, 1)
    assert _traffic(view) == 8 * 4
    scalar = torch.tensor(1.0).expand(16, 16)
    assert _traffic(scalar) == 4


def test_traffic_transposed() -> None:
    t = torch.randn(3, 5).t()
    assert t.shape == (5, 3) and t.stride() == (1, 5)
    assert _traffic(t) == 15 * 4


def test_traffic_sliced_view_counts_only_its_elements() -> None:
    every_other = torch.randn(10)[::2]
    assert _traffic(every_other) == 5 * 4
    column = torch.randn(4, 6)[:, 1]
    assert _traffic(column) == 4 * 4


def test_traffic_broadcast_with_gap() -> None:
    # shape (2, 2), stride (0, 2): elements 0 and 2 -> 2 distinct, not the span of 3
    assert tensor_traffic_bytes((2, 2), (0, 2), 2) == 2 * 2


def test_traffic_overlapping_view() -> None:
    # unfold-like windows of 3 with step 1 over 5 elements: elements 0..4
    assert tensor_traffic_bytes((3, 3), (1, 1), 4) == 5 * 4


def test_traffic_zero_size_and_scalar() -> None:
    assert tensor_traffic_bytes((0, 7), (7, 1), 4) == 0
    assert tensor_traffic_bytes((5, 0), (0, 1), 4) == 0
    assert tensor_traffic_bytes((), (), 8) == 8


def test_traffic_validates() -> None:
    with pytest.raises(ValueError):
        tensor_traffic_bytes((2, 2), (1,), 4)
    with pytest.raises(ValueError):
        tensor_traffic_bytes((2,), (1,), 0)
    with pytest.raises(ValueError):
        tensor_traffic_bytes((-1,), (1,), 4)


# --------------------------------------------------------------------------- roofline


def test_roofline_hand_computed() -> None:
    roof = Roofline(bytes_read=GIB, bytes_written=GIB, time_us=500.0, peak_gbps=4300.0)
    assert roof.bytes_total == 2 * GIB
    # 2147483648 bytes / 500e-6 s = 4.294967296e12 B/s
    assert roof.achieved_gbps == pytest.approx(4294.967296)
    assert roof.pct_of_peak == pytest.approx(100 * 4294.967296 / 4300)
    assert roof.pct_of_peak == pytest.approx(99.88296, rel=1e-6)
    # 2147483648 / 4.3e12 s = 499.41480 us
    assert roof.min_time_us == pytest.approx(2 * GIB / 4.3e12 * 1e6)
    assert roof.min_time_us == pytest.approx(499.4148, rel=1e-6)
    assert roof.headroom_us == pytest.approx(500.0 - 499.4148, abs=1e-4)
    assert roof.at_roofline()
    assert roof.at_roofline(0.99)
    assert not roof.at_roofline(0.999)
    data = json.loads(json.dumps(roof.to_dict()))
    assert data["achieved_gbps"] == pytest.approx(4294.967296)


def test_roofline_slow_kernel_headroom() -> None:
    # 1e9 bytes at 1000 GB/s take 1000 us; measured 4000 us -> 25 % of peak, 3000 us headroom
    roof = Roofline(bytes_read=600_000_000, bytes_written=400_000_000, time_us=4000.0, peak_gbps=1000.0)
    assert roof.achieved_gbps == pytest.approx(250.0)
    assert roof.pct_of_peak == pytest.approx(25.0)
    assert roof.min_time_us == pytest.approx(1000.0)
    assert roof.headroom_us == pytest.approx(3000.0)
    assert not roof.at_roofline()


def test_roofline_faster_than_peak_has_no_headroom() -> None:
    # a kernel served from L2 can beat the DRAM copy bandwidth: headroom clamps to 0
    roof = Roofline(bytes_read=1_000_000, bytes_written=0, time_us=0.1, peak_gbps=4300.0)
    assert roof.headroom_us == 0.0
    assert roof.pct_of_peak > 100


def test_roofline_validates() -> None:
    with pytest.raises(ValueError):
        Roofline(bytes_read=1, bytes_written=1, time_us=0.0, peak_gbps=1.0)
    with pytest.raises(ValueError):
        Roofline(bytes_read=1, bytes_written=1, time_us=1.0, peak_gbps=0.0)
    with pytest.raises(ValueError):
        Roofline(bytes_read=-1, bytes_written=1, time_us=1.0, peak_gbps=1.0)


# --------------------------------------------------------------------------- Amdahl and averages


def test_amdahl_hand_computed() -> None:
    assert amdahl_bound(1000.0, 250.0) == pytest.approx(4.0 / 3.0)
    assert amdahl_bound(1000.0, 0.0) == 1.0
    # a kernel that is 2 % of the time cannot buy more than ~2 %
    assert amdahl_bound(100.0, 2.0) == pytest.approx(100 / 98)
    assert amdahl_bound(1000.0, 1000.0) == math.inf


def test_amdahl_validates() -> None:
    with pytest.raises(ValueError, match="headroom_us"):
        amdahl_bound(1000.0, 1250.0)
    with pytest.raises(ValueError, match="headroom_us"):
        amdahl_bound(1000.0, -1.0)
    with pytest.raises(ValueError, match="total_us"):
        amdahl_bound(0.0, 0.0)


def test_geometric_mean() -> None:
    assert geometric_mean([0.5, 2.0]) == pytest.approx(1.0)
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean(iter([3.0])) == pytest.approx(3.0)
    for bad in ([], [1.0, 0.0], [1.0, -2.0], [float("nan")]):
        with pytest.raises(ValueError):
            geometric_mean(bad)
