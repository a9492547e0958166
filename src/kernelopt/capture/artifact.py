"""Compile a model with Inductor and keep what it produced as a structured artifact.

``torch.compile`` stays in charge: a custom backend hands every
``CompiledFxGraph`` to us, and we keep its wrapper text, its live output module
(whose globals hold the kernels) and Dynamo's names for its inputs. One run of
the compiled model with recording proxies yields every launch in call order.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from kernelopt.capture import compat
from kernelopt.capture.output_code import KernelDef, OutputCode, parse_output_code
from kernelopt.capture.recorder import Launch, LaunchSink, install_proxies
from kernelopt.capture.rewrites.passes import compile_with_options


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


def capture(
    model: torch.nn.Module, inputs: Sequence[Any], options: dict[str, Any] | None = None, reset: bool = True
) -> Artifact:
    """Compile ``model`` with Inductor (``dynamic=False``), run it once, and capture the result.

    Dynamo's caches are reset first unless ``reset=False``: Dynamo caches compiled
    code on the forward's code object, so two variants of one module share it. To
    keep a second variant live beside the first, capture :func:`separate_code` of
    the model with ``reset=False``.
    """
    compat.require_supported_torch()
    if reset:
        compat.reset_dynamo()
    options = dict(options or {})
    raw_graphs: list[tuple[Any, list[str]]] = []  # (inner compile's result, Dynamo's input names)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        names = compat.placeholder_sources(gm)
        # AOTAutograd compiles a training graph's backward later, at the first backward: its inputs
        # are saved activations, not Dynamo's sources.
        first = [True]

        def keep(compiled: Any) -> None:
            raw_graphs.append((compiled, names if first[0] else []))
            first[0] = False

        return compile_with_options(gm, example_inputs, keep, options)

    compiled = torch.compile(model, backend=backend, dynamic=False)
    with compat.fresh_compile(), torch.no_grad():
        compiled(*inputs)  # compiles, then runs once (first-call autotuning happens here)
    graphs: list[CapturedGraph] = []
    for cg, names in raw_graphs:
        if not compat.has_output_code(cg):
            continue
        source = compat.graph_source_code(cg)
        graphs.append(
            CapturedGraph(
                index=len(graphs),
                cache_key=compat.graph_cache_key(cg),
                source_code=source,
                placeholders=names,
                module=compat.output_module(cg),
                output_code=parse_output_code(source),
            )
        )
    artifact = Artifact(compiled=compiled, graphs=graphs, options=options)
    artifact.launches = artifact.record_launches(inputs)
    return artifact


def separate_code(model: torch.nn.Module, tag: str) -> torch.nn.Module:
    """A copy of ``model`` whose forward has its own code object, hence its own Dynamo cache.

    Same weights, same computation; compiled with other Inductor options it lives
    beside the original compiled model in one process, so the two can be timed
    interleaved.
    """
    cls = type(model)
    forward = cls.forward
    code = forward.__code__.replace(co_name=f"{forward.__name__}_{tag}")
    new_forward = types.FunctionType(code, forward.__globals__, code.co_name, forward.__defaults__, forward.__closure__)
    new_forward.__kwdefaults__ = forward.__kwdefaults__
    variant_cls = type(f"{cls.__name__}_{tag}", (cls,), {"forward": new_forward, "__module__": cls.__module__})
    clone = copy.deepcopy(model)
    clone.__class__ = variant_cls
    return clone
