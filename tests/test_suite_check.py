"""Problem files are loaded in a worker: one that hangs, exits or floods at import costs its own entry (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.pipeline.suite_check import check_suite


@pytest.fixture
def tmp_path(worker_tmp: Path) -> Path:
    """Here a test's files (suites, tools) are read by workers, which may run as another user:
    ``worker_tmp`` (conftest) is a folder they can enter, where pytest's own is closed to them."""
    return worker_tmp

GOOD = '''import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
'''
HOSTILE = {
    "b_loops": "while True:\n    pass\n",
    "c_exits": "import sys\nsys.exit(3)\n",
    "d_os_exit": "import os\nos._exit(4)\n",
    "e_interrupt": "raise KeyboardInterrupt\n",
    "f_floods": "print('x' * (10 << 20))\n" + GOOD,
    "g_swallows": "try:\n    while True:\n        pass\nexcept Exception:\n    pass\n",
}


def test_every_hostile_file_costs_its_own_entry_and_the_rest_load(tmp_path: Path, capsys) -> None:
    (tmp_path / "a_good.py").write_text(GOOD)
    for name, text in HOSTILE.items():
        (tmp_path / f"{name}.py").write_text(text)
    (tmp_path / "h_good.py").write_text(GOOD)
    entries = {e.name: e for e in check_suite(tmp_path, seconds_per_file=2.0)}
    assert entries["a_good"].error is None and entries["h_good"].error is None
    assert entries["f_floods"].error is None  # it loads; its 10 MB went to the worker's log
    assert "did not finish loading within 2 s" in (entries["b_loops"].error or "")
    assert "did not finish loading within 2 s" in (entries["g_swallows"].error or "")
    assert "SystemExit at import" in (entries["c_exits"].error or "")
    assert "ended the loading process at import" in (entries["d_os_exit"].error or "")
    assert "KeyboardInterrupt at import" in (entries["e_interrupt"].error or "")
    assert len(capsys.readouterr().out) < 10_000  # nothing flooded this process's console


def test_a_selection_loads_only_the_chosen_files(tmp_path: Path) -> None:
    (tmp_path / "a_good.py").write_text(GOOD)
    (tmp_path / "b_loops.py").write_text(HOSTILE["b_loops"])
    (entry,) = check_suite(tmp_path, only=["a_good"], seconds_per_file=2.0)
    assert entry.name == "a_good" and entry.error is None
