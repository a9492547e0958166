"""The ``search`` layer: candidate generation and selection (operators, policies, termination).

One target (a generated kernel, or ``MODEL_TARGET`` for whole-model Inductor
options) is searched by a :class:`SearchEngine`: a :class:`SelectionPolicy`
picks parents among evaluated :class:`Node` s, registered :class:`Operator` s
propose :class:`Candidate` s, the engine persists them in a :class:`NodeStore`
and hands them to an evaluator it knows only as a callback, until a
:class:`Budget` says stop. Nothing here imports torch or touches a GPU.
"""

from __future__ import annotations

from kernelopt.search.candidate import MODEL_TARGET, Candidate, EvaluationResult, normalize_source
from kernelopt.search.engine import SearchEngine, SearchOutcome
from kernelopt.search.nodes import Node, NodeStore
from kernelopt.search.operators import (
    Operator,
    SearchContext,
    available_operators,
    make_operators,
    register_operator,
)
from kernelopt.search.policy import DEFAULT_POLICY, BeamPolicy, SelectionPolicy, UCBPolicy, make_policy
from kernelopt.search.termination import Budget, SearchState, stop_reason

__all__ = [
    "DEFAULT_POLICY",
    "MODEL_TARGET",
    "BeamPolicy",
    "Budget",
    "Candidate",
    "EvaluationResult",
    "Node",
    "NodeStore",
    "Operator",
    "SearchContext",
    "SearchEngine",
    "SearchOutcome",
    "SearchState",
    "SelectionPolicy",
    "UCBPolicy",
    "available_operators",
    "make_operators",
    "make_policy",
    "normalize_source",
    "register_operator",
    "stop_reason",
]
