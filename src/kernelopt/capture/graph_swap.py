"""Swap one graph's call sequence inside a live compiled model, and undo it.

A *graph candidate* changes which kernels run in one graph of Inductor's output: its code is a
new ``call`` for that graph, in the shape Inductor writes it, with the kernels it launches that
the graph does not have (under names of their own, so they never shadow the graph's). The
candidates made here come from Inductor itself: the same graph compiled under other options
(:func:`from_variant`), which may fuse differently, split a reduction, or drop a layout copy.

Inductor's loaded module resolves ``call``'s globals on every call, and every wrapper around it
holds the same function object (:func:`kernelopt.capture.compat.call_function`), so the swap
puts the candidate's code object into that function and its kernels into the module's globals:
nothing recompiles, vendor calls stay Inductor's, and :func:`restore_graph` puts the original
code back. A candidate is addressed by the digest of the graph's output code it was made for; a
recompiled graph (other torch, other options) is refused instead of being patched blindly.

Under CUDA graphs the same graph may be one partition that ``call`` forwards to
(:class:`~kernelopt.capture.call_sequence.Partition`): where its :func:`folded_digest` is the one
the candidate was made for, the partition function's code becomes a small adapter that reorders
the partition's inputs into ``call``'s order, runs the candidate's call and hands its outputs back
in the partition's order, so the CUDA-graph trees record the candidate's kernels.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelopt.capture import compat
from kernelopt.capture.artifact import Artifact, CapturedGraph
from kernelopt.capture.call_sequence import (
    Partition,
    call_source_of,
    folded_digest,
    graph_digest,
    is_partitioned,
    single_partition,
    wrapper_facts,
)
from kernelopt.capture.copy_kernels import moves_only
from kernelopt.capture.kernel_source import renamed, second_passes, serial_reduction
from kernelopt.capture.output_code import cpp_argtypes, source_hash
from kernelopt.capture.rewrites import row_softmax_op  # noqa: F401  (registers the op a candidate's call may name)
from kernelopt.capture.swap import SwapError, build_kernel


def describe_options(options: Mapping[str, Any]) -> str:
    """``name=value, ...``: how an option set is named in notes and verdicts."""
    return ", ".join(f"{name}={value!r}" for name, value in options.items())


@dataclass(frozen=True)
class GraphKernel:
    """One kernel a graph candidate launches: Triton source as Inductor writes it, or (CPU) C++
    source with the argument types Inductor's binding needs."""

    name: str
    language: str  # "triton" | "cpp"
    source: str
    argtypes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "language": self.language, "source": self.source, "argtypes": list(self.argtypes)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GraphKernel:
        return cls(str(d["name"]), str(d["language"]), str(d["source"]), tuple(d.get("argtypes") or ()))


@dataclass(frozen=True)
class GraphCandidate:
    """A changed call sequence for one graph: ``call_source`` (one ``def call``) and its own kernels."""

    graph: int
    original_digest: str  # graph_digest of the graph's output code, as captured
    call_source: str
    kernels: tuple[GraphKernel, ...]
    origin: str  # what made it (e.g. "Inductor under {'split_reductions': False}")
    options: dict[str, Any] = field(default_factory=dict)
    folded_digest: str = ""  # folded_digest of the graph: matches it written as a CUDA-graph partition

    @property
    def kernel_names(self) -> list[str]:
        return [k.name for k in self.kernels]

    @property
    def buffers(self) -> int:
        """How many buffers its call allocates (``empty_strided_*``): outputs and the intermediate
        tensors it writes to memory and reads back."""
        return allocations(self.call_source)

    @property
    def copy_kernels(self) -> list[str]:
        """Its Triton kernels that only move data (:func:`~kernelopt.capture.copy_kernels.moves_only`):
        what the call sequence still spends on layouts; C++ kernels are not read."""
        return copy_kernel_names(self.kernels)

    @property
    def rereads(self) -> int:
        """Its Triton kernels' passes over their rows after the first (:func:`rereads`)."""
        return rereads(self.kernels)

    @property
    def serial(self) -> int:
        """Its Triton kernels that reduce a large tensor on a few programs (:func:`serial_reductions`)."""
        return serial_reductions(self.kernels)

    def digest(self) -> str:
        """The candidate's identity: its call and every kernel's source."""
        return source_hash(self._code())[:16]

    def code_digest(self, tag: str) -> str:
        """:meth:`digest` with the variant's kernel-name prefix ``tag`` taken out: two option sets under
        which Inductor wrote the very same call and kernels give the same value."""
        return source_hash(self._code().replace(tag, "ko"))[:16]

    def _code(self) -> str:
        return "\n\0".join([self.call_source, *(f"{k.name}\n{k.language}\n{k.source}" for k in self.kernels)])

    def to_dict(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "original_digest": self.original_digest,
            "call_source": self.call_source,
            "kernels": [k.to_dict() for k in self.kernels],
            "origin": self.origin,
            "options": dict(self.options),
            "folded_digest": self.folded_digest,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GraphCandidate:
        return cls(
            int(d["graph"]),
            str(d["original_digest"]),
            str(d["call_source"]),
            tuple(GraphKernel.from_dict(k) for k in d["kernels"]),
            str(d.get("origin", "")),
            dict(d.get("options") or {}),
            str(d.get("folded_digest") or ""),
        )


def _rename_calls(call_source: str, names: Mapping[str, str]) -> str:
    """``call_source`` with every reference to a kernel variable renamed (by token, never by text)."""
    tree = ast.parse(call_source)
    spans: list[tuple[int, int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            spans.append((node.lineno, node.col_offset, node.end_col_offset or node.col_offset, names[node.id]))
    lines = call_source.splitlines(keepends=True)
    for lineno, start, end, new in sorted(spans, reverse=True):
        line = lines[lineno - 1]
        lines[lineno - 1] = line[:start] + new + line[end:]
    return "".join(lines)


def from_variant(
    original: CapturedGraph, variant: CapturedGraph, tag: str, origin: str, options: Mapping[str, Any] | None = None
) -> GraphCandidate | None:
    """``variant`` (the same graph compiled under other options) as a candidate for ``original``'s
    call sequence, or None where it cannot stand in: other parameters or another number of
    outputs, or the very same kernels and calls (the options changed nothing here). Its kernels
    are renamed ``<tag>_<name>``, so they live beside the graph's own."""
    mine, theirs = wrapper_facts(original.source_code), wrapper_facts(variant.source_code)
    if mine.params != theirs.params or mine.outputs != theirs.outputs:
        return None
    call = call_source_of(variant.source_code)
    if call == call_source_of(original.source_code) and all(
        var in original.kernels and original.kernels[var].source == k.source for var, k in variant.kernels.items()
    ):
        return None
    launched = names_in(call)
    argtypes = cpp_argtypes(variant.source_code)
    names = {var: f"{tag}_{var}" for var in variant.kernels if var in launched}
    kernels = []
    for var, new in names.items():
        kernel = variant.kernels[var]
        if kernel.language == "triton":
            kernels.append(GraphKernel(new, "triton", renamed(kernel.source, kernel.name, new)))
        else:
            kernels.append(GraphKernel(new, kernel.language, kernel.source, argtypes.get(var, ())))
    return GraphCandidate(
        original.index,
        graph_digest(original.source_code),
        _rename_calls(call, names),
        tuple(kernels),
        origin,
        dict(options or {}),
        folded_digest(original.source_code) or "",
    )


def names_in(call_source: str) -> set[str]:
    """Every name a ``call`` reads: the kernels it launches among them."""
    return {n.id for n in ast.walk(ast.parse(call_source)) if isinstance(n, ast.Name)}


def copy_kernel_names(kernels: Sequence[Any]) -> list[str]:
    """The names of the Triton kernels among ``kernels`` that only move data
    (:func:`~kernelopt.capture.copy_kernels.moves_only`); C++ kernels are not read."""
    return [k.name for k in kernels if k.language == "triton" and moves_only(k.source, k.name)]


def rereads(kernels: Sequence[Any]) -> int:
    """The Triton kernels among ``kernels``' passes over their rows after the first
    (:func:`~kernelopt.capture.kernel_source.second_passes`)."""
    return sum(second_passes(k.source) for k in kernels if k.language == "triton")


def serial_reductions(kernels: Sequence[Any]) -> int:
    """The Triton kernels among ``kernels`` that reduce a large tensor on a few programs
    (:func:`~kernelopt.capture.kernel_source.serial_reduction`)."""
    return sum(serial_reduction(k.source) for k in kernels if k.language == "triton")


def allocations(call_source: str) -> int:
    """How many buffers a ``call`` allocates (``empty_strided_*``)."""
    return sum(
        1
        for node in ast.walk(ast.parse(call_source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("empty_strided")
    )


def captured_shape(graph: CapturedGraph) -> dict[str, int]:
    """The compiled graph counted as its variants are (``kernels`` its call launches, ``copies``: the
    Triton ones among them that only move data, ``buffers`` its call allocates), so a variant's note
    can say what it drops."""
    call = call_source_of(graph.source_code)
    launched = names_in(call)
    kernels = [k for var, k in graph.kernels.items() if var in launched]
    return {
        "kernels": len(kernels),
        "copies": len(copy_kernel_names(kernels)),
        "rereads": rereads(kernels),
        "serial": serial_reductions(kernels),
        "buffers": allocations(call),
    }


def build_graph_kernels(candidate: GraphCandidate) -> dict[str, Any]:
    """Every kernel of the candidate built, by name (``SwapError`` naming the first that fails)."""
    built: dict[str, Any] = {}
    for kernel in candidate.kernels:
        if kernel.language == "triton":
            built[kernel.name] = build_kernel(kernel.source, kernel.name)
        elif kernel.language == "cpp":
            try:
                built[kernel.name] = compat.build_cpp_kernel(kernel.argtypes, kernel.source)
            except Exception as exc:  # the candidate's failure
                raise SwapError(
                    f"kernel {kernel.name} does not build: {type(exc).__name__}: {exc}".splitlines()[0]
                ) from exc
        else:
            raise SwapError(f"kernel {kernel.name} is {kernel.language}: a graph candidate's kernels are Triton or C++")
    return built


def _call_code(call_source: str) -> types.CodeType:
    try:
        module_code = compile(call_source, "<kernelopt graph candidate>", "exec")
    except (SyntaxError, ValueError) as exc:
        raise SwapError(f"the candidate's call does not compile: {exc}") from exc
    codes = [c for c in module_code.co_consts if isinstance(c, types.CodeType) and c.co_name == "call"]
    if len(codes) != 1:
        raise SwapError("the candidate's source is not one function named call")
    return codes[0]


@dataclass
class GraphSwap:
    """A live call-sequence swap: enough to undo it, and to prove it ran."""

    graph: int
    module: types.ModuleType
    function: types.FunctionType
    original_code: types.CodeType
    code: types.CodeType
    kernels: dict[str, Any]
    digest: str
    helpers: dict[str, Any] = field(default_factory=dict)  # module globals of ours beside the kernels


def swap_call(
    module: types.ModuleType, graph_source: str, candidate: GraphCandidate, built: Mapping[str, Any]
) -> GraphSwap:
    """Install ``candidate`` (its kernels ``built``) as the call sequence of the output module
    ``module`` whose code is ``graph_source``: in its ``call``, or in the one CUDA-graph partition
    that ``call`` forwards to; refuse one made for another graph."""
    here = graph_digest(graph_source)
    partition = None
    if here != candidate.original_digest:
        partition = single_partition(graph_source) if candidate.folded_digest else None
        if partition is None or folded_digest(graph_source) != candidate.folded_digest:
            how = (
                " (it is split into CUDA-graph partitions: compile without CUDA graphs, or with the whole graph in one)"
                if is_partitioned(graph_source)
                else ""
            )
            raise SwapError(
                f"graph {candidate.graph} compiled differently from the one the candidate was made for "
                f"(graph digest {here[:12]} != {candidate.original_digest[:12]}){how}: "
                "recompile with the same torch and settings"
            )
    missing = [name for name in candidate.kernel_names if name not in built]
    if missing:
        raise SwapError(f"graph candidate kernel(s) {', '.join(missing)} were not built")
    call = compat.call_function(module)
    code = _call_code(candidate.call_source)
    if code.co_freevars or code.co_argcount != call.__code__.co_argcount:
        raise SwapError(f"the candidate's call takes {code.co_argcount} parameters, the graph's takes "
                        f"{call.__code__.co_argcount}")  # fmt: skip
    module_globals = vars(module)
    helpers: dict[str, Any] = {}
    function = call
    if partition is not None:
        function = compat.partition_function(module, partition.function)
        runner = f"_kernelopt_graph_{candidate.digest()}"
        helpers[runner] = types.FunctionType(code, module_globals, runner)
        code = _partition_adapter(partition, runner)
    clashes = [name for name in [*candidate.kernel_names, *helpers] if name in module_globals]
    if clashes:
        raise SwapError(f"graph candidate kernel {clashes[0]} would shadow a name of the graph's module")
    kernels = {name: built[name] for name in candidate.kernel_names}
    module_globals.update(kernels)
    module_globals.update(helpers)
    swap = GraphSwap(candidate.graph, module, function, function.__code__, code, kernels, candidate.digest(), helpers)
    function.__code__ = code
    return swap


def _partition_adapter(partition: Partition, runner: str) -> types.CodeType:
    """The code of a partition function that runs the candidate's call ``runner`` in its place: the
    partition's inputs in call's order in, the call's outputs in the partition's order out."""
    ordered = [0] * len(partition.inputs)
    for k, position in enumerate(partition.inputs):
        ordered[position] = k  # call's input ``position`` is the partition's argument k
    own = "None, " if partition.call_params == 2 else ""
    outputs = "".join(f"outputs[{j}], " for j in partition.outputs)
    source = (
        f"def {partition.function}(args):\n"
        f"    ordered = [{', '.join(f'args[{k}]' for k in ordered)}]\n"
        "    args.clear()\n"
        f"    outputs = {runner}({own}ordered)\n"
        f"    return ({outputs})\n"
    )
    module_code = compile(source, f"<kernelopt partition adapter {runner}>", "exec")
    return next(c for c in module_code.co_consts if isinstance(c, types.CodeType))


def swap_graph(artifact: Artifact, candidate: GraphCandidate, built: Mapping[str, Any]) -> GraphSwap:
    """Install ``candidate`` (its kernels ``built``) as graph ``candidate.graph``'s call sequence."""
    if not 0 <= candidate.graph < len(artifact.graphs):
        raise SwapError(f"graph {candidate.graph} does not exist (artifact has {len(artifact.graphs)})")
    graph = artifact.graphs[candidate.graph]
    return swap_call(graph.module, graph.source_code, candidate, built)


def restore_graph(swap: GraphSwap) -> None:
    """Undo a call-sequence swap (idempotent)."""
    swap.function.__code__ = swap.original_code
    module_globals = vars(swap.module)
    for name in [*swap.kernels, *swap.helpers]:
        module_globals.pop(name, None)


class _Counted:
    """A kernel that counts its launches (``.run`` for Triton, a call for C++) and delegates."""

    def __init__(self, kernel: Any) -> None:
        self.kernel, self.launches = kernel, 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.launches += 1
        return self.kernel.run(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.launches += 1
        return self.kernel(*args, **kwargs)


def check_graphs_live(artifact: Artifact, swaps: Sequence[GraphSwap], inputs: Sequence[Any]) -> None:
    """Run once and prove every swapped call ran and launched each of its own kernels."""
    counted: list[tuple[GraphSwap, str, _Counted]] = []
    for swap in swaps:
        module_globals = vars(swap.module)
        for name, kernel in swap.kernels.items():
            module_globals[name] = proxy = _Counted(kernel)
            counted.append((swap, name, proxy))
    before = compat.recompile_count()
    try:
        artifact(*inputs)
    finally:
        for swap, name, _ in counted:
            vars(swap.module)[name] = swap.kernels[name]
    if compat.recompile_count() != before:
        raise SwapError(
            "the compiled model recompiled (new input shapes, dtypes or a Dynamo reset), which drops a swapped "
            "call sequence; call it with the inputs it was captured with"
        )
    stale = [f"graph {s.graph}" for s in swaps if s.function.__code__ is not s.code]
    idle = [name for _, name, proxy in counted if proxy.launches == 0]
    if stale or idle:
        raise SwapError(
            f"the swapped call sequence did not run as installed ({', '.join(stale + idle)}): "
            "the compiled model no longer uses it"
        )
