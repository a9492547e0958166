"""scripts/device/lanes.sh on the CPU, with a stand-in for gpu_check.sh: lanes, GPUs, variables, timeout, archive."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

from conftest import ROOT

LANES = ROOT / "scripts" / "device" / "lanes.sh"
FAKE_CHECK = """#!/usr/bin/env bash
# stand-in for gpu_check.sh: record what the step saw, or hang for the timeout test
[[ $1 == hang ]] && exec sleep 600
mkdir -p "$OUT"
echo "step=$1 gpu=$CUDA_VISIBLE_DEVICES out=$(basename $OUT) a=${A:-unset} b=${B:-unset}" > "$OUT/$1.txt"
echo "done $1"
"""


def run_lanes(tmp_path: Path, *lanes: str, timeout: str = "60") -> tuple[subprocess.CompletedProcess, Path]:
    check = tmp_path / "fake_check.sh"
    check.write_text(FAKE_CHECK)
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "GPU_CHECK": str(check), "LANES_TIMEOUT": timeout}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    work = tmp_path / "tree"  # no .whl here: nothing to install
    work.mkdir()
    result = subprocess.run(["bash", str(LANES), *lanes], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    return result, out


def archived(out: Path) -> dict[str, str]:
    with tarfile.open(out / "all.tgz") as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_each_lane_runs_its_steps_in_order_on_its_own_gpu_and_everything_is_archived(tmp_path: Path) -> None:
    result, out = run_lanes(tmp_path, "A=1 one; B=2 two", "three")
    assert result.returncode == 0, result.stderr
    files = archived(out)
    assert files["l0/one.txt"].strip() == "step=one gpu=0 out=l0 a=1 b=unset"
    assert files["l0/two.txt"].strip() == "step=two gpu=0 out=l0 a=unset b=2"  # variables belong to one item
    assert files["l1/three.txt"].strip() == "step=three gpu=1 out=l1 a=unset b=unset"
    assert files["l0/one.log"].strip() == "done one"
    lanes = files["lanes.txt"]
    assert lanes.index("lane 0: A=1 one") < lanes.index("lane 0: one exited 0") < lanes.index("lane 0: B=2 two")
    assert "== " in result.stdout and "done three" in result.stdout  # each log's tail is printed


def test_a_lane_past_the_timeout_is_ended_and_the_archive_still_written(tmp_path: Path) -> None:
    result, out = run_lanes(tmp_path, "first; hang; never", "quick", timeout="3")
    assert result.returncode == 0, result.stderr
    files = archived(out)
    assert "l0/first.txt" in files and "l1/quick.txt" in files
    assert "l0/never.txt" not in files  # the lane ended at the hang
    assert "LANES_TIMEOUT reached" in files["lanes.txt"]
