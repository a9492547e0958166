"""Compile a model with Inductor and keep what it produced as a structured artifact.

``torch.compile`` stays in charge: a custom backend hands every
``CompiledFxGraph`` to us, and we keep its wrapper text, its live output module
(whose globals hold the kernels) and Dynamo's names for its inputs. One run of
the compiled model with recording proxies yields every launch in call order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Iterator, Sequence

import torch

from kernelopt.capture import compat
from kernelopt.capture.output_code import KernelDef, OutputCode, parse_output_code
from kernelopt.capture.recorder import Launch, LaunchSink, install_proxies


@dataclass
class CapturedGraph:
    """One Inductor graph: its wrapper text, parsed kernels and live module."""

    index: int
    cache_key: str
    source_code: str
    placeholders: list[str]
    module: ModuleType
    output_code: OutputCode

    @property
    def kernels(self) -> dict[str, KernelDef]:
        return self.output_code.kernels


@dataclass
class Artifact:
    """A model compiled by Inductor, with its graphs and the launches of one forward."""

    compiled: Any
    graphs: list[CapturedGraph]
    options: dict[str, Any]
    launches: list[Launch] = field(default_factory=list)

    def kernels(self) -> Iterator[tuple[int, KernelDef]]:
        for graph in self.graphs:
            for kernel in graph.kernels.values():
                yield graph.index, kernel

    def __call__(self, *inputs: Any) -> Any:
        with torch.no_grad():
            return self.compiled(*inputs)

    def instrumented(self, sink: LaunchSink):
        """Context in which every launch goes through ``sink`` (recording and/or profiler ranges)."""
        modules = [(g.index, g.module, g.kernels) for g in self.graphs]
        return install_proxies(modules, sink, compat.chosen_config)

    def record_launches(self, inputs: Sequence[Any]) -> list[Launch]:
        """Run one forward with recording proxies and return its launches in call order."""
        sink = LaunchSink(record_args=True)
        with self.instrumented(sink):
            sink.begin_call()
            self(*inputs)
        return list(sink.launches)


def capture(model: torch.nn.Module, inputs: Sequence[Any], options: dict[str, Any] | None = None) -> Artifact:
    """Compile ``model`` with Inductor (``dynamic=False``), run it once, and capture the result.

    Dynamo's caches are reset first: two compiled variants of one module share
    Dynamo's code cache, so kernelopt keeps one live artifact per process.
    """
    compat.require_supported_torch()
    compat.reset_dynamo()
    options = dict(options or {})
    raw_graphs: list[Any] = []
    placeholders: list[list[str]] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        placeholders.append(compat.placeholder_sources(gm))
        return compat.compile_fx_with_inner_hook(gm, example_inputs, raw_graphs.append, options)

    compiled = torch.compile(model, backend=backend, dynamic=False)
    with compat.fresh_compile(), torch.no_grad():
        compiled(*inputs)  # compiles, then runs once (first-call autotuning happens here)
    graphs = []
    for i, cg in enumerate(raw_graphs):
        source = compat.graph_source_code(cg)
        graphs.append(
            CapturedGraph(
                index=i,
                cache_key=compat.graph_cache_key(cg),
                source_code=source,
                placeholders=placeholders[i] if i < len(placeholders) else [],
                module=compat.output_module(cg),
                output_code=parse_output_code(source),
            )
        )
    artifact = Artifact(compiled=compiled, graphs=graphs, options=options)
    artifact.launches = artifact.record_launches(inputs)
    return artifact
