"""``kernelopt analyze FILE`` runs the problem file in a worker: a file that exits or hangs ends the run
failed, in one line, and this process lives on (issue 15, item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.config import load_settings
from kernelopt.errors import KerneloptError
from kernelopt.pipeline import analyze as analyze_run
from kernelopt.store import Store


@pytest.fixture
def tmp_path(worker_tmp: Path) -> Path:
    return worker_tmp  # the worker (maybe another user) reads the problem files


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("import os\nos._exit(4)\n", "the analysis failed in its worker"),
        ("import sys\nsys.exit(3)\n", "the analysis failed in its worker"),
        ("while True:\n    pass\n", "the analysis failed in its worker: timeout"),
    ],
)
def test_a_hostile_problem_file_ends_the_run_failed_not_this_process(tmp_path, monkeypatch, text, expected) -> None:
    monkeypatch.setattr(analyze_run, "require_gpu", lambda command: None)
    problem = tmp_path / "hostile.py"
    problem.write_text(text)
    with Store(tmp_path / "k.db") as store:
        with pytest.raises(KerneloptError) as raised:
            analyze_run.analyze_file(problem, store, config=load_settings({"eval_timeout_s": 8}))
        message = str(raised.value)
        assert "\n" not in message and expected in message and "hostile.py" in message
        (run,) = store.runs()
        assert run.kind == "analyze" and run.status == "failed" and run.error == message


def test_a_missing_file_is_refused_before_a_run_is_recorded(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(analyze_run, "require_gpu", lambda command: None)
    with Store(tmp_path / "k.db") as store:
        with pytest.raises(KerneloptError, match="no such problem file"):
            analyze_run.analyze_file(tmp_path / "missing.py", store)
        assert store.runs() == []
