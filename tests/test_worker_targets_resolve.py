"""Every function (or runner backend) a worker is told to run by name exists: a moved module fails here, not on the GPU."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "kernelopt"
LITERAL = re.compile(r'"(kernelopt(?:\.\w+)+):(\w+)"')
SESSION_CALL = re.compile(r'f"\{SESSION\}:(\w+)"')
RUNNER_CALL = re.compile(r'(?:_raw|call)\(\s*"(\w+)"')


def targets() -> list[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        found.update(LITERAL.findall(text))
        if SESSION_CALL.search(text):
            module = "kernelopt." + ".".join(path.relative_to(SRC).with_suffix("").parts)
            session = getattr(importlib.import_module(module), "SESSION", None)
            assert isinstance(session, str), f"{path} names worker targets through SESSION but has none"
            found.update((session, name) for name in SESSION_CALL.findall(text))
    remote = (SRC / "evaluate" / "remote.py").read_text()
    module = re.search(r'^MODULE = "([\w.]+)"', remote, re.M)
    assert module
    found.update((module.group(1), name) for name in RUNNER_CALL.findall(remote))
    for judge in ("session.py", "restitched.py"):  # the judge's modules that call the runner by name
        text = (SRC / "evaluate" / judge).read_text()
        found.update((module.group(1), name) for name in re.findall(r'self\.runner\.call\(\s*"(\w+)"', text))
    return sorted(found)


def test_the_scan_finds_the_known_targets() -> None:
    found = targets()
    assert ("kernelopt.pipeline.bench_problem", "bench_problem") in found
    assert ("kernelopt.evaluate.runner", "time_launch") in found
    assert ("kernelopt.evaluate.one_candidate", "evaluate") in found
    assert ("kernelopt.evaluate.runner", "kernel_source") in found
    assert len(found) > 15


@pytest.mark.parametrize(("module", "name"), targets())
def test_worker_target_exists(module: str, name: str) -> None:
    value = getattr(importlib.import_module(module), name, None)
    assert value is not None, f"{module}:{name} does not exist"
    assert callable(value) or (callable(getattr(value, "build", None)) and callable(getattr(value, "launch", None)))


def test_every_module_run_with_python_dash_m_exists() -> None:
    import importlib.util

    modules = set()
    for path in SRC.rglob("*.py"):
        modules.update(re.findall(r'"-m",\s*"(kernelopt(?:\.\w+)+)"', path.read_text()))
    assert "kernelopt.evaluate.ncu_probe" in modules
    for module in sorted(modules):
        assert importlib.util.find_spec(module) is not None, module
