"""A fake ``kernelopt bench`` worker target: canned outcomes instead of an optimization.

Importable by the worker because the tests pass this directory as ``extra_path``.
Each test problem file says what the fake does with a top-level ``FAKE = ...``
literal: a dict of outcome fields to return, or ``"raise"``, ``"segfault"`` or
``"sleep"``. Every call appends the problem's file name to ``calls.log`` beside
the file, so tests can see which problems ran. No torch here: workers start fast.
"""

from __future__ import annotations

import ast
import os
import signal
import time
from pathlib import Path
from typing import Any

FAST_FIELDS = {"eager_ms": 2.0, "compiled_ms": 1.0, "max_autotune_ms": 0.9, "optimized_ms": 0.5, "evaluations": 4, "gpu_s": 2.0}


def _fake(path: Path) -> Any:
    for stmt in ast.parse(path.read_text()).body:
        if isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == ["FAKE"]:
            return ast.literal_eval(stmt.value)
    raise LookupError(f"{path} has no FAKE = ... line")


def scripted(problem_path: str, options: dict[str, Any]) -> dict[str, Any]:
    path = Path(problem_path)
    with open(path.parent / "calls.log", "a") as log:
        log.write(path.name + "\n")
    fake = _fake(path)
    if fake == "raise":
        raise RuntimeError("fake failure inside the target")
    if fake == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fake == "sleep":
        time.sleep(600)
    if fake == "meet":  # finishes only if another "meet" problem runs at the same time
        (path.parent / f"meet.{path.stem}").touch()
        deadline = time.monotonic() + 30
        while len(list(path.parent.glob("meet.*"))) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("no other problem ran at the same time")
            time.sleep(0.01)
        fake = {**FAST_FIELDS, "details": {"visible": os.environ.get("CUDA_VISIBLE_DEVICES")}}
    return {
        "name": "ignored: bench names problems itself",
        "path": problem_path,
        "status": "ok",
        "reason": "",
        "correct": True,
        **fake,
        "details": {"options": options, **fake.get("details", {})},
    }


def scripted_file(file_path: str, options: dict[str, Any]) -> dict[str, Any]:
    """The kernel-file bench's fake: a row from the file's ``FAKE`` (a dict of row fields, or ``"sleep"``)."""
    path = Path(file_path)
    with open(path.parent / "calls.log", "a") as log:
        log.write(path.name + "\n")
    fake = _fake(path)
    if fake == "sleep":
        time.sleep(600)
    return {"name": "ignored", "path": file_path, "kind": "triton", "status": "ok", "reason": "scripted", **fake,
            "details": {"options": options}}
