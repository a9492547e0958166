"""The candidate's process for kernel files: load, run and time candidate files; judge nothing.

The kernel-file counterpart of :mod:`kernelopt.evaluate.runner` (the same rule: the
judge and the accused never share a process). A candidate file is loaded here from
a private temporary file (Triton reads a kernel's source back through ``inspect``),
its ``launch`` runs on inputs the judge lent (:mod:`kernelopt.evaluate.shared_tensors`)
and what it returns is copied into the judge's output buffers; a timed call is one
call with its own events and an L2 flush, a reading the judge checks against its own
clock. A CUDA C++ candidate is built here and runs inside a fresh import of the original
file, in the slot of the kernel the judge named (:mod:`kernelopt.capture.cuda_slot`).
Like the other runner, it imports no gate, tolerance or comparison.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelopt.evaluate.shared_tensors import SharedTensor, open_args

ORIGINAL = "original"


class _State:
    def __init__(self, device: str, entry: str, slot: str | None, runtime: Sequence[str]) -> None:
        self.device = torch.device(device)
        self.entry = entry
        self.slot, self.runtime = slot, tuple(runtime)  # the kernel a CUDA C++ candidate replaces
        self.original_source: str | None = None
        self.modules: dict[str, ModuleType] = {}
        # in the worker's own directory (its cwd), which the worker removes when it ends
        self.folder = Path(tempfile.mkdtemp(prefix="kernelopt-files-", dir=os.getcwd()))
        self.opened: dict[str, list[Any]] = {}
        self.last: list[Any] = []  # what the last timed call returned, for the judge to check


_STATE: _State | None = None


def _state() -> _State:
    if _STATE is None:
        raise RuntimeError("the file runner was not opened: call kernelopt.evaluate.runner_file:start first")
    return _STATE


def digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def start(
    device: str = "cuda", entry: str = "launch", slot: str | None = None, runtime: Sequence[str] = ()
) -> dict[str, Any]:
    """Start (or restart) this runner; ``entry`` is the function of a file that runs it, ``slot`` the kernel
    a CUDA C++ candidate replaces and ``runtime`` that kernel's runtime parameters (the judge read both
    from the original)."""
    global _STATE
    _STATE = _State(device, entry, slot, runtime)
    return {"ok": True}


def _load(state: _State, key: str, source: str) -> ModuleType:
    path = state.folder / f"kernel_{key}.py"
    path.write_text(source)
    name = f"kernelopt_candidate_file_{key}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton's @jit looks its module up here; the file stays for inspect
    spec.loader.exec_module(module)
    return module


def _load_cuda(state: _State, key: str, source: str) -> ModuleType:
    """The original file imported afresh with its slot kernel bound to the built CUDA C++ ``source``."""
    from kernelopt.capture.cuda_kernel import build_cuda_kernel
    from kernelopt.capture.cuda_slot import bind_cuda_slot

    if state.slot is None or state.original_source is None:
        raise RuntimeError("no kernel slot was named for a CUDA C++ candidate (the judge names it at start)")
    launcher = build_cuda_kernel(source, state.slot)
    module = _load(state, key, state.original_source)
    bind_cuda_slot(module, state.slot, launcher, state.runtime)
    return module


def load(source: str, original: bool = False) -> dict[str, Any]:
    """Import one file (a candidate, or with ``original`` the user's own; a CUDA C++ candidate is built and
    bound into a fresh import of the original); a failure is returned as text, never raised."""
    from kernelopt.capture.cuda_kernel import CudaBuildError, is_cuda_source

    state = _state()
    key = ORIGINAL if original else digest(source)
    started = time.monotonic()
    if original:
        state.original_source = source
    if key not in state.modules:
        try:
            module = _load_cuda(state, key, source) if is_cuda_source(source) else _load(state, key, source)
            if not callable(getattr(module, state.entry, None)):
                raise RuntimeError(f"the file defines no {state.entry} function")
            state.modules[key] = module
        except CudaBuildError as exc:  # nvcc's first error, as it stands, for the Repairer
            return {"digest": key, "error": str(exc), "seconds": time.monotonic() - started}
        except Exception as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return {"digest": key, "error": f"{type(exc).__name__}: {text}", "seconds": time.monotonic() - started}
    return {"digest": key, "error": None, "seconds": time.monotonic() - started}


def _outputs(result: Any) -> list[Any]:
    if result is None:
        return []
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _copy_out(state: _State, got: list[Any], outputs: Sequence[SharedTensor]) -> dict[str, Any]:
    """Each returned tensor into the judge's buffer of the same place; what was returned is described,
    so the judge can name a mismatch (then nothing is copied)."""
    described = [
        {"shape": list(t.shape), "dtype": str(t.dtype), "device": str(t.device)}
        if isinstance(t, torch.Tensor)
        else {"type": type(t).__name__}
        for t in got
    ]
    if len(got) != len(outputs):
        return {"error": None, "returned": described}
    buffers = [o.open() for o in outputs]
    for value, buffer in zip(got, buffers):
        if not isinstance(value, torch.Tensor) or value.shape != buffer.shape or value.dtype != buffer.dtype:
            return {"error": None, "returned": described}
    for value, buffer in zip(got, buffers):
        buffer.copy_(value)
    _synchronize(state.device)
    return {"error": None, "returned": described}


def run(key: str, inputs: Sequence[Any], outputs: Sequence[SharedTensor]) -> dict[str, Any]:
    """One call of the file's entry on lent inputs, its outputs copied into the judge's buffers."""
    state = _state()
    entry = getattr(state.modules[key], state.entry)
    args = open_args(inputs)
    try:
        got = _outputs(entry(*args))
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        return {"error": f"{state.entry}() raised {type(exc).__name__}: {first}"}
    _synchronize(state.device)
    return _copy_out(state, got, outputs)


def copy_last(outputs: Sequence[SharedTensor]) -> dict[str, Any]:
    """What the last timed call returned, into the judge's buffers (what was timed is what is checked)."""
    state = _state()
    return _copy_out(state, state.last, outputs)


def time_run(key: str, inputs: Sequence[Any], flush_l2: bool = True) -> dict[str, Any]:
    """One timed call of the entry on lent inputs (allocation of its outputs included, as for the
    original): L2 flushed, events around the call. Opened inputs stay open until :func:`release`."""
    from kernelopt.measure.timer import read_call

    state = _state()
    entry = getattr(state.modules[key], state.entry)
    handle = repr(inputs)
    opened = state.opened.get(handle)
    if opened is None:
        opened = state.opened[handle] = open_args(inputs)
    result: list[Any] = []
    reading = read_call(lambda: result.append(entry(*opened)), device=state.device, flush_l2=flush_l2)
    state.last = _outputs(result[0])
    return {"ms": reading.ms, "lead_ms": reading.lead_ms}


def release() -> dict[str, Any]:
    state = _state()
    released = len(state.opened)
    state.opened.clear()
    state.last = []
    _synchronize(state.device)
    return {"released": released}
