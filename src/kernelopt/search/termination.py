"""When a search stops: budgets, patience, and the roofline.

Budgets bound what a search may spend (evaluations, wall time, GPU time).
Patience stops a search that has stopped finding anything. The roofline stop
is the physical one: once the best kernel runs within ``roofline_fraction`` of
the time its memory traffic needs at the measured peak bandwidth, no candidate
can buy much more, and the budget is better spent on another kernel.

Every stop comes with one line saying why, for the progress display and the
report; :func:`stop_reason` returns None while the search should go on.
"""

from __future__ import annotations

from dataclasses import dataclass

IMPROVEMENT_EPSILON = 1e-9
"""A round improves the search when it raises the best fitness by more than this."""


@dataclass
class Budget:
    """Limits of one target's search; None switches a limit off.

    ``patience``: rounds in a row without improving the best fitness.
    ``roofline_fraction``: stop once ``min_time_us / best_time_us`` reaches it.
    """

    max_evaluations: int | None = 100
    max_wall_s: float | None = None
    max_gpu_s: float | None = None
    patience: int | None = 3
    roofline_fraction: float = 0.9


@dataclass
class SearchState:
    """What the search has spent and found so far.

    ``best_time_us``: the best passed node's kernel time; ``min_time_us``: the
    target's roofline time (its bytes at peak bandwidth). Either may be unknown
    (None), e.g. for the model target, and then the roofline never stops a search.
    """

    evaluations: int = 0
    wall_s: float = 0.0
    gpu_s: float = 0.0
    rounds: int = 0
    rounds_without_improvement: int = 0
    best_fitness: float = 0.0
    best_time_us: float | None = None
    min_time_us: float | None = None

    def roofline_ratio(self) -> float | None:
        """How close the best kernel is to the roofline (1.0 = at it), when both times are known."""
        if self.best_time_us is None or self.min_time_us is None or self.best_time_us <= 0 or self.min_time_us <= 0:
            return None
        return self.min_time_us / self.best_time_us


def stop_reason(budget: Budget, state: SearchState) -> str | None:
    """One line saying why the search stops now, or None to go on."""
    if budget.max_evaluations is not None and state.evaluations >= budget.max_evaluations:
        return f"evaluation budget of {budget.max_evaluations} reached"
    if budget.max_wall_s is not None and state.wall_s >= budget.max_wall_s:
        return f"wall-time budget of {budget.max_wall_s:g} s reached ({state.wall_s:.1f} s)"
    if budget.max_gpu_s is not None and state.gpu_s >= budget.max_gpu_s:
        return f"GPU-time budget of {budget.max_gpu_s:g} s reached ({state.gpu_s:.1f} s)"
    ratio = state.roofline_ratio()
    if ratio is not None and ratio >= budget.roofline_fraction:
        return f"best kernel at {ratio:.0%} of the roofline (>= {budget.roofline_fraction:.0%})"
    if budget.patience is not None and state.rounds_without_improvement >= budget.patience:
        return f"patience: {state.rounds_without_improvement} rounds without improvement"
    return None
