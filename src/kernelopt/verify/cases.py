"""Gate 2's cases: the argument lists the original and the candidate kernel both run on.

Kept apart from the runner (:mod:`kernelopt.verify.subkernel`) because what a
case holds and how a case is executed change for different reasons: the runner
may move to another process, the cases stay pure input generation.

Cases, in order: every recorded launch snapshot (real data from a model run);
then fresh values in the snapshot's exact layouts for each seed x input
distribution (floating inputs get new values, integer inputs keep the
snapshot's); then, only when asked for, the edge cases of
:mod:`kernelopt.problem.edges` (large magnitudes, one-signed rows, NaN and
+-inf, subnormals and signed zeros, constant rows), where integer inputs are
redrawn within the snapshot's own [min, max]. Edges are opt-in (``edges=()``
by default) so the search's light path stays as cheap as before; the final
check passes :data:`EDGE_CASES`.

Every function here is a generator or feeds one: one case's tensors exist at
a time, since they can be gigabytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from kernelopt.capture.output_code import KernelDef
from kernelopt.config import default_of
from kernelopt.problem import DISTRIBUTIONS
from kernelopt.problem.edges import EDGE_DISTRIBUTIONS, check_edge_names, edge_like_layout
from kernelopt.problem.layouts import exact_clone, random_like_layout

DEFAULT_SEEDS: tuple[int, ...] = default_of("kernel_seeds")  # gate 2's seeds (kernelopt.config)

EDGE_CASES: tuple[str, ...] = tuple(EDGE_DISTRIBUTIONS)
"""Every edge-case distribution, in the order the cases run: what the final check passes."""


def param_roles(kernel: KernelDef) -> list[tuple[str, bool, bool]]:
    """(name, reads, writes) for each runtime parameter, honouring Inductor's mutated list."""
    written = kernel.written_params()
    return [(p.name, p.reads, p.name in written) for p in kernel.runtime_params]


def kernel_cases(
    kernel: KernelDef,
    snapshots: Sequence[Sequence[Any]],
    seeds: Sequence[int] = DEFAULT_SEEDS,
    distributions: Sequence[str] | None = None,
    edges: Sequence[str] = (),
    edge_seeds: Sequence[int] | None = None,
) -> Iterator[tuple[str, list[Any]]]:
    """Labelled argument lists: each snapshot, then seeds x distributions, then edges x edge seeds.

    ``distributions`` names a subset of :data:`DISTRIBUTIONS` (None: all of them).
    ``edges`` names edge-case distributions (see :data:`EDGE_CASES`; default none);
    each runs once per seed in ``edge_seeds`` (None: the first of ``seeds``, or of
    :data:`DEFAULT_SEEDS` when ``seeds`` is empty, since an edge case's point is
    its structure, not its sample), labelled
    ``"edge large, seed 1"``. Unknown edge names raise :class:`KerneloptError`
    here, before any case is built.
    A generator: one case's tensors exist at a time (they can be gigabytes).
    """
    check_edge_names(edges)
    chosen_edge_seeds = tuple(seeds[:1] or DEFAULT_SEEDS[:1]) if edge_seeds is None else tuple(edge_seeds)
    return _cases(kernel, snapshots, seeds, distributions, tuple(edges), chosen_edge_seeds)


def _cases(
    kernel: KernelDef,
    snapshots: Sequence[Sequence[Any]],
    seeds: Sequence[int],
    distributions: Sequence[str] | None,
    edges: tuple[str, ...],
    edge_seeds: tuple[int, ...],
) -> Iterator[tuple[str, list[Any]]]:
    chosen = {name: DISTRIBUTIONS[name] for name in distributions} if distributions is not None else DISTRIBUTIONS
    for i, recorded in enumerate(snapshots):
        yield (f"snapshot {i}" if len(snapshots) > 1 else "snapshot", list(recorded))
    roles = param_roles(kernel)
    base = snapshots[0]
    for seed in seeds:
        for dist, scale in chosen.items():
            # built by a helper so this frame keeps no reference to a case once it is handed out
            yield (f"seed {seed}, distribution {dist}", _seed_args(roles, base, seed, scale))
    for seed in edge_seeds:
        for edge in edges:
            yield (f"edge {edge}, seed {seed}", _edge_args(roles, base, edge, seed))


def _seed_args(roles: list[tuple[str, bool, bool]], base: Sequence[Any], seed: int, scale: float) -> list[Any]:
    """One seeded case: every floating tensor the kernel reads gets fresh values, the rest exact copies."""
    gen = None
    args: list[Any] = []
    for (_name, reads, _writes), value in zip(roles, base):
        if isinstance(value, torch.Tensor) and reads and value.is_floating_point():
            if gen is None:
                gen = torch.Generator(device=value.device).manual_seed(seed)
            args.append(random_like_layout(value, gen, scale))
        elif isinstance(value, torch.Tensor) and not reads:
            args.append(value)  # a write-only output is only a layout here: the runner poisons copies
        elif isinstance(value, torch.Tensor):
            args.append(exact_clone(value))
        else:
            args.append(value)
    return args


def _edge_args(roles: list[tuple[str, bool, bool]], base: Sequence[Any], edge: str, seed: int) -> list[Any]:
    """One edge case: every tensor the kernel reads gets edge values (integers within the
    snapshot's range); write-only tensors are the snapshot's own, only a layout: the runner
    poisons copies of them and never writes them."""
    generators: dict[torch.device, torch.Generator] = {}
    args: list[Any] = []
    for (_name, reads, _writes), value in zip(roles, base):
        if isinstance(value, torch.Tensor) and reads:
            gen = generators.get(value.device)
            if gen is None:
                gen = generators[value.device] = torch.Generator(device=value.device).manual_seed(seed)
            args.append(edge_like_layout(value, edge, gen))
        elif isinstance(value, torch.Tensor):
            args.append(value)  # write-only: a layout for the runner's poisoned copies
        else:
            args.append(value)
    return args
