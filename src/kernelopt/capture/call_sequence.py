"""What an Inductor output module's ``call`` is made of, read from its text.

The wrapper gate (:mod:`kernelopt.verify.static_wrapper`) checks a changed call sequence against
these facts of the original, and a graph candidate (:mod:`kernelopt.capture.graph_swap`) is made
only from a variant with the same parameters and outputs.

Under CUDA graphs (``mode="reduce-overhead"``) Inductor writes the same graph as *partitions*:
``call`` hands its inputs to module-level functions (``partition_0``) that the CUDA-graph trees
record. Where the whole graph is one partition that ``call`` only forwards to, the partition's body
is the plain compile's ``call`` body, less the input asserts, with its inputs and outputs in
another order; :func:`folded_digest` names that graph the same in both forms, so a candidate made
for the plain compile can stand in for the partition.
"""

from __future__ import annotations

import ast
import copy
import textwrap
from dataclasses import dataclass

from kernelopt.capture.output_code import parse_kernels, source_hash, without_backend_hash


@dataclass(frozen=True)
class WrapperFacts:
    """What the original graph's module vouches for: its kernels, vendor calls, call parameters, outputs."""

    kernels: frozenset[str]
    cpp_kernels: frozenset[str]  # the C++ ones (CPU tensors), which the wrapper calls directly
    vendor_ops: frozenset[str]
    params: tuple[str, ...]
    outputs: int
    fallback_ops: frozenset[str] = frozenset()  # ATen fallbacks it calls, dotted: torch.ops.aten.OP.OVERLOAD


def fallback_name(func: ast.expr) -> str | None:
    """``torch.ops.aten.OP.OVERLOAD`` where ``func`` names an ATen operator as Inductor's wrapper calls
    a fallback (attention, sort, cumsum, ...), fully or through the module's ``aten = torch.ops.aten``
    (a dropout's ``aten.randint.low_out``), else None."""
    name = ast.unparse(func)
    if name.startswith("aten.") and name.count(".") == 2:
        name = f"torch.ops.{name}"
    return name if name.startswith("torch.ops.aten.") and name.count(".") == 4 else None


def call_function_node(tree: ast.Module) -> ast.FunctionDef | None:
    """``call``: a module-level function, or the method of Inductor's ``Runner`` class (torch >= 2.9)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
    return None


def partition_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The module-level partition functions ``runner = Runner(partitions=[...])`` names, in order."""
    named: list[str] = []
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "Runner"
        ):
            for keyword in node.value.keywords:
                if keyword.arg == "partitions" and isinstance(keyword.value, ast.List):
                    named = [e.id for e in keyword.value.elts if isinstance(e, ast.Name)]
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    return [functions[name] for name in named if name in functions]


def partition_calls(call: ast.FunctionDef) -> int:
    """How many times ``call`` hands work to a CUDA-graph partition (``self.partitions[i](...)``)."""
    return sum(
        1
        for n in ast.walk(call)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Subscript)
        and isinstance(n.func.value, ast.Attribute)
        and n.func.value.attr == "partitions"
    )


def is_partitioned(module_source: str) -> bool:
    """Whether Inductor split this graph into CUDA-graph partitions (its ``call`` launches nothing itself)."""
    call = call_function_node(ast.parse(module_source))
    return call is not None and partition_calls(call) > 0


@dataclass(frozen=True)
class Partition:
    """A graph compiled as one CUDA-graph partition that its ``call`` only forwards to."""

    function: str  # the partition's module-level function, e.g. "partition_0"
    inputs: tuple[int, ...]  # the partition's k-th argument is call's inputs[k]-th
    outputs: tuple[int, ...]  # the partition's j-th output is call's outputs[j]-th
    call_params: int  # parameters of the graph's own call (2 for Runner.call(self, args))


def _names(node: ast.expr) -> list[str] | None:
    elts = node.elts if isinstance(node, ast.Tuple | ast.List) else [node]
    names = [e.id for e in elts if isinstance(e, ast.Name)]
    return names if len(names) == len(elts) else None


def _unpacked(stmt: ast.stmt) -> list[str] | None:
    """``a, b = args`` -> ["a", "b"]."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.value, ast.Name)
        and stmt.value.id == "args"
    ):
        return _names(stmt.targets[0])
    return None


def _forwarded(tree: ast.Module) -> tuple[Partition, ast.FunctionDef, ast.stmt, list[str]] | None:
    """The one partition ``call`` forwards to, with the partition's node, call's unpacking and its
    returned names; None for any other shape (several partitions, work outside them, symbolic sizes)."""
    call = call_function_node(tree)
    functions = partition_functions(tree)
    if call is None or len(functions) != 1 or partition_calls(call) != 1:
        return None
    body = [s for s in call.body if not isinstance(s, ast.Delete)]
    if len(body) != 5:
        return None
    unpack, clear, pack, invoke, ret = body
    params = _unpacked(unpack)
    packed = (
        _names(pack.value)
        if isinstance(pack, ast.Assign) and len(pack.targets) == 1 and isinstance(pack.value, ast.List)
        else None
    )
    produced = _names(invoke.targets[0]) if isinstance(invoke, ast.Assign) and len(invoke.targets) == 1 else None
    returned = _names(ret.value) if isinstance(ret, ast.Return) and ret.value is not None else None
    if not (
        params is not None
        and isinstance(clear, ast.Expr)
        and ast.unparse(clear) == "args.clear()"
        and packed is not None
        and sorted(packed) == sorted(params)
        and produced is not None
        and returned is not None
        and sorted(produced) == sorted(returned)
        and len(set(returned)) == len(returned)
    ):
        return None
    function = functions[0]
    own = function.body
    if not own or _unpacked(own[0]) != packed or not isinstance(own[-1], ast.Return) or own[-1].value is None:
        return None
    if _names(own[-1].value) != produced:
        return None
    partition = Partition(
        function.name,
        tuple(params.index(name) for name in packed),
        tuple(returned.index(name) for name in produced),
        len(call.args.args),
    )
    return partition, function, unpack, returned


def single_partition(module_source: str) -> Partition | None:
    """The graph's one CUDA-graph partition, where ``call`` only forwards to it (else None)."""
    found = _forwarded(ast.parse(module_source))
    return found[0] if found is not None else None


class _WithoutAsserts(ast.NodeTransformer):
    """Drops the input checks (``assert_size_stride``, ``assert_alignment``): Inductor writes them in
    the plain ``call`` and leaves them out of a partition."""

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id.startswith("assert_"):
            return None
        return node


def folded_digest(module_source: str) -> str | None:
    """The graph's identity whether or not Inductor wrote it as one CUDA-graph partition: the
    statements of what runs (call's body, or the partition's in call's argument and output order,
    input asserts dropped) and the kernels' sources. None for a graph split into several partitions."""
    tree = ast.parse(module_source)
    call = call_function_node(tree)
    if call is None:
        raise ValueError("the output code defines no call function")
    if partition_calls(call) == 0:
        statements = list(call.body)
    else:
        found = _forwarded(tree)
        if found is None:
            return None
        _, function, unpack, returned = found
        ret = ast.Return(ast.Tuple([ast.Name(n, ast.Load()) for n in returned], ast.Load()))
        statements = [unpack, *function.body[1:-1], ret]
    module = _WithoutAsserts().visit(ast.Module([copy.deepcopy(s) for s in statements], []))
    kernels = sorted((var, without_backend_hash(k.source)) for var, k in parse_kernels(module_source).items())
    body = "\n\0".join([*(ast.dump(s) for s in module.body), "\0kernels", *(f"{var}\n{text}" for var, text in kernels)])
    return source_hash(body)


def wrapper_facts(original_source: str) -> WrapperFacts:
    """The facts of the original output module (trusted; ``ValueError`` when it has no ``call``)."""
    tree = ast.parse(original_source)
    call = call_function_node(tree)
    if call is None:
        raise ValueError("the original output code defines no call function")
    kernels: set[str] = set()
    cpp: set[str] = set()
    for node in tree.body:  # name = async_compile.triton('name', '''...''') and friends
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "async_compile"
            ):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                kernels.update(names)
                if func.attr == "cpp_pybinding":
                    cpp.update(names)
    vendor: set[str] = set()
    fallbacks: set[str] = set()
    for where in (call, *partition_functions(tree)):  # a partitioned graph's calls are in its partitions
        for n in ast.walk(where):
            if not isinstance(n, ast.Call):
                continue
            func = n.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "extern_kernels"
            ):
                vendor.add(func.attr)
            elif name := fallback_name(func):
                fallbacks.add(name)
    returns = [n for n in ast.walk(call) if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple)]
    outputs = len(returns[-1].value.elts) if returns else 0  # type: ignore[union-attr]
    return WrapperFacts(
        frozenset(kernels),
        frozenset(cpp),
        frozenset(vendor),
        tuple(a.arg for a in call.args.args),
        outputs,
        frozenset(fallbacks),
    )


def call_source_of(module_source: str) -> str:
    """The text of an output module's ``call`` function, dedented; ``ValueError`` when it has none."""
    node = call_function_node(ast.parse(module_source))
    if node is None:
        raise ValueError("the output code defines no call function")
    text = ast.get_source_segment(module_source, node, padded=True)
    assert text is not None  # parsed from this very source
    return textwrap.dedent(text)


def graph_digest(module_source: str) -> str:
    """One graph's identity across processes: its call function and its kernels' sources, without
    what differs between two processes' captures of the same graph (the kernels' Triton backend
    hash, the cache paths in comments outside ``call``)."""
    kernels = sorted((var, without_backend_hash(k.source)) for var, k in parse_kernels(module_source).items())
    body = "\n\0".join([call_source_of(module_source), *(f"{var}\n{text}" for var, text in kernels)])
    return source_hash(body)
