"""What an Inductor output module's ``call`` is made of, read from its text.

The wrapper gate (:mod:`kernelopt.verify.static_wrapper`) checks a changed call sequence against
these facts of the original, and a graph candidate (:mod:`kernelopt.capture.graph_swap`) is made
only from a variant with the same parameters and outputs.
"""

from __future__ import annotations

import ast
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
    vendor = {
        n.func.attr
        for n in ast.walk(call)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "extern_kernels"
    }
    returns = [n for n in ast.walk(call) if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple)]
    outputs = len(returns[-1].value.elts) if returns else 0  # type: ignore[union-attr]
    return WrapperFacts(
        frozenset(kernels), frozenset(cpp), frozenset(vendor), tuple(a.arg for a in call.args.args), outputs
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
