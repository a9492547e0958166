"""Helion in the judge of a kernel file: no autotuning of its own, and the autotuner as a stage.

A Helion kernel without a config baked in would autotune on its first call, in every process that
loads it, for as long as its effort profile says; kernelopt runs it with Helion's default config
instead (:data:`HELION_ENV` in the candidate's and the reference process, the same setting on the
judge's own kernel objects) and runs Helion's own autotuner once, through its public API, within the
run's budget (:func:`helion_configs`); the ``helion-autotune`` operator then proposes its choice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from kernelopt.errors import KerneloptError
from kernelopt.problem.kernel_file import HELION, KernelFile

HELION_ENV = {"HELION_AUTOTUNE_EFFORT": "none"}
SEARCH_ENV = "HELION_AUTOTUNER"  # Helion's own name for its search algorithm setting


def helion_kernels(file: KernelFile) -> list[Any]:
    """The file's ``helion.Kernel`` objects (none for a Triton file)."""
    return [getattr(file.module, name) for name in file.kernels] if file.kind == HELION else []


def quiet(file: KernelFile) -> None:
    """The judge's own Helion kernels run their default config, never an autotuning pass."""
    for kernel in helion_kernels(file):
        kernel.settings.autotune_effort = HELION_ENV["HELION_AUTOTUNE_EFFORT"]


def search_names() -> list[str] | None:
    """The search algorithms this Helion offers by name (None: Helion is not importable here)."""
    try:
        from helion.autotuner import search_algorithms
    except ImportError:
        return None
    return sorted(search_algorithms)


def check_search(name: str) -> None:
    """Refuse, in one line, a ``helion_search`` setting this Helion does not know (before any worker)."""
    names = search_names()
    if name and names is not None and name not in names:
        raise KerneloptError(f"helion_search={name!r}: this Helion has no such search; pass one of {', '.join(names)}")


def helion_configs(
    file: KernelFile,
    inputs: Sequence[Any],
    effort: str | None = None,
    budget_s: int | None = None,
    search: str = "",
) -> dict[str, Any]:
    """The first Helion kernel's default config on ``inputs`` and, with ``effort``, what Helion's autotuner
    (``search``: its algorithm by name, empty for Helion's own pick) chooses there within ``budget_s``
    seconds (the judge's own kernel keeps its default config after)."""
    kernel = helion_kernels(file)[0]
    bound = kernel.bind(tuple(inputs))
    default = bound.config_spec.default_config()
    out: dict[str, Any] = {"kernel": file.kernels[0], "default": dict(default), "tuned": None}
    if effort is None:
        return out
    settings = kernel.settings
    saved = (settings.autotune_effort, settings.autotune_budget_seconds, settings.autotune_progress_bar)
    saved_search = os.environ.get(SEARCH_ENV)
    started = time.monotonic()
    try:
        if search:  # Helion's own default_autotuner_fn reads it when the tuner starts
            os.environ[SEARCH_ENV] = search
        settings.autotune_effort, settings.autotune_budget_seconds, settings.autotune_progress_bar = (
            effort,
            budget_s,
            False,
        )
        out["tuned"] = dict(bound.autotune(tuple(inputs), force=True))
    except Exception as exc:  # the user's kernel under Helion's tuner: its failure is data, not a crash
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        settings.autotune_effort, settings.autotune_budget_seconds, settings.autotune_progress_bar = saved
        if saved_search is None:
            os.environ.pop(SEARCH_ENV, None)
        else:
            os.environ[SEARCH_ENV] = saved_search
        bound.set_config(default)
    out.update(effort=effort, search=search or None, budget_s=budget_s, seconds=time.monotonic() - started)
    return out
