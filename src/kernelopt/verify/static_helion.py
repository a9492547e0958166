"""Gate 1 for a Helion kernel file's candidate: the user's file with one config baked in, nothing else.

Helion kernels are Python whose body Helion traces and compiles, so the rules that hold a
Triton kernel to an allow-list do not transfer; what a Helion candidate may change is
therefore narrow by rule: the ``config=`` of a ``@helion.kernel`` decorator, given as
``helion.Config(...)`` with literal arguments only, and an ``import helion`` line to name
it. Everything else must be the original's syntax tree, node for node (comments and
layout are free). Rewrites of Helion source by the LLM agents would need rules of their
own; until then they are refused here.
"""

from __future__ import annotations

import ast

from kernelopt.verify.static_rules import MAX_SOURCE_CHARS
from kernelopt.verify.verdict import Verdict

GATE = "static"


def _is_kernel_decorator(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return ast.unparse(target).split(".")[-1] == "kernel"


def _kernel_decorators(tree: ast.Module) -> list[ast.expr]:
    return [
        d for fn in tree.body if isinstance(fn, ast.FunctionDef) for d in fn.decorator_list if _is_kernel_decorator(d)
    ]


def _config_problem(value: ast.expr) -> str | None:
    if not (isinstance(value, ast.Call) and ast.unparse(value.func) == "helion.Config" and not value.args):
        return f"config must be helion.Config(...) with keyword arguments, got {ast.unparse(value)[:80]}"
    for kw in value.keywords:
        try:
            ast.literal_eval(kw.value)
        except (ValueError, SyntaxError):
            return f"helion.Config argument {kw.arg} is not a literal: {ast.unparse(kw.value)[:80]}"
    return None


def _normalized(tree: ast.Module) -> str:
    """The tree without decorator configs and ``import helion`` lines: what may not change."""
    body = [s for s in tree.body if not (isinstance(s, ast.Import) and [a.name for a in s.names] == ["helion"])]
    tree = ast.Module(body=body, type_ignores=[])
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            fn.decorator_list = [_without_config(d) for d in fn.decorator_list]
    return ast.dump(tree, include_attributes=False)


def _without_config(dec: ast.expr) -> ast.expr:
    """A kernel decorator without its configs; ``@kernel()`` with nothing left reads as ``@kernel``."""
    if not _is_kernel_decorator(dec):
        return dec
    if isinstance(dec, ast.Call):
        dec.keywords = [kw for kw in dec.keywords if kw.arg not in ("config", "configs")]
        if not dec.args and not dec.keywords:
            return dec.func
    return dec


def check_static_helion(candidate_source: str, *, original_source: str) -> Verdict:
    """Pass iff the candidate is the original with literal Helion configs baked into its kernels."""
    if len(candidate_source) > MAX_SOURCE_CHARS:
        return Verdict(
            GATE,
            False,
            f"the candidate is {len(candidate_source)} characters; the limit is {MAX_SOURCE_CHARS}",
            {"rule": "size"},
        )
    try:
        candidate = ast.parse(candidate_source)
    except SyntaxError as exc:
        return Verdict(GATE, False, f"line {exc.lineno}: syntax error: {exc.msg}", {"rule": "syntax"})
    original = ast.parse(original_source)
    for dec in _kernel_decorators(candidate):
        for kw in dec.keywords if isinstance(dec, ast.Call) else []:
            if kw.arg == "configs":
                return Verdict(
                    GATE,
                    False,
                    f"line {dec.lineno}: a candidate bakes one config; configs= would autotune",
                    {"rule": "config"},
                )
            if kw.arg == "config" and (problem := _config_problem(kw.value)) is not None:
                return Verdict(GATE, False, f"line {dec.lineno}: {problem}", {"rule": "config"})
    if _normalized(candidate) != _normalized(original):
        return Verdict(
            GATE,
            False,
            "a Helion candidate may change only the config of its @helion.kernel decorators; "
            "the rest of the file must stay as the user wrote it",
            {"rule": "unchanged"},
        )
    return Verdict(GATE, True, "the original file with a literal helion.Config baked in", {"rule": None})
