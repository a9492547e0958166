"""The kind of a user's file, read from its syntax tree alone (nothing runs): a model problem, a
Triton kernel file or a Helion kernel file.

Apart from the loaders (:mod:`kernelopt.problem.loader`, :mod:`kernelopt.problem.kernel_file`) so
either can ask the kind of a file before executing it, without importing the other.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from kernelopt.errors import ProblemError

MODEL, TRITON, HELION = "model", "triton", "helion"
KINDS = (MODEL, TRITON, HELION)
ENTRY = "launch"
KIND_HINT = (
    "a problem file defines class Model(nn.Module), get_inputs() and get_init_inputs(); a Triton kernel file "
    "defines @triton.jit kernels, launch(*inputs) and get_inputs(); a Helion kernel file defines a "
    "@helion.kernel function and get_inputs()"
)


def _decorator_names(fn: ast.FunctionDef) -> set[str]:
    """The dotted names of a function's decorators (``triton.jit``, ``helion.kernel``, ``jit``), calls unwrapped."""
    names = set()
    for dec in fn.decorator_list:
        node = dec.func if isinstance(dec, ast.Call) else dec
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
            names.add(".".join(reversed(parts)))
    return names


def _imported_from(tree: ast.Module, module: str) -> dict[str, str]:
    """Local name -> what it is in ``module`` (``from helion import kernel`` gives ``kernel -> helion.kernel``)."""
    bound: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.module.split(".")[0] == module:
            for alias in stmt.names:
                bound[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name.split(".")[0] == module:
                    bound[alias.asname or alias.name.split(".")[0]] = (
                        alias.name.split(".")[0] if not alias.asname else alias.name
                    )
    return bound


def _resolved(names: set[str], bound: dict[str, str]) -> set[str]:
    out = set()
    for name in names:
        head, _, rest = name.partition(".")
        base = bound.get(head, head)
        out.add(f"{base}.{rest}" if rest else base)
    return out


@dataclass(frozen=True)
class FileShape:
    """What a file's syntax tree says it is: its kind and the names a kind needs."""

    kind: str
    kernels: tuple[str, ...]  # @triton.jit or @helion.kernel functions
    functions: tuple[str, ...]  # every top-level function


def file_shape(source: str, path: str | Path = "<file>") -> FileShape:
    """The kind of a user's file, read from its syntax tree (nothing is executed)."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else str(path)
        raise ProblemError(f"{where}: syntax error: {exc.msg}") from exc
    bound = {**_imported_from(tree, "triton"), **_imported_from(tree, "helion")}
    functions = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    classes = {s.name for s in tree.body if isinstance(s, ast.ClassDef)}
    triton_kernels, helion_kernels = [], []
    for fn in functions:
        names = _resolved(_decorator_names(fn), bound)
        if {"triton.jit", "triton.language.jit"} & names:
            triton_kernels.append(fn.name)
        if {"helion.kernel", "helion.runtime.kernel.kernel"} & names:
            helion_kernels.append(fn.name)
    fn_names = tuple(fn.name for fn in functions)
    if "Model" in classes:
        return FileShape(MODEL, (), fn_names)
    if helion_kernels:
        return FileShape(HELION, tuple(helion_kernels), fn_names)
    if triton_kernels:
        if ENTRY not in fn_names:
            raise ProblemError(
                f"{path}: defines @triton.jit kernels ({', '.join(triton_kernels)}) but no launch(*inputs); "
                "add a launch function that allocates the outputs, launches the kernels and returns the outputs"
            )
        return FileShape(TRITON, tuple(triton_kernels), fn_names)
    raise ProblemError(f"{path}: not a problem, Triton or Helion kernel file; {KIND_HINT}")


def read_source(path: Path) -> str:
    """A user's file as text; a missing or unreadable file is one line naming it."""
    if not path.is_file():
        raise ProblemError(f"{path}: no such file")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        text = " ".join(str(exc).split())[:200]
        raise ProblemError(f"{path}: cannot read the file ({type(exc).__name__}{': ' + text if text else ''})") from exc


def file_kind(path: str | Path) -> str:
    """:data:`MODEL`, :data:`TRITON` or :data:`HELION` for the file at ``path``."""
    path = Path(path)
    return file_shape(read_source(path), path).kind
