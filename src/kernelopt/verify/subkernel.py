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

from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelopt.capture.guards import guarded_clone, guards_intact
from kernelopt.capture.output_code import KernelDef
from kernelopt.capture.snapshot import launch
from kernelopt.problem.layouts import clone_args
from kernelopt.verify.cases import DEFAULT_SEEDS, kernel_cases, param_roles
from kernelopt.verify.correctness import check_case, combine_cases, nan_fill_
from kernelopt.verify.verdict import Verdict

Launcher = Callable[[Sequence[Any]], None]


def as_launcher(kernel: Any) -> Launcher:
    """A launcher for a kernel built in this process (the original)."""
    return lambda args: launch(kernel, args)


def _prepared(
    kernel: KernelDef,
    args: Sequence[Any],
    alternate: bool = False,
    guarded: bool = False,
    read_only: Sequence[Any] | None = None,
) -> list[Any]:
    """A copy of ``args`` with write-only outputs poisoned; ``guarded`` puts every tensor inside
    poisoned guard regions (:mod:`kernelopt.capture.guards`), for the candidate's runs.
    ``read_only``: an argument list whose tensors the kernel only reads are used as they are
    instead of copied (each copy of a gigabyte input is a gigabyte the gate holds)."""
    copy = []
    for i, ((_name, reads, writes), value) in enumerate(zip(param_roles(kernel), args)):
        if not isinstance(value, torch.Tensor):
            copy.append(value)
        elif read_only is not None and reads and not writes:
            copy.append(read_only[i])
        else:
            copy.append(guarded_clone(value) if guarded else clone_args([value])[0])
            if writes and not reads:
                nan_fill_(copy[-1], alternate=alternate)
    return copy


def _guard_failures(kernel: KernelDef, label: str, runs: Sequence[Sequence[Any]]) -> list[str]:
    """Writes outside a buffer: the guard regions around the candidate's tensors, checked bit for bit."""
    failures = []
    for (name, _reads, _writes), values in zip(param_roles(kernel), zip(*runs)):
        for value in values:
            if isinstance(value, torch.Tensor):
                problem = guards_intact(value)
                if problem is not None:
                    failures.append(f"{label}: {name}: the candidate wrote outside the buffer ({problem})")
                    break
    return failures


def run_case(
    kernel: KernelDef, original: Launcher, candidate: Launcher, label: str, args: Sequence[Any], alternate: bool = False
) -> Verdict:
    """One case: original and candidate on identical copies, candidate twice for determinism.

    ``alternate`` fills write-only outputs with the second sentinel (integer and bool
    outputs differ; see :func:`nan_fill_`): alternating it across cases catches an
    element left unwritten where the original happens to write the first sentinel."""
    roles = param_roles(kernel)
    # The original (trusted) reads the case's inputs themselves; the candidate gets guarded copies,
    # one set for both runs: the inputs are compared bit for bit with the case's after both.
    reference = _prepared(kernel, args, alternate, read_only=args)
    original(reference)
    first = _prepared(kernel, args, alternate, guarded=True)
    candidate(first)
    second = _prepared(kernel, args, alternate, guarded=True, read_only=first)
    candidate(second)
    _synchronize(args)
    outside = _guard_failures(kernel, label, [first, second])
    if outside:
        return Verdict("correctness", False, outside[0], {"case": label, "rule": "guard_region", "failures": outside})
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


def check_launch(
    kernel: KernelDef, original: Launcher, before: Sequence[Any], after: Sequence[Any], label: str
) -> Verdict:
    """Did one candidate call that started from ``before`` and left ``after`` write what the original
    writes from ``before``? (The timed calls of gate 4 are checked so.) ``before`` is consumed: the
    original (trusted) runs on it in place, so a gigabyte launch costs no further copy here."""
    if not before:
        return Verdict("correctness", False, f"{label}: no record of its inputs was kept")
    reference = list(before)
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
    edges: Sequence[str] = (),
) -> Verdict:
    """Gate 2: the candidate writes what the original writes on every case, and nothing else.

    ``edges`` adds the edge cases of :mod:`kernelopt.problem.edges` (large magnitudes,
    one-signed rows, NaN and +-inf, subnormals and zeros, constant rows)."""
    if not snapshots:
        return Verdict("correctness", False, f"{kernel.name} never launched in the model run: nothing to compare")
    verdicts: list[Verdict] = []
    # One case's tensors at a time: each is dropped before the next is made (no enumerate, whose
    # cached result tuple would keep the last case alive meanwhile).
    for label, args in kernel_cases(kernel, snapshots, seeds, distributions, edges=edges):
        verdicts.append(run_case(kernel, original, candidate, label, args, alternate=len(verdicts) % 2 == 1))
        del args
    return combine_cases(verdicts)
