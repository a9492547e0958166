"""The Planner: one concrete plan per call, steered away from directions already tried."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernelopt.agents.roles.base import Role, RoleResult, assert_no_tensors
from kernelopt.agents.roles.context import kernel_view, launch_view
from kernelopt.agents.roles.models import Analysis, Plan
from kernelopt.capture.output_code import KernelDef
from kernelopt.knowledge.card import Card
from kernelopt.knowledge.memory import ExperienceRow, StrategyStats, normalize_strategy

COLLAPSE_WINDOW = 4  # how many recent plans the collapse test looks at
COLLAPSE_MAX_DISTINCT = 2  # at most this many distinct strategies among them: collapsed


def collapsed_strategies(
    recent: Sequence[Plan | str], window: int = COLLAPSE_WINDOW, max_distinct: int = COLLAPSE_MAX_DISTINCT
) -> list[str]:
    """The strategies the last ``window`` plans collapsed onto, or [] if they did not.

    Collapse: at least ``window`` plans so far, and the last ``window`` of them
    use ``max_distinct`` or fewer distinct strategies (KernelOPT's meltdown test).
    """
    if window <= 0 or len(recent) < window:
        return []
    names = [normalize_strategy(p.strategy if isinstance(p, Plan) else p) for p in recent[-window:]]
    distinct = list(dict.fromkeys(names))
    return distinct if len(distinct) <= max_distinct else []


def _direction(item: Plan | str) -> str:
    if isinstance(item, Plan):
        change = " ".join(item.change.split())
        return f"{item.strategy}: {change[:200]}{'...' if len(change) > 200 else ''}"
    return normalize_strategy(item)


class Planner(Role[Plan]):
    name = "planner"
    output_model = Plan

    def __init__(self, *args: Any, collapse_window: int = COLLAPSE_WINDOW, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.collapse_window = collapse_window

    def run(
        self,
        analysis: Analysis,
        kernel: KernelDef,
        cards: Sequence[Card],
        experience: Sequence[StrategyStats] = (),
        avoid: Sequence[str] = (),
        recent: Sequence[Plan | str] = (),
        lessons: Sequence[ExperienceRow] = (),
        hardware: Card | None = None,
        launch: Mapping[str, Any] | None = None,
        avoid_min_tries: int = 2,
        cuda_unavailable: str | None = None,
    ) -> RoleResult[Plan]:
        """Propose one plan.

        ``cards`` come from :func:`kernelopt.knowledge.retrieve`, ``experience`` and
        ``avoid`` from :mod:`kernelopt.knowledge.memory` for this bottleneck and kind,
        ``recent`` are the plans (or strategy names) of this search's recent rounds,
        oldest first, and ``lessons`` the Judge's latest records for similar kernels.
        ``cuda_unavailable``: why this machine cannot build CUDA C++: the plan is then Triton (a CUDA
        plan is sent back as a repair, and a Planner that keeps to CUDA fails as any invalid reply does).
        """
        assert_no_tensors({"analysis": analysis, "kernel": kernel, "recent": recent, "launch": launch})
        context = {
            "analysis": analysis,
            "kernel": kernel_view(kernel),
            "cards": list(cards),
            "experience": list(experience),
            "avoid": list(avoid),
            "avoid_min_tries": avoid_min_tries,
            "lessons": list(lessons),
            "recent": [_direction(p) for p in recent],
            "collapsed": collapsed_strategies(recent, self.collapse_window),
            "collapse_window": self.collapse_window,
            "hardware": hardware,
            "launch": launch_view(launch),
            "cuda_unavailable": cuda_unavailable,
        }

        def buildable(plan: Plan) -> str | None:  # told not to: asked again, so the whole plan is Triton's
            if cuda_unavailable and plan.language == "cuda":
                return (
                    f"the plan's language is cuda, but this machine cannot build CUDA C++ ({cuda_unavailable}): "
                    "give the plan for a Triton kernel (language triton), its change written for Triton"
                )
            return None

        return self.ask(context, check=buildable)
