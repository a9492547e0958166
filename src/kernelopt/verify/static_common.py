"""Shared pieces of the static gate: findings, import bindings and module-path resolution.

Every checker of gate 1 (the walker in :mod:`kernelopt.verify.static_walker`, the
module-shape check in :mod:`kernelopt.verify.static_module`, the signature check in
:mod:`kernelopt.verify.static_signature`, the kernel-body and import-time checks in
:mod:`kernelopt.verify.static_kernel`) reports :class:`Violation` objects and resolves
dotted names the same way, so they live here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelopt.verify.static_rules import (
    ANY,
    CONSTEXPR_PATHS,
    DENIED_COMPONENTS,
    POLICIES,
    REEXPORTS,
    RULES,
    TORCH_DTYPES,
)


@dataclass(frozen=True)
class Violation:
    """One broken rule at one place."""

    rule: str
    line: int
    col: int
    construct: str

    @property
    def message(self) -> str:
        return (
            f"line {self.line}: {self.construct}; {RULES[self.rule]}"
            if self.rule != "precision"
            else (f"line {self.line}: {self.construct}, {RULES[self.rule]}")
        )

    def to_dict(self) -> dict[str, object]:
        return {"rule": self.rule, "line": self.line, "col": self.col, "message": self.message}


def bindings(tree: ast.AST) -> tuple[dict[str, str], set[str]]:
    """Names bound by imports anywhere -> dotted path; and the names bound to modules by ``import``."""
    bound: dict[str, str] = {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                    modules.add(alias.asname)
                else:
                    root = alias.name.split(".")[0]
                    bound[root] = root
                    modules.add(root)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound, modules


def resolve(path: str) -> str:
    """Apply Inductor's re-exports (``triton_helpers.libdevice`` is Triton's libdevice, ...)."""
    for _ in range(4):
        for prefix, target in REEXPORTS.items():
            if path == prefix or path.startswith(prefix + "."):
                path = target + path[len(prefix) :]
                break
        else:
            return path
    return path


def chain(node: ast.expr) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"]; None when the chain is not rooted at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def policy_key(path: str) -> str | None:
    best = None
    for key in POLICIES:
        if (path == key or path.startswith(key + ".")) and (best is None or len(key) > len(best)):
            best = key
    return best


def check_path(path: str, *, called: bool, written: str) -> tuple[str, str] | None:
    """Is this resolved dotted path something a candidate may use? -> (rule, construct) or None."""
    key = policy_key(path)
    if key is None:
        return None  # not rooted at an allowed module: the import itself was already rejected
    rest = path[len(key) + 1 :].split(".") if path != key else []
    if key == "torch":
        if called:
            return "torch_compute", f"calls {written}"
        if len(rest) == 1 and rest[0] in TORCH_DTYPES:
            return None
        return "torch_compute", f"references {written}" + ("" if written == path else f" ({path})")
    allowed = POLICIES[key]
    if rest and allowed is not ANY and rest[0] not in allowed:
        return "module_access", f"uses {written}" + ("" if written == path else f" ({path})")
    for part in rest:
        if part.startswith("_") or part in DENIED_COMPONENTS:
            return "module_access", f"uses {written}" + ("" if written == path else f" ({path})")
    return None


def path_of(node: ast.expr, bound: dict[str, str]) -> str | None:
    parts = chain(node)
    if not parts or parts[0] not in bound:
        return None
    return resolve(".".join([bound[parts[0]], *parts[1:]]))


def is_constexpr_annotation(node: ast.expr | None, bound: dict[str, str]) -> bool:
    """``tl.constexpr``, written as a name or as the string ``"tl.constexpr"``."""
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return False
    return path_of(node, bound) in CONSTEXPR_PATHS


def short(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters, for a finding's construct."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
