"""Gate 2 on the device: run the original and the candidate kernel alone and compare.

Cases: every recorded launch snapshot (real data from a model run), then fresh
values in the snapshot's exact layouts for each seed × input distribution.
Floating inputs get new values; integer inputs (indices) keep the snapshot's,
since their valid range is not ours to invent. Write-only outputs are pre-filled
with NaN sentinels in both runs, so an element the candidate does not write
shows up wherever the original wrote a value.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from kernelopt.capture.output_code import KernelDef
from kernelopt.capture.snapshot import clone_args, launch
from kernelopt.verify.cases import DEFAULT_SEEDS, kernel_cases, param_roles
from kernelopt.verify.correctness import check_case, combine_cases, nan_fill_
from kernelopt.verify.verdict import Verdict

def _prepared(kernel: KernelDef, args: Sequence[Any], alternate: bool = False) -> list[Any]:
    copy = clone_args(args)
    for (name, reads, writes), value in zip(param_roles(kernel), copy):
        if writes and not reads and isinstance(value, torch.Tensor):
            nan_fill_(value, alternate=alternate)
    return copy


def run_case(kernel: KernelDef, original: Any, candidate: Any, label: str, args: Sequence[Any],
             alternate: bool = False) -> Verdict:
    """One case: original and candidate on identical copies, candidate twice for determinism.

    ``alternate`` fills write-only outputs with the second sentinel (integer and bool
    outputs differ; see :func:`nan_fill_`): alternating it across cases catches an
    element left unwritten where the original happens to write the first sentinel."""
    roles = param_roles(kernel)
    reference = _prepared(kernel, args, alternate)
    launch(original, reference)
    first = _prepared(kernel, args, alternate)
    launch(candidate, first)
    second = _prepared(kernel, args, alternate)
    launch(candidate, second)
    torch.cuda.synchronize()
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


def run_subkernel_gate(
    kernel: KernelDef,
    original: Any,
    candidate: Any,
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
