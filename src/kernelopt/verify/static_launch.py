"""Gate 1's check of a kernel file's ``launch``: an allow-list of its statements and expressions.

``launch`` is host code the judge calls with the original's inputs. It may allocate outputs,
take views and sizes of tensors, compute sizes and grids, and launch the file's own
``@triton.jit`` kernels, but compute nothing with PyTorch, write into no tensor and keep nothing
across calls. To tell a size from a tensor, the checker first infers the kind of every local
(number, shape, tensor, grid, ...: a fixpoint over all its assignments, whatever their order),
then walks the body once more to report. The tables it applies are in
:mod:`~kernelopt.verify.static_kernel_file_rules`; what the top level defines (kernels,
constants, functions) comes from :mod:`~kernelopt.verify.static_kernel_file`.

Long because ``launch`` is checked by one visitor over every statement and expression kind it
may hold; splitting it would scatter one traversal (and its kind inference) over several files.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

from kernelopt.verify.static_common import chain, resolve, short
from kernelopt.verify.static_findings import Finding
from kernelopt.verify.static_kernel_file_rules import (
    ALLOCATION_KEYWORDS,
    ALLOCATIONS,
    BUILTINS,
    EXPRESSION_KINDS,
    GRID,
    KIND_WORDS,
    LAUNCH_DENIED_KEYWORDS,
    MATH_CONSTANTS,
    MEMORY_FORMATS,
    META,
    NUMBER,
    OTHER,
    SHAPE,
    SIZE_CALLS,
    STATEMENT_KINDS,
    TENSOR,
    TENSOR_FIELDS,
    TENSOR_QUERIES,
    TENSOR_SIZES,
    TENSOR_VIEWS,
    VALUE_TL_DTYPES,
    Kind,
    finding,
)
from kernelopt.verify.static_rules import PYTHON_MATH, TORCH_DTYPES


def _join(a: Kind, b: Kind) -> Kind:
    """Two values one name may hold: unknown joins anything; two different kinds are a tensor (the safe side)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    return TENSOR


@dataclass
class TopLevel:
    """What the top level defines, for launch's checker (filled by :mod:`~kernelopt.verify.static_kernel_file`)."""

    kernels: set[str] = field(default_factory=set)
    constants: dict[str, str] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)
    launches: list[ast.FunctionDef] = field(default_factory=list)
    skipped: set[int] = field(default_factory=set)  # ids of nodes the original vouches for (not walked)
    found: list[Finding] = field(default_factory=list)


def _assigned_names(fn: ast.FunctionDef) -> set[str]:
    """Names stored anywhere in launch outside lambdas (its locals, as Python sees them)."""
    names: set[str] = set()
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return names


@dataclass
class _Launch:
    """The allow-list of launch, knowing which values are sizes, shapes, tensors or something else."""

    bound: dict[str, str]
    top: TopLevel
    kinds: dict[str, Kind] = field(default_factory=dict)
    scopes: list[set[str]] = field(default_factory=list)  # a grid lambda's parameters
    quiet: bool = False
    found: list[Finding] = field(default_factory=list)

    def check(self, fn: ast.FunctionDef) -> list[Finding]:
        """Infer each local's kind (a fixpoint over all its assignments, whatever their order), then check."""
        args = fn.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
        self.kinds = dict.fromkeys(_assigned_names(fn), None)
        self.kinds.update(dict.fromkeys((a.arg for a in params), TENSOR))  # inputs: tensors, the safe side
        self.quiet = True
        for _ in range(3 * len(self.kinds) + 2):  # each kind only rises: unknown, one kind, tensor
            before = dict(self.kinds)
            self.body(fn.body)
            if self.kinds == before:
                break
        self.quiet = False
        self.body(fn.body)
        return self.found

    def add(self, rule: str, node: ast.AST, construct: str) -> None:
        if not self.quiet:
            self.found.append(finding(rule, node, construct))

    def local(self, name: str) -> bool:
        return name in self.kinds or any(name in scope for scope in self.scopes)

    def module_path(self, node: ast.expr) -> str | None:
        parts = chain(node)
        if not parts or parts[0] not in self.bound or self.local(parts[0]):
            return None
        return resolve(".".join([self.bound[parts[0]], *parts[1:]]))

    def kernel(self, node: ast.expr) -> str | None:
        """The file's kernel ``node`` names (not shadowed by a local), or None."""
        if isinstance(node, ast.Name) and node.id in self.top.kernels and not self.local(node.id):
            return node.id
        return None

    def is_launch(self, node: ast.Call) -> bool:
        return isinstance(node.func, ast.Subscript) and self.kernel(node.func.value) is not None

    # -- statements -----------------------------------------------------------------------

    def body(self, statements: Iterable[ast.stmt]) -> None:
        for statement in statements:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return  # a docstring
            if isinstance(value, ast.Call):
                self.call(value, statement=True)
                return
            self.expr(value)
            self.add("statement", node, f"the bare expression {short(ast.unparse(value), 60)}")
        elif isinstance(node, ast.Assign):
            kind = self.grid(node.value) if isinstance(node.value, ast.Lambda) else self.expr(node.value)
            for target in node.targets:
                self.store(target, node.value, kind)
        elif isinstance(node, ast.AugAssign):
            self.augmented(node)
        elif isinstance(node, ast.If):
            self.truth(node.test)
            self.body(node.body)
            self.body(node.orelse)
        elif isinstance(node, ast.For):
            self.loop(node)
        elif isinstance(node, ast.Assert):
            self.truth(node.test)
            if node.msg is not None:
                self.expr(node.msg)
        elif isinstance(node, ast.Return):
            self.returned(node)
        elif not isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            what = STATEMENT_KINDS.get(type(node), type(node).__name__)
            self.add("statement", node, what)

    def store(self, target: ast.expr, value: ast.expr, kind: Kind) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target, kind)
        elif isinstance(target, (ast.Tuple, ast.List)):
            names = [n for n in target.elts if isinstance(n, ast.Name)]
            if len(names) != len(target.elts):
                self.add("statement", target, f"unpacking into {short(ast.unparse(target), 60)}")
                return
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(names):
                if any(isinstance(e, ast.Starred) for e in value.elts):
                    self.add("statement", target, f"unpacking {short(ast.unparse(value), 60)}")
                kinds = [self.expr_kind(e) for e in value.elts]
            elif kind == SHAPE:
                kinds = [NUMBER] * len(names)
            elif kind is None:
                kinds = [None] * len(names)
            else:
                rule = "torch_compute" if kind == TENSOR else "expression"
                self.add(rule, target, f"unpacks {short(ast.unparse(value), 60)} ({KIND_WORDS[kind]})")
                kinds = [TENSOR] * len(names)
            for name, item in zip(names, kinds):
                self.assign_name(name, item)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            self.expr(target.value)
            self.add("mutation", target, f"writes {short(ast.unparse(target), 60)}")
        else:
            self.add("statement", target, f"an assignment to {short(ast.unparse(target), 60)}")

    def expr_kind(self, node: ast.expr) -> Kind:
        """The kind of an element already checked as part of its tuple (no second round of findings)."""
        quiet, self.quiet = self.quiet, True
        try:
            return self.expr(node)
        finally:
            self.quiet = quiet

    def assign_name(self, target: ast.Name, kind: Kind) -> None:
        name = target.id
        if name in self.bound or name in self.top.kernels or name in self.top.functions or name in BUILTINS:
            self.add("name", target, f"assigns {name}, which names a module, a kernel, a function or a builtin")
        if self.quiet and name in self.kinds:
            self.kinds[name] = _join(self.kinds[name], kind)

    def augmented(self, node: ast.AugAssign) -> None:
        target = node.target
        if not isinstance(target, ast.Name):
            if isinstance(target, (ast.Subscript, ast.Attribute)):
                self.expr(target.value)
            self.expr(node.value)
            self.add("mutation", node, f"writes {short(ast.unparse(target), 60)} in place")
            return
        current = self.name(ast.Name(id=target.id, ctx=ast.Load(), lineno=node.lineno))
        if current == TENSOR:
            self.expr(node.value)
            self.add("mutation", node, f"{short(ast.unparse(node), 60)} writes tensor {target.id} in place")
            return
        self.assign_name(target, self.binop(node, current, self.expr(node.value)))

    def loop(self, node: ast.For) -> None:
        it = node.iter
        args = (
            it.args
            if isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id == "range"
            and not self.local("range")
            and 1 <= len(it.args) <= 3
            and not it.keywords
            and not any(isinstance(a, ast.Starred) for a in it.args)
            else None
        )
        if args is None or not isinstance(node.target, ast.Name) or node.orelse:
            self.add("statement", node, f"for {short(ast.unparse(node.target), 30)} in {short(ast.unparse(it), 50)}")
            self.expr(it)
        else:
            for arg in args:
                self.need(arg, self.expr(arg), (NUMBER,), "range() of")
        if isinstance(node.target, ast.Name):
            self.assign_name(node.target, NUMBER)
        self.body(node.body)
        self.body(node.orelse)

    def returned(self, node: ast.Return) -> None:
        value = node.value
        items = value.elts if isinstance(value, ast.Tuple) else [value] if value is not None else []
        if not items or not all(isinstance(i, ast.Name) and i.id in self.kinds for i in items):
            shown = short(ast.unparse(value), 60) if value is not None else "nothing"
            self.add("return", node, f"returns {shown}, not a local or a tuple of locals")
        if value is not None:
            self.expr(value)

    # -- expressions ----------------------------------------------------------------------

    def need(self, node: ast.expr, kind: Kind, allowed: tuple[str, ...], what: str) -> None:
        """``kind`` must be one of ``allowed``: a tensor where it is not is PyTorch work."""
        if kind is None or kind in allowed:
            return
        if kind == TENSOR:
            self.add("torch_compute", node, f"{what} tensor {short(ast.unparse(node), 50)}")
        else:
            self.add("expression", node, f"{what} {short(ast.unparse(node), 50)} ({KIND_WORDS[kind]})")

    def truth(self, node: ast.expr) -> Kind:
        kind = self.expr(node)
        self.need(node, kind, (NUMBER, SHAPE, OTHER), "tests the truth of")
        return kind

    def expr(self, node: ast.expr) -> Kind:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)):
                return NUMBER
            if node.value is None or isinstance(node.value, str):
                return OTHER
            self.add("expression", node, f"the literal {short(repr(node.value), 40)}")
            return OTHER
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node, self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp):
            kind = self.expr(node.operand)
            if isinstance(node.op, ast.Not):
                self.need(node.operand, kind, (NUMBER, SHAPE, OTHER), "tests the truth of")
                return NUMBER
            self.need(node.operand, kind, (NUMBER,), f"{type(node.op).__name__.lower()} of")
            return NUMBER if kind in (NUMBER, None) else TENSOR
        if isinstance(node, ast.BoolOp):
            result: Kind = None
            for value in node.values:
                result = _join(result, self.truth(value))
            return result
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.IfExp):
            self.truth(node.test)
            return _join(self.expr(node.body), self.expr(node.orelse))
        if isinstance(node, (ast.Tuple, ast.List)):
            return self.sequence(node.elts)
        if isinstance(node, ast.Lambda):
            self.add("code_shape", node, "a lambda that is not a launch's grid")
            return GRID
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            self.add("code_shape", node, type(node).__name__.lower())
            return TENSOR
        what = EXPRESSION_KINDS.get(type(node), type(node).__name__)
        self.add("expression", node, f"{what}: {short(ast.unparse(node), 60)}")
        return TENSOR

    def name(self, node: ast.Name) -> Kind:
        name = node.id
        if any(name in scope for scope in self.scopes):
            return META
        if name in self.kinds:
            kind = self.kinds[name]
            return kind if kind is not None or self.quiet else TENSOR
        constant = self.top.constants.get(name)
        if constant == "dict":
            self.add("global_state", node, f"reads the module-level dict {name}")
            return None  # refused already: what is made of it adds nothing
        if constant is not None:
            return constant
        if name in self.top.kernels:
            self.add("kernel_launch", node, f"uses kernel {name} as a value, not as {name}[grid](...)")
        elif name in self.bound:
            self.add("name", node, f"uses module {name} as a value")
        elif name in self.top.functions:
            self.add("name", node, f"uses the top-level function {name}")
        elif name in BUILTINS:
            self.add("name", node, f"uses builtin {name} as a value")
        else:
            self.add("name", node, f"{name} is not a parameter, a local, a module, a kernel or a constant")
        return TENSOR

    def attribute(self, node: ast.Attribute) -> Kind:
        path = self.module_path(node)
        if path is not None:
            return self.module_value(node, path)
        kernel = self.kernel(node.value)
        if kernel is not None:
            self.add(
                "kernel_launch", node, f"uses {kernel}.{node.attr}; a kernel is only launched, {kernel}[grid](...)"
            )
            return OTHER
        base = self.expr(node.value)
        if base in (TENSOR, None):
            if node.attr in TENSOR_FIELDS:
                return TENSOR_FIELDS[node.attr]
            self.add("torch_compute", node, f"reads .{node.attr} of tensor {short(ast.unparse(node.value), 50)}")
            return TENSOR
        rule = "kernel_launch" if base == META else "expression"
        self.add(rule, node, f"reads .{node.attr} of {short(ast.unparse(node.value), 50)} ({KIND_WORDS[base]})")
        return OTHER

    def module_value(self, node: ast.expr, path: str) -> Kind:
        root, _, attr = path.rpartition(".")
        if root == "torch" and (attr in TORCH_DTYPES or attr in MEMORY_FORMATS):
            return OTHER
        if root == "triton.language" and attr in VALUE_TL_DTYPES:
            return OTHER
        if root == "math" and attr in MATH_CONSTANTS:
            return NUMBER
        written = ast.unparse(node)
        shown = written if written == path else f"{written} ({path})"
        self.add("torch_compute" if path.split(".")[0] == "torch" else "expression", node, f"uses {shown}")
        return OTHER

    def subscript(self, node: ast.Subscript) -> Kind:
        base = self.expr(node.value)
        index = node.slice
        if base == META:
            if not (isinstance(index, ast.Constant) and isinstance(index.value, str)):
                self.add("kernel_launch", node, f"reads {short(ast.unparse(node), 50)}, not meta['NAME']")
            return NUMBER
        if base == TENSOR:  # refused whatever the index
            self.add("torch_compute", node, f"indexes tensor {short(ast.unparse(node), 60)}")
            return TENSOR
        if isinstance(index, ast.Slice):
            for bound_ in (index.lower, index.upper, index.step):
                if bound_ is not None:
                    self.need(bound_, self.expr(bound_), (NUMBER,), "slices with")
            kind: Kind = SHAPE
        else:
            self.need(index, self.expr(index), (NUMBER,), "indexes with")
            kind = NUMBER
        if base not in (SHAPE, None):
            self.add("expression", node, f"indexes {short(ast.unparse(node.value), 50)} ({KIND_WORDS[base]})")
            return OTHER
        return kind if base is not None else None

    def sequence(self, items: list[ast.expr]) -> Kind:
        kinds: list[Kind] = []
        for item in items:
            if isinstance(item, ast.Starred):
                kind = self.expr(item.value)
                self.need(item.value, kind, (SHAPE,), "unpacks")
                kinds.append(SHAPE if kind in (SHAPE, None) else TENSOR)
            else:
                kinds.append(self.expr(item))
        if None in kinds:
            return None
        return SHAPE if all(k in (NUMBER, SHAPE) for k in kinds) else TENSOR

    def binop(self, node: ast.BinOp | ast.AugAssign, a: Kind, b: Kind) -> Kind:
        shown = short(ast.unparse(node), 60)
        if TENSOR in (a, b):
            self.add("torch_compute", node, f"arithmetic on a tensor: {shown}")
            return TENSOR
        if a is None or b is None:
            return None
        op = node.op
        if a == b == NUMBER:
            return NUMBER
        if (isinstance(op, ast.Add) and a == b == SHAPE) or (isinstance(op, ast.Mult) and {a, b} == {SHAPE, NUMBER}):
            return SHAPE
        self.add("expression", node, f"arithmetic on {KIND_WORDS[a]} and {KIND_WORDS[b]}: {shown}")
        return OTHER

    def compare(self, node: ast.Compare) -> Kind:
        kinds = [self.expr(node.left), *(self.expr(c) for c in node.comparators)]
        for op, (a, b) in zip(node.ops, zip(kinds, kinds[1:])):
            if not isinstance(op, (ast.Is, ast.IsNot)) and TENSOR in (a, b):
                self.add("torch_compute", node, f"compares a tensor: {short(ast.unparse(node), 60)}")
                break
        return NUMBER

    def arguments(self, node: ast.Call) -> list[Kind]:
        kinds = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                kind = self.expr(arg.value)
                self.need(arg.value, kind, (SHAPE,), "unpacks")
                kinds.append(kind)
            else:
                kinds.append(self.expr(arg))
        for kw in node.keywords:
            self.expr(kw.value)
            if kw.arg is None:
                self.add("expression", kw.value, f"passes **{short(ast.unparse(kw.value), 50)}")
        return kinds

    # -- calls ----------------------------------------------------------------------------

    def call(self, node: ast.Call, statement: bool = False) -> Kind:
        func = node.func
        if self.is_launch(node):
            self.launch(node)
            if not statement:
                self.add("kernel_launch", node, f"uses the result of launching {ast.unparse(func)}")
            return OTHER
        if isinstance(func, ast.Name):
            return self.named_call(node, func.id)
        if isinstance(func, ast.Attribute):
            path = self.module_path(func)
            return self.module_call(node, path) if path is not None else self.method(node, func)
        self.arguments(node)
        self.add("launch_call", node, f"calls the result of {short(ast.unparse(func), 60)}")
        return TENSOR

    def named_call(self, node: ast.Call, name: str) -> Kind:
        if self.local(name) or name not in BUILTINS or name == "range":
            self.arguments(node)
            if self.local(name):
                self.add("launch_call", node, f"calls the local value {name}()")
            elif name in self.top.kernels:
                self.add("kernel_launch", node, f"calls kernel {name}() directly, not as {name}[grid](...)")
            elif name in self.top.functions:
                self.add("launch_call", node, f"calls {name}(), a top-level function that is not a kernel")
            elif name == "range":
                self.add("launch_call", node, "calls range() outside a for loop's header")
            else:
                self.add("launch_call", node, f"calls {name}()")
            return TENSOR
        kinds = self.arguments(node)
        if node.keywords:
            self.add("launch_call", node, f"calls {name}() with keywords")
        if len(kinds) != 1 and name != "min" and name != "max":
            self.add("launch_call", node, f"calls {name}() with {len(kinds)} arguments")
        if name == "len":
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (SHAPE, TENSOR, OTHER), "len() of")
            return NUMBER
        if name == "int":
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (NUMBER,), "int() reads the value of")
            return NUMBER
        if name == "tuple":
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (SHAPE,), "tuple() iterates over")
            return SHAPE
        allowed = (SHAPE,) if len(kinds) == 1 else (NUMBER,)  # max(shape) or max(a, b, ...)
        for arg, kind in zip(node.args, kinds):
            self.need(arg, kind, allowed, f"{name}() of")
        return NUMBER

    def module_call(self, node: ast.Call, path: str) -> Kind:
        written = ast.unparse(node.func)
        shown = written if written == path else f"{written} ({path})"
        kinds = self.arguments(node)
        if path in ALLOCATIONS:
            self.allocation(node, ALLOCATIONS[path], kinds, shown)
            return TENSOR
        if path in SIZE_CALLS or (path.startswith("math.") and path[5:] in PYTHON_MATH - MATH_CONSTANTS):
            if node.keywords or (path in SIZE_CALLS and len(kinds) != SIZE_CALLS[path]):
                self.add("launch_call", node, f"calls {shown} with {len(kinds)} arguments and keywords")
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (NUMBER,) if path in SIZE_CALLS else (NUMBER, SHAPE), f"{written}() of")
            return NUMBER
        rule = "torch_compute" if path.split(".")[0] == "torch" else "launch_call"
        self.add(rule, node, f"calls {shown}")
        return TENSOR

    def allocation(self, node: ast.Call, form: str, kinds: list[Kind], shown: str) -> None:
        if form == "like":
            if len(kinds) != 1:
                self.add("launch_call", node, f"calls {shown} with {len(kinds)} positional arguments")
            for arg, kind in zip(node.args[:1], kinds):
                self.need(arg, kind, (TENSOR,), f"{shown} of")
        elif form == "strided":
            if len(kinds) != 2:
                self.add("launch_call", node, f"calls {shown} with {len(kinds)} positional arguments")
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (SHAPE,), f"{shown} of")
        else:
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (NUMBER, SHAPE), f"{shown} of")
        for kw in node.keywords:
            if kw.arg == "out":
                self.add("mutation", kw.value, f"{shown} writes into out={short(ast.unparse(kw.value), 40)}")
            elif kw.arg not in ALLOCATION_KEYWORDS:
                self.add("launch_call", kw.value, f"{shown} with {kw.arg}=")
            else:
                self.need(kw.value, self.expr_kind(kw.value), (OTHER,), f"{shown} with {kw.arg}=")

    def method(self, node: ast.Call, func: ast.Attribute) -> Kind:
        attr = func.attr
        kernel = self.kernel(func.value)
        if kernel is not None:
            self.arguments(node)
            self.add("kernel_launch", node, f"calls {kernel}.{attr}(); a kernel is only launched, {kernel}[grid](...)")
            return OTHER
        receiver = self.expr(func.value)
        kinds = self.arguments(node)
        shown = short(ast.unparse(func), 60)
        if attr.endswith("_") and not attr.endswith("__"):
            self.add("mutation", node, f"calls the in-place method {shown}()")
            return TENSOR
        if receiver not in (TENSOR, None):
            rule = "kernel_launch" if receiver == META else "launch_call"
            self.add(rule, node, f"calls {shown}() of {KIND_WORDS[receiver]}")
            return TENSOR
        if attr not in TENSOR_QUERIES | TENSOR_SIZES | TENSOR_VIEWS:
            self.add("torch_compute", node, f"calls {shown}(), not an allow-listed tensor method")
            return TENSOR
        for arg, kind in zip(node.args, kinds):
            self.need(arg, kind, (NUMBER, SHAPE, OTHER), f"{shown}() with")
        for kw in node.keywords:
            self.need(kw.value, self.expr_kind(kw.value), (NUMBER, SHAPE, OTHER), f"{shown}() with")
        if attr in TENSOR_SIZES:
            return NUMBER if node.args else SHAPE
        return NUMBER if attr in TENSOR_QUERIES else TENSOR

    def launch(self, node: ast.Call) -> None:
        func = node.func
        assert isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name)
        kernel, grid = func.value.id, func.slice
        kind = self.grid(grid) if isinstance(grid, ast.Lambda) else self.expr(grid)
        if kind not in (SHAPE, GRID, None):
            self.add(
                "kernel_launch", grid, f"launches {kernel} on grid {short(ast.unparse(grid), 50)} ({KIND_WORDS[kind]})"
            )
        for arg in node.args:
            value = arg.value if isinstance(arg, ast.Starred) else arg
            kind = self.expr(value)
            if isinstance(arg, ast.Starred):
                self.need(value, kind, (SHAPE,), "unpacks")
            elif kind in (GRID, META):
                self.add("kernel_launch", arg, f"passes {short(ast.unparse(arg), 50)} ({KIND_WORDS[kind]}) to {kernel}")
        for kw in node.keywords:
            kind = self.expr(kw.value)
            if kw.arg is None or kw.arg.startswith("_") or kw.arg in LAUNCH_DENIED_KEYWORDS:
                self.add("kernel_launch", kw.value, f"launches {kernel} with {short(ast.unparse(kw), 50)}")
            elif kind in (GRID, META):
                self.add("kernel_launch", kw.value, f"passes {kw.arg}= ({KIND_WORDS[kind]}) to {kernel}")

    def grid(self, node: ast.Lambda) -> Kind:
        """``lambda meta: (sizes...)``: one parameter, read only as ``meta["NAME"]``."""
        args = node.args
        if len(args.args) != 1 or args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg or args.defaults:
            self.add("kernel_launch", node, f"the grid lambda takes ({ast.unparse(args)}), not one parameter meta")
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
        self.scopes.append({a.arg for a in every})
        try:
            kind = self.expr(node.body)
        finally:
            self.scopes.pop()
        if kind not in (SHAPE, None):
            self.add("kernel_launch", node.body, f"the grid lambda returns {short(ast.unparse(node.body), 50)}")
        return GRID


def launch_findings(fn: ast.FunctionDef, bound: dict[str, str], top: TopLevel) -> list[Finding]:
    """Every broken rule in ``launch`` (``fn``), given the file's import bindings and top level."""
    return _Launch(bound, top).check(fn)
