"""Selection policies: which evaluated nodes become the parents of the next round.

Two policies, one protocol:

* :class:`BeamPolicy` (the default) keeps the best few passed nodes, with a
  diversity rule: no operator may fill more than half the beam, and distinct
  lineages (subtrees under different children of the root) come first.
* :class:`UCBPolicy` scores each passed node by the mean fitness of its
  subtree's first level plus an exploration bonus (UCB1), trading exploiting
  good parents against trying rarely expanded ones.

Why beam is the default: after the four gates, a fitness is a verified,
noise-margined speedup, so the number we rank on is already trustworthy and
re-sampling a node to average out noise (what UCB's statistics are for) buys
nothing. Passing candidates are sparse: most proposals fail a gate or do not
clear the performance margin, so a node rarely has enough evaluated children
for UCB's means to separate parents before the budget (tens to a few hundred
evaluations) is spent. A beam keeps several directions alive at the cost of
one sort, and the diversity rule stops it collapsing onto one operator's idea
(e.g. every parent a launch-config variant of the same tile) when another
direction is only slightly behind.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from kernelopt.errors import KerneloptError
from kernelopt.search.nodes import Node


class SelectionPolicy(Protocol):
    """Chooses up to ``k`` parents among ``nodes``: the evaluated nodes of one target, root included."""

    def select(self, nodes: list[Node], k: int, rng: random.Random) -> list[Node]: ...


def _fallback_root(nodes: list[Node]) -> list[Node]:
    """When nothing passed, expand the original again: it is the only node known to be correct."""
    return [n for n in nodes if n.is_root][:1]


def _by_fitness(nodes: list[Node]) -> list[Node]:
    """Best first; the earlier node wins a tie, so selection is deterministic."""
    return sorted(nodes, key=lambda n: (-(n.fitness or 0.0), n.id))


def lineage(node: Node, by_id: dict[int, Node]) -> int:
    """The id of ``node``'s ancestor that is a child of the root (the root's own id for the root).

    Nodes of one lineage descend from one first step away from the original
    kernel, so they tend to share its idea; the beam prefers distinct ones.
    """
    current = node
    while current.parent_id is not None:
        parent = by_id.get(current.parent_id)
        if parent is None or parent.parent_id is None:
            return current.id
        current = parent
    return current.id


@dataclass
class BeamPolicy:
    """The best ``width`` passed nodes, diversified across operators and lineages.

    With ``diversity``, at most ``ceil(width / 2)`` parents come from one operator
    and the best node of each lineage is taken before a second one of any
    lineage. The operator cap yields only when no other operator has a passed
    node left, so a search with a single operator still fills its beam.
    Returns ``min(k, width)`` nodes at most.
    """

    width: int = 4
    diversity: bool = True

    def __post_init__(self) -> None:
        if self.width < 1:
            raise ValueError(f"beam width must be >= 1, got {self.width}")

    def select(self, nodes: list[Node], k: int, rng: random.Random) -> list[Node]:
        count = min(k, self.width)
        if count <= 0:
            return []
        passed = _by_fitness([n for n in nodes if n.passed])
        if not passed:
            return _fallback_root(nodes)
        if not self.diversity:
            return passed[:count]

        cap = math.ceil(self.width / 2)
        by_id = {n.id: n for n in nodes}
        chosen: list[Node] = []
        chosen_ids: set[int] = set()
        per_operator: Counter[str] = Counter()
        lineages_taken: set[int] = set()

        def take(node: Node) -> None:
            chosen.append(node)
            chosen_ids.add(node.id)
            per_operator[node.operator] += 1
            lineages_taken.add(lineage(node, by_id))

        # 1: the best of each lineage; 2: any node; both within the operator cap.
        for distinct_lineage in (True, False):
            for node in passed:
                if len(chosen) == count:
                    return chosen
                if node.id in chosen_ids or per_operator[node.operator] >= cap:
                    continue
                if distinct_lineage and lineage(node, by_id) in lineages_taken:
                    continue
                take(node)
        # 3: the cap yields when nothing from another operator is left.
        for node in passed:
            if len(chosen) == count:
                break
            if node.id not in chosen_ids:
                take(node)
        return chosen


@dataclass
class UCBPolicy:
    """UCB1 over passed nodes: ``mean + c * sqrt(ln(N) / (1 + children))``.

    ``mean`` is the average fitness of the node and its evaluated children, a
    failed child counting 0, so a parent whose children keep failing sinks.
    ``N`` is the number of evaluated nodes (root included), ``children`` the
    node's evaluated children. Ties go to the earlier node.
    """

    c: float = 1.4

    def scores(self, nodes: list[Node]) -> dict[int, float]:
        """The UCB score of every passed node, by id."""
        evaluated = [n for n in nodes if n.status == "evaluated"]
        total = len(evaluated)
        children: dict[int, list[Node]] = {}
        for node in evaluated:
            if node.parent_id is not None:
                children.setdefault(node.parent_id, []).append(node)
        scores = {}
        for node in evaluated:
            if not node.passed:
                continue
            kids = children.get(node.id, [])
            mean = ((node.fitness or 0.0) + sum(k.fitness or 0.0 for k in kids)) / (1 + len(kids))
            bonus = self.c * math.sqrt(math.log(total) / (1 + len(kids))) if total > 1 else 0.0
            scores[node.id] = mean + bonus
        return scores

    def select(self, nodes: list[Node], k: int, rng: random.Random) -> list[Node]:
        if k <= 0:
            return []
        scores = self.scores(nodes)
        if not scores:
            return _fallback_root(nodes)
        ranked = sorted((n for n in nodes if n.id in scores), key=lambda n: (-scores[n.id], n.id))
        return ranked[:k]


POLICIES = {"beam": BeamPolicy, "ucb": UCBPolicy}
DEFAULT_POLICY = "beam"


def make_policy(name: str = DEFAULT_POLICY) -> SelectionPolicy:
    """The policy called ``name`` with its default settings."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise KerneloptError(f"unknown selection policy {name!r}; available: {', '.join(sorted(POLICIES))}") from None
