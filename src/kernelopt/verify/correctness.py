"""Gate 2: does the candidate kernel write what the original kernel writes?

The orchestrator runs the original Inductor kernel and the candidate on
identical inputs (a snapshot of a real launch, then several seeds and input
distributions) into output buffers pre-filled with :func:`nan_fill_`, and hands
this module the tensors. The decisions here are pure tensor arithmetic, on
whatever device the tensors live, and they target the reward hacks that a
comparison of values can see (the reference's section 3):

* partial or skipped writes (hack 7, 10): an element the candidate never wrote
  still holds the NaN sentinel where the original wrote a finite value;
* precision downgrades beyond the dtype's tolerance (hack 13): every finite
  element is held to :func:`~kernelopt.verify.tolerance.tolerance_for`;
* input mutation (hack 8): every read-only input must be bitwise unchanged;
* stale or uninitialised memory and races: two runs on identical inputs must
  agree bitwise, NaN positions included.

Layout is checked too (shape, dtype, strides): Inductor's launcher and the
kernels after this one read the buffer with the original's strides. How one
output differs from the original's is :mod:`kernelopt.verify.tensor_diff`
(re-exported here); this module holds the sentinels, the bitwise checks and the
verdict on a case.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor

from kernelopt.verify import _format as fmt
from kernelopt.verify._chunks import BlockStats, as_bits, blocks, chunk_elements_for, first_true, flat, unravel
from kernelopt.verify.tensor_diff import TensorDiff, compare_tensor, diff_tensor
from kernelopt.verify.verdict import Verdict

GATE = "correctness"


# --------------------------------------------------------------------------- sentinels


def nan_fill_(t: Tensor, *, alternate: bool = False) -> Tensor:
    """Fill an output buffer with a sentinel before a kernel runs, in place; returns ``t``.

    An element the kernel does not write keeps the sentinel, so a candidate
    that skips part of its output cannot pass on values the allocator happened
    to leave behind (often the original's own results, freed a moment before).

    * floating and complex: NaN, which no finite result equals, so
      :func:`compare_tensor` names unwritten elements exactly;
    * signed integers: the dtype's minimum; unsigned: its maximum;
    * bool: True (neither value is rare in a mask).

    An integer or bool sentinel can coincide with a legitimate value, so an
    unwritten element goes unseen wherever the original wrote that very value.
    ``alternate=True`` gives a second sentinel (signed: maximum, unsigned:
    half the maximum + 1, bool: False, floating: still NaN); filling with it in
    every other case makes a skipped element fail in some case. Within one case
    the original's and the candidate's buffers must get the same sentinel.
    """
    dtype = t.dtype
    if dtype.is_floating_point or dtype.is_complex:
        return t.fill_(math.nan)
    if dtype == torch.bool:
        return t.fill_(not alternate)
    info = torch.iinfo(dtype)
    if info.min < 0:
        return t.fill_(info.max if alternate else info.min)
    return t.fill_(info.max // 2 + 1 if alternate else info.max)


# --------------------------------------------------------------------------- bitwise


def bitwise_changes(
    name: str, before: Tensor, after: Tensor, *, chunk_elements: int | None = None
) -> tuple[int, tuple[int, ...] | None]:
    """How many elements differ bit for bit, and the index of the first one (None when none do).

    For "is this the same memory content": inputs before and after the
    candidate ran, or two runs of the candidate. NaN equals the same NaN here.
    A shape or dtype mismatch is the caller's bug (both come from one buffer),
    so it raises ``ValueError`` instead of failing the candidate.
    """
    if before.shape != after.shape or before.dtype != after.dtype:
        raise ValueError(
            f"{name}: cannot compare {tuple(before.shape)} {before.dtype} with {tuple(after.shape)} {after.dtype} "
            "bitwise; both tensors must come from the same buffer"
        )
    acc = BlockStats()
    for offset, index in blocks(before.shape, chunk_elements or chunk_elements_for(before)):
        b = flat(before, index)
        differs = as_bits(b) != as_bits(flat(after, index).to(b.device))
        if differs.dim() == 2:  # complex: real and imaginary bits
            differs = differs.any(dim=1)
        acc.add(offset, differs.sum(), first_true(differs))
    if not acc.rows:
        return 0, None
    count, first = BlockStats.first(acc.read(), acc.offsets, 0, 1)
    return count, None if first is None else unravel(first, before.shape)


# --------------------------------------------------------------------------- one case, all cases


def check_case(
    case: str,
    written: Mapping[str, tuple[Tensor, Tensor]],
    inputs_before_after: Mapping[str, tuple[Tensor, Tensor]],
    rerun: Mapping[str, tuple[Tensor, Tensor]] | None,
) -> Verdict:
    """Gate 2 on one case (one set of inputs): outputs, input integrity, determinism.

    ``written``: output parameter -> (original's result, candidate's result).
    ``inputs_before_after``: read-only input -> (before the candidate ran, after).
    ``rerun``: output -> (candidate's first run, second run on identical inputs),
    or None when the case was run once. Every failure is listed in
    ``details["failures"]``; the reason shows the most telling one: input
    mutation first (it can make a wrong output look right), then outputs,
    then non-determinism. Reasons start with the ``case`` label.
    """
    failures: list[str] = []
    if not written:
        failures.append("no outputs were compared; pass every parameter the kernel writes in `written`")
    for name, (before, after) in inputs_before_after.items():
        changed, first = bitwise_changes(name, before, after)
        if changed:
            failures.append(
                f"{name} was modified by the candidate (input mutation): {changed} elements changed, "
                f"first at index {fmt.index(first or ())}"
            )
    outputs: dict[str, dict[str, object]] = {}
    for name, (original, candidate) in written.items():
        diff = diff_tensor(name, original, candidate)
        outputs[name] = diff.to_dict()
        if diff.reason is not None:
            failures.append(diff.reason)
    for name, (first_run, second_run) in (rerun or {}).items():
        changed, first = bitwise_changes(name, first_run, second_run)
        if changed:
            failures.append(
                f"{name} differs between two runs on the same inputs (non-deterministic or reads "
                f"uninitialised memory): {changed} of {first_run.numel()} elements, "
                f"first at index {fmt.index(first or ())}"
            )
    details: dict[str, object] = {
        "case": case,
        "outputs": outputs,
        "inputs_checked": sorted(inputs_before_after),
        "rerun_checked": sorted(rerun) if rerun is not None else None,
        "failures": [f"{case}: {f}" for f in failures],
    }
    if failures:
        return Verdict(GATE, False, f"{case}: {failures[0]}", details)
    return Verdict(GATE, True, f"{case}: {len(written)} output(s) matched the original kernel", details)


def combine_cases(verdicts: list[Verdict]) -> Verdict:
    """One gate-2 verdict from every case: it passes only if each case passed.

    Details keep each case's outcome and, per output, the worst errors over
    all cases (what a report shows as "how close").
    """
    n = len(verdicts)
    worst_abs: dict[str, float] = {}
    worst_rel: dict[str, float] = {}
    for verdict in verdicts:
        for name, stats in (verdict.details.get("outputs") or {}).items():
            for key, worst in (("max_abs_err", worst_abs), ("max_rel_err", worst_rel)):
                value = stats.get(key)
                if value is not None:
                    worst[name] = max(worst.get(name, 0.0), float(value))
    failed = [v for v in verdicts if not v.passed]
    details: dict[str, object] = {
        "n_cases": n,
        "n_failed": len(failed),
        "cases": [{"case": v.details.get("case"), "passed": v.passed, "reason": v.reason} for v in verdicts],
        "max_abs_err": worst_abs,
        "max_rel_err": worst_rel,
    }
    if n == 0:
        return Verdict(GATE, False, "no cases were run; the correctness gate needs at least one", details)
    if failed:
        return Verdict(GATE, False, f"{failed[0].reason} ({len(failed)} of {n} cases failed)", details)
    return Verdict(GATE, True, f"{n} cases (snapshot + seeds x distributions) matched the original kernel", details)


__all__ = [
    "GATE",
    "TensorDiff",
    "bitwise_changes",
    "check_case",
    "combine_cases",
    "compare_tensor",
    "diff_tensor",
    "nan_fill_",
]
