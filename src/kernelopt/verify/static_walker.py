"""Gate 1's walker: one pass over a module's syntax tree, applying the rule tables.

Every node is visited once. Statement and expression kinds, builtins, attribute
names and imports are looked up in :mod:`kernelopt.verify.static_rules`; every
dotted chain rooted at an imported name is resolved (aliases, Inductor's
re-exports) and checked against the module policy, unless the original kernel
uses the same path. On the way it collects what the checks after it need: the
import bindings, the resolved paths and imports used (so the original's can be
trusted in its candidate), and the precision tokens with their first use.

Long because the walker is one visitor over every node kind a module can hold;
splitting it would scatter one traversal over several files.
"""

from __future__ import annotations

import ast

from kernelopt.verify.static_common import Violation, bindings, chain, check_path, policy_key, resolve
from kernelopt.verify.static_rules import (
    ALLOWED_DUNDER_NAMES,
    APPROXIMATE_FUNCTIONS,
    APPROXIMATE_LOWERINGS,
    DEVICE_CLOCK_NAMES,
    FORBIDDEN_ATTRIBUTES,
    FORBIDDEN_BUILTINS,
    FORBIDDEN_NODES,
    IMPORT_HINTS,
    LOW_PRECISION_NAMES,
    LOW_PRECISION_PREFIXES,
    MODULE_PATHS,
    REDUCED_PRECISION_MODES,
)


def _import_allowed(path: str, original_imports: set[str]) -> bool:
    if path in original_imports:
        return True
    key = policy_key(path)
    if key is None or key == "torch":
        return False
    return check_path(path, called=False, written=path) is None


class Walker(ast.NodeVisitor):
    """Visits every node once, applying the rule tables; collects violations and precision tokens."""

    def __init__(self, tree: ast.AST, original_imports: set[str], original_paths: set[str]) -> None:
        self.bound, self.module_names = bindings(tree)
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
            self._maximalchain(node)
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
            parts = chain(node.value)
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
                    self._maximalchain(node)
                token = precision_token_for_name(self.bound[name].rsplit(".", 1)[-1])
                if token:
                    self._token(token, node, f"uses {name}")

    def _maximalchain(self, node: ast.expr) -> None:
        """Check a whole dotted chain rooted at an imported name (``torch.nn.functional.gelu``)."""
        parts = chain(node)
        if not parts or parts[0] not in self.bound:
            return
        written = ".".join(parts)
        path = resolve(".".join([self.bound[parts[0]], *parts[1:]]))
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
        if path in self.original_paths and policy_key(path) != "torch":
            return  # the original kernel uses it: trusted
        finding = check_path(path, called=called, written=written)
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


def precision_token_for_name(name: str) -> str | None:
    """The precision token an identifier names (``float16``, ``fast_expf``, ...), or None."""
    if name in LOW_PRECISION_NAMES:
        return LOW_PRECISION_NAMES[name]
    if name.startswith(LOW_PRECISION_PREFIXES):
        return name
    if name.startswith("fast_") or name in APPROXIMATE_FUNCTIONS:
        return name
    return None


def precision_token_for_string(value: str) -> str | None:
    """The precision token a string literal names (``'*fp16'``, ``'tf32'``, ...), or None."""
    text = value.strip().lstrip("*")
    if text in REDUCED_PRECISION_MODES:
        return text
    if text in LOW_PRECISION_NAMES:
        return LOW_PRECISION_NAMES[text]
    if text.startswith(LOW_PRECISION_PREFIXES) and text.isidentifier():
        return text
    return None
