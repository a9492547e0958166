"""Nsight Compute: find ``ncu`` and check that it can read hardware counters here.

Counters are unavailable in many containers and VMs (no permission, no driver
support). The agents use counters when present, so ``doctor`` says plainly
whether they are, and why not.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

NCU_CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")
# A tiny CUDA workload for the probe: one elementwise kernel.
_PROBE = "import torch; x = torch.ones(1 << 20, device='cuda'); torch.cuda.synchronize(); y = x * 2; torch.cuda.synchronize()"
PROBE_METRIC = "gpu__time_duration.sum"


@dataclass(frozen=True)
class NcuStatus:
    path: str | None
    version: str | None
    counters: bool
    reason: str  # why counters are or are not readable, one line


def find_ncu() -> str | None:
    """``ncu`` on PATH, else the usual install locations."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in NCU_CANDIDATES:
        for path in sorted(glob.glob(pattern), reverse=True):
            if os.access(path, os.X_OK):
                return path
    return None


def _rows(text: str) -> list[dict[str, str]]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def _number(text: str | None) -> float | None:
    try:
        return float((text or "").replace(",", ""))
    except ValueError:
        return None


def parse_metric_csv(text: str, metric: str) -> list[float]:
    """Values of ``metric`` in ``ncu --csv`` output (header row starts with "ID")."""
    values = [_number(row.get("Metric Value")) for row in _rows(text) if row.get("Metric Name") == metric]
    return [v for v in values if v is not None]


def parse_metrics_csv(text: str) -> dict[str, dict[str, float]]:
    """Per profiled kernel (by name, first launch of each), every numeric metric in ``ncu --csv`` output."""
    kernels: dict[str, dict[str, float]] = {}
    first_id: dict[str, str] = {}
    for row in _rows(text):
        name, launch = row.get("Kernel Name", ""), row.get("ID", "")
        first_id.setdefault(name, launch)
        value = _number(row.get("Metric Value"))
        if launch == first_id[name] and value is not None and row.get("Metric Name"):
            kernels.setdefault(name, {})[row["Metric Name"]] = value
    return kernels


# What the Analyst reads: speed of light of compute and memory, the DRAM share, cache hit
# rates, occupancy and its register limit, and how well global loads use their sectors.
ANALYST_METRICS = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sector_hit_rate.pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__occupancy_limit_registers",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
)
PROFILE_RANGE = "kernelopt_profile"  # NVTX range around the one forward that is profiled


def kernel_metrics(
    command: list[str], kernel: str, metrics: tuple[str, ...] = ANALYST_METRICS, timeout_s: float = 600.0
) -> tuple[dict[str, float] | None, str]:
    """Profile the first launch of ``kernel`` inside the ``kernelopt_profile`` NVTX range of ``command``.

    Returns (metrics, reason); metrics is None when counters could not be read, with
    the reason in one line. Clocks are left alone (``--clock-control none``).
    """
    path = find_ncu()
    if path is None:
        return None, "ncu not found; install Nsight Compute or put ncu on PATH"
    cmd = [
        path,
        "--clock-control",
        "none",
        "--csv",
        "--nvtx",
        "--nvtx-include",
        f"{PROFILE_RANGE}/",
        "--kernel-name",
        f"regex:^{kernel}$",
        "--launch-count",
        "1",
        "--metrics",
        ",".join(metrics),
        *command,
    ]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"running ncu failed: {exc}"
    found = parse_metrics_csv(run.stdout)
    if kernel in found:
        return found[kernel], f"read {len(found[kernel])} metrics for {kernel}"
    tail = " ".join((run.stderr or run.stdout).split())[-200:]
    return None, f"ncu read no counters for {kernel} (exit {run.returncode}): {tail}"


def ncu_status(timeout_s: float = 120.0) -> NcuStatus:
    """Probe Nsight Compute with one tiny kernel (``--clock-control none`` leaves clocks alone)."""
    path = find_ncu()
    if path is None:
        return NcuStatus(None, None, False, "ncu not found; install Nsight Compute or put ncu on PATH")
    try:
        printed = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        version = printed.splitlines()[-1] if printed else None
        probe = subprocess.run(
            [path, "--clock-control", "none", "--metrics", PROBE_METRIC, "--csv", sys.executable, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return NcuStatus(path, None, False, f"running ncu failed: {exc}")
    values = parse_metric_csv(probe.stdout, PROBE_METRIC)
    if values:
        return NcuStatus(path, version, True, f"read {PROBE_METRIC} for {len(values)} kernel(s)")
    tail = " ".join((probe.stderr or probe.stdout).split())[-200:]
    return NcuStatus(path, version, False, f"ncu ran but read no counters (exit {probe.returncode}): {tail}")
