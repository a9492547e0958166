"""How hard the gates look: the settings a session evaluates candidates with.

One record (:class:`GateSettings`) and its two presets: :func:`search_settings`, the
search's light gates (a timing screen first, few seeds, no memcheck), and
:func:`final_settings`, the full re-evaluation every winner gets before anything is
delivered. The order in which the gates read these fields is
:meth:`kernelopt.evaluate.session.EvaluationSession.evaluate`'s; the defaults are the
effort profiles' (:mod:`kernelopt.config`). Plain data: a pipeline builds them and
they travel to the session's worker as a dict (:meth:`GateSettings.to_dict`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from kernelopt.config import Settings, default_of
from kernelopt.errors import KerneloptError
from kernelopt.problem import DISTRIBUTIONS
from kernelopt.problem.edges import check_edge_names
from kernelopt.verify.cases import EDGE_CASES


@dataclass
class GateSettings:
    """How hard the gates look. ``screen_trials`` > 0 times the candidate against the
    original first, in a short interleaved run, and rejects it at the performance gate
    when it is below ``screen_min_speedup`` there, before the costly correctness and
    model gates: a search's many slower candidates cost a compile and a few launches.
    A candidate that passes still goes through all four gates in order. The defaults are
    the ``default`` effort profile's (:mod:`kernelopt.config`); a run passes its own."""

    kernel_seeds: tuple[int, ...] = default_of("kernel_seeds")
    model_seeds: tuple[int, ...] = default_of("model_seeds")
    trials: int = default_of("trials")
    margin: float = default_of("margin")
    max_error_ratio: float = 10.0
    end_to_end: bool = True
    screen_trials: int = 0
    screen_min_speedup: float = 1.0
    kernel_distributions: tuple[str, ...] | None = None  # gate 2's random inputs; None: every distribution
    kernel_edges: tuple[str, ...] | None = None  # gate 2's edge cases; None: every one (EDGE_CASES)
    memcheck: bool = True  # a candidate that passed runs once more under compute-sanitizer's memcheck
    cuda_graphs: bool = False  # the final check also judges as CUDA-graph replays where graphs pay

    def __post_init__(self) -> None:
        unknown = [d for d in self.kernel_distributions or () if d not in DISTRIBUTIONS]
        if unknown:
            raise KerneloptError(
                f"unknown input distribution(s) {', '.join(unknown)}; choose from {', '.join(DISTRIBUTIONS)}"
            )
        check_edge_names(self.kernel_edges or ())

    @property
    def edges(self) -> tuple[str, ...]:
        return EDGE_CASES if self.kernel_edges is None else self.kernel_edges

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SEARCH_DISTRIBUTIONS = ("neg",)  # beside the real-data snapshot: the signs flipped (a kernel assuming x >= 0 fails)


def search_settings(config: Settings | None = None) -> GateSettings:
    """The search's gates: a short timing screen (``screen_trials``), then gate 2 on the
    recorded snapshot plus one random case per search seed (negated inputs) and gate 3
    with the search's model seeds. Every winner is evaluated again with the full
    :class:`GateSettings` (every seed x 4 distributions) before anything is delivered.
    ``config`` None: the ``default`` effort profile's values.

    The screen asks for half the performance margin: a candidate must beat 1 + margin
    at gate 4, and on the H200 near-roofline kernels sent most ~1.00x candidates
    through the costly gates only to fail the margin there. Gate 2 with every
    distribution (5 cases of 3 launches) was the costliest stage on the H200: a
    median 2.1-2.4 s per candidate reaching it on 1 GB kernels (softmax, cumsum),
    15.5 s on row-L2's 8.6 GB, against 0.1-0.5 s for each other stage."""
    config = config or Settings()
    return GateSettings(
        kernel_seeds=config.search_kernel_seeds,
        model_seeds=config.search_model_seeds,
        trials=config.trials,
        margin=config.margin,
        end_to_end=False,
        screen_trials=config.screen_trials,
        screen_min_speedup=1.0 + config.margin / 2,
        kernel_distributions=SEARCH_DISTRIBUTIONS,
        kernel_edges=(),
        memcheck=False,
    )


def final_settings(search: GateSettings, config: Settings | None = None) -> GateSettings:
    """The winners' re-evaluation: no screen, every distribution and edge case, memcheck, and at
    least the full seeds of gates 2 and 3 (``kernel_seeds``, ``model_seeds`` of ``config``;
    None: the ``default`` effort profile's)."""
    full = config or Settings()
    return replace(
        search,
        screen_trials=0,
        end_to_end=False,
        kernel_distributions=None,
        kernel_edges=None,
        memcheck=True,
        kernel_seeds=tuple(dict.fromkeys(search.kernel_seeds + full.kernel_seeds)),
        model_seeds=tuple(dict.fromkeys(search.model_seeds + full.model_seeds)),
    )
