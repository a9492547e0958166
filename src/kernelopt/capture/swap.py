"""Swap generated Triton kernels inside a live compiled model, and undo it.

A kernel is addressed by (graph, kernel name, sha256 of its original source);
a replacement whose original is not there is refused. The swap replaces the
kernel global of Inductor's loaded output module, which ``call`` resolves on
every call: vendor calls, buffer plan, guards and AOT wrappers stay exactly as
Inductor made them, and no recompile happens. A recompile (new shapes, a Dynamo
reset) loads a fresh module and would silently drop the swap, so
:func:`check_swaps_live` runs the model once and proves every replacement ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelopt.capture import compat
from kernelopt.capture.artifact import Artifact
from kernelopt.capture.output_code import KernelDef
from kernelopt.errors import KerneloptError


class SwapError(KerneloptError):
    """A replacement that cannot be applied (wrong address, stale original, broken source)."""


@dataclass(frozen=True)
class KernelAddress:
    graph: int
    name: str
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"graph": self.graph, "name": self.name, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelAddress:
        return cls(int(d["graph"]), str(d["name"]), str(d["sha256"]))


@dataclass
class Swap:
    """A live replacement: enough to undo it."""

    address: KernelAddress
    var: str
    original: Any
    replacement: Any
    source: str


def find_kernel(artifact: Artifact, name: str, graph: int | None = None) -> tuple[KernelAddress, str, KernelDef]:
    """The address, module variable and definition of a generated kernel by name."""
    found = [
        (g.index, var, k)
        for g in artifact.graphs
        if graph is None or g.index == graph
        for var, k in g.kernels.items()
        if k.name == name
    ]
    if not found:
        names = sorted(k.name for _, k in artifact.kernels())
        raise SwapError(
            f"no generated kernel named {name!r} in this artifact; its kernels are: {', '.join(names) or 'none'}"
        )
    if len(found) > 1:
        raise SwapError(f"kernel {name!r} appears in graphs {[f[0] for f in found]}; pass the graph index")
    gi, var, kernel = found[0]
    return KernelAddress(gi, name, kernel.sha256), var, kernel


def build_kernel(source: str, name: str) -> Any:
    """Compile a candidate module with Inductor's own loader and return its launcher; a CUDA C++
    candidate (:mod:`kernelopt.capture.cuda_kernel`) is built with ``load_inline`` instead."""
    from kernelopt.capture.cuda_kernel import CudaBuildError, build_cuda_kernel, is_cuda_source

    if is_cuda_source(source):
        try:
            return build_cuda_kernel(source, name)
        except CudaBuildError as exc:
            raise SwapError(str(exc)) from exc
    try:
        module = compat.load_source_module(source)
    except Exception as exc:  # candidate code is untrusted: any failure is its failure
        raise SwapError(f"candidate for {name} does not load: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    kernel = getattr(module, name, None)
    if kernel is None:
        raise SwapError(f"candidate defines no kernel named {name}")
    if not hasattr(kernel, "run"):
        raise SwapError(f"candidate's {name} has no .run launcher; decorate it as Inductor does (@triton_heuristics.*)")
    try:
        precompile = getattr(kernel, "precompile", None)
        if precompile is not None:
            precompile()  # compile now, outside any timed region, and surface errors here
    except Exception as exc:
        raise SwapError(f"candidate for {name} does not compile: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    return kernel


def swap_kernel(artifact: Artifact, address: KernelAddress, source: str, kernel: Any | None = None) -> Swap:
    """Install ``source`` in place of the kernel at ``address``; refuse a stale address."""
    if not 0 <= address.graph < len(artifact.graphs):
        raise SwapError(f"graph {address.graph} does not exist (artifact has {len(artifact.graphs)})")
    graph = artifact.graphs[address.graph]
    matches = [(var, k) for var, k in graph.kernels.items() if k.name == address.name]
    if not matches:
        raise SwapError(f"graph {address.graph} has no kernel {address.name}: the model compiled differently")
    var, kdef = matches[0]
    if not kdef.identified_by(address.sha256):
        raise SwapError(
            f"kernel {address.name} differs from the one the replacement was made for "
            f"(source sha256 {kdef.sha256[:12]} != {address.sha256[:12]}): recompile with the same torch and settings"
        )
    module_globals = vars(graph.module)
    replacement = kernel if kernel is not None else build_kernel(source, address.name)
    original = module_globals[var]
    module_globals[var] = replacement
    return Swap(address, var, original, replacement, source)


def restore(artifact: Artifact, swap: Swap) -> None:
    """Undo a swap (idempotent)."""
    vars(artifact.graphs[swap.address.graph].module)[swap.var] = swap.original


def reapply(artifact: Artifact, swap: Swap) -> None:
    """Put a previously built replacement back (A/B timing without rebuilding)."""
    vars(artifact.graphs[swap.address.graph].module)[swap.var] = swap.replacement


def check_swaps_live(artifact: Artifact, swaps: Sequence[Swap], inputs: Sequence[Any]) -> None:
    """Run once and prove every replacement launched; a recompile that dropped one is an error."""
    before = compat.recompile_count()
    launches = artifact.record_launches(inputs)
    if compat.recompile_count() != before:
        raise SwapError(
            "the compiled model recompiled (new input shapes, dtypes or a Dynamo reset), which drops kernel "
            "replacements; call it with the inputs it was captured with"
        )
    launched = {(launch.graph, launch.name) for launch in launches}
    missing = [
        s.address.name
        for s in swaps
        if vars(artifact.graphs[s.address.graph].module).get(s.var) is not s.replacement
        or (s.address.graph, s.address.name) not in launched
    ]
    if missing:
        raise SwapError(f"replacement(s) for {', '.join(missing)} did not run: the compiled model no longer uses them")
