"""The judge's record of which host path each of kernelopt's own ops took: one reader per op, registered by
the op's module, and one definition of Python's path for verdicts and rows alike."""

from __future__ import annotations

import pytest

from kernelopt.measure import op_hosts


@pytest.fixture
def readers(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The registry emptied for one test, restored after it."""
    fresh: dict = {}
    monkeypatch.setattr(op_hosts, "_READERS", fresh)
    return fresh


def test_only_ops_called_in_this_process_are_read(readers: dict) -> None:
    states = {"kernelopt.b": None, "kernelopt.a": "C++: 1 plan(s) kept"}
    op_hosts.register("kernelopt.b", lambda: states["kernelopt.b"])
    op_hosts.register("kernelopt.a", lambda: states["kernelopt.a"])
    assert op_hosts.read() == {"kernelopt.a": "C++: 1 plan(s) kept"}  # b only imported: left out
    states["kernelopt.b"] = op_hosts.python_path("no nvcc")
    assert op_hosts.read() == {"kernelopt.a": "C++: 1 plan(s) kept", "kernelopt.b": "Python: no nvcc"}
    op_hosts.register("kernelopt.b", lambda: None)  # a module reloaded replaces its reader
    assert list(op_hosts.read()) == ["kernelopt.a"]


def test_pythons_path_is_told_by_its_first_word_and_nothing_else() -> None:
    assert op_hosts.through_python(op_hosts.python_path("the C++ host path did not build or load: no nvcc"))
    assert not op_hosts.through_python("C++: 2 plan(s) kept, 40 call(s) launched from C++, 0 handed to Python's path")
    assert not op_hosts.through_python("Pythonic")  # the word, then its reason
    assert not op_hosts.through_python(None)


def test_the_group_norm_registers_its_reader_and_leaves_out_an_op_never_called(monkeypatch) -> None:
    """Importing the op registers it; before its first CUDA call it reads nothing (every compile with
    kernelopt's passes imports it), after a failed host build it reads Python's path and why."""
    from kernelopt.capture.rewrites import group_norm_op

    assert group_norm_op.host_state() == group_norm_op.HOST_NOT_ASKED
    assert op_hosts.through_python(group_norm_op.HOST_NOT_ASKED)
    assert "kernelopt.group_norm" not in op_hosts.read()
    monkeypatch.setattr(group_norm_op, "_HOST_UNUSED", "the C++ host path did not build or load: no nvcc")
    assert op_hosts.read()["kernelopt.group_norm"] == "Python: the C++ host path did not build or load: no nvcc"
