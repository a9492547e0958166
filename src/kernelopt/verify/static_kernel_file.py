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

This module holds the original's facts, the checks of the top level (imports, constants,
decorators, ``launch``'s signature), the reuse of the kernel gate on the kernels, and the entry
points; the rules as data are in :mod:`~kernelopt.verify.static_kernel_file_rules` and the
check of ``launch``'s body in :mod:`~kernelopt.verify.static_launch`. A little over 500 lines
because the top level has that many shapes to check (imports, constants, ``@triton.autotune``
configs, heuristics, the entry's signature, the trusted copies), each a short function, all
read against the same facts of the original.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from kernelopt.verify.static_common import Violation, bindings, chain, is_constexpr_annotation, path_of, short
from kernelopt.verify.static_findings import Finding, findings_verdict
from kernelopt.verify.static_kernel import (
    AccessFacts,
    access_facts,
    access_violations,
    body_violations,
    clock_string_violations,
    import_time_violations,
)
from kernelopt.verify.static_kernel_file_rules import (
    ALLOWED_MODULES,
    ANYWHERE,
    AUTOTUNE_INTS,
    AUTOTUNE_STRINGS,
    BUILTINS,
    CONFIG_KEYWORDS,
    CONSTANT_OPS,
    ENTRY,
    KERNEL_FILE_RULES,
    NUMBER,
    OTHER,
    PRIORITY,
    SHAPE,
    TRUSTED_FUNCTIONS,
    finding,
)
from kernelopt.verify.static_launch import TopLevel, launch_findings
from kernelopt.verify.static_rules import CONSTEXPR_PATHS, FORBIDDEN_NODES, IMPORT_HINTS, JIT_KEYWORDS, MAX_SOURCE_CHARS
from kernelopt.verify.static_walker import Walker
from kernelopt.verify.verdict import Verdict

__all__ = [
    "KERNEL_FILE_RULES",
    "PRIORITY",
    "KernelFileFacts",
    "check_static_kernel_file",
    "kernel_file_facts",
    "kernel_file_findings",
]


def _from_violation(v: Violation) -> Finding:
    """A finding of the kernel gate's checks, in this gate's terms (its rule ids are this table's)."""
    rule = v.rule if v.rule in KERNEL_FILE_RULES else "top_level"
    return Finding(rule, v.line, v.construct, KERNEL_FILE_RULES[rule])


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
            return NUMBER
        return OTHER if node.value is None or isinstance(node.value, (str, bytes)) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return NUMBER if _literal_kind(node.operand, bound) == NUMBER else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, CONSTANT_OPS):  # N = 64 * 1024 * 1024
        small = not isinstance(node.op, (ast.Pow, ast.LShift)) or (
            isinstance(node.right, ast.Constant) and isinstance(node.right.value, int) and node.right.value <= 64
        )  # no 10 ** 10 ** 10 to hang the import
        numbers = _literal_kind(node.left, bound) == _literal_kind(node.right, bound) == NUMBER
        return NUMBER if small and numbers else None
    if isinstance(node, ast.Tuple):
        kinds = [_literal_kind(e, bound) for e in node.elts]
        if None in kinds:
            return None
        return SHAPE if all(k in (NUMBER, SHAPE) for k in kinds) else OTHER
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
        yield finding("import", stmt, f"imports {path} ({why})")


def _configs_findings(node: ast.expr, bound: dict[str, str]) -> Iterator[Finding]:
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        yield finding("autotune", node, f"configs={short(ast.unparse(node), 60)}, not a list of triton.Config")
        return
    for config in node.elts:
        shown = short(ast.unparse(config), 60)
        if not (isinstance(config, ast.Call) and path_of(config.func, bound) == "triton.Config"):
            yield finding("autotune", config, f"config {shown} is not triton.Config(...)")
            continue
        meta = config.args[0] if len(config.args) == 1 else None
        if not (
            isinstance(meta, ast.Dict)
            and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in meta.keys)
            and all(_literal_kind(v, bound) == NUMBER for v in meta.values)
        ):
            yield finding("autotune", config, f"config {shown} does not take one dict of literal numbers")
        for kw in config.keywords:
            literal = isinstance(kw.value, ast.Constant) and (
                isinstance(kw.value.value, int) or (kw.arg == "maxnreg" and kw.value.value is None)
            )
            if kw.arg not in CONFIG_KEYWORDS or not literal:
                yield finding("autotune", kw.value, f"config passes {short(ast.unparse(kw), 60)}")


def _autotune_findings(dec: ast.expr, where: str, bound: dict[str, str]) -> Iterator[Finding]:
    if not isinstance(dec, ast.Call):
        yield finding("autotune", dec, f"@triton.autotune on {where} without configs")
        return
    if len(dec.args) > 2 or any(isinstance(a, ast.Starred) for a in dec.args):
        yield finding("autotune", dec, f"@triton.autotune on {where} takes {len(dec.args)} positional arguments")
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
                yield finding("autotune", value, f"{name}={short(ast.unparse(value), 60)}, not a list of strings")
        elif name in AUTOTUNE_INTS:
            if not (isinstance(value, ast.Constant) and isinstance(value.value, int)):
                yield finding("autotune", value, f"{name}={short(ast.unparse(value), 60)}, not a literal number")
        else:
            shown = f"**{ast.unparse(value)}" if name is None else f"{name}={short(ast.unparse(value), 50)}"
            yield finding("autotune", value, f"@triton.autotune on {where} passes {shown}")
    if "configs" not in named or "key" not in named:
        yield finding("autotune", dec, f"@triton.autotune on {where} without configs and key")


def _decorator_findings(fn: ast.FunctionDef, bound: dict[str, str], facts: KernelFileFacts) -> Iterator[Finding]:
    """A kernel: ``@triton.jit`` innermost; above it one literal ``@triton.autotune``, the original's heuristics."""
    *outer, inner = fn.decorator_list
    if _decorator_path(inner, bound) != "triton.jit":
        yield finding("decorator", inner, f"{fn.name} is not decorated @triton.jit innermost")
    elif isinstance(inner, ast.Call) and (inner.args or any(k.arg not in JIT_KEYWORDS for k in inner.keywords)):
        yield finding("decorator", inner, f"@{short(ast.unparse(inner), 60)} on {fn.name}")
    autotunes = 0
    for dec in outer:
        path = _decorator_path(dec, bound)
        if path == "triton.autotune":
            autotunes += 1
            yield from _autotune_findings(dec, fn.name, bound)
        elif path == "triton.heuristics":
            if ast.dump(dec) not in facts.heuristics:
                yield finding("heuristics", dec, f"@{short(ast.unparse(dec), 60)} on {fn.name} is not the original's")
        else:
            yield finding("decorator", dec, f"decorates {fn.name} with @{short(ast.unparse(dec), 60)}")
    if autotunes > 1:
        yield finding("autotune", fn, f"{fn.name} is autotuned {autotunes} times")


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
        yield finding(
            "entry", fn, f"launch({ast.unparse(_bare(args))}) for the original's launch({ast.unparse(_bare(expected))})"
        )
    defaults = [ast.dump(d) for d in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]]
    if defaults != [ast.dump(d) for d in [*expected.defaults, *(d for d in expected.kw_defaults if d is not None)]]:
        yield finding("entry", fn, "launch's parameter defaults differ from the original's (they run at import)")
    for dec in fn.decorator_list:
        yield finding("entry", dec, f"decorates launch with @{short(ast.unparse(dec), 60)}")
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
    for node in [*(a.annotation for a in every), fn.returns]:
        if node is not None and not _annotation_ok(node):
            yield finding("entry", node, f"launch's annotation {short(ast.unparse(node), 60)} runs at import")


def _bare(args: ast.arguments) -> ast.arguments:
    """The parameter list without annotations and defaults, for a finding."""
    bare = copy.deepcopy(args)
    for a in [*bare.posonlyargs, *bare.args, *bare.kwonlyargs, *(a for a in (bare.vararg, bare.kwarg) if a)]:
        a.annotation = None
    bare.defaults, bare.kw_defaults = [], [None for _ in bare.kw_defaults]
    return bare


def _top_level(tree: ast.Module, bound: dict[str, str], facts: KernelFileFacts) -> TopLevel:
    top = TopLevel()
    first: dict[str, tuple[int, str | None]] = {}

    def bind(name: str, node: ast.stmt, module: str | None = None) -> None:
        """Each name once (``import triton`` and ``import triton.language`` bind the same module), no builtin."""
        if name in BUILTINS:
            top.found.append(finding("top_level", node, f"rebinds the builtin {name}"))
        elif name in first and (module is None or first[name][1] != module):
            top.found.append(finding("top_level", node, f"rebinds {name} (first bound at line {first[name][0]})"))
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
            top.found.append(finding("class_def", stmt, FORBIDDEN_NODES[ast.ClassDef][1](stmt)))
        elif isinstance(stmt, ast.Expr):
            top.found.append(finding("top_level", stmt, f"runs {short(ast.unparse(stmt), 60)} at module level"))
        else:
            top.found.append(finding("top_level", stmt, f"a top-level {type(stmt).__name__.lower()} statement"))
    if not top.launches:
        top.found.append(finding("entry", None, "the file defines no launch function"))
    return top


def _constant(
    stmt: ast.Assign | ast.AnnAssign, bound: dict[str, str], top: TopLevel, bind: Callable[[str, ast.stmt], None]
) -> None:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    kind = _literal_kind(stmt.value, bound) if stmt.value is not None else None
    annotated = isinstance(stmt, ast.Assign) or is_constexpr_annotation(stmt.annotation, bound)
    if len(targets) != 1 or not isinstance(targets[0], ast.Name) or kind is None or not annotated:
        top.found.append(
            finding(
                "top_level", stmt, f"assigns {short(ast.unparse(stmt), 60)} at module level (not a literal constant)"
            )
        )
        return
    bind(targets[0].id, stmt)
    top.constants[targets[0].id] = kind


def _function(fn: ast.FunctionDef, bound: dict[str, str], facts: KernelFileFacts, top: TopLevel) -> None:
    if _is_kernel(fn, bound):
        top.kernels.add(fn.name)
        top.found.extend(_decorator_findings(fn, bound, facts))
        if fn.name == ENTRY:
            top.found.append(finding("entry", fn, "launch is a @triton.jit function"))
        elif fn.name in TRUSTED_FUNCTIONS:
            top.found.append(finding("original_only", fn, f"{fn.name} is a @triton.jit function"))
        return
    top.functions.add(fn.name)
    if fn.name == ENTRY:
        top.launches.append(fn)
        if len(top.launches) > 1:
            top.found.append(finding("entry", fn, f"defines launch {len(top.launches)} times"))
        top.found.extend(_entry_findings(fn, facts))
    elif fn.name in TRUSTED_FUNCTIONS:
        if fn.name not in facts.trusted_functions:
            top.found.append(finding("original_only", fn, f"defines {fn.name}, which the original does not"))
        elif ast.dump(fn) != facts.trusted_functions[fn.name]:
            top.found.append(finding("original_only", fn, f"{fn.name} differs from the original's"))
        else:
            top.skipped.add(id(fn))
    else:
        top.found.append(
            finding("top_level", fn, f"defines {fn.name}, which is neither a @triton.jit function nor launch")
        )


# --------------------------------------------------------------------------------------
# The whole file
# --------------------------------------------------------------------------------------


def _host_module(tree: ast.Module, bound: dict[str, str], top: TopLevel, facts: KernelFileFacts) -> ast.Module:
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
            finding("size", None, f"source is {len(candidate_source):,} characters (limit {MAX_SOURCE_CHARS:,})")
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
            if v.rule in ANYWHERE or (v.rule == "code_shape" and v.construct != "lambda")
        ]
        tokens = {**walker.tokens, **kernel_walker.tokens}
        found += [_from_violation(v) for token, v in tokens.items() if token not in facts.tokens]
        found += [
            _from_violation(v) for v in clock_string_violations(tree) if v.construct not in facts.trusted_clock_strings
        ]
        for fn in top.launches:
            found += launch_findings(fn, bound, top)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return [Finding("syntax", line, f"syntax error: {exc}", KERNEL_FILE_RULES["syntax"])], []
    except (RecursionError, MemoryError):
        return [finding("size", None, "source nests too deeply to analyse")], []
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


def check_static_file(
    kind: str,
    candidate_source: str,
    *,
    original_source: str,
    kernel: str | None = None,
    python_source: str | None = None,
    dtypes: Mapping[str, str] | None = None,
) -> Verdict:
    """Gate 1 for a kernel file of either kind: a Triton file's rules, or a Helion file's baked config only.
    A CUDA C++ candidate (its first line ``// kernelopt: cuda``) fills the slot of the Triton kernel ``kernel``
    (:mod:`~kernelopt.verify.static_file_cuda`); ``python_source`` is the Python it runs inside, where that is
    not the original by construction; ``dtypes`` the slot's tensors' dtypes, where the file has run."""
    from kernelopt.capture.cuda_kernel import is_cuda_source

    if is_cuda_source(candidate_source):
        if kind == "helion":
            return Verdict(
                "static",
                False,
                "a CUDA C++ candidate replaces a @triton.jit kernel; a Helion file's candidates are helion.Config choices",
                {"rule": "slot", "language": "cuda"},
            )
        from kernelopt.verify.static_file_cuda import check_static_file_cuda

        return check_static_file_cuda(
            candidate_source, original_source=original_source, kernel=kernel, python_source=python_source, dtypes=dtypes
        )
    if kind == "helion":
        from kernelopt.verify.static_helion import check_static_helion

        return check_static_helion(candidate_source, original_source=original_source)
    return check_static_kernel_file(candidate_source, original_source=original_source)
