"""Nsight Compute probing without a GPU: CSV parsing and the reasons doctor prints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelopt.measure import ncu
from kernelopt.measure.ncu import PROBE_METRIC, ncu_status, parse_metric_csv

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)

NCU_CSV = "\n".join(
    [
        "==PROF== Connected to process 41277 (/usr/bin/python3.11)",
        '==PROF== Profiling "vectorized_elementwise_kernel" - 0: 0%....50%....100% - 1 pass',
        '==PROF== Profiling "triton_poi_fused_mul_0" - 1: 0%....50%....100% - 1 pass',
        "==PROF== Disconnected from process 41277",
        HEADER,
        '"0","41277","python3.11","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, '
        'at::native::FillFunctor<float>, at::detail::Array<char *, 1>>(int, T2, T3)","1","7",'
        '"(128, 1, 1)","(2048, 1, 1)","0","9.0","Command line profiler metrics",'
        '"gpu__time_duration.sum","nsecond","2,144"',
        '"0","41277","python3.11","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, '
        'at::native::FillFunctor<float>, at::detail::Array<char *, 1>>(int, T2, T3)","1","7",'
        '"(128, 1, 1)","(2048, 1, 1)","0","9.0","Command line profiler metrics",'
        '"dram__bytes_read.sum","byte","4,194,304"',
        '"1","41277","python3.11","127.0.0.1","triton_poi_fused_mul_0","1","7",'
        '"(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics",'
        '"gpu__time_duration.sum","nsecond","1,056"',
    ]
)


def test_parse_metric_csv() -> None:
    assert parse_metric_csv(NCU_CSV, "gpu__time_duration.sum") == [2144.0, 1056.0]
    assert parse_metric_csv(NCU_CSV, "dram__bytes_read.sum") == [4194304.0]
    assert parse_metric_csv(NCU_CSV, "sm__throughput.avg.pct_of_peak_sustained_elapsed") == []


def test_parse_metric_csv_without_header() -> None:
    text = "==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - no permission\n"
    assert parse_metric_csv(text, "gpu__time_duration.sum") == []
    assert parse_metric_csv("", "gpu__time_duration.sum") == []


def test_ncu_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu, "NCU_CANDIDATES", ())
    assert ncu.find_ncu() is None
    status = ncu_status()
    assert status.counters is False
    assert status.path is None
    assert "ncu not found" in status.reason


def test_ncu_that_reads_no_counters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "ncu"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "==PROF== Connected to process 1"\n'
        'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission" >&2\n'
        "exit 3\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + "/usr/bin" + os.pathsep + "/bin")
    monkeypatch.setattr(ncu, "NCU_CANDIDATES", ())
    status = ncu_status(timeout_s=30)
    assert status.path == str(fake)
    assert status.counters is False
    assert "exit 3" in status.reason
    assert "ERR_NVGPUCTRPERM" in status.reason
    assert "\n" not in status.reason


def test_ncu_that_reads_counters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    csv_file = tmp_path / "out.csv"
    csv_file.write_text(NCU_CSV + "\n")
    fake = tmp_path / "ncu"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "NVIDIA (R) Nsight Compute Command Line Profiler"; '
        'echo "Version 2025.1.0.0 (build 1)"; exit 0; fi\n'
        f'cat "{csv_file}"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + "/usr/bin" + os.pathsep + "/bin")
    monkeypatch.setattr(ncu, "NCU_CANDIDATES", ())
    status = ncu_status(timeout_s=30)
    assert status.counters is True
    assert status.version == "Version 2025.1.0.0 (build 1)"
    assert PROBE_METRIC in status.reason and "2 kernel(s)" in status.reason


def test_parse_metrics_csv_takes_the_first_launch_of_each_kernel() -> None:
    from kernelopt.measure.ncu import parse_metrics_csv

    header = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
    rows = [
        '"0","1","python3","h","triton_red_x_0","1","7","(512, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","43.21"',
        '"0","1","python3","h","triton_red_x_0","1","7","(512, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","32"',
        '"1","1","python3","h","triton_red_x_0","1","7","(512, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","99"',
        '"2","1","python3","h","sgemm","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","1,024"',
    ]
    text = "==PROF== Connected\n" + header + "\n" + "\n".join(rows) + "\n==PROF== Disconnected\n"
    found = parse_metrics_csv(text)
    assert found["triton_red_x_0"] == {"dram__throughput.avg.pct_of_peak_sustained_elapsed": 43.21, "launch__registers_per_thread": 32.0}
    assert found["sgemm"] == {"gpu__time_duration.sum": 1024.0}
    assert parse_metrics_csv("no csv here") == {}


def test_kernel_metrics_without_ncu_says_why(monkeypatch) -> None:
    from kernelopt.measure import ncu

    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    metrics, reason = ncu.kernel_metrics(["python3", "-c", "pass"], "k")
    assert metrics is None and "ncu not found" in reason
