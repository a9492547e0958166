"""Where each node of a search graph sits in its drawing: a tidy top-down tree.

Plotly has no tree layout, and a search graph is a tree (every candidate has one
parent, the root is Inductor's kernel), so the positions are computed here:
leaves take consecutive columns in depth-first order, a parent sits centred over
its first and last child, its row is its depth. Pure arithmetic, so the figure
module only draws and the layout is tested on its own.
"""

from __future__ import annotations

from collections.abc import Iterable


def tree_layout(edges: Iterable[tuple[int, int | None]]) -> dict[int, tuple[float, int]]:
    """``(node, parent)`` pairs → ``{node: (column, depth)}``.

    A node whose parent is None or not among the nodes is a root; several roots are
    laid side by side. Children are ordered by id (creation order), so the drawing
    of a resumed run matches that of an uninterrupted one.
    """
    pairs = list(edges)
    ids = {node for node, _ in pairs}
    children: dict[int | None, list[int]] = {}
    for node, parent in sorted(pairs):
        children.setdefault(parent if parent in ids else None, []).append(node)
    positions: dict[int, tuple[float, int]] = {}
    next_column = 0.0
    # An explicit stack rather than recursion: a long repair lineage is a deep chain.
    for root in children.get(None, []):
        stack: list[tuple[int, int, bool]] = [(root, 0, False)]
        while stack:
            node, depth, expanded = stack.pop()
            kids = children.get(node, [])
            if not kids:
                positions[node] = (next_column, depth)
                next_column += 1.0
            elif not expanded:
                stack.append((node, depth, True))
                stack.extend((kid, depth + 1, False) for kid in reversed(kids))
            else:
                positions[node] = ((positions[kids[0]][0] + positions[kids[-1]][0]) / 2.0, depth)
    for node in sorted(ids - positions.keys()):  # only in a cycle, which a store cannot hold: shown, not lost
        positions[node] = (next_column, 0)
        next_column += 1.0
    return positions
