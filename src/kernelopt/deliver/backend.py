"""``torch.compile(model, backend=kernelopt.backend("tuned.kopt.json"))``: Inductor, plus verified kernels.

The backend compiles each graph with Inductor exactly as ``torch.compile``'s
default does, then, in the module Inductor loaded for it, replaces every
generated kernel whose source is the one a replacement was verified against
(its name, and the sha256 of its source less the Triton backend hash, which
follows the compiling process's environment). Nothing else is matched: a graph
compiled for other shapes, a recompile, another torch or Triton generate other
kernel sources, and then Inductor's own kernels run. A recompiled graph
therefore never runs a stale replacement. What went unused is said once per
backend, in one line, when the process ends. With no replacements
or none that match (on a CPU,
Inductor writes C++ kernels) the backend is exactly Inductor.
``backend="kernelopt"`` takes the verified kernels of the user's store (every
``optimize`` that delivers adds its winners: :mod:`kernelopt.store.tuned`).

A graph candidate (a graph's changed call sequence, :mod:`kernelopt.capture.graph_swap`) is matched
the same way, by the digest of the graph it was verified against, and swapped in whole.

Every replacement passes the static gate before it is built, as in ``kernelopt.load``.
"""

from __future__ import annotations

import atexit
import logging
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelopt.capture import compat
from kernelopt.capture.call_sequence import folded_digest, graph_digest, is_partitioned
from kernelopt.capture.graph_swap import GraphCandidate, build_graph_kernels, swap_call
from kernelopt.capture.output_code import OutputCode, parse_output_code
from kernelopt.capture.rewrites.passes import compile_with_options
from kernelopt.capture.swap import KernelAddress
from kernelopt.deliver.export import (
    Replacement,
    check_graphs_static,
    check_replacements_static,
    check_versions,
    graph_candidates,
    read_export,
)
from kernelopt.errors import KerneloptError
from kernelopt.verify.static_graph import check_static_graph

log = logging.getLogger("kernelopt.backend")


@dataclass
class BackendReport:
    """What the backend did: which replacements ran where, and which never matched."""

    used: dict[str, int] = field(default_factory=dict)  # kernel name -> graphs it was swapped into
    graphs: int = 0
    partitioned: int = 0  # compiled graphs split into CUDA-graph partitions, which no graph candidate matches

    def unused(self, replacements: Iterable[Replacement]) -> list[Replacement]:
        return [r for r in replacements if r.address.name not in self.used]


def swap_matching(
    namespace: MutableMapping[str, Any],
    output: OutputCode,
    replacements: Sequence[Replacement],
    build: Callable[[str, str], Any],
) -> list[str]:
    """Install, in one output module's ``namespace``, the replacements whose original kernel it holds.

    ``build(source, name)`` makes the launcher (Inductor's loader on a GPU). Returns
    the names of the kernels replaced."""
    replaced = []
    for var, kernel in output.kernels.items():
        match = next(
            (r for r in replacements if r.address.name == kernel.name and kernel.identified_by(r.address.sha256)), None
        )
        if match is None or var not in namespace:
            continue
        namespace[var] = build(match.source, kernel.name)
        replaced.append(kernel.name)
    return replaced


class KerneloptBackend:
    """A ``torch.compile`` backend: Inductor's compile, then the verified replacements that match."""

    def __init__(
        self,
        replacements: Sequence[Replacement] = (),
        options: dict[str, Any] | None = None,
        origin: str = "kernelopt",
        graphs: Sequence[GraphCandidate] = (),
        run_mode: str | None = None,
    ) -> None:
        check_replacements_static(origin, replacements)  # as kernelopt.load does, before anything is built
        check_graphs_static(origin, graphs)
        self.replacements = list(replacements)
        self.graphs = list(graphs)
        self.options = dict(options or {})
        self.run_mode = run_mode  # the export's CUDA-graph mode: used where the user's compile names none
        self.origin = origin
        self.report = BackendReport()
        self._said = False
        if self.replacements or self.graphs:
            atexit.register(self.say_unused)  # once, when every graph that will compile has

    def compile_options(self, mode: str | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """The Inductor options of one compile: the export's (those the replacements were verified under),
        then the user's ``torch.compile(mode=..., options=...)``, which torch hands a custom backend. A
        kernel the user's options change no longer matches its replacement, and runs as Inductor made it.
        Where the user names no mode, the export's ``run_mode`` (the CUDA-graph mode it was timed fastest
        under) is the mode."""
        merged = dict(self.options)
        mode = self.run_mode if mode is None else mode
        if mode is not None and mode != "default":
            if mode not in compat.compile_modes():
                raise KerneloptError(
                    f"torch.compile(mode={mode!r}): not a mode this torch knows; pass one of "
                    f"{', '.join(compat.compile_modes())}"
                )
            merged.update(compat.mode_options(mode))
        merged.update(options or {})
        return merged

    def __call__(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: list[Any],
        mode: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> Any:
        """Compile one graph. ``mode="reduce-overhead"`` (or ``max-autotune``) runs it under Inductor's CUDA
        graphs: the replacements are installed before the graph's first call, so its recording holds them."""
        settings = self.compile_options(mode, options)
        if not self.replacements and not self.graphs:
            return compile_with_options(gm, example_inputs, lambda _cg: None, settings)
        graphs: list[Any] = []
        # Inductor's caches would hand back a compiled graph without running the hook that sees its module.
        with compat.fresh_compile():
            compiled = compile_with_options(gm, example_inputs, graphs.append, settings)
        for cg in graphs:
            self._swap_into(cg)
        self.report.graphs += len(graphs)
        return compiled

    def _swap_into(self, compiled_graph: Any) -> None:
        from kernelopt.capture.swap import build_kernel

        source = compat.graph_source_code(compiled_graph)
        output = parse_output_code(source)
        if not any(k.language == "triton" for k in output.kernels.values()):
            return
        module = compat.output_module(compiled_graph)
        graph = self._graph_for(source)
        if self.graphs and graph is None and is_partitioned(source):
            self.report.partitioned += 1  # split for CUDA graphs in a way no candidate matches
        if graph is not None:  # the whole call sequence: the graph's own kernels no longer run
            verdict = check_static_graph(graph, original_source=source, allow_cpp=False)
            if not verdict.passed:
                raise KerneloptError(f"{self.origin}: graph {graph.graph}'s call sequence fails the static gate: "
                                     f"{verdict.reason}")  # fmt: skip
            swap_call(module, source, graph, build_graph_kernels(graph))
            key = f"graph {graph.graph}"
            self.report.used[key] = self.report.used.get(key, 0) + 1
            return
        for name in swap_matching(vars(module), output, self.replacements, build_kernel):
            self.report.used[name] = self.report.used.get(name, 0) + 1

    def _graph_for(self, source: str) -> GraphCandidate | None:
        """The graph candidate made for this compiled graph: by its digest, or, where Inductor wrote
        it as one CUDA-graph partition, by the digest that folds the partition back into call."""
        if not self.graphs:
            return None
        digest = graph_digest(source)
        graph = next((g for g in self.graphs if g.original_digest == digest), None)
        if graph is None and is_partitioned(source):
            folded = folded_digest(source)
            graph = next((g for g in self.graphs if folded is not None and g.folded_digest == folded), None)
        return graph

    def say_unused(self) -> str | None:
        """One line naming the replacements no compiled graph matched (logged once), or None."""
        unused = [r.address.name for r in self.report.unused(self.replacements)]
        unused += [f"graph {g.graph}" for g in self.graphs if f"graph {g.graph}" not in self.report.used]
        if not unused:
            return None
        what, held = ("kernels or graphs", "kernel or call sequence") if self.graphs else ("kernels", "kernel")
        line = (
            f"{self.origin}: {len(unused)} of {len(self.replacements) + len(self.graphs)} verified {what} "
            f"not used ({', '.join(unused)}): no compiled graph holds the {held} they were verified "
            "against (other shapes, a recompile, another torch or Triton); Inductor's kernels run there"
        )
        if self.report.partitioned and any(u.startswith("graph ") for u in unused):
            line += (
                f"; {self.report.partitioned} graph(s) compiled as CUDA-graph partitions (mode reduce-overhead or "
                "max-autotune) that no candidate matches: a graph candidate stands in only where the whole graph "
                "is one partition"
            )
        if not self._said:
            log.warning(line)
            self._said = True
        return line


def backend(path: str | Path | None = None) -> KerneloptBackend:
    """The backend for ``torch.compile``: the verified replacements of an exported file (or none)."""
    if path is None:
        return KerneloptBackend()
    doc = read_export(path)
    check_versions(doc, path)
    replacements = [Replacement.from_dict(r) for r in doc["replacements"]]
    return KerneloptBackend(
        replacements,
        doc.get("options") or {},
        origin=str(path),
        graphs=graph_candidates(doc),
        run_mode=doc.get("run_mode"),
    )


def store_backend(store_path: str | Path | None = None) -> KerneloptBackend:
    """The backend over the store's cache of verified kernels (this device, this torch and Triton).

    No store (``store_path`` None: the ``store`` setting) or nothing verified here: exactly Inductor."""
    from kernelopt.measure.environment import device_label, triton_version
    from kernelopt.store import Store
    from kernelopt.store.db import default_store_path
    from kernelopt.store.tuned import tuned_for

    path = Path(store_path) if store_path is not None else default_store_path()
    if not path.is_file():
        return KerneloptBackend()
    with Store(path, read_only=True) as store:
        tuned = tuned_for(
            store, device=device_label(), torch_version=str(torch.__version__), triton_version=triton_version()
        )
    replacements = [Replacement(KernelAddress(0, t.name, t.original_sha256), t.source) for t in tuned]
    return KerneloptBackend(replacements, origin=f"the store {path}")


_STORE_BACKEND: list[KerneloptBackend] = []  # one per process: the store is read at the first compile


def kernelopt_backend(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    """``backend="kernelopt"`` (the ``torch_dynamo_backends`` entry point): the store's verified kernels,
    under the ``mode`` and ``options`` given to ``torch.compile``."""
    if not _STORE_BACKEND:
        _STORE_BACKEND.append(store_backend())
    return _STORE_BACKEND[0](gm, example_inputs, mode=mode, options=options)
