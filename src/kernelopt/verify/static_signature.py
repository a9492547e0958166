"""Gate 1's kernel check: the candidate defines the kernel it replaces, as the launcher calls it.

Inductor's launcher calls the kernel by name, passes pointer and numel arguments
positionally in the original's order and fills the ``tl.constexpr`` ones from its
configs. So the candidate must define that function once, innermost-decorated with
``@triton.jit`` (and with a ``@triton_heuristics`` decorator where the original has
one), keep the original's runtime parameters by name and order, give every new
constexpr a default, and not rename itself in ``inductor_meta``. Helpers must be
plain ``@triton.jit`` functions. :func:`kernel_signature` reads the same parameter
list from the trusted original.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from kernelopt.verify.static_common import Violation, bindings, is_constexpr_annotation, path_of, short
from kernelopt.verify.static_rules import HEURISTIC_DECORATORS, JIT_KEYWORDS, RUNTIME


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


def _decorator_kind(dec: ast.expr, bound: dict[str, str]) -> str | None:
    """'jit', 'heuristics:<name>' or None for anything else."""
    target = dec.func if isinstance(dec, ast.Call) else dec
    path = path_of(target, bound)
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
        Param(a.arg, is_constexpr_annotation(a.annotation, bound), i >= first_default, a.lineno)
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


def top_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The module's top-level functions, decorated or not (the launcher looks the kernel up among them)."""
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
    bound, _ = bindings(tree)
    for fn in top_functions(tree):
        if fn.name == kernel_name:
            return _signature_of(fn, bound)
    raise ValueError(f"original kernel source defines no top-level function {kernel_name}")


def kernel_violations(
    tree: ast.Module, bound: dict[str, str], kernel_name: str, expected: KernelSignature
) -> Iterable[Violation]:
    """The kernel's decorators and signature against ``expected`` (the original's); helpers' decorators."""
    functions = top_functions(tree)
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
                    "kernel", dec.lineno, dec.col_offset, f"decorates {fn.name} with @{short(ast.unparse(dec), 60)}"
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
