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


def parse_metric_csv(text: str, metric: str) -> list[float]:
    """Values of ``metric`` in ``ncu --csv`` output (header row starts with "ID")."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    values = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row.get("Metric Name") == metric:
            try:
                values.append(float(row["Metric Value"].replace(",", "")))
            except (KeyError, ValueError):
                continue
    return values


def ncu_status(timeout_s: float = 120.0) -> NcuStatus:
    """Probe Nsight Compute with one tiny kernel (``--clock-control none`` leaves clocks alone)."""
    path = find_ncu()
    if path is None:
        return NcuStatus(None, None, False, "ncu not found; install Nsight Compute or put ncu on PATH")
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        version = version.splitlines()[-1] if version else None
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
