"""Gate 1's module-shape check: the top level may hold only what Inductor emits there.

A kernel module's top level runs at import, in the evaluating process, before any
gate has run the kernel. Inductor writes only imports, ``@triton.jit`` functions,
literal constants and ``triton_helpers.set_driver_to_gpu()`` there, so that is all
a candidate may hold; anything else (a statement that runs code, a mutable
global, a rebinding of an imported or defined name) is a ``top_level`` finding.
What decorators, defaults and annotations evaluate is checked by
:func:`kernelopt.verify.static_kernel.import_time_violations`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from kernelopt.verify.static_common import Violation, is_constexpr_annotation, path_of, short
from kernelopt.verify.static_rules import CONSTEXPR_PATHS, RUNTIME


def _is_immutable_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_immutable_literal(node.operand)
    if isinstance(node, ast.Tuple):
        return all(_is_immutable_literal(e) for e in node.elts)
    return False


def _is_constant_value(node: ast.expr, bound: dict[str, str]) -> bool:
    """A literal, or ``tl.constexpr(<literal>)`` (Triton reads module globals only as constexprs)."""
    if _is_immutable_literal(node):
        return True
    return (
        isinstance(node, ast.Call)
        and path_of(node.func, bound) in CONSTEXPR_PATHS
        and len(node.args) == 1
        and not node.keywords
        and _is_immutable_literal(node.args[0])
    )


def top_level_violations(tree: ast.Module, bound: dict[str, str]) -> Iterable[Violation]:
    """Every top-level statement that is not an import, a function, a literal constant or the driver call."""
    functions = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.ClassDef))}
    defined = set(bound) | functions
    for index, stmt in enumerate(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                name = alias.asname or alias.name.split(".")[0]
                if name in functions:
                    yield Violation("top_level", stmt.lineno, stmt.col_offset, f"rebinds {name} by an import")
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            continue  # checked by the walker and static_signature.kernel_violations
        if isinstance(stmt, ast.Expr):
            if index == 0 and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                continue  # module docstring
            call = stmt.value
            if (
                isinstance(call, ast.Call)
                and not call.args
                and not call.keywords
                and path_of(call.func, bound) == f"{RUNTIME}.triton_helpers.set_driver_to_gpu"
            ):
                continue
            yield Violation(
                "top_level", stmt.lineno, stmt.col_offset, f"runs {short(ast.unparse(stmt))} at module level"
            )
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = stmt.value
            ok_annotation = isinstance(stmt, ast.Assign) or is_constexpr_annotation(stmt.annotation, bound)
            if (
                len(names) == len(targets) == 1
                and value is not None
                and ok_annotation
                and _is_constant_value(value, bound)
            ):
                if names[0] in defined:
                    yield Violation("top_level", stmt.lineno, stmt.col_offset, f"rebinds {names[0]} at module level")
                continue
            yield Violation(
                "top_level",
                stmt.lineno,
                stmt.col_offset,
                f"assigns {short(ast.unparse(stmt))} at module level (not an immutable literal)",
            )
            continue
        yield Violation(
            "top_level", stmt.lineno, stmt.col_offset, f"has a top-level {type(stmt).__name__.lower()} statement"
        )
