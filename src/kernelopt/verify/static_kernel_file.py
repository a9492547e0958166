"""Gate 1 for a standalone Triton kernel file: its ``@triton.jit`` kernels and the ``launch`` that runs them.

A kernel-file candidate is a whole module in the original file's shape: imports, literal
constants, ``@triton.jit`` kernels and one ``launch(...)`` that the judge calls on the original's
``get_inputs()`` and compares with the original's ``reference``. All of it is untrusted code that
runs in the evaluating process when it is imported and called, so this gate reads its syntax
tree first and accepts only what a kernel file needs:

* the top level: ``torch``, ``triton``, ``triton.language`` and ``math`` imports (and the triton
  modules the original imports), literal constants, kernels under ``@triton.jit`` (with a literal-only ``@triton.autotune``, and
  ``@triton.heuristics`` only as the original has it: its lambdas run on the host), one plain
  ``launch`` with the original's parameters, and ``reference`` / ``get_inputs`` only unchanged;
* the kernels: the Inductor kernel gate's own checks (:mod:`~kernelopt.verify.static_walker`,
  :mod:`~kernelopt.verify.static_kernel`), run on a module of the file's imports and kernels,
  with the original file's kernels as the trusted original (their unmasked accesses, inline
  assembly and module paths);
* ``launch``: an allow-list of statements and expressions that tracks which values are sizes
  and which are tensors, so it can allocate, take views and sizes, and launch the file's own
  kernels, but compute nothing with PyTorch, write into no tensor and keep nothing across calls;
* everywhere else: the walker's rules against frames, dynamic code, streams, threads, files.

What source cannot show (a wrong kernel, a shape shortcut) is left to the correctness gate.
Long because ``launch`` is checked by one visitor over every expression kind it may hold.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from kernelopt.verify.static_common import Violation, bindings, chain, is_constexpr_annotation, path_of, resolve, short
from kernelopt.verify.static_findings import Finding, findings_verdict
from kernelopt.verify.static_kernel import (
    AccessFacts,
    access_facts,
    access_violations,
    body_violations,
    clock_string_violations,
    import_time_violations,
)
from kernelopt.verify.static_rules import (
    CONSTEXPR_PATHS,
    FORBIDDEN_NODES,
    IMPORT_HINTS,
    JIT_KEYWORDS,
    MAX_SOURCE_CHARS,
    PYTHON_MATH,
    RULES,
    TL_DTYPES,
    TORCH_DTYPES,
)
from kernelopt.verify.static_walker import Walker
from kernelopt.verify.verdict import Verdict

# The walker's rules that hold anywhere in the file, host code included.
_ANYWHERE = (
    "monkey_patch",
    "dynamic_code",
    "introspection",
    "device_clock",
    "threads",
    "timing",
    "io",
    "fallback",
    "class_def",
    "global_state",
    "context_manager",
)
KERNEL_FILE_RULES: dict[str, str] = {
    "size": "the source is too large to check",
    "syntax": "the candidate must be Python that parses",
    **{rule: RULES[rule] for rule in _ANYWHERE},
    "torch_compute": (
        "the work runs in the file's Triton kernels: no PyTorch calls or tensor methods beyond the "
        "allow-listed allocations, views and size queries, and no arithmetic, comparison, truth test "
        "or indexing on tensors"
    ),
    "mutation": "launch may not write into tensors: no in-place methods, subscript or attribute writes, out=",
    "code_shape": "a candidate may not define lambdas (but launch's `lambda meta:` grid), generators or async code",
    "import": "allowed imports: torch, triton, triton.language, math, and the triton modules the original imports",
    "top_level": (
        "the top level may hold only imports, literal constants, @triton.jit functions, launch, "
        "and reference / get_inputs as the original has them"
    ),
    "entry": "exactly one plain `def launch` taking the original's parameters, in order",
    "original_only": "reference and get_inputs are the original's: a candidate may repeat them unchanged or omit them",
    "autotune": (
        "@triton.autotune takes only literal configs (triton.Config of a literal dict, num_warps, num_stages, "
        "num_ctas, maxnreg), a key of strings, reset_to_zero / restore_value of strings; no hooks or pruning"
    ),
    "heuristics": "@triton.heuristics runs its functions on the host: only as the original has it, unchanged",
    "decorator": (
        "a kernel is decorated @triton.jit innermost (with its compile keywords only), under at most "
        "one @triton.autotune and the original's @triton.heuristics"
    ),
    "kernel_launch": (
        "launch starts only the file's own @triton.jit kernels, as a statement K[grid](...), "
        "grid a tuple of sizes or `lambda meta: (...)` reading only meta['NAME']"
    ),
    "launch_call": (
        "launch may call only torch.empty / empty_like / empty_strided / zeros / zeros_like, triton.cdiv, "
        "triton.next_power_of_2, math functions of sizes, min, max, len, int, tuple, range, "
        "and the allow-listed tensor methods"
    ),
    "name": (
        "launch may name only its parameters and locals, the imported modules, the file's kernels, "
        "the allowed builtins and literal constants"
    ),
    "expression": (
        "launch builds values only from parameters, locals, literals and constants, with arithmetic and "
        "comparisons on sizes and reads of a tensor's shape, dtype, device, ndim and is_cuda"
    ),
    "statement": (
        "launch may hold only assignments to locals, kernel launches, assert, if/else, for over range(...), and return"
    ),
    "return": "launch returns its locals: a name or a tuple of names",
    **{
        rule: RULES[rule]
        for rule in ("kernel_call", "value_access", "module_access", "import_time", "inline_asm", "mask")
    },
    "precision": "a candidate may not use a lower precision or an approximate mode that the original file does not",
}
PRIORITY = {rule: i for i, rule in enumerate(KERNEL_FILE_RULES)}

ALLOWED_MODULES = frozenset({"torch", "triton", "triton.language", "math"})
TRUSTED_FUNCTIONS = ("reference", "get_inputs")  # the judge takes them from the original
ENTRY = "launch"

# launch: tensor attributes and methods (name -> what they give), calls, builtins.
_NUMBER, _SHAPE, _TENSOR, _OTHER, _GRID, _META = "number", "shape", "tensor", "other", "grid", "meta"
Kind = str | None  # one of the above; None: not known yet (only while kinds are being inferred)
_KIND_WORDS = {
    _NUMBER: "a number",
    _SHAPE: "a shape",
    _TENSOR: "a tensor",
    _OTHER: "a dtype, device, string or None",
    _GRID: "a grid",
    _META: "the grid's meta",
}
TENSOR_FIELDS = {"shape": _SHAPE, "dtype": _OTHER, "device": _OTHER, "ndim": _NUMBER, "is_cuda": _NUMBER}
TENSOR_QUERIES = frozenset({"numel", "dim", "element_size", "is_contiguous"})
TENSOR_SIZES = frozenset({"size", "stride"})  # a number with a dim argument, a shape without
TENSOR_VIEWS = frozenset(
    {
        "contiguous",
        "view",
        "reshape",
        "flatten",
        "unsqueeze",
        "squeeze",
        "t",
        "transpose",
        "permute",
        "expand",
        "as_strided",
    }
)
ALLOCATIONS = {  # resolved path -> what its positional arguments are
    "torch.empty": "sizes",
    "torch.zeros": "sizes",
    "torch.empty_like": "like",
    "torch.zeros_like": "like",
    "torch.empty_strided": "strided",
}
ALLOCATION_KEYWORDS = frozenset({"dtype", "device", "memory_format"})
MEMORY_FORMATS = frozenset({"contiguous_format", "preserve_format", "channels_last", "channels_last_3d"})
SIZE_CALLS = {"triton.cdiv": 2, "triton.next_power_of_2": 1}
MATH_CONSTANTS = frozenset({"pi", "e", "tau", "inf", "nan"})
BUILTINS = frozenset({"min", "max", "len", "int", "tuple", "range"})
LAUNCH_DENIED_KEYWORDS = frozenset({"warmup", "grid", "stream"})
VALUE_TL_DTYPES = TL_DTYPES - {"dtype", "pointer_type", "block_type", "void"}

_CONSTANT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift)
AUTOTUNE_STRINGS = frozenset({"key", "reset_to_zero", "restore_value"})
AUTOTUNE_INTS = frozenset({"warmup", "rep"})
CONFIG_KEYWORDS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})

_EXPRESSION_KINDS: dict[type, str] = {
    ast.JoinedStr: "an f-string",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.NamedExpr: "an assignment expression",
    ast.Slice: "a slice",
    ast.Starred: "an unpacking",
}
_STATEMENT_KINDS: dict[type, str] = {
    ast.While: "a while loop",
    ast.Try: "a try block",
    ast.With: "a with block",
    ast.FunctionDef: "a nested function",
    ast.AsyncFunctionDef: "a nested function",
    ast.ClassDef: "a class definition",
    ast.Import: "an import",
    ast.ImportFrom: "an import",
    ast.Global: "a global declaration",
    ast.Nonlocal: "a nonlocal declaration",
    ast.Delete: "a del statement",
    ast.Raise: "a raise statement",
    ast.AnnAssign: "an annotated assignment",
    ast.AsyncFor: "an async loop",
    ast.AsyncWith: "an async with block",
}


def _found(rule: str, node: ast.AST | None, construct: str) -> Finding:
    return Finding(rule, getattr(node, "lineno", 1), construct, KERNEL_FILE_RULES[rule])


def _from_violation(v: Violation) -> Finding:
    """A finding of the kernel gate's checks, in this gate's terms (its rule ids are this table's)."""
    rule = v.rule if v.rule in KERNEL_FILE_RULES else "top_level"
    return Finding(rule, v.line, v.construct, KERNEL_FILE_RULES[rule])


def _join(a: Kind, b: Kind) -> Kind:
    """Two values one name may hold: unknown joins anything; two different kinds are a tensor (the safe side)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    return _TENSOR


# --------------------------------------------------------------------------------------
# The file's shape: imports, decorators, the kernels' module
# --------------------------------------------------------------------------------------


def _import_bindings(tree: ast.Module) -> dict[str, str]:
    """Names the top-level imports bind -> dotted path (imports elsewhere are refused, never trusted)."""
    imports: list[ast.stmt] = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    return bindings(ast.Module(body=imports, type_ignores=[]))[0]


def _imported_paths(stmt: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(name it binds, what it imports) for each alias of one import statement."""
    if isinstance(stmt, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.name) for a in stmt.names]
    module = "." * stmt.level + (stmt.module or "")
    return [(a.asname or a.name, f"{module}.{a.name}") for a in stmt.names]


def _decorator_path(dec: ast.expr, bound: dict[str, str]) -> str | None:
    return path_of(dec.func if isinstance(dec, ast.Call) else dec, bound)


def _is_kernel(fn: ast.stmt, bound: dict[str, str]) -> bool:
    return isinstance(fn, ast.FunctionDef) and any(_decorator_path(d, bound) == "triton.jit" for d in fn.decorator_list)


def _kernel_functions(tree: ast.Module, bound: dict[str, str]) -> list[ast.FunctionDef]:
    return [s for s in tree.body if isinstance(s, ast.FunctionDef) and _is_kernel(s, bound)]


def _kernel_module(tree: ast.Module, bound: dict[str, str]) -> ast.Module:
    """The file's imports and kernels, each under its ``@triton.jit`` alone: what the kernel gate checks.
    Autotune and heuristics decorators are this gate's to check; the nodes keep their line numbers."""
    body: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            body.append(stmt)
        elif isinstance(stmt, ast.FunctionDef) and _is_kernel(stmt, bound):
            kernel = copy.copy(stmt)
            kernel.decorator_list = [d for d in stmt.decorator_list if _decorator_path(d, bound) == "triton.jit"][-1:]
            body.append(kernel)
    return ast.Module(body=body, type_ignores=[])


@dataclass
class _Kernels:
    """The kernel gate's view of a file's kernels."""

    tree: ast.Module
    walker: Walker
    access: AccessFacts
    shape: list[Violation]


def _kernels(tree: ast.Module, bound: dict[str, str], imports: set[str], paths: set[str]) -> _Kernels:
    module = _kernel_module(tree, bound)
    walker = Walker(module, imports, paths)
    walker.visit(module)
    shape = [
        *walker.violations,
        *import_time_violations(module, walker.bound),
        *body_violations(module, walker.bound, paths),
    ]
    return _Kernels(module, walker, access_facts(module, walker.bound), shape)


@dataclass(frozen=True)
class KernelFileFacts:
    """What the original kernel file vouches for (trusted; it is the problem's own file)."""

    launch: ast.FunctionDef
    trusted_functions: dict[str, str]  # reference / get_inputs -> their syntax tree, dumped
    heuristics: frozenset[str]  # each @triton.heuristics(...) decorator of its kernels, dumped
    imports: frozenset[str]  # the triton modules it imports
    tokens: frozenset[str]  # the precision tokens anywhere in it
    kernels: _Kernels = field(repr=False)
    trusted_kernel_findings: frozenset[tuple[str, str]] = frozenset()
    trusted_clock_strings: frozenset[str] = frozenset()

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(a.arg for a in [*self.launch.args.posonlyargs, *self.launch.args.args])


def kernel_file_facts(original_source: str) -> KernelFileFacts:
    """The facts of the original kernel file (``ValueError`` when it does not parse or has no ``launch``)."""
    try:
        tree = ast.parse(original_source)
    except SyntaxError as exc:
        raise ValueError(f"the original kernel file does not parse: line {exc.lineno}: {exc.msg}") from exc
    launches = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == ENTRY]
    if not launches:
        raise ValueError("the original kernel file defines no launch function")
    bound = _import_bindings(tree)
    trusted = {s.name: ast.dump(s) for s in tree.body if isinstance(s, ast.FunctionDef) and s.name in TRUSTED_FUNCTIONS}
    heuristics = {
        ast.dump(d)
        for s in _kernel_functions(tree, bound)
        for d in s.decorator_list
        if _decorator_path(d, bound) == "triton.heuristics"
    }
    imports = {
        path
        for s in tree.body
        if isinstance(s, (ast.Import, ast.ImportFrom))
        for _, path in _imported_paths(s)
        if path.startswith("triton.")
    }
    everything = Walker(tree, set(), set())
    everything.visit(tree)
    kernels = _kernels(tree, bound, set(), set())
    return KernelFileFacts(
        launches[-1],
        trusted,
        frozenset(heuristics),
        frozenset(imports),
        frozenset(everything.tokens),
        kernels,
        frozenset((v.rule, v.construct) for v in kernels.shape),
        frozenset(v.construct for v in clock_string_violations(tree)),
    )


# --------------------------------------------------------------------------------------
# The top level
# --------------------------------------------------------------------------------------


def _literal_kind(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The kind of a literal constant's value, ``"dict"`` for a dict of literals; None if not a literal."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, int, float)):
            return _NUMBER
        return _OTHER if node.value is None or isinstance(node.value, (str, bytes)) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _NUMBER if _literal_kind(node.operand, bound) == _NUMBER else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, _CONSTANT_OPS):  # N = 64 * 1024 * 1024
        small = not isinstance(node.op, (ast.Pow, ast.LShift)) or (
            isinstance(node.right, ast.Constant) and isinstance(node.right.value, int) and node.right.value <= 64
        )  # no 10 ** 10 ** 10 to hang the import
        numbers = _literal_kind(node.left, bound) == _literal_kind(node.right, bound) == _NUMBER
        return _NUMBER if small and numbers else None
    if isinstance(node, ast.Tuple):
        kinds = [_literal_kind(e, bound) for e in node.elts]
        if None in kinds:
            return None
        return _SHAPE if all(k in (_NUMBER, _SHAPE) for k in kinds) else _OTHER
    if isinstance(node, ast.Dict):
        keys_ok = all(isinstance(k, ast.Constant) for k in node.keys)  # None: ``**x``
        return "dict" if keys_ok and all(_literal_kind(v, bound) for v in node.values) else None
    if (
        isinstance(node, ast.Call)
        and path_of(node.func, bound) in CONSTEXPR_PATHS
        and len(node.args) == 1
        and not node.keywords
    ):
        kind = _literal_kind(node.args[0], bound)
        return kind if kind != "dict" else None
    return None


def _import_findings(stmt: ast.Import | ast.ImportFrom, original_imports: frozenset[str]) -> Iterator[Finding]:
    for _, path in _imported_paths(stmt):
        if path in ALLOWED_MODULES or path in original_imports or path == "__future__.annotations":
            continue
        root = path.lstrip(".").split(".")[0]
        if path.startswith("."):
            why = "a relative import"
        elif path.endswith(".*"):
            why = "a star import"
        elif root in IMPORT_HINTS and root != "torch":
            why = IMPORT_HINTS[root]
        else:
            why = "not on the allow-list"
        yield _found("import", stmt, f"imports {path} ({why})")


def _configs_findings(node: ast.expr, bound: dict[str, str]) -> Iterator[Finding]:
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        yield _found("autotune", node, f"configs={short(ast.unparse(node), 60)}, not a list of triton.Config")
        return
    for config in node.elts:
        shown = short(ast.unparse(config), 60)
        if not (isinstance(config, ast.Call) and path_of(config.func, bound) == "triton.Config"):
            yield _found("autotune", config, f"config {shown} is not triton.Config(...)")
            continue
        meta = config.args[0] if len(config.args) == 1 else None
        if not (
            isinstance(meta, ast.Dict)
            and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in meta.keys)
            and all(_literal_kind(v, bound) == _NUMBER for v in meta.values)
        ):
            yield _found("autotune", config, f"config {shown} does not take one dict of literal numbers")
        for kw in config.keywords:
            literal = isinstance(kw.value, ast.Constant) and (
                isinstance(kw.value.value, int) or (kw.arg == "maxnreg" and kw.value.value is None)
            )
            if kw.arg not in CONFIG_KEYWORDS or not literal:
                yield _found("autotune", kw.value, f"config passes {short(ast.unparse(kw), 60)}")


def _autotune_findings(dec: ast.expr, where: str, bound: dict[str, str]) -> Iterator[Finding]:
    if not isinstance(dec, ast.Call):
        yield _found("autotune", dec, f"@triton.autotune on {where} without configs")
        return
    if len(dec.args) > 2 or any(isinstance(a, ast.Starred) for a in dec.args):
        yield _found("autotune", dec, f"@triton.autotune on {where} takes {len(dec.args)} positional arguments")
    named: dict[str | None, ast.expr] = dict(zip(("configs", "key"), dec.args))
    named.update((k.arg, k.value) for k in dec.keywords)
    for name, value in named.items():
        if name == "configs":
            yield from _configs_findings(value, bound)
        elif name in AUTOTUNE_STRINGS:
            if not (
                isinstance(value, (ast.List, ast.Tuple))
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts)
            ):
                yield _found("autotune", value, f"{name}={short(ast.unparse(value), 60)}, not a list of strings")
        elif name in AUTOTUNE_INTS:
            if not (isinstance(value, ast.Constant) and isinstance(value.value, int)):
                yield _found("autotune", value, f"{name}={short(ast.unparse(value), 60)}, not a literal number")
        else:
            shown = f"**{ast.unparse(value)}" if name is None else f"{name}={short(ast.unparse(value), 50)}"
            yield _found("autotune", value, f"@triton.autotune on {where} passes {shown}")
    if "configs" not in named or "key" not in named:
        yield _found("autotune", dec, f"@triton.autotune on {where} without configs and key")


def _decorator_findings(fn: ast.FunctionDef, bound: dict[str, str], facts: KernelFileFacts) -> Iterator[Finding]:
    """A kernel: ``@triton.jit`` innermost; above it one literal ``@triton.autotune``, the original's heuristics."""
    *outer, inner = fn.decorator_list
    if _decorator_path(inner, bound) != "triton.jit":
        yield _found("decorator", inner, f"{fn.name} is not decorated @triton.jit innermost")
    elif isinstance(inner, ast.Call) and (inner.args or any(k.arg not in JIT_KEYWORDS for k in inner.keywords)):
        yield _found("decorator", inner, f"@{short(ast.unparse(inner), 60)} on {fn.name}")
    autotunes = 0
    for dec in outer:
        path = _decorator_path(dec, bound)
        if path == "triton.autotune":
            autotunes += 1
            yield from _autotune_findings(dec, fn.name, bound)
        elif path == "triton.heuristics":
            if ast.dump(dec) not in facts.heuristics:
                yield _found("heuristics", dec, f"@{short(ast.unparse(dec), 60)} on {fn.name} is not the original's")
        else:
            yield _found("decorator", dec, f"decorates {fn.name} with @{short(ast.unparse(dec), 60)}")
    if autotunes > 1:
        yield _found("autotune", fn, f"{fn.name} is autotuned {autotunes} times")


def _annotation_ok(node: ast.expr) -> bool:
    """Annotations of launch run at import: a dotted name or a string, nothing that calls."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or chain(node) is not None


def _entry_findings(fn: ast.FunctionDef, facts: KernelFileFacts) -> Iterator[Finding]:
    """``launch``: plain, with the original's parameters (names, order, defaults)."""
    args, expected = fn.args, facts.launch.args

    def shape(a: ast.arguments) -> tuple[object, ...]:
        return (
            tuple(x.arg for x in a.posonlyargs),
            tuple(x.arg for x in a.args),
            a.vararg.arg if a.vararg else None,
            tuple(x.arg for x in a.kwonlyargs),
            a.kwarg.arg if a.kwarg else None,
        )

    if shape(args) != shape(expected):
        yield _found(
            "entry", fn, f"launch({ast.unparse(_bare(args))}) for the original's launch({ast.unparse(_bare(expected))})"
        )
    defaults = [ast.dump(d) for d in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]]
    if defaults != [ast.dump(d) for d in [*expected.defaults, *(d for d in expected.kw_defaults if d is not None)]]:
        yield _found("entry", fn, "launch's parameter defaults differ from the original's (they run at import)")
    for dec in fn.decorator_list:
        yield _found("entry", dec, f"decorates launch with @{short(ast.unparse(dec), 60)}")
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
    for node in [*(a.annotation for a in every), fn.returns]:
        if node is not None and not _annotation_ok(node):
            yield _found("entry", node, f"launch's annotation {short(ast.unparse(node), 60)} runs at import")


def _bare(args: ast.arguments) -> ast.arguments:
    """The parameter list without annotations and defaults, for a finding."""
    bare = copy.deepcopy(args)
    for a in [*bare.posonlyargs, *bare.args, *bare.kwonlyargs, *(a for a in (bare.vararg, bare.kwarg) if a)]:
        a.annotation = None
    bare.defaults, bare.kw_defaults = [], [None for _ in bare.kw_defaults]
    return bare


@dataclass
class _TopLevel:
    """What the top level defines, for launch's checker."""

    kernels: set[str] = field(default_factory=set)
    constants: dict[str, str] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)
    launches: list[ast.FunctionDef] = field(default_factory=list)
    skipped: set[int] = field(default_factory=set)  # ids of nodes the original vouches for (not walked)
    found: list[Finding] = field(default_factory=list)


def _top_level(tree: ast.Module, bound: dict[str, str], facts: KernelFileFacts) -> _TopLevel:
    top = _TopLevel()
    first: dict[str, tuple[int, str | None]] = {}

    def bind(name: str, node: ast.stmt, module: str | None = None) -> None:
        """Each name once (``import triton`` and ``import triton.language`` bind the same module), no builtin."""
        if name in BUILTINS:
            top.found.append(_found("top_level", node, f"rebinds the builtin {name}"))
        elif name in first and (module is None or first[name][1] != module):
            top.found.append(_found("top_level", node, f"rebinds {name} (first bound at line {first[name][0]})"))
        first.setdefault(name, (node.lineno, module))

    for index, stmt in enumerate(tree.body):
        if (
            index == 0
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            continue  # the module's docstring
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            top.found.extend(_import_findings(stmt, facts.imports))
            for name, path in _imported_paths(stmt):
                if path != "__future__.annotations":
                    plain = isinstance(stmt, ast.Import) and name == path.split(".")[0]
                    bind(name, stmt, name if plain else path)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            _constant(stmt, bound, top, bind)
        elif isinstance(stmt, ast.FunctionDef):
            bind(stmt.name, stmt)
            _function(stmt, bound, facts, top)
        elif isinstance(stmt, ast.ClassDef):
            top.found.append(_found("class_def", stmt, FORBIDDEN_NODES[ast.ClassDef][1](stmt)))
        elif isinstance(stmt, ast.Expr):
            top.found.append(_found("top_level", stmt, f"runs {short(ast.unparse(stmt), 60)} at module level"))
        else:
            top.found.append(_found("top_level", stmt, f"a top-level {type(stmt).__name__.lower()} statement"))
    if not top.launches:
        top.found.append(_found("entry", None, "the file defines no launch function"))
    return top


def _constant(
    stmt: ast.Assign | ast.AnnAssign, bound: dict[str, str], top: _TopLevel, bind: Callable[[str, ast.stmt], None]
) -> None:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    kind = _literal_kind(stmt.value, bound) if stmt.value is not None else None
    annotated = isinstance(stmt, ast.Assign) or is_constexpr_annotation(stmt.annotation, bound)
    if len(targets) != 1 or not isinstance(targets[0], ast.Name) or kind is None or not annotated:
        top.found.append(
            _found(
                "top_level", stmt, f"assigns {short(ast.unparse(stmt), 60)} at module level (not a literal constant)"
            )
        )
        return
    bind(targets[0].id, stmt)
    top.constants[targets[0].id] = kind


def _function(fn: ast.FunctionDef, bound: dict[str, str], facts: KernelFileFacts, top: _TopLevel) -> None:
    if _is_kernel(fn, bound):
        top.kernels.add(fn.name)
        top.found.extend(_decorator_findings(fn, bound, facts))
        if fn.name == ENTRY:
            top.found.append(_found("entry", fn, "launch is a @triton.jit function"))
        elif fn.name in TRUSTED_FUNCTIONS:
            top.found.append(_found("original_only", fn, f"{fn.name} is a @triton.jit function"))
        return
    top.functions.add(fn.name)
    if fn.name == ENTRY:
        top.launches.append(fn)
        if len(top.launches) > 1:
            top.found.append(_found("entry", fn, f"defines launch {len(top.launches)} times"))
        top.found.extend(_entry_findings(fn, facts))
    elif fn.name in TRUSTED_FUNCTIONS:
        if fn.name not in facts.trusted_functions:
            top.found.append(_found("original_only", fn, f"defines {fn.name}, which the original does not"))
        elif ast.dump(fn) != facts.trusted_functions[fn.name]:
            top.found.append(_found("original_only", fn, f"{fn.name} differs from the original's"))
        else:
            top.skipped.add(id(fn))
    else:
        top.found.append(
            _found("top_level", fn, f"defines {fn.name}, which is neither a @triton.jit function nor launch")
        )


# --------------------------------------------------------------------------------------
# launch
# --------------------------------------------------------------------------------------


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
    top: _TopLevel
    kinds: dict[str, Kind] = field(default_factory=dict)
    scopes: list[set[str]] = field(default_factory=list)  # a grid lambda's parameters
    quiet: bool = False
    found: list[Finding] = field(default_factory=list)

    def check(self, fn: ast.FunctionDef) -> list[Finding]:
        """Infer each local's kind (a fixpoint over all its assignments, whatever their order), then check."""
        args = fn.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
        self.kinds = dict.fromkeys(_assigned_names(fn), None)
        self.kinds.update(dict.fromkeys((a.arg for a in params), _TENSOR))  # inputs: tensors, the safe side
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
            self.found.append(_found(rule, node, construct))

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
            what = _STATEMENT_KINDS.get(type(node), type(node).__name__)
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
            elif kind == _SHAPE:
                kinds = [_NUMBER] * len(names)
            elif kind is None:
                kinds = [None] * len(names)
            else:
                rule = "torch_compute" if kind == _TENSOR else "expression"
                self.add(rule, target, f"unpacks {short(ast.unparse(value), 60)} ({_KIND_WORDS[kind]})")
                kinds = [_TENSOR] * len(names)
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
        if current == _TENSOR:
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
                self.need(arg, self.expr(arg), (_NUMBER,), "range() of")
        if isinstance(node.target, ast.Name):
            self.assign_name(node.target, _NUMBER)
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
        if kind == _TENSOR:
            self.add("torch_compute", node, f"{what} tensor {short(ast.unparse(node), 50)}")
        else:
            self.add("expression", node, f"{what} {short(ast.unparse(node), 50)} ({_KIND_WORDS[kind]})")

    def truth(self, node: ast.expr) -> Kind:
        kind = self.expr(node)
        self.need(node, kind, (_NUMBER, _SHAPE, _OTHER), "tests the truth of")
        return kind

    def expr(self, node: ast.expr) -> Kind:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)):
                return _NUMBER
            if node.value is None or isinstance(node.value, str):
                return _OTHER
            self.add("expression", node, f"the literal {short(repr(node.value), 40)}")
            return _OTHER
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
                self.need(node.operand, kind, (_NUMBER, _SHAPE, _OTHER), "tests the truth of")
                return _NUMBER
            self.need(node.operand, kind, (_NUMBER,), f"{type(node.op).__name__.lower()} of")
            return _NUMBER if kind in (_NUMBER, None) else _TENSOR
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
            return _GRID
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            self.add("code_shape", node, type(node).__name__.lower())
            return _TENSOR
        what = _EXPRESSION_KINDS.get(type(node), type(node).__name__)
        self.add("expression", node, f"{what}: {short(ast.unparse(node), 60)}")
        return _TENSOR

    def name(self, node: ast.Name) -> Kind:
        name = node.id
        if any(name in scope for scope in self.scopes):
            return _META
        if name in self.kinds:
            kind = self.kinds[name]
            return kind if kind is not None or self.quiet else _TENSOR
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
        return _TENSOR

    def attribute(self, node: ast.Attribute) -> Kind:
        path = self.module_path(node)
        if path is not None:
            return self.module_value(node, path)
        kernel = self.kernel(node.value)
        if kernel is not None:
            self.add(
                "kernel_launch", node, f"uses {kernel}.{node.attr}; a kernel is only launched, {kernel}[grid](...)"
            )
            return _OTHER
        base = self.expr(node.value)
        if base in (_TENSOR, None):
            if node.attr in TENSOR_FIELDS:
                return TENSOR_FIELDS[node.attr]
            self.add("torch_compute", node, f"reads .{node.attr} of tensor {short(ast.unparse(node.value), 50)}")
            return _TENSOR
        rule = "kernel_launch" if base == _META else "expression"
        self.add(rule, node, f"reads .{node.attr} of {short(ast.unparse(node.value), 50)} ({_KIND_WORDS[base]})")
        return _OTHER

    def module_value(self, node: ast.expr, path: str) -> Kind:
        root, _, attr = path.rpartition(".")
        if root == "torch" and (attr in TORCH_DTYPES or attr in MEMORY_FORMATS):
            return _OTHER
        if root == "triton.language" and attr in VALUE_TL_DTYPES:
            return _OTHER
        if root == "math" and attr in MATH_CONSTANTS:
            return _NUMBER
        written = ast.unparse(node)
        shown = written if written == path else f"{written} ({path})"
        self.add("torch_compute" if path.split(".")[0] == "torch" else "expression", node, f"uses {shown}")
        return _OTHER

    def subscript(self, node: ast.Subscript) -> Kind:
        base = self.expr(node.value)
        index = node.slice
        if base == _META:
            if not (isinstance(index, ast.Constant) and isinstance(index.value, str)):
                self.add("kernel_launch", node, f"reads {short(ast.unparse(node), 50)}, not meta['NAME']")
            return _NUMBER
        if base == _TENSOR:  # refused whatever the index
            self.add("torch_compute", node, f"indexes tensor {short(ast.unparse(node), 60)}")
            return _TENSOR
        if isinstance(index, ast.Slice):
            for bound_ in (index.lower, index.upper, index.step):
                if bound_ is not None:
                    self.need(bound_, self.expr(bound_), (_NUMBER,), "slices with")
            kind: Kind = _SHAPE
        else:
            self.need(index, self.expr(index), (_NUMBER,), "indexes with")
            kind = _NUMBER
        if base not in (_SHAPE, None):
            self.add("expression", node, f"indexes {short(ast.unparse(node.value), 50)} ({_KIND_WORDS[base]})")
            return _OTHER
        return kind if base is not None else None

    def sequence(self, items: list[ast.expr]) -> Kind:
        kinds: list[Kind] = []
        for item in items:
            if isinstance(item, ast.Starred):
                kind = self.expr(item.value)
                self.need(item.value, kind, (_SHAPE,), "unpacks")
                kinds.append(_SHAPE if kind in (_SHAPE, None) else _TENSOR)
            else:
                kinds.append(self.expr(item))
        if None in kinds:
            return None
        return _SHAPE if all(k in (_NUMBER, _SHAPE) for k in kinds) else _TENSOR

    def binop(self, node: ast.BinOp | ast.AugAssign, a: Kind, b: Kind) -> Kind:
        shown = short(ast.unparse(node), 60)
        if _TENSOR in (a, b):
            self.add("torch_compute", node, f"arithmetic on a tensor: {shown}")
            return _TENSOR
        if a is None or b is None:
            return None
        op = node.op
        if a == b == _NUMBER:
            return _NUMBER
        if (isinstance(op, ast.Add) and a == b == _SHAPE) or (isinstance(op, ast.Mult) and {a, b} == {_SHAPE, _NUMBER}):
            return _SHAPE
        self.add("expression", node, f"arithmetic on {_KIND_WORDS[a]} and {_KIND_WORDS[b]}: {shown}")
        return _OTHER

    def compare(self, node: ast.Compare) -> Kind:
        kinds = [self.expr(node.left), *(self.expr(c) for c in node.comparators)]
        for op, (a, b) in zip(node.ops, zip(kinds, kinds[1:])):
            if not isinstance(op, (ast.Is, ast.IsNot)) and _TENSOR in (a, b):
                self.add("torch_compute", node, f"compares a tensor: {short(ast.unparse(node), 60)}")
                break
        return _NUMBER

    def arguments(self, node: ast.Call) -> list[Kind]:
        kinds = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                kind = self.expr(arg.value)
                self.need(arg.value, kind, (_SHAPE,), "unpacks")
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
            return _OTHER
        if isinstance(func, ast.Name):
            return self.named_call(node, func.id)
        if isinstance(func, ast.Attribute):
            path = self.module_path(func)
            return self.module_call(node, path) if path is not None else self.method(node, func)
        self.arguments(node)
        self.add("launch_call", node, f"calls the result of {short(ast.unparse(func), 60)}")
        return _TENSOR

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
            return _TENSOR
        kinds = self.arguments(node)
        if node.keywords:
            self.add("launch_call", node, f"calls {name}() with keywords")
        if len(kinds) != 1 and name != "min" and name != "max":
            self.add("launch_call", node, f"calls {name}() with {len(kinds)} arguments")
        if name == "len":
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (_SHAPE, _TENSOR, _OTHER), "len() of")
            return _NUMBER
        if name == "int":
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (_NUMBER,), "int() reads the value of")
            return _NUMBER
        if name == "tuple":
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (_SHAPE,), "tuple() iterates over")
            return _SHAPE
        allowed = (_SHAPE,) if len(kinds) == 1 else (_NUMBER,)  # max(shape) or max(a, b, ...)
        for arg, kind in zip(node.args, kinds):
            self.need(arg, kind, allowed, f"{name}() of")
        return _NUMBER

    def module_call(self, node: ast.Call, path: str) -> Kind:
        written = ast.unparse(node.func)
        shown = written if written == path else f"{written} ({path})"
        kinds = self.arguments(node)
        if path in ALLOCATIONS:
            self.allocation(node, ALLOCATIONS[path], kinds, shown)
            return _TENSOR
        if path in SIZE_CALLS or (path.startswith("math.") and path[5:] in PYTHON_MATH - MATH_CONSTANTS):
            if node.keywords or (path in SIZE_CALLS and len(kinds) != SIZE_CALLS[path]):
                self.add("launch_call", node, f"calls {shown} with {len(kinds)} arguments and keywords")
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (_NUMBER,) if path in SIZE_CALLS else (_NUMBER, _SHAPE), f"{written}() of")
            return _NUMBER
        rule = "torch_compute" if path.split(".")[0] == "torch" else "launch_call"
        self.add(rule, node, f"calls {shown}")
        return _TENSOR

    def allocation(self, node: ast.Call, form: str, kinds: list[Kind], shown: str) -> None:
        if form == "like":
            if len(kinds) != 1:
                self.add("launch_call", node, f"calls {shown} with {len(kinds)} positional arguments")
            for arg, kind in zip(node.args[:1], kinds):
                self.need(arg, kind, (_TENSOR,), f"{shown} of")
        elif form == "strided":
            if len(kinds) != 2:
                self.add("launch_call", node, f"calls {shown} with {len(kinds)} positional arguments")
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (_SHAPE,), f"{shown} of")
        else:
            for arg, kind in zip(node.args, kinds):
                self.need(arg, kind, (_NUMBER, _SHAPE), f"{shown} of")
        for kw in node.keywords:
            if kw.arg == "out":
                self.add("mutation", kw.value, f"{shown} writes into out={short(ast.unparse(kw.value), 40)}")
            elif kw.arg not in ALLOCATION_KEYWORDS:
                self.add("launch_call", kw.value, f"{shown} with {kw.arg}=")
            else:
                self.need(kw.value, self.expr_kind(kw.value), (_OTHER,), f"{shown} with {kw.arg}=")

    def method(self, node: ast.Call, func: ast.Attribute) -> Kind:
        attr = func.attr
        kernel = self.kernel(func.value)
        if kernel is not None:
            self.arguments(node)
            self.add("kernel_launch", node, f"calls {kernel}.{attr}(); a kernel is only launched, {kernel}[grid](...)")
            return _OTHER
        receiver = self.expr(func.value)
        kinds = self.arguments(node)
        shown = short(ast.unparse(func), 60)
        if attr.endswith("_") and not attr.endswith("__"):
            self.add("mutation", node, f"calls the in-place method {shown}()")
            return _TENSOR
        if receiver not in (_TENSOR, None):
            rule = "kernel_launch" if receiver == _META else "launch_call"
            self.add(rule, node, f"calls {shown}() of {_KIND_WORDS[receiver]}")
            return _TENSOR
        if attr not in TENSOR_QUERIES | TENSOR_SIZES | TENSOR_VIEWS:
            self.add("torch_compute", node, f"calls {shown}(), not an allow-listed tensor method")
            return _TENSOR
        for arg, kind in zip(node.args, kinds):
            self.need(arg, kind, (_NUMBER, _SHAPE, _OTHER), f"{shown}() with")
        for kw in node.keywords:
            self.need(kw.value, self.expr_kind(kw.value), (_NUMBER, _SHAPE, _OTHER), f"{shown}() with")
        if attr in TENSOR_SIZES:
            return _NUMBER if node.args else _SHAPE
        return _NUMBER if attr in TENSOR_QUERIES else _TENSOR

    def launch(self, node: ast.Call) -> None:
        func = node.func
        assert isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name)
        kernel, grid = func.value.id, func.slice
        kind = self.grid(grid) if isinstance(grid, ast.Lambda) else self.expr(grid)
        if kind not in (_SHAPE, _GRID, None):
            self.add(
                "kernel_launch", grid, f"launches {kernel} on grid {short(ast.unparse(grid), 50)} ({_KIND_WORDS[kind]})"
            )
        for arg in node.args:
            value = arg.value if isinstance(arg, ast.Starred) else arg
            kind = self.expr(value)
            if isinstance(arg, ast.Starred):
                self.need(value, kind, (_SHAPE,), "unpacks")
            elif kind in (_GRID, _META):
                self.add(
                    "kernel_launch", arg, f"passes {short(ast.unparse(arg), 50)} ({_KIND_WORDS[kind]}) to {kernel}"
                )
        for kw in node.keywords:
            kind = self.expr(kw.value)
            if kw.arg is None or kw.arg.startswith("_") or kw.arg in LAUNCH_DENIED_KEYWORDS:
                self.add("kernel_launch", kw.value, f"launches {kernel} with {short(ast.unparse(kw), 50)}")
            elif kind in (_GRID, _META):
                self.add("kernel_launch", kw.value, f"passes {kw.arg}= ({_KIND_WORDS[kind]}) to {kernel}")

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
        if kind not in (_SHAPE, None):
            self.add("kernel_launch", node.body, f"the grid lambda returns {short(ast.unparse(node.body), 50)}")
        return _GRID


# --------------------------------------------------------------------------------------
# The whole file
# --------------------------------------------------------------------------------------


def _host_module(tree: ast.Module, bound: dict[str, str], top: _TopLevel, facts: KernelFileFacts) -> ast.Module:
    """Everything that is not a kernel body or a copy the original vouches for: the walker's ground."""
    body: list[ast.stmt] = []
    for stmt in tree.body:
        if id(stmt) in top.skipped:
            continue
        if isinstance(stmt, ast.FunctionDef) and _is_kernel(stmt, bound):
            for dec in stmt.decorator_list:
                path = _decorator_path(dec, bound)
                if path != "triton.jit" and not (path == "triton.heuristics" and ast.dump(dec) in facts.heuristics):
                    body.append(ast.copy_location(ast.Expr(value=dec), dec))
            continue
        body.append(stmt)
    return ast.Module(body=body, type_ignores=[])


def _kernel_findings(tree: ast.Module, bound: dict[str, str], facts: KernelFileFacts) -> tuple[list[Finding], Walker]:
    """The kernel gate's checks on the file's kernels, the original file's kernels trusted as the original."""
    original = facts.kernels
    kernels = _kernels(tree, bound, original.walker.imports, original.walker.paths)
    top_imports = {s.lineno for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))}  # this gate's own
    violations = [
        v
        for v in kernels.shape
        if not (v.rule == "import" and v.line in top_imports)
        and (v.rule, v.construct) not in facts.trusted_kernel_findings
    ]
    violations += access_violations(kernels.tree, kernels.walker.bound, original.access)
    return [_from_violation(v) for v in violations], kernels.walker


def _findings(candidate_source: str, facts: KernelFileFacts) -> tuple[list[Finding], list[str]]:
    if len(candidate_source) > MAX_SOURCE_CHARS:
        return [
            _found("size", None, f"source is {len(candidate_source):,} characters (limit {MAX_SOURCE_CHARS:,})")
        ], []
    try:
        tree = ast.parse(candidate_source)
        bound = _import_bindings(tree)
        top = _top_level(tree, bound, facts)
        found = list(top.found)
        kernel_found, kernel_walker = _kernel_findings(tree, bound, facts)
        found += kernel_found
        host = _host_module(tree, bound, top, facts)
        walker = Walker(host, set(), set())
        walker.visit(host)
        found += [
            _from_violation(v)
            for v in walker.violations
            if v.rule in _ANYWHERE or (v.rule == "code_shape" and v.construct != "lambda")
        ]
        tokens = {**walker.tokens, **kernel_walker.tokens}
        found += [_from_violation(v) for token, v in tokens.items() if token not in facts.tokens]
        found += [
            _from_violation(v) for v in clock_string_violations(tree) if v.construct not in facts.trusted_clock_strings
        ]
        for fn in top.launches:
            found += _Launch(bound, top).check(fn)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return [Finding("syntax", line, f"syntax error: {exc}", KERNEL_FILE_RULES["syntax"])], []
    except (RecursionError, MemoryError):
        return [_found("size", None, "source nests too deeply to analyse")], []
    return found, sorted(top.kernels)


def kernel_file_findings(candidate_source: str, facts: KernelFileFacts) -> list[Finding]:
    """Every broken rule of a candidate kernel file, against the original's ``facts``."""
    return _findings(candidate_source, facts)[0]


def check_static_kernel_file(candidate_source: str, *, original_source: str) -> Verdict:
    """Gate 1 for a kernel file: may ``candidate_source`` be imported and its ``launch`` called in the
    original's stead? Reads syntax trees only; raises ``ValueError`` only when the original is unusable."""
    facts = kernel_file_facts(original_source)
    found, kernels = _findings(candidate_source, facts)
    return findings_verdict(
        found,
        PRIORITY,
        f"static checks passed for a kernel file of {len(kernels)} @triton.jit function"
        f"{'s' if len(kernels) != 1 else ''} launched by launch({', '.join(facts.params)}); "
        f"{len(KERNEL_FILE_RULES)} rules",
        {"level": "kernel_file", "kernels": kernels, "rules": list(KERNEL_FILE_RULES)},
    )
