"""Helion in the judge of a kernel file: no autotuning of its own, and the autotuner as a stage.

A Helion kernel without a config baked in would autotune on its first call, in every process that
loads it, for as long as its effort profile says; kernelopt runs it with Helion's default config
instead (:data:`HELION_ENV` in the candidate's and the reference process, the same setting on the
judge's own kernel objects) and runs Helion's own autotuner once per kernel, through its public API,
within the run's budget (:func:`helion_configs`), on the arguments the file's ``launch`` really passes
that kernel (which are not the file's inputs once ``launch`` computes anything between two kernels);
the ``helion-autotune`` operator then proposes their choices, baked together.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from kernelopt.errors import KerneloptError
from kernelopt.problem.file_kind import HELION
from kernelopt.problem.kernel_file import KernelFile

HELION_ENV = {"HELION_AUTOTUNE_EFFORT": "none"}
SEARCH_ENV = "HELION_AUTOTUNER"  # Helion's own name for its search algorithm setting
NOT_CALLED = "launch() does not call it on the file's inputs: not tuned, its decorator left as written"


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
    """Each Helion kernel's default config on the arguments the file passes it and, with ``effort``, what
    Helion's autotuner (``search``: its algorithm by name, empty for Helion's own pick) chooses there.
    The kernels share ``budget_s`` seconds in turn, each the remainder's even share, so a kernel the
    tuner finishes early leaves its time to the next (the judge's own kernels keep their default configs
    after). One entry per kernel under ``kernels``, in the file's order."""
    started = time.monotonic()
    arguments = kernel_arguments(file, inputs)
    waiting = len(arguments)  # the kernels still to tune: each gets an even share of what is left
    entries = []
    for name, kernel in zip(file.kernels, helion_kernels(file)):
        args = arguments.get(name)
        if args is None:
            entries.append({"kernel": name, "default": None, "tuned": None, "skipped": NOT_CALLED})
            continue
        share = None
        if effort is not None and budget_s is not None:
            share = max(1, round((budget_s - (time.monotonic() - started)) / waiting))
        entries.append(_kernel_configs(name, kernel, args, effort, share, search))
        waiting -= 1
    out: dict[str, Any] = {"kernels": entries}
    if effort is not None:
        out.update(effort=effort, search=search or None, budget_s=budget_s, seconds=time.monotonic() - started)
    return out


def kernel_arguments(file: KernelFile, inputs: Sequence[Any]) -> dict[str, tuple[Any, ...]]:
    """The arguments each Helion kernel gets on ``inputs`` (its first call's, normalized by its signature):
    the inputs themselves where the file's entry is its one kernel, else what ``launch`` passes each
    (recorded in one run of it, copied before each call). A kernel ``launch`` does not call is absent."""
    kernels = dict(zip(file.kernels, helion_kernels(file)))
    if file.entry_name in kernels:
        return {file.entry_name: tuple(inputs)}
    calls = file.kernel_calls(list(inputs), file.kernels, copy=True)
    return {
        name: tuple(kernels[name].normalize_args(*found[0].args, **found[0].keywords))
        for name, found in calls.items()
        if found
    }


def _kernel_configs(
    name: str, kernel: Any, args: tuple[Any, ...], effort: str | None, budget_s: int | None, search: str
) -> dict[str, Any]:
    """One kernel's default config on ``args`` and, with ``effort``, Helion's autotuner's choice within
    ``budget_s`` seconds; its failure is recorded, not raised."""
    bound = kernel.bind(args)
    default = bound.config_spec.default_config()
    out: dict[str, Any] = {"kernel": name, "default": dict(default), "tuned": None}
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
        out["tuned"] = dict(bound.autotune(args, force=True))
    except Exception as exc:  # the user's kernel under Helion's tuner: its failure is data, not a crash
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        settings.autotune_effort, settings.autotune_budget_seconds, settings.autotune_progress_bar = saved
        if saved_search is None:
            os.environ.pop(SEARCH_ENV, None)
        else:
            os.environ[SEARCH_ENV] = saved_search
        bound.set_config(default)
    out.update(budget_s=budget_s, seconds=time.monotonic() - started)
    return out
