"""``kernelopt.load_kernel``: a delivered kernel file comes back in only as it was verified."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import ROOT, forge_record

import kernelopt
from kernelopt.errors import KerneloptError
from kernelopt.pipeline.optimize_file import FileReport, deliver
from kernelopt.pipeline.records import Winner
from kernelopt.search.file_configs import apply_config

pytest.importorskip("triton")
ORIGINAL = ROOT / "examples" / "kernels" / "softmax_naive.py"


@pytest.fixture
def delivered(tmp_path: Path) -> Path:
    source = apply_config(ORIGINAL.read_text(), {"launch:0:softmax_kernel": {"num_warps": 8, "num_stages": 3}})
    report = FileReport("softmax_naive", "triton", 1, "cpu", 10.0, None, speedup=1.2, speedup_iqr=(1.1, 1.3))
    report.best = Winner("launch-config", "num_warps 4->8", source, [], node=2)
    written, _record = deliver(ORIGINAL, ORIGINAL.read_text(), report, tmp_path / "softmax_kopt.py", {})
    return Path(written)


def test_a_delivered_file_that_matches_its_record_is_imported_and_runs(delivered: Path) -> None:
    module = kernelopt.load_kernel(delivered)
    x = torch.randn(6, 50)
    torch.testing.assert_close(module.launch(x), torch.softmax(x, dim=-1))


def test_a_file_changed_after_verification_is_refused(delivered: Path) -> None:
    delivered.write_text(delivered.read_text().replace("num_warps=8", "num_warps=16"))
    with pytest.raises(KerneloptError, match="its bytes are not the ones verified"):
        kernelopt.load_kernel(delivered)


def test_a_record_that_vouches_for_a_cheat_is_refused_by_gate_1(delivered: Path) -> None:
    forge_record(delivered, delivered.read_text().replace("    return y\n", "    return torch.softmax(x, -1)\n", 1))
    with pytest.raises(KerneloptError, match="gate 1 refuses it"):
        kernelopt.load_kernel(delivered)


def test_a_file_without_its_record_is_refused(tmp_path: Path) -> None:
    lone = tmp_path / "lone_kopt.py"
    lone.write_text(ORIGINAL.read_text())
    with pytest.raises(KerneloptError, match="no verification record beside it"):
        kernelopt.load_kernel(lone)
