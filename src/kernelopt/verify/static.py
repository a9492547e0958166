"""Gate 1: static validation of a candidate kernel source.

A candidate is untrusted Python (written by an LLM or a user) that replaces one
Triton kernel Inductor generated. Before it is imported anywhere, this gate reads
its syntax tree and rejects every construct a kernel has no business containing:
PyTorch compute, fallback paths, threads, streams and timers, monkey-patching,
frame or globals inspection, dynamic code, file and network access, classes,
state kept across calls, precision the original does not use, and imports
outside a short allow-list. It also checks that the kernel keeps the name and
the launcher contract (decorators and parameter list) of the kernel it replaces.

It works on the ``ast`` tree, never on the text, so comments and strings can
neither hide a construct nor fake one. It is one layer of defence: what source
cannot show (stale memory, partial work, shape shortcuts, input mutation,
precision within tolerance) is left to the correctness, model and performance
gates, and candidates run in an isolated worker anyway.

The module must have the shape Inductor emits: module paths are checked against
explicit allow-lists of the Triton language, libdevice, ``tl_math`` and Inductor's
helpers; kernel bodies, import-time values, masks, inline assembly and the device
clock are checked by :mod:`kernelopt.verify.static_kernel`. :func:`check_static_candidate`
is the part that needs no original, for callers that must refuse before one is known.

The rules are data (the tables in :mod:`kernelopt.verify.static_rules`); the
walker here and the checks in ``static_kernel`` apply them. Every finding names its line; the verdict's reason is the
most serious finding, and all findings are in ``details["violations"]``.

Long because the walker is one visitor over every node kind a module can hold;
splitting it would scatter one traversal over several files.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kernelopt.verify.static_common import Violation
from kernelopt.verify.static_common import bindings as _bindings
from kernelopt.verify.static_common import chain as _chain
from kernelopt.verify.static_common import check_path as _check_path
from kernelopt.verify.static_common import path_of as _path_of
from kernelopt.verify.static_common import policy_key as _policy_key
from kernelopt.verify.static_common import resolve as _resolve
from kernelopt.verify.static_kernel import (
    AccessFacts,
    access_facts,
    access_violations,
    body_violations,
    clock_string_violations,
    import_time_violations,
)
from kernelopt.verify.static_rules import (
    ALLOWED_DUNDER_NAMES,
    APPROXIMATE_LOWERINGS,
    CONSTEXPR_PATHS,
    DEVICE_CLOCK_NAMES,
    FORBIDDEN_ATTRIBUTES,
    FORBIDDEN_BUILTINS,
    FORBIDDEN_NODES,
    HEURISTIC_DECORATORS,
    IMPORT_HINTS,
    JIT_KEYWORDS,
    MAX_SOURCE_CHARS,
    MODULE_PATHS,
    PRIORITY,
    RULES,
    RUNTIME,
    precision_token_for_name,
    precision_token_for_string,
)
from kernelopt.verify.verdict import Verdict

# --------------------------------------------------------------------------------------
# Findings and signatures
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One kernel parameter: its name, whether it is ``tl.constexpr``, whether it has a default."""

    name: str
    constexpr: bool
    has_default: bool
    line: int = 0

    def __str__(self) -> str:
        return self.name + (": tl.constexpr" if self.constexpr else "") + (" = ..." if self.has_default else "")


@dataclass(frozen=True)
class KernelSignature:
    """A kernel's parameter list as Inductor's launcher sees it."""

    name: str
    params: tuple[Param, ...]
    line: int
    has_heuristics: bool = False
    varargs: str | None = None  # "*args", "**kwargs" or keyword-only names, if any

    @property
    def runtime(self) -> tuple[str, ...]:
        """Pointer and numel parameters, passed positionally by the launcher, in order."""
        return tuple(p.name for p in self.params if not p.constexpr)

    @property
    def constexprs(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.constexpr)

    def __str__(self) -> str:
        return f"{self.name}({', '.join(str(p) for p in self.params)})"


# --------------------------------------------------------------------------------------
# Import bindings and path resolution
# --------------------------------------------------------------------------------------


def _import_allowed(path: str, original_imports: set[str]) -> bool:
    if path in original_imports:
        return True
    key = _policy_key(path)
    if key is None or key == "torch":
        return False
    return _check_path(path, called=False, written=path) is None


# --------------------------------------------------------------------------------------
# The walker
# --------------------------------------------------------------------------------------


class _Walker(ast.NodeVisitor):
    """Visits every node once, applying the rule tables; collects violations and precision tokens."""

    def __init__(self, tree: ast.AST, original_imports: set[str], original_paths: set[str]) -> None:
        self.bound, self.module_names = _bindings(tree)
        # ``torch.x(...)`` is PyTorch whether or not the candidate imported torch (it may be
        # reachable through the namespace the module is loaded into).
        self.bound.setdefault("torch", "torch")
        self.original_imports = original_imports
        self.original_paths = original_paths
        self.violations: list[Violation] = []
        self.tokens: dict[str, Violation] = {}  # precision token -> first use
        self.paths: set[str] = set()  # every resolved module path used (to trust them in candidates)
        self.imports: set[str] = set()
        self._parent: dict[int, ast.AST] = {}
        self._called: set[int] = set()
        self._scopes: list[set[str]] = []  # local names of the enclosing functions
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self._parent[id(child)] = parent

    # -- recording ----------------------------------------------------------------------

    def _add(self, rule: str, node: ast.AST, construct: str) -> None:
        line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0)
        self.violations.append(Violation(rule, line, col, construct))

    def _token(self, token: str, node: ast.AST, construct: str) -> None:
        if token not in self.tokens:
            line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0)
            self.tokens[token] = Violation("precision", line, col, f"{construct} ({token})")

    # -- dispatch ------------------------------------------------------------------------

    def visit(self, node: ast.AST) -> None:
        entry = FORBIDDEN_NODES.get(type(node))
        if entry is not None:
            rule, describe = entry
            self._add(rule, node, describe(node))
        super().visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        # decorators, defaults and annotations run in the enclosing scope; the body in its own
        for dec in node.decorator_list:
            self.visit(dec)
        self.visit(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        self._scopes.append(_local_names(node))
        for stmt in node.body:
            self.visit(stmt)
        self._scopes.pop()

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imports.add(alias.name)
            if not _import_allowed(alias.name, self.original_imports):
                construct = (
                    "imports torch, which the original kernel does not import"
                    if alias.name == "torch"
                    else self._import_construct(alias.name)
                )
                self._add("import", node, construct)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self._add("import", node, f"imports from relative module {'.' * node.level}{module}")
            return
        for alias in node.names:
            path = f"{module}.{alias.name}"
            self.imports.add(path)
            if alias.name == "*":
                self._add("import", node, f"imports * from {module}")
            elif not _import_allowed(path, self.original_imports):
                self._add("import", node, self._import_construct(path, shown=f"{alias.name} from {module}"))
            elif alias.name.startswith("__") and alias.name.endswith("__"):
                self._add("introspection", node, f"imports {alias.name} from {module}")
            token = precision_token_for_name(alias.name)
            if token:
                self._token(token, node, f"imports {alias.name}")
        self.generic_visit(node)

    def _import_construct(self, path: str, shown: str | None = None) -> str:
        root = path.split(".")[0]
        hint = IMPORT_HINTS.get(root)
        what = shown or path
        return f"imports {what} ({hint})" if hint else f"imports {what}, which is not on the allow-list"

    def visit_Call(self, node: ast.Call) -> None:
        self._called.add(id(node.func))
        for kw in node.keywords:
            self._keyword_precision(kw)
        self.generic_visit(node)

    def _keyword_precision(self, kw: ast.keyword) -> None:
        if kw.arg == "allow_tf32" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
            self._token("tf32", kw, f"passes allow_tf32={ast.unparse(kw.value)}")
        elif kw.arg == "input_precision" and not isinstance(kw.value, ast.Constant):
            self._token(
                f"input_precision={ast.unparse(kw.value)}", kw, f"passes input_precision={ast.unparse(kw.value)}"
            )
        elif kw.arg is None:  # **kwargs: the precision keywords could hide in there
            self._token("**kwargs", kw, f"passes **{ast.unparse(kw.value)}")

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            token = precision_token_for_string(node.value)
            if token:
                self._token(token, node, f"uses the string {node.value!r}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            verb = "assigns" if isinstance(node.ctx, ast.Store) else "deletes"
            self._add("monkey_patch", node, f"{verb} {ast.unparse(node)}")
        self._attribute_name(node.attr, node)
        parent = self._parent.get(id(node))
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            self._maximal_chain(node)
        self.generic_visit(node)

    def _attribute_name(self, attr: str, node: ast.AST) -> None:
        if attr.startswith("__") and attr.endswith("__"):
            self._add("introspection", node, f"uses {ast.unparse(node)}")
        if attr in DEVICE_CLOCK_NAMES:
            self._add("device_clock", node, f"{_verb(node, self._called)} {ast.unparse(node)}")
        rule = FORBIDDEN_ATTRIBUTES.get(attr)
        if rule:
            self._add(rule, node, f"{_verb(node, self._called)} {ast.unparse(node)}")
        token = precision_token_for_name(attr)
        if token:
            self._token(token, node, f"uses {ast.unparse(node)}")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            parts = _chain(node.value)
            if parts and parts[0] in self.bound:
                self._add("monkey_patch", node, f"assigns {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        called = id(node) in self._called
        if isinstance(node.ctx, ast.Load):
            rule = FORBIDDEN_BUILTINS.get(name)
            shadowed = name in self.bound or any(name in scope for scope in self._scopes)
            if rule and not shadowed:
                self._add(rule, node, f"calls {name}()" if called else f"uses {name}")
            elif name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDER_NAMES:
                self._add("introspection", node, f"uses {name}")
            if name in self.bound:
                parent = self._parent.get(id(node))
                if not (isinstance(parent, ast.Attribute) and parent.value is node):
                    self._maximal_chain(node)
                token = precision_token_for_name(self.bound[name].rsplit(".", 1)[-1])
                if token:
                    self._token(token, node, f"uses {name}")

    def _maximal_chain(self, node: ast.expr) -> None:
        """Check a whole dotted chain rooted at an imported name (``torch.nn.functional.gelu``)."""
        parts = _chain(node)
        if not parts or parts[0] not in self.bound:
            return
        written = ".".join(parts)
        path = _resolve(".".join([self.bound[parts[0]], *parts[1:]]))
        self.paths.add(path)
        called = id(node) in self._called
        lowering = APPROXIMATE_LOWERINGS.get(path)
        if lowering:
            self._token(lowering[0], node, f"uses {written}, which lowers to {lowering[1]}")
        if path in MODULE_PATHS or (len(parts) == 1 and parts[0] in self.module_names):
            if called or path == "torch" or path not in self.original_paths:
                what = "calls" if called else "uses"
                rule = "torch_compute" if path == "torch" else "module_access"
                self._add(rule, node, f"{what} module {written} as a value")
            return
        if path in self.original_paths and _policy_key(path) != "torch":
            return  # the original kernel uses it: trusted
        finding = _check_path(path, called=called, written=written)
        if finding:
            self._add(finding[0], node, finding[1])


def _local_names(fn: ast.FunctionDef) -> set[str]:
    """Names Python treats as local to ``fn`` (so ``input = ...`` there is not the builtin)."""
    args = fn.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    declared_elsewhere: set[str] = set()
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue  # their bodies are other scopes
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # comprehension and lambda variables do not leak into fn
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared_elsewhere.update(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return names - declared_elsewhere


def _verb(node: ast.AST, called: set[int]) -> str:
    ctx = getattr(node, "ctx", None)
    if isinstance(ctx, ast.Store):
        return "assigns"
    if isinstance(ctx, ast.Del):
        return "deletes"
    return "calls" if id(node) in called else "uses"


# --------------------------------------------------------------------------------------
# Module shape, kernel and signature
# --------------------------------------------------------------------------------------


def _is_immutable_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_immutable_literal(node.operand)
    if isinstance(node, ast.Tuple):
        return all(_is_immutable_literal(e) for e in node.elts)
    return False


def _is_constexpr_annotation(node: ast.expr | None, bound: dict[str, str]) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "tl.constexpr"
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return False
    return _path_of(node, bound) in CONSTEXPR_PATHS


def _is_constant_value(node: ast.expr, bound: dict[str, str]) -> bool:
    """A literal, or ``tl.constexpr(<literal>)`` (Triton reads module globals only as constexprs)."""
    if _is_immutable_literal(node):
        return True
    return (
        isinstance(node, ast.Call)
        and _path_of(node.func, bound) in CONSTEXPR_PATHS
        and len(node.args) == 1
        and not node.keywords
        and _is_immutable_literal(node.args[0])
    )


def _top_level(tree: ast.Module, bound: dict[str, str]) -> Iterable[Violation]:
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
            continue  # checked by the walker and _kernel_and_helpers
        if isinstance(stmt, ast.Expr):
            if index == 0 and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                continue  # module docstring
            call = stmt.value
            if (
                isinstance(call, ast.Call)
                and not call.args
                and not call.keywords
                and _path_of(call.func, bound) == f"{RUNTIME}.triton_helpers.set_driver_to_gpu"
            ):
                continue
            yield Violation(
                "top_level", stmt.lineno, stmt.col_offset, f"runs {_short(ast.unparse(stmt))} at module level"
            )
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = stmt.value
            ok_annotation = isinstance(stmt, ast.Assign) or _is_constexpr_annotation(stmt.annotation, bound)
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
                f"assigns {_short(ast.unparse(stmt))} at module level (not an immutable literal)",
            )
            continue
        yield Violation(
            "top_level", stmt.lineno, stmt.col_offset, f"has a top-level {type(stmt).__name__.lower()} statement"
        )


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _decorator_kind(dec: ast.expr, bound: dict[str, str]) -> str | None:
    """'jit', 'heuristics:<name>' or None for anything else."""
    target = dec.func if isinstance(dec, ast.Call) else dec
    path = _path_of(target, bound)
    if path == "triton.jit" and (
        not isinstance(dec, ast.Call) or (not dec.args and all(k.arg in JIT_KEYWORDS for k in dec.keywords))
    ):
        return "jit"
    prefix = f"{RUNTIME}.triton_heuristics."
    if path and path.startswith(prefix) and isinstance(dec, ast.Call) and path[len(prefix) :] in HEURISTIC_DECORATORS:
        return "heuristics:" + path[len(prefix) :]
    return None


def _signature_of(fn: ast.FunctionDef, bound: dict[str, str]) -> KernelSignature:
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    params = tuple(
        Param(a.arg, _is_constexpr_annotation(a.annotation, bound), i >= first_default, a.lineno)
        for i, a in enumerate(positional)
    )
    extra = []
    if args.vararg:
        extra.append(f"*{args.vararg.arg}")
    extra.extend(a.arg for a in args.kwonlyargs)
    if args.kwarg:
        extra.append(f"**{args.kwarg.arg}")
    heuristics = any((_decorator_kind(d, bound) or "").startswith("heuristics:") for d in fn.decorator_list)
    return KernelSignature(fn.name, params, fn.lineno, heuristics, ", ".join(extra) or None)


def _top_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [s for s in tree.body if isinstance(s, ast.FunctionDef)]


def kernel_signature(source: str, kernel_name: str) -> KernelSignature:
    """The parameter list of top-level function ``kernel_name`` in ``source``.

    Used on the original (trusted, Inductor-generated) kernel; raises ``ValueError``
    if it does not parse or does not define the kernel, which is a bug upstream.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"original kernel source does not parse: line {exc.lineno}: {exc.msg}") from exc
    bound, _ = _bindings(tree)
    for fn in _top_functions(tree):
        if fn.name == kernel_name:
            return _signature_of(fn, bound)
    raise ValueError(f"original kernel source defines no top-level function {kernel_name}")


def _kernel_and_helpers(
    tree: ast.Module, bound: dict[str, str], kernel_name: str, expected: KernelSignature
) -> Iterable[Violation]:
    functions = _top_functions(tree)
    kernels = [f for f in functions if f.name == kernel_name]
    for fn in functions:
        kinds = [_decorator_kind(d, bound) for d in fn.decorator_list]
        where = (fn.lineno, fn.col_offset)
        if fn.name != kernel_name:
            if kinds != ["jit"]:
                yield Violation(
                    "top_level",
                    *where,
                    f"defines function {fn.name} without @triton.jit"
                    if "jit" not in kinds
                    else f"decorates helper {fn.name} with more than @triton.jit",
                )
            continue
        for dec, kind in zip(fn.decorator_list, kinds):
            if kind is None:
                yield Violation(
                    "kernel", dec.lineno, dec.col_offset, f"decorates {fn.name} with @{_short(ast.unparse(dec), 60)}"
                )
        if not kinds or kinds[-1] != "jit":
            yield Violation("kernel", *where, f"{fn.name} is not decorated with @triton.jit as its innermost decorator")
        heuristics = [k for k in kinds if k and k.startswith("heuristics:")]
        if len(heuristics) > 1:
            yield Violation("kernel", *where, f"{fn.name} has {len(heuristics)} @triton_heuristics decorators")
        elif expected.has_heuristics and not heuristics:
            yield Violation(
                "kernel",
                *where,
                f"{fn.name} lacks the @triton_heuristics decorator the launcher needs "
                "(keep the original's or pin one with fixed_config)",
            )
        yield from _meta_name_violations(fn, bound)
        yield from _signature_violations(_signature_of(fn, bound), expected)
    if not kernels:
        others = ", ".join(f"{f.name} (line {f.lineno})" for f in functions) or "no functions"
        line = functions[0].lineno if functions else 1
        yield Violation("kernel", line, 0, f"defines no top-level function named {kernel_name} (found: {others})")
    elif len(kernels) > 1:
        yield Violation("kernel", kernels[1].lineno, 0, f"defines {kernel_name} {len(kernels)} times")


def _meta_name_violations(fn: ast.FunctionDef, bound: dict[str, str]) -> Iterable[Violation]:
    """``inductor_meta['kernel_name']`` names the kernel in profiles: it may not claim another name."""
    for dec in fn.decorator_list:
        if not (isinstance(dec, ast.Call) and (_decorator_kind(dec, bound) or "").startswith("heuristics:")):
            continue
        for kw in dec.keywords:
            if kw.arg != "inductor_meta" or not isinstance(kw.value, ast.Dict):
                continue
            for key, value in zip(kw.value.keys, kw.value.values):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "kernel_name"
                    and not (isinstance(value, ast.Constant) and value.value == fn.name)
                ):
                    yield Violation(
                        "kernel",
                        value.lineno,
                        value.col_offset,
                        f"inductor_meta names the kernel {ast.unparse(value)}, not {fn.name!r}",
                    )


def _signature_violations(actual: KernelSignature, expected: KernelSignature) -> Iterable[Violation]:
    name = actual.name
    if actual.varargs:
        yield Violation("signature", actual.line, 0, f"{name} takes {actual.varargs}")
    expected_runtime, actual_runtime = expected.runtime, actual.runtime
    by_name = {p.name: p for p in actual.params}
    if actual_runtime != expected_runtime:
        missing = [n for n in expected_runtime if n not in actual_runtime]
        added = [n for n in actual_runtime if n not in expected_runtime]
        if missing and missing[0] in by_name:
            p = by_name[missing[0]]
            yield Violation(
                "signature", p.line, 0, f"{name} declares {p.name} tl.constexpr; the original passes it at run time"
            )
        elif missing:
            yield Violation(
                "signature", actual.line, 0, f"{name} drops parameter {missing[0]} of the original {expected}"
            )
        elif added:
            p = by_name[added[0]]
            note = " (it was tl.constexpr in the original)" if added[0] in expected.constexprs else ""
            yield Violation(
                "signature", p.line, 0, f"{name} adds parameter {added[0]} without tl.constexpr and a default{note}"
            )
        else:
            yield Violation(
                "signature",
                actual.line,
                0,
                f"{name} takes ({', '.join(actual_runtime)}) in that order; "
                f"the original takes ({', '.join(expected_runtime)})",
            )
        return
    leading = actual.params[: len(actual_runtime)]
    if any(p.constexpr for p in leading):
        p = next(p for p in leading if p.constexpr)
        yield Violation(
            "signature", p.line, 0, f"{name} puts constexpr parameter {p.name} before pointer and numel parameters"
        )
    for p in actual.params:
        if p.constexpr and p.name not in expected.constexprs and not p.has_default:
            yield Violation("signature", p.line, 0, f"{name} adds constexpr parameter {p.name} without a default")


# --------------------------------------------------------------------------------------
# The gate
# --------------------------------------------------------------------------------------


@dataclass
class _Analysis:
    tree: ast.Module
    walker: _Walker
    access: AccessFacts


def _analyze(source: str, original_imports: set[str], original_paths: set[str]) -> _Analysis:
    tree = ast.parse(source)
    walker = _Walker(tree, original_imports, original_paths)
    walker.visit(tree)
    return _Analysis(tree, walker, access_facts(tree, walker.bound))


def _fail(violations: list[Violation], **extra: object) -> Verdict:
    ordered = sorted(set(violations), key=lambda v: (PRIORITY[v.rule], v.line, v.col, v.construct))
    primary = ordered[0]
    reason = primary.message
    if len(ordered) > 1:
        reason += f" (and {len(ordered) - 1} more finding{'s' if len(ordered) > 2 else ''})"
    return Verdict(
        "static", False, reason, {"rule": primary.rule, "violations": [v.to_dict() for v in ordered], **extra}
    )


def _shape_violations(analysis: _Analysis, trusted_paths: set[str]) -> list[Violation]:
    """Everything the candidate's module alone shows: forbidden constructs and the module's shape."""
    tree, walker = analysis.tree, analysis.walker
    return [
        *walker.violations,
        *_top_level(tree, walker.bound),
        *import_time_violations(tree, walker.bound),
        *body_violations(tree, walker.bound, trusted_paths),
        *clock_string_violations(tree),
    ]


def _candidate_violations(
    source: str, original: _Analysis, kernel_name: str, expected: KernelSignature
) -> list[Violation]:
    candidate = _analyze(source, original.walker.imports, original.walker.paths)
    walker = candidate.walker
    # A construct Inductor itself emitted in the original (a new helper call, a profiler
    # import) is trusted verbatim: the candidate is never held to more than its original.
    trusted = {(v.rule, v.construct) for v in _shape_violations(original, set())}
    violations = [
        v for v in _shape_violations(candidate, original.walker.paths) if (v.rule, v.construct) not in trusted
    ]
    violations += [v for token, v in walker.tokens.items() if token not in original.walker.tokens]
    violations += access_violations(candidate.tree, walker.bound, original.access)
    violations += _kernel_and_helpers(candidate.tree, walker.bound, kernel_name, expected)
    return violations


def _guarded(source: str, run: Callable[[], list[Violation]], kernel_name: str) -> Verdict | list[Violation]:
    if len(source) > MAX_SOURCE_CHARS:
        return _fail([Violation("size", 1, 0, f"source is {len(source):,} characters (limit {MAX_SOURCE_CHARS:,})")])
    try:
        return run()
    except SyntaxError as exc:
        return _fail([Violation("syntax", exc.lineno or 1, max((exc.offset or 1) - 1, 0), f"syntax error: {exc.msg}")])
    except ValueError as exc:  # e.g. null bytes
        return _fail([Violation("syntax", 1, 0, f"unparsable source: {exc}")])
    except RecursionError:
        return _fail([Violation("size", 1, 0, "source nests too deeply to analyse")])


def check_static(candidate_source: str, *, kernel_name: str, original_source: str) -> Verdict:
    """Gate 1: may ``candidate_source`` stand in for ``kernel_name`` of ``original_source``?

    Reads the syntax tree only; nothing is imported or executed. Raises
    ``ValueError`` only when the *original* (trusted) source is unusable.
    """
    expected = kernel_signature(original_source, kernel_name)
    original = _analyze(original_source, set(), set())
    found = _guarded(
        candidate_source, lambda: _candidate_violations(candidate_source, original, kernel_name, expected), kernel_name
    )
    if isinstance(found, Verdict):
        return found
    if found:
        return _fail(found, kernel=kernel_name)
    return Verdict(
        "static",
        True,
        f"static checks passed for {expected.name}; {len(RULES)} rules, signature matches the original",
        {"kernel": kernel_name, "signature": str(expected), "rules": list(RULES)},
    )


CANDIDATE_ONLY_RULES = tuple(r for r in RULES if r not in ("precision", "mask", "inline_asm", "signature"))


def check_static_candidate(candidate_source: str, *, kernel_name: str) -> Verdict:
    """The part of gate 1 that needs no original: forbidden constructs and the module's shape.

    For callers that must refuse a candidate before the original kernel is known
    (before a capture is paid for, before an exported artifact is compiled). Rules
    relative to the original (precision, masks, inline asm, signature) are left to
    :func:`check_static`, which must still run once the original is known. A construct
    only Inductor's own original would vouch for is refused here.
    """

    def run() -> list[Violation]:
        analysis = _analyze(candidate_source, set(), set())
        found = _shape_violations(analysis, set())
        functions = [f for f in _top_functions(analysis.tree) if f.name == kernel_name]
        if not functions:
            found.append(Violation("kernel", 1, 0, f"defines no top-level function named {kernel_name}"))
        return [v for v in found if v.rule in CANDIDATE_ONLY_RULES]

    found = _guarded(candidate_source, run, kernel_name)
    if isinstance(found, Verdict):
        return found
    if found:
        return _fail(found, kernel=kernel_name)
    return Verdict(
        "static",
        True,
        f"candidate-only static checks passed for {kernel_name}",
        {"kernel": kernel_name, "rules": list(CANDIDATE_ONLY_RULES)},
    )
