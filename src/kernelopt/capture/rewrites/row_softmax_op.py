"""``torch.ops.kernelopt.row_softmax``: a softmax or log-softmax whose row stays on chip, across the
thread blocks of one Hopper cluster.

A row too wide for one program's registers (a vocabulary of 50257, a 65536-wide softmax) is written by
Inductor as a looped reduction that reads it twice: once for its max and sum (online), once for the
output. Its floor is one read and one write. Here a row is split among the ``C`` blocks of a thread-block
cluster (sm_90: Hopper's clusters, co-scheduled by the hardware), each holding its part in registers; the
blocks exchange their partial max and sum through distributed shared memory at one cluster barrier and
write their part of the output from registers. The one read Inductor's kernel adds is gone.

The op takes the softmax's input as the graph holds it (float32, bfloat16 or float16, any leading shape,
the row last), an optional positive scale (a temperature's inverse, an attention scale) applied in
float32, ``log`` for a log-softmax, ``lse`` with it for ``y - logsumexp(y)`` (logits normalised by their
logsumexp), and ``out_float`` for a float32 output of a lower-precision input
(``log_softmax(x.float())``); otherwise the output has the input's dtype. Rows holding a NaN or +inf, and
rows all -inf, come out NaN, as torch's softmax writes them; under ``lse`` a row whose max is +inf or
-inf is shifted by it, as torch's logsumexp is. CPU and non-Hopper tensors are computed by
torch itself (what a CPU test of the rewrite runs).

The kernels, their build and their launch: :mod:`~kernelopt.capture.rewrites.row_softmax_kernel`. ``bulk`` asks
for the form that holds each block's part in shared memory (copied there by one bulk copy) instead of
registers.

``torch.ops.kernelopt.row_l2_normalize`` is the same kernel's other build: each row divided by its L2
norm (at least ``eps``: ``F.normalize``'s clamp), the blocks exchanging their sums of squares, so a row
that Inductor reads twice (its norm, then the division) is read once
(:mod:`~kernelopt.capture.rewrites.cluster_norm`). Its output has the input's dtype, computed in float32.
"""

from __future__ import annotations

import functools
from collections import Counter

import torch

from kernelopt.capture.rewrites.row_softmax_kernel import BULK_THREADS, DTYPES, ITEMS, MAX_CLUSTER, THREADS, launcher

MAX_COLUMNS = THREADS * ITEMS * MAX_CLUSTER  # 131072: wider rows are left to Inductor
MIN_COLUMNS = 4096  # narrower rows: Inductor's persistent reductions hold them and read them once already
# The shared-memory form (``bulk``): a block's part of the row at most this many bytes, so an SM holds two
# blocks or more (227 KB of shared memory a block, 228 an SM). scripts/device/row_softmax_bulk_probe.py times
# every cluster size and block width: with the form's final build the shapes this gives were the best or
# within 3 % of the best on an H100 and on the H200 (benchmarks/h100- and h200-2026-12-05-bulk-variants).
BULK_PART_BYTES = 112 * 1024
OP_NAME = "torch.ops.kernelopt.row_softmax.default"  # as Inductor's wrapper calls it
NORM_OP_NAME = "torch.ops.kernelopt.row_l2_normalize.default"


CLUSTER_SIZES = tuple(2**k for k in range(MAX_CLUSTER.bit_length()) if 2**k <= MAX_CLUSTER)  # 1, 2, 4, 8


def cluster_blocks(columns: int) -> int | None:
    """The blocks of a cluster for rows of ``columns``: the fewest whose registers hold the row (on the
    H200 each block more in a cluster cost more than the registers it saved: 50257 wide, 4 blocks of 32
    elements a thread ran 1.9x faster than 8 of 16); None where no cluster holds it."""
    return next((b for b in CLUSTER_SIZES if b * THREADS * ITEMS >= columns), None)


def bulk_blocks(columns: int, itemsize: int) -> int | None:
    """The blocks of a cluster for rows of ``columns`` in the shared-memory form: the fewest whose parts
    (``itemsize`` bytes an element, as the row is stored) fit :data:`BULK_PART_BYTES` each; None where no
    cluster holds it."""
    return next((b for b in CLUSTER_SIZES if -(-columns // b) * itemsize + 16 <= BULK_PART_BYTES), None)


def max_columns(bulk: bool, itemsize: int) -> int:
    """The widest row the op holds: in registers :data:`MAX_COLUMNS` whatever the dtype, in shared memory
    (``bulk``) a cluster's parts of :data:`BULK_PART_BYTES` as the row is stored (``itemsize`` bytes an
    element: float32 229344, a 16-bit dtype 458688, as wide as a 256000 vocabulary)."""
    return MAX_CLUSTER * ((BULK_PART_BYTES - 16) // itemsize) if bulk else MAX_COLUMNS


def blocks_for(x: torch.Tensor, bulk: bool) -> int | None:
    """The blocks of a cluster the op launches for ``x``'s rows, in its register or shared-memory form."""
    return bulk_blocks(x.shape[-1], x.element_size()) if bulk else cluster_blocks(x.shape[-1])


def supports(x: torch.Tensor, out_float: bool, bulk: bool = False) -> bool:
    """Whether the CUDA kernel computes this input (else the op falls back to torch's own softmax):
    a Hopper or later GPU, a dtype it is compiled for, a row it holds."""
    return x.device.type == "cuda" and unsupported(x, out_float, bulk) is None


def unsupported(x: torch.Tensor, out_float: bool, bulk: bool = False) -> str | None:
    """Why the CUDA kernel would not compute this input of a CUDA device, else None."""
    return _planned(x, out_float, bulk)[1]


def _planned(x: torch.Tensor, out_float: bool, bulk: bool) -> tuple[int, None] | tuple[None, str]:
    """The blocks of a cluster the kernel launches for this input of a CUDA device, or why it would not
    compute it (one pass of the checks a call makes)."""
    if x.dtype not in DTYPES:
        return None, f"no build for {x.dtype}"
    if x.dim() == 0 or x.numel() == 0:
        return None, "an empty or zero-dimensional tensor"
    if out_float and x.dtype == torch.float32:
        return None, "a float32 input asked for a float32 upcast"  # nothing to upcast: the rewrite never asks
    if not has_clusters(x.device.index):
        return None, f"no thread-block clusters on a GPU of compute capability {capability(x.device.index)}"
    blocks = blocks_for(x, bulk)
    if blocks is None:
        return (
            None,
            f"rows of {x.shape[-1]} elements, wider than a cluster holds ({max_columns(bulk, x.element_size())})",
        )
    return blocks, None


FALLBACKS: Counter[str] = Counter()  # CUDA calls torch computed in this process, by reason (fallbacks_since)


def fallbacks_since(before: Counter[str]) -> list[str]:
    """The CUDA calls torch computed since ``before`` (a copy of :data:`FALLBACKS`), one line per reason:
    what a candidate's first run reports, so a graph whose op never ran its kernel is named as such."""
    return [f"{n} call(s) computed by torch, not the kernel: {reason}" for reason, n in (FALLBACKS - before).items()]


def fallback_verdict(lines: list[str]) -> str:
    """A gate's reason for a candidate whose op was computed by torch (``lines``: :func:`fallbacks_since`):
    correct, but not what the rewrite asked the op for, so it is refused before any timing."""
    return "kernelopt's own op did not run its kernel in the candidate's process: " + "; ".join(lines)


def count_fallback(reason: str, op: str = "kernelopt.row_softmax") -> None:
    """Count a CUDA call torch computed, by the op's name and its reason, and say so once per reason."""
    FALLBACKS[f"{op}: {reason}"] += 1
    _warn_fallback(reason, op)


@functools.cache
def _warn_fallback(reason: str, op: str = "kernelopt.row_softmax") -> None:
    """Said once per reason: a CUDA call that torch computes instead runs several times slower (the rewrite
    asks for the op only where the kernel takes it, so this is a fault to see, not a path to take)."""
    import warnings

    warnings.warn(f"{op} computed by torch on a CUDA tensor, not by its kernel: {reason}", stacklevel=3)


def forward_only(x: torch.Tensor, op: str) -> None:
    """Refuse an input autograd would differentiate through the op: neither op has a backward (the rewrites
    put them in compiled graphs, whose forward runs with grad mode off)."""
    if x.requires_grad and torch.is_grad_enabled():
        raise RuntimeError(
            f"{op} has no backward: call it under torch.no_grad() or on a tensor that does not require grad"
        )


@functools.cache
def capability(device: int | None) -> tuple[int, int]:
    """The GPU's compute capability, asked once per device: every call of the op asks."""
    return torch.cuda.get_device_capability(device)


def has_clusters(device: int | None) -> bool:
    """Whether the GPU has thread-block clusters (sm_90+)."""
    return capability(device) >= (9, 0)


def reference(x: torch.Tensor, scale: float, log: bool, out_float: bool, lse: bool = False) -> torch.Tensor:
    """What the op computes, by torch: the softmax in float32 over the last dimension (``lse``:
    ``y - logsumexp(y)``, which differs from a log-softmax on rows holding +inf)."""
    y = x.float() * scale
    if log and lse:
        out = y - torch.logsumexp(y, dim=-1, keepdim=True)
    else:
        out = torch.log_softmax(y, dim=-1) if log else torch.softmax(y, dim=-1)
    return out if out_float else out.to(x.dtype)


def row_softmax(
    x: torch.Tensor, scale: float, log: bool, out_float: bool, lse: bool = False, bulk: bool = False
) -> torch.Tensor:
    """Softmax (or log-softmax, ``log``; or ``y - logsumexp(y)``, ``log`` and ``lse``) of
    ``y = x * scale`` over the last dimension, one read of each row; ``bulk``: each block's part of the row
    held in shared memory, copied there by one bulk copy, instead of in registers."""
    forward_only(x, "kernelopt.row_softmax")
    if x.device.type != "cuda":  # a CPU test of the rewrite: torch computes it
        return reference(x, scale, log, out_float, lse)
    blocks, reason = _planned(x, out_float, bulk)
    if blocks is None:
        count_fallback(str(reason))
        return reference(x, scale, log, out_float, lse)
    x = x.contiguous()
    y = torch.empty(x.shape, dtype=torch.float32 if out_float else x.dtype, device=x.device)
    kernel = launcher(x.dtype, y.dtype, capability(x.device.index))
    if bulk:
        kernel.run_bulk(x, y, blocks, BULK_THREADS, float(scale), bool(log), bool(log and lse))
    else:
        kernel.run(x, y, blocks, True, float(scale), bool(log), bool(log and lse))
    return y


def _row_softmax_fake(
    x: torch.Tensor, scale: float, log: bool, out_float: bool, lse: bool = False, bulk: bool = False
) -> torch.Tensor:
    return torch.empty(x.shape, dtype=torch.float32 if out_float else x.dtype, device=x.device)


def norm_reference(x: torch.Tensor, eps: float) -> torch.Tensor:
    """What :func:`row_l2_normalize` computes, by torch: ``x / max(sqrt(sum(x**2)), eps)`` over the last
    dimension in float32 (the clamp keeps a NaN norm, as ``clamp_min`` does), in ``x``'s dtype."""
    y = x.float()
    return (y / (y * y).sum(dim=-1, keepdim=True).sqrt().clamp_min(eps)).to(x.dtype)


def row_l2_normalize(x: torch.Tensor, eps: float, bulk: bool = False) -> torch.Tensor:
    """Each row of ``x`` (the last dimension) divided by its L2 norm, at least ``eps``, one read of each row;
    ``bulk``: the shared-memory form, as :func:`row_softmax` takes it."""
    forward_only(x, "kernelopt.row_l2_normalize")
    if x.device.type != "cuda":  # a CPU test of the rewrite: torch computes it
        return norm_reference(x, eps)
    blocks, reason = _planned(x, False, bulk)
    if blocks is None:
        count_fallback(str(reason), "kernelopt.row_l2_normalize")
        return norm_reference(x, eps)
    x = x.contiguous()
    y = torch.empty_like(x)
    kernel = launcher(x.dtype, x.dtype, capability(x.device.index))
    if bulk:
        kernel.run_bulk(x, y, blocks, BULK_THREADS, 1.0, False, False, norm=True, eps=float(eps))
    else:
        kernel.run(x, y, blocks, True, 1.0, False, False, norm=True, eps=float(eps))
    return y


def _row_l2_normalize_fake(x: torch.Tensor, eps: float, bulk: bool = False) -> torch.Tensor:
    return torch.empty_like(x)


# The two ops registered with the dispatcher directly (``define`` and ``impl``), not by
# ``torch.library.custom_op``, whose Python wrappers on the autograd and backend keys cost several
# microseconds more a call (pytorch/pytorch#139500): the op's whole host path counts where a forward's
# launches are not hidden behind the GPU's work. Neither op has a backward (:func:`forward_only`). The
# library, the fallback count and the forward-only check are every kernelopt op's (the group norm's too,
# :mod:`~kernelopt.capture.rewrites.group_norm_op`).
OPS_LIBRARY = torch.library.Library("kernelopt", "FRAGMENT")
for _function, _fake in ((row_softmax, _row_softmax_fake), (row_l2_normalize, _row_l2_normalize_fake)):
    OPS_LIBRARY.define(_function.__name__ + torch.library.infer_schema(_function, mutates_args=()))
    for _key in ("CPU", "CUDA"):
        OPS_LIBRARY.impl(_function.__name__, _function, _key)
    torch.library.register_fake(f"kernelopt::{_function.__name__}", _fake, lib=OPS_LIBRARY)
