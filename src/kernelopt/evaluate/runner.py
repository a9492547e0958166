"""The candidate's process: compile, launch and time candidates; judge nothing.

Issue 11's rule: the judge and the accused never share a process. A candidate is
Python that runs at import and at compile time, so it can patch anything in the
process that loads it. This module is all that process runs (as the target of a
:class:`~kernelopt.workers.PersistentWorker`): it builds candidates, launches them
on buffers the judge lent it (:mod:`kernelopt.evaluate.shared_tensors`), times
one call at a time with its own events, runs the re-stitched model and copies
its outputs into the judge's buffers. It imports no gate, tolerance, margin or
comparison (``tests/test_judge_split.py`` checks the process's module table),
and everything it returns is plain evidence the judge checks: outputs the judge
reads itself, and timings the judge cross-checks against its own clock.

Kernels are built by a *backend* (``module:object`` with ``build(source, name)``
and ``launch(kernel, args)``): Inductor's own loader and launcher by default,
Python stand-ins in the CPU tests.
"""

from __future__ import annotations

import hashlib
import importlib
import time
from collections.abc import Sequence
from typing import Any

import torch

from kernelopt.evaluate.shared_tensors import SharedTensor, open_args
from kernelopt.measure import op_hosts

DEFAULT_BACKEND = "kernelopt.evaluate.runner:TRITON"
ORIGINAL = "original"  # the digest that names the captured model's own kernel (calibration only)


class TritonBackend:
    """Inductor's loader and launcher: what a real candidate runs through."""

    @staticmethod
    def build(source: str, name: str) -> Any:
        from kernelopt.capture.swap import build_kernel

        return build_kernel(source, name)

    @staticmethod
    def launch(kernel: Any, args: Sequence[Any]) -> None:
        from kernelopt.capture import compat

        compat.launch(kernel, args)


TRITON = TritonBackend()


def digest(source: str) -> str:
    """The name a built candidate goes by in this process."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


class _State:
    def __init__(self, backend: str, device: str) -> None:
        module, _, name = backend.partition(":")
        self.backend = getattr(importlib.import_module(module), name)
        self.device = torch.device(device)
        self.kernels: dict[str, Any] = {}
        self.graphs: dict[str, tuple[Any, dict[str, Any]]] = {}  # digest -> (GraphCandidate, its built kernels)
        self.originals: dict[str, Any] = {}
        self.session: Any = None  # the captured model, built on the first model-level call
        self.spec: dict[str, Any] | None = None
        self.opened: dict[str, list[Any]] = {}


_STATE: _State | None = None


def _state() -> _State:
    if _STATE is None:
        raise RuntimeError("the runner was not opened: call kernelopt.evaluate.runner:start first")
    return _STATE


def start(backend: str = DEFAULT_BACKEND, device: str = "cuda", spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start (or restart) this runner; ``spec`` names the problem whose model it captures when asked."""
    global _STATE
    _STATE = _State(backend, device)
    _STATE.spec = spec
    return {"ok": True}


def register_original(name: str, source: str) -> dict[str, Any]:
    """Build the original kernel here too, so the judge can calibrate this process's timing
    overhead on a kernel it trusts, before any candidate has run in it."""
    state = _state()
    state.originals[name] = state.backend.build(source, name)
    return {"ok": True}


def _built(key: str, cache: dict[str, Any], make: Any) -> dict[str, Any]:
    """``cache[key] = make()`` unless built before; a failure is returned as text, never raised."""
    started = time.monotonic()
    if key not in cache:
        try:
            cache[key] = make()
        except Exception as exc:
            return {
                "digest": key,
                "error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                "seconds": time.monotonic() - started,
            }
    return {"digest": key, "error": None, "seconds": time.monotonic() - started}


def build(name: str, source: str) -> dict[str, Any]:
    """Compile one candidate; a failure is returned as text, never raised."""
    state = _state()
    return _built(digest(source), state.kernels, lambda: state.backend.build(source, name))


def build_graph(candidate: dict[str, Any]) -> dict[str, Any]:
    """Build a graph candidate's kernels (a changed call sequence, :mod:`kernelopt.capture.graph_swap`);
    a failure is returned as text, never raised."""
    from kernelopt.capture.graph_swap import GraphCandidate, build_graph_kernels

    graph = GraphCandidate.from_dict(candidate)
    return _built(graph.digest(), _state().graphs, lambda: (graph, build_graph_kernels(graph)))


def _kernel(state: _State, name: str, key: str) -> Any:
    if key == ORIGINAL:
        return state.originals[name]
    return state.kernels[key]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def launch(name: str, key: str, arg_sets: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Launch the kernel once on each lent argument set, then wait for the device."""
    state = _state()
    kernel = _kernel(state, name, key)
    for shared in arg_sets:
        args = open_args(shared)
        state.backend.launch(kernel, args)
        del args
    _synchronize(state.device)
    return {"launches": len(arg_sets)}


def time_launch(name: str, key: str, args: Sequence[Any], flush_l2: bool = True) -> dict[str, Any]:
    """One timed launch on lent arguments: L2 flushed, events around the launch (the judge
    checks the reading against its own clock). The opened arguments stay open until
    :func:`release`, so a timing loop over the same sets does not reopen them every call."""
    from kernelopt.measure.timer import read_call

    state = _state()
    kernel = _kernel(state, name, key)
    handle_key = repr(args)
    opened = state.opened.get(handle_key)
    if opened is None:
        opened = state.opened[handle_key] = open_args(args)
    reading = read_call(lambda: state.backend.launch(kernel, opened), device=state.device, flush_l2=flush_l2)
    return {"ms": reading.ms, "lead_ms": reading.lead_ms}


def release() -> dict[str, Any]:
    """Close every lent buffer this process still holds open (the judge may free them now)."""
    state = _state()
    released = len(state.opened)
    state.opened.clear()
    _synchronize(state.device)
    return {"released": released}


# --------------------------------------------------------------------------- the re-stitched model


def _session(state: _State) -> Any:
    if state.session is None:
        from kernelopt.evaluate.runner_model import RunnerModel

        if state.spec is None:
            raise RuntimeError("the runner was opened without a problem: it cannot run the model")
        state.session = RunnerModel(state.spec, state.device)
    return state.session


def warm_model() -> dict[str, Any]:
    """Capture the model now (before any candidate), so the first model gate does not pay for it."""
    _session(_state())
    return {"ok": True}


def set_swaps(replacements: Sequence[tuple[dict[str, Any], str]], graphs: Sequence[str] = ()) -> dict[str, Any]:
    """Install built candidates (address, digest) and built graph candidates (by digest) in this
    process's captured model, and prove they run."""
    state = _state()
    model = _session(state)
    return model.set_swaps(
        [(address, state.kernels[key]) for address, key in replacements],
        [state.graphs[key] for key in graphs],
    )


def kernel_source(name: str) -> dict[str, Any]:
    """This process's own capture of kernel ``name`` (for the judge to name a difference from its own)."""
    model = _session(_state())
    for _, kernel in model.artifact.kernels():
        if kernel.name == name:
            return {"source": kernel.source}
    return {"source": None}


def run_model(inputs: Sequence[Any], outputs: Sequence[SharedTensor]) -> dict[str, Any]:
    """One forward of the re-stitched model on lent inputs; outputs copied into the judge's buffers."""
    state = _state()
    return _session(state).run(open_args(inputs), [o.open() for o in outputs])


def run_model_recorded(inputs: Sequence[Any], outputs: Sequence[SharedTensor]) -> dict[str, Any]:
    """One replay of the re-stitched model's recorded CUDA graph on lent input values; outputs copied
    into the judge's buffers (:meth:`~kernelopt.evaluate.runner_model.RunnerModel.run_recorded`)."""
    state = _state()
    return _session(state).run_recorded(open_args(inputs), [o.open() for o in outputs])


def drop_recorded() -> dict[str, Any]:
    """Drop the model's recorded CUDA graph, if any, and hand its memory back."""
    state = _state()
    if state.session is not None:
        state.session.drop_recorded()
    return {"ok": True}


def time_model(flush_l2: bool = True, recorded: bool = False, include_host: bool = True) -> dict[str, Any]:
    """One timed forward of the re-stitched model on its captured inputs; with ``recorded``, one
    replay of the forward recorded as a CUDA graph (recorded on the first such call). ``include_host``:
    the reading holds this call's host time too; the judge asks for the device's alone and the host's
    from :func:`host_model` (a call read alone finds the host cold)."""
    from kernelopt.measure.timer import read_call

    state = _state()
    model = _session(state)
    fn = model.recorded().replay if recorded else model.forward
    reading = read_call(fn, device=state.device, flush_l2=flush_l2, include_host=include_host)
    return {"ms": reading.ms, "lead_ms": reading.lead_ms}


def host_model(recorded: bool = False) -> dict[str, Any]:
    """The host's time of a forward (``recorded``: a replay) called right after another, in ms
    (:func:`~kernelopt.measure.split_timer.read_host`): what the model in a loop costs the host a call."""
    from kernelopt.measure.timer import read_host

    state = _state()
    model = _session(state)
    host_ms = read_host(model.recorded().replay if recorded else model.forward, device=state.device)
    return {"host_ms": host_ms, "op_hosts": op_hosts.read()}
