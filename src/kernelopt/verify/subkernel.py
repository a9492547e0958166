"""Gate 2 on the device: run the original and the candidate kernel alone and compare.

Cases: every recorded launch snapshot (real data from a model run), then fresh
values in the snapshot's exact layouts for each seed × input distribution.
Floating inputs get new values; integer inputs (indices) keep the snapshot's,
since their valid range is not ours to invent. Write-only outputs are pre-filled
with NaN sentinels in both runs, so an element the candidate does not write
shows up wherever the original wrote a value.

The original and the candidate come in as *launchers* (a function of the
argument list): the original's runs here, the candidate's in its own process
on these very buffers (:meth:`~kernelopt.evaluate.remote.RemoteRunner.launcher`),
so the comparison below is the judge's and the reference never leaves it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import torch

from kernelopt.capture.output_code import KernelDef
from kernelopt.capture.snapshot import clone_args, exact_clone, launch, random_like_layout
from kernelopt.problem import DISTRIBUTIONS
from kernelopt.verify.correctness import check_case, combine_cases, nan_fill_
from kernelopt.verify.verdict import Verdict

DEFAULT_SEEDS = (1, 2, 3)

Launcher = Callable[[Sequence[Any]], None]


def as_launcher(kernel: Any) -> Launcher:
    """A launcher for a kernel built in this process (the original)."""
    return lambda args: launch(kernel, args)


def param_roles(kernel: KernelDef) -> list[tuple[str, bool, bool]]:
    """(name, reads, writes) for each runtime parameter, honouring Inductor's mutated list."""
    written = kernel.written_params()
    return [(p.name, p.reads, p.name in written) for p in kernel.runtime_params]


def kernel_cases(
    kernel: KernelDef, snapshots: Sequence[Sequence[Any]], seeds: Sequence[int] = DEFAULT_SEEDS,
    distributions: Sequence[str] | None = None,
) -> Iterator[tuple[str, list[Any]]]:
    """Labelled argument lists: each snapshot, then seeds × distributions in the same layouts.

    ``distributions`` names a subset of :data:`DISTRIBUTIONS` (None: all of them).
    A generator: one case's tensors exist at a time (they can be gigabytes).
    """
    chosen = {name: DISTRIBUTIONS[name] for name in distributions} if distributions is not None else DISTRIBUTIONS
    for i, args in enumerate(snapshots):
        yield (f"snapshot {i}" if len(snapshots) > 1 else "snapshot", list(args))
    roles = param_roles(kernel)
    base = snapshots[0]
    for seed in seeds:
        for dist, scale in chosen.items():
            gen = None
            args: list[Any] = []
            for (name, reads, _writes), value in zip(roles, base):
                if isinstance(value, torch.Tensor) and reads and value.is_floating_point():
                    if gen is None:
                        gen = torch.Generator(device=value.device).manual_seed(seed)
                    args.append(random_like_layout(value, gen, scale))
                elif isinstance(value, torch.Tensor):
                    args.append(exact_clone(value))
                else:
                    args.append(value)
            yield (f"seed {seed}, distribution {dist}", args)


def _prepared(kernel: KernelDef, args: Sequence[Any], alternate: bool = False) -> list[Any]:
    copy = clone_args(args)
    for (name, reads, writes), value in zip(param_roles(kernel), copy):
        if writes and not reads and isinstance(value, torch.Tensor):
            nan_fill_(value, alternate=alternate)
    return copy


def run_case(kernel: KernelDef, original: Launcher, candidate: Launcher, label: str, args: Sequence[Any],
             alternate: bool = False) -> Verdict:
    """One case: original and candidate on identical copies, candidate twice for determinism.

    ``alternate`` fills write-only outputs with the second sentinel (integer and bool
    outputs differ; see :func:`nan_fill_`): alternating it across cases catches an
    element left unwritten where the original happens to write the first sentinel."""
    roles = param_roles(kernel)
    reference = _prepared(kernel, args, alternate)
    original(reference)
    first = _prepared(kernel, args, alternate)
    candidate(first)
    second = _prepared(kernel, args, alternate)
    candidate(second)
    _synchronize(args)
    written, inputs, rerun = {}, {}, {}
    for i, (name, reads, writes) in enumerate(roles):
        if not isinstance(args[i], torch.Tensor):
            continue
        if writes:
            written[name] = (reference[i], first[i])
            rerun[name] = (first[i], second[i])
        elif reads:
            inputs[name] = (args[i], first[i])
    return check_case(label, written, inputs, rerun)


def _synchronize(args: Sequence[Any]) -> None:
    if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
        torch.cuda.synchronize()


def check_launch(kernel: KernelDef, original: Launcher, before: Sequence[Any], after: Sequence[Any],
                 label: str) -> Verdict:
    """Did one candidate call that started from ``before`` and left ``after`` write what the original
    writes from ``before``? (The timed calls of gate 4 are checked so.) ``before`` is consumed."""
    if not before:
        return Verdict("correctness", False, f"{label}: no record of its inputs was kept")
    reference = clone_args(before)
    original(reference)
    _synchronize(reference)
    written, inputs = {}, {}
    for i, (name, reads, writes) in enumerate(param_roles(kernel)):
        if not isinstance(before[i], torch.Tensor):
            continue
        if writes:
            written[name] = (reference[i], after[i])
        elif reads:
            inputs[name] = (before[i], after[i])
    return check_case(label, written, inputs, None)


def run_subkernel_gate(
    kernel: KernelDef,
    original: Launcher,
    candidate: Launcher,
    snapshots: Sequence[Sequence[Any]],
    seeds: Sequence[int] = DEFAULT_SEEDS,
    distributions: Sequence[str] | None = None,
) -> Verdict:
    """Gate 2: the candidate writes what the original writes on every case, and nothing else."""
    if not snapshots:
        return Verdict("correctness", False, f"{kernel.name} never launched in the model run: nothing to compare")
    verdicts = []
    for index, (label, args) in enumerate(kernel_cases(kernel, snapshots, seeds, distributions)):
        verdicts.append(run_case(kernel, original, candidate, label, args, alternate=index % 2 == 1))
    return combine_cases(verdicts)
