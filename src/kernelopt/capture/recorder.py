"""Record the launches of a compiled model while it runs.

The wrapper's ``call`` resolves kernels, ``extern_kernels`` and ``aten`` as
module globals at every call, so swapping those globals for thin proxies sees
every launch in true call order (across graph breaks and graph partitions) with
its real arguments, without touching Inductor's buffer plan. The proxies can
also wrap each launch in a profiler range, which is how per-launch GPU time is
attributed (``measure.attribution``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from kernelopt.capture.output_code import KernelDef
from kernelopt.measure.roofline import tensor_traffic_bytes

LAUNCH_LABEL_PREFIX = "kernelopt.launch."


@dataclass(frozen=True)
class ArgInfo:
    """One launch argument: a tensor's layout and traffic role, or a scalar's value."""

    position: int
    name: str | None  # kernel parameter name or keyword, where known
    role: str  # "read" | "write" | "readwrite" | "scalar"
    shape: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    dtype: str | None = None
    device: str | None = None
    itemsize: int = 0
    value: Any = None

    @property
    def is_tensor(self) -> bool:
        return self.dtype is not None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["shape"], d["stride"] = list(self.shape), list(self.stride)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ArgInfo:
        return cls(**{**d, "shape": tuple(d["shape"]), "stride": tuple(d["stride"])})


@dataclass
class Launch:
    """One launch of a compiled model's forward, in call order."""

    index: int
    graph: int
    kind: str  # "triton" | "cpp" | "vendor" | "aten"
    name: str
    args: list[ArgInfo] = field(default_factory=list)
    kernel_sha256: str | None = None
    config: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"{LAUNCH_LABEL_PREFIX}{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "graph": self.graph,
            "kind": self.kind,
            "name": self.name,
            "args": [a.to_dict() for a in self.args],
            "kernel_sha256": self.kernel_sha256,
            "config": self.config,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Launch:
        return cls(**{**d, "args": [ArgInfo.from_dict(a) for a in d["args"]]})


def _tensor_info(position: int, name: str | None, role: str, t: torch.Tensor) -> ArgInfo:
    return ArgInfo(
        position=position,
        name=name,
        role=role,
        shape=tuple(t.shape),
        stride=tuple(t.stride()),
        dtype=str(t.dtype).removeprefix("torch."),
        device=str(t.device),
        itemsize=t.element_size(),
    )


def _scalar_info(position: int, name: str | None, value: Any) -> ArgInfo:
    plain = value if isinstance(value, (int, float, bool, str, type(None))) else repr(value)
    return ArgInfo(position=position, name=name, role="scalar", value=plain)


def describe_kernel_args(kernel: KernelDef, args: tuple[Any, ...]) -> list[ArgInfo]:
    """Map a generated kernel's positional launch args onto its parameters and roles."""
    params = kernel.runtime_params
    written = kernel.written_params()
    infos = []
    for i, value in enumerate(args):
        param = params[i] if i < len(params) else None
        name = param.name if param else None
        if isinstance(value, torch.Tensor):
            reads = param.reads if param else True
            writes = name in written if name else False
            role = "readwrite" if reads and writes else "write" if writes else "read"
            infos.append(_tensor_info(i, name, role, value))
        else:
            infos.append(_scalar_info(i, name, value))
    return infos


def describe_library_args(args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> list[ArgInfo]:
    """Arguments of a vendor or aten call: ``out=`` and returned tensors are written, the rest read."""
    infos: list[ArgInfo] = []
    items = [(None, v) for v in args] + list(kwargs.items())
    for i, (key, value) in enumerate(items):
        if isinstance(value, torch.Tensor):
            infos.append(_tensor_info(i, key, "write" if key == "out" else "read", value))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            infos.extend(_tensor_info(i, key, "read", v) for v in value)
        else:
            infos.append(_scalar_info(i, key, value))
    results = result if isinstance(result, (list, tuple)) else [result]
    for r in results:
        if isinstance(r, torch.Tensor) and not any(a.role == "write" for a in infos):
            infos.append(_tensor_info(len(items), "result", "write", r))
    return infos


def traffic_bytes(args: Sequence[ArgInfo]) -> tuple[int, int]:
    """Ideal bytes (read, written) of a launch: each tensor argument moved once, by its role."""
    read = written = 0
    for arg in args:
        if not arg.is_tensor:
            continue
        nbytes = tensor_traffic_bytes(arg.shape, arg.stride, arg.itemsize)
        if arg.role in ("read", "readwrite"):
            read += nbytes
        if arg.role in ("write", "readwrite"):
            written += nbytes
    return read, written


class LaunchSink:
    """Receives launches from the proxies; numbers them per model call."""

    def __init__(self, record_args: bool = True, label: bool = False) -> None:
        self.record_args = record_args
        self.label = label
        self.launches: list[Launch] = []
        self._next = 0

    def begin_call(self) -> None:
        self._next = 0
        self.launches = []

    def _new(self, graph: int, kind: str, name: str) -> Launch:
        launch = Launch(index=self._next, graph=graph, kind=kind, name=name)
        self._next += 1
        self.launches.append(launch)
        return launch

    def _range(self, launch: Launch) -> contextlib.AbstractContextManager:
        if self.label:
            return torch.profiler.record_function(launch.label)
        return contextlib.nullcontext()


class KernelProxy:
    """Stands in for one generated kernel global; records then forwards every launch."""

    def __init__(self, sink: LaunchSink, graph: int, kernel: KernelDef, target: Any, config: Callable[[Any], Any]):
        self._sink, self._graph, self._kernel, self._target, self._config = sink, graph, kernel, target, config

    def _launch(self, call: Callable[[], Any], args: tuple[Any, ...]) -> Any:
        launch = self._sink._new(self._graph, self._kernel.language, self._kernel.name)
        launch.kernel_sha256 = self._kernel.sha256
        if self._sink.record_args:
            launch.args = describe_kernel_args(self._kernel, args)
        with self._sink._range(launch):
            result = call()
        if self._sink.record_args and self._kernel.language == "triton":
            launch.config = self._config(self._target)
        return result

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self._launch(lambda: self._target.run(*args, **kwargs), args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._launch(lambda: self._target(*args, **kwargs), args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class LibraryProxy:
    """Stands in for ``extern_kernels`` or ``aten``; every call through it is a launch."""

    def __init__(self, sink: LaunchSink, graph: int, target: Any, name: str, kind: str):
        self._sink, self._graph, self._target, self._name, self._kind = sink, graph, target, name, kind

    def __getattr__(self, attr: str) -> LibraryProxy:
        return LibraryProxy(self._sink, self._graph, getattr(self._target, attr), f"{self._name}.{attr}", self._kind)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        launch = self._sink._new(self._graph, self._kind, self._name)
        with self._sink._range(launch):
            result = self._target(*args, **kwargs)
        if self._sink.record_args:
            launch.args = describe_library_args(args, kwargs, result)
        return result


@contextlib.contextmanager
def install_proxies(
    modules: list[tuple[int, Any, dict[str, KernelDef]]],
    sink: LaunchSink,
    config_of: Callable[[Any], Any],
) -> Iterator[LaunchSink]:
    """Swap kernel, ``extern_kernels`` and ``aten`` globals for recording proxies; always restore."""
    saved: list[tuple[dict, str, Any]] = []
    try:
        for graph, module, kernels in modules:
            g = vars(module)
            for var, kernel in kernels.items():
                if var in g:
                    saved.append((g, var, g[var]))
                    g[var] = KernelProxy(sink, graph, kernel, g[var], config_of)
            for var, kind in (("extern_kernels", "vendor"), ("aten", "aten")):
                if var in g:
                    saved.append((g, var, g[var]))
                    g[var] = LibraryProxy(sink, graph, g[var], var, kind)
        yield sink
    finally:
        for g, var, original in reversed(saved):
            g[var] = original
