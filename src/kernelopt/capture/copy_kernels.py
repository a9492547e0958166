"""Which generated Triton kernels only move data: layout copies, transposes and concatenations.

Inductor writes such a kernel where a layout must change between two operations it cannot fuse: a
``clone`` of a permuted view before a vendor matmul, a ``cat`` into a new buffer, a contiguous copy
after a transpose. Its time is the price of the layout, not of any arithmetic, and no launch config
or eviction hint removes it: only a changed call sequence can (a vendor call reading the strided
view, a producer writing the consumer's layout). ``analyze`` therefore counts these kernels apart.

A kernel is a mover when every value it stores is a value it loaded: directly, through a dtype cast
(``.to``), a broadcast, or a ``tl.where`` choosing between moved values and constants (how
Inductor writes ``cat``). Index arithmetic is free to be anything; reductions and math on loaded
values make it a compute kernel. Read from the source's syntax tree; nothing is run.
"""

from __future__ import annotations

import ast

_PASS_THROUGH = frozenset({"broadcast_to", "reshape", "view", "expand_dims"})


def _call_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _kernel(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _moved(value: ast.expr, moved: set[str]) -> bool:
    """Whether ``value`` is a loaded value, unchanged but for its type, shape or a choice among such."""
    if isinstance(value, ast.Name):
        return value.id in moved
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (int, float, bool))  # a fill value, as in a padded cat
    attr = _call_name(value)
    if attr == "load":
        return True
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return False
    if attr == "to":  # x.to(dtype): the value, converted
        return _moved(value.func.value, moved)
    if attr in _PASS_THROUGH and value.args:
        return _moved(value.args[0], moved)
    if attr == "where" and len(value.args) == 3:  # the condition is index logic; both branches must move
        return _moved(value.args[1], moved) and _moved(value.args[2], moved)
    return False


def moves_only(source: str, name: str) -> bool:
    """Whether kernel ``name`` in ``source`` (Inductor's module for it) stores nothing but loaded values."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    kernel = _kernel(tree, name)
    if kernel is None:
        return False
    moved: set[str] = set()
    stores = 0
    for statement in ast.walk(kernel):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                (moved.add if _moved(statement.value, moved) else moved.discard)(target.id)
        elif isinstance(statement, ast.Call) and _call_name(statement) in {"store", "atomic_add"}:
            if _call_name(statement) != "store" or len(statement.args) < 2 or not _moved(statement.args[1], moved):
                return False
            stores += 1
    return stores > 0
