"""Gate 1, the parts that read kernel bodies and what runs at import.

Triton compiles a ``@triton.jit`` body by walking its syntax tree, and any plain
Python callable it meets there runs on the host at compile time, inside the
evaluating process. Decorator arguments, parameter defaults and annotations run
when the module is imported. So a candidate is held to the shape Inductor emits:

* at import, only literals and the few constructors Inductor writes
  (:data:`~kernelopt.verify.static_rules.IMPORT_TIME_CALLS`, hint enums, ``__file__``);
* in a kernel body, only calls of allow-listed module functions, tensor methods,
  a few pure builtins and the module's own ``@triton.jit`` functions, and only the
  allow-listed attributes of values, whatever expression the value comes from;
* every ``tl.load`` / ``tl.store`` masked, unless the original makes the same
  unmasked access (compared after expanding the kernel's single-assignment names,
  so rebinding an index variable does not count as "the same");
* no device clock, and inline assembly only verbatim from the original.

Rules and tables live in :mod:`kernelopt.verify.static_rules`; these functions only
apply them and return :class:`~kernelopt.verify.static_common.Violation` lists.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterable
from dataclasses import dataclass, field

from kernelopt.verify.static_common import Violation, chain, check_path, is_constexpr_annotation, path_of, short
from kernelopt.verify.static_rules import (
    DEVICE_CLOCK_NAMES,
    DEVICE_CLOCK_REGISTERS,
    IMPORT_TIME_CALLS,
    IMPORT_TIME_ENUMS,
    IMPORT_TIME_NAMES,
    INLINE_ASM_PATHS,
    KERNEL_BUILTINS,
    MASK_POSITIONS,
    MASKED_PATHS,
    TENSOR_ATTRIBUTES,
    TENSOR_METHODS,
)

_MAX_EXPANSION_DEPTH = 12
_MAX_EXPANDED_NAMES = 2000  # a crafted chain of names could otherwise blow the expansion up


def _at(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 1), getattr(node, "col_offset", 0)


def _is_jit(dec: ast.expr, bound: dict[str, str]) -> bool:
    return path_of(dec.func if isinstance(dec, ast.Call) else dec, bound) == "triton.jit"


def jit_functions(tree: ast.Module, bound: dict[str, str]) -> list[ast.FunctionDef]:
    """Top-level functions decorated with ``@triton.jit`` (the kernel and its helpers)."""
    return [s for s in tree.body if isinstance(s, ast.FunctionDef) and any(_is_jit(d, bound) for d in s.decorator_list)]


# --------------------------------------------------------------------------------------
# Import time
# --------------------------------------------------------------------------------------


def _import_time_literal(node: ast.expr, bound: dict[str, str]) -> ast.expr | None:
    """None if ``node`` is safe to evaluate at import; else the first offending sub-expression."""
    if isinstance(node, ast.Constant):
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _import_time_literal(node.operand, bound)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return next((bad for e in node.elts if (bad := _import_time_literal(e, bound)) is not None), None)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return node  # ``{**x}`` unpacks an arbitrary mapping
        items = [*node.keys, *node.values]
        return next((bad for e in items if e is not None and (bad := _import_time_literal(e, bound)) is not None), None)
    if isinstance(node, ast.Name):
        return None if node.id in IMPORT_TIME_NAMES and node.id not in bound else node
    if isinstance(node, ast.Attribute):
        base = path_of(node.value, bound)
        ok = base in IMPORT_TIME_ENUMS and node.attr.isidentifier() and not node.attr.startswith("_")
        return None if ok else node
    if isinstance(node, ast.Call):
        func = (
            "builtins.set"
            if isinstance(node.func, ast.Name) and node.func.id == "set" and "set" not in bound
            else path_of(node.func, bound)
        )
        if func not in IMPORT_TIME_CALLS:
            return node
        if func == "builtins.set" and (node.args or node.keywords):
            return node
        values = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return node
        return next((bad for v in values if (bad := _import_time_literal(v, bound)) is not None), None)
    return node


def import_time_violations(tree: ast.Module, bound: dict[str, str]) -> Iterable[Violation]:
    """Decorator arguments, defaults and annotations of top-level functions: literals only."""
    for fn in (s for s in tree.body if isinstance(s, ast.FunctionDef)):
        for dec in fn.decorator_list:
            if not isinstance(dec, ast.Call):
                continue
            for value in [*dec.args, *(k.value for k in dec.keywords)]:
                bad = _import_time_literal(value, bound)
                if bad is not None:
                    yield Violation(
                        "import_time",
                        *_at(bad),
                        f"decorator of {fn.name} evaluates {short(ast.unparse(bad), 60)} at import",
                    )
            if any(isinstance(a, ast.Starred) for a in dec.args) or any(k.arg is None for k in dec.keywords):
                yield Violation("import_time", *_at(dec), f"decorator of {fn.name} unpacks arguments at import")
        args = fn.args
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            bad = _import_time_literal(default, bound)
            if bad is not None:
                yield Violation(
                    "import_time", *_at(bad), f"default of {fn.name} evaluates {short(ast.unparse(bad), 60)} at import"
                )
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if arg.annotation is not None and not is_constexpr_annotation(arg.annotation, bound):
                yield Violation(
                    "import_time",
                    *_at(arg.annotation),
                    f"annotation {short(ast.unparse(arg.annotation), 60)} of {fn.name}.{arg.arg} is not tl.constexpr",
                )
        if fn.returns is not None and not (isinstance(fn.returns, ast.Constant) and fn.returns.value is None):
            yield Violation(
                "import_time", *_at(fn.returns), f"return annotation {short(ast.unparse(fn.returns), 60)} of {fn.name}"
            )


# --------------------------------------------------------------------------------------
# Kernel bodies: calls and attributes
# --------------------------------------------------------------------------------------


def _local_names(fn: ast.FunctionDef) -> set[str]:
    args = fn.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def _module_rooted(node: ast.expr, bound: dict[str, str], local: set[str]) -> bool:
    """Is ``node`` a dotted chain rooted at an imported (not shadowed) name?"""
    parts = chain(node)
    return parts is not None and bool(parts) and parts[0] in bound and parts[0] not in local


def body_violations(tree: ast.Module, bound: dict[str, str], trusted_paths: set[str]) -> Iterable[Violation]:
    """Calls and attribute reads in every @triton.jit body against the allow-lists."""
    functions = jit_functions(tree, bound)
    jit_names = {f.name for f in functions}
    for fn in functions:
        local = _local_names(fn)
        for stmt in fn.body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call):
                    yield from _call_violation(node, fn.name, bound, local, jit_names, trusted_paths)
                elif isinstance(node, ast.Attribute) and not _module_rooted(node, bound, local):
                    if node.attr not in TENSOR_ATTRIBUTES:
                        yield Violation(
                            "value_access",
                            *_at(node),
                            f"{fn.name} reads .{node.attr} of {short(ast.unparse(node.value), 50)}",
                        )
                elif isinstance(node, ast.Name) and node.id in DEVICE_CLOCK_NAMES and node.id in bound:
                    yield Violation("device_clock", *_at(node), f"{fn.name} uses {node.id} ({bound[node.id]})")


def _call_violation(
    node: ast.Call, where: str, bound: dict[str, str], local: set[str], jit_names: set[str], trusted: set[str]
) -> Iterable[Violation]:
    func = node.func
    shown = short(ast.unparse(func), 60)
    if isinstance(func, ast.Name):
        name = func.id
        if name in local:
            yield Violation("kernel_call", *_at(node), f"{where} calls local value {name}()")
        elif name in jit_names:
            return
        elif name in bound:
            path = path_of(func, bound)
            if path is None or (path not in trusted and check_path(path, called=True, written=name) is not None):
                yield Violation("kernel_call", *_at(node), f"{where} calls {name}() ({path})")
        elif name not in KERNEL_BUILTINS:
            yield Violation(
                "kernel_call",
                *_at(node),
                f"{where} calls {name}(), which is not a @triton.jit "
                "function of this module (it would run at compile time)",
            )
        return
    if isinstance(func, ast.Attribute):
        if _module_rooted(func, bound, local):
            return  # module paths are checked by the walker's policy tables
        if func.attr not in TENSOR_METHODS:
            yield Violation("kernel_call", *_at(node), f"{where} calls {shown}(), not an allow-listed tensor method")
        return
    yield Violation("kernel_call", *_at(node), f"{where} calls the result of {shown}")


# --------------------------------------------------------------------------------------
# Masks, inline assembly, the device clock in strings
# --------------------------------------------------------------------------------------


@dataclass
class AccessFacts:
    """What the original kernel does that a candidate may repeat: unmasked accesses, inline asm calls."""

    unmasked: set[tuple[str, str]] = field(default_factory=set)
    inline_asm: set[str] = field(default_factory=set)


class _Expand(ast.NodeTransformer):
    """Replace names assigned once in the function by their value; others by all their definitions."""

    def __init__(self, defs: dict[str, list[ast.AST]], depth: int = 0, budget: list[int] | None = None) -> None:
        self.defs = defs
        self.depth = depth
        self.budget = budget if budget is not None else [_MAX_EXPANDED_NAMES]

    def visit_Name(self, node: ast.Name) -> ast.AST:
        values = self.defs.get(node.id)
        if not values or self.depth >= _MAX_EXPANSION_DEPTH or self.budget[0] <= 0:
            return node
        self.budget[0] -= 1
        if len(values) == 1 and isinstance(values[0], ast.expr):
            return _Expand(self.defs, self.depth + 1, self.budget).visit(copy.deepcopy(values[0]))
        return ast.Name(id=f"{node.id}|" + "|".join(sorted(ast.dump(v) for v in values)), ctx=ast.Load())


def _definitions(fn: ast.FunctionDef) -> dict[str, list[ast.AST]]:
    defs: dict[str, list[ast.AST]] = {}  # parameters stay plain names: the signature check pins them
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defs.setdefault(n.id, []).append(node.value if isinstance(t, ast.Name) else node)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name):
            value = node.value if isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value else node
            defs.setdefault(node.target.id, []).append(value)
        elif isinstance(node, (ast.For, ast.comprehension)):
            for n in ast.walk(node.target):
                if isinstance(n, ast.Name):
                    defs.setdefault(n.id, []).append(ast.Tuple(elts=[node.iter], ctx=ast.Load()))
    return defs


def _fingerprint(expr: ast.expr, defs: dict[str, list[ast.AST]]) -> str:
    return ast.dump(_Expand(defs).visit(copy.deepcopy(expr)))


def _mask_of(call: ast.Call, path: str) -> ast.expr | None:
    position = MASK_POSITIONS[path]
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg in ("mask", "boundary_check")), None)


def _always_true(mask: ast.expr | None, defs: dict[str, list[ast.AST]], bound: dict[str, str]) -> bool:
    """No mask, ``None``, ``True`` or a name bound only to ``tl.full(shape, True, ...)`` (possibly sliced)."""
    if mask is None:
        return True
    node: ast.AST = _Expand(defs).visit(copy.deepcopy(mask))
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Constant):
        return node.value is None or node.value is True
    if isinstance(node, ast.Call) and path_of(node.func, bound) == "triton.language.full" and len(node.args) >= 2:
        fill = node.args[1]
        return isinstance(fill, ast.Constant) and fill.value in (True, 1)
    return False


def access_facts(tree: ast.Module, bound: dict[str, str]) -> AccessFacts:
    """The original's unmasked loads/stores (by kind and expanded pointer) and inline asm calls."""
    facts = AccessFacts()
    for fn in jit_functions(tree, bound):
        defs = _definitions(fn)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            path = path_of(node.func, bound)
            if path in MASKED_PATHS and node.args and _always_true(_mask_of(node, path), defs, bound):
                facts.unmasked.add((path, _fingerprint(node.args[0], defs)))
            elif path in INLINE_ASM_PATHS:
                facts.inline_asm.add(ast.dump(node))
    return facts


def access_violations(tree: ast.Module, bound: dict[str, str], original: AccessFacts) -> Iterable[Violation]:
    """Unmasked loads and stores the original does not make; inline asm it does not contain."""
    for fn in jit_functions(tree, bound):
        defs = _definitions(fn)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            path = path_of(node.func, bound)
            if path in MASKED_PATHS:
                if not node.args:
                    yield Violation("mask", *_at(node), f"{fn.name} calls {ast.unparse(node.func)} without a pointer")
                elif (
                    _always_true(_mask_of(node, path), defs, bound)
                    and (path, _fingerprint(node.args[0], defs)) not in original.unmasked
                ):
                    what = path.rsplit(".", 1)[1]
                    yield Violation(
                        "mask",
                        *_at(node),
                        f"{fn.name} has an unmasked {what} of {short(ast.unparse(node.args[0]), 50)}",
                    )
            elif path in INLINE_ASM_PATHS and ast.dump(node) not in original.inline_asm:
                yield Violation(
                    "inline_asm",
                    *_at(node),
                    f"{fn.name} calls {ast.unparse(node.func)}(...) that the original does not",
                )


def clock_string_violations(tree: ast.Module) -> Iterable[Violation]:
    """PTX clock registers in any string of the module that code can use (docstrings are skipped)."""
    prose = {id(s.value) for s in ast.walk(tree) if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)}
    for node in ast.walk(tree):
        if id(node) in prose:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = next((r for r in DEVICE_CLOCK_REGISTERS if r in node.value), None)
            if hit:
                yield Violation("device_clock", *_at(node), f"string {short(repr(node.value), 50)} reads {hit}")
