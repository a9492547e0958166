"""``torch.ops.kernelopt.group_norm``: a group norm that reads each group once, the group held in the shared
memory of one Hopper thread-block cluster.

Inductor writes a group norm whose groups are wider than a program holds as two kernels, the statistics
and then the output, so the input is read twice; its floor is one read and one write. The op takes the
group norm's input as the graph holds it (``N, C, ...``, contiguous; float32, bfloat16 or float16), its
weight and bias by channel (or None), the number of groups and eps, and returns the output in the input's
dtype, computed in float32 and rounded once. CPU tensors, GPUs without clusters and groups no cluster
holds are computed by torch (counted and said once, as the row softmax's fallbacks are: a gate refuses a
candidate whose op fell back). ``clusters`` (0: the op's own choice) is for the probe that times each.

The kernel, its build and launch: :mod:`~kernelopt.capture.rewrites.group_norm_kernel`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernelopt.capture.rewrites import row_softmax_op
from kernelopt.capture.rewrites.group_norm_kernel import DTYPES, MAX_CLUSTER, PART_BYTES_LIMIT, launcher

OP_NAME = "torch.ops.kernelopt.group_norm.default"  # as Inductor's wrapper calls it
# A block's part at most this many bytes where a cluster of that many blocks holds the group, so that an SM
# holds two blocks (as the row softmax's BULK_PART_BYTES); past it, parts up to the 227 KB a block may ask.
SHARED_PART_BYTES = 112 * 1024
CLUSTER_SIZES = tuple(2**k for k in range(MAX_CLUSTER.bit_length()) if 2**k <= MAX_CLUSTER)  # 1 ... 16
MIN_GROUP = 4096  # narrower groups: Inductor's persistent reductions read them once already


def cluster_blocks(columns: int, itemsize: int) -> int | None:
    """The blocks of a cluster for groups of ``columns`` elements: the fewest whose parts fit
    :data:`SHARED_PART_BYTES`, else the fewest whose parts fit the most a block may ask; None past that."""
    for limit in (SHARED_PART_BYTES, PART_BYTES_LIMIT):
        blocks = next((b for b in CLUSTER_SIZES if -(-columns // b) * itemsize + 16 <= limit), None)
        if blocks is not None:
            return blocks
    return None


def max_columns(itemsize: int) -> int:
    """The widest group the op holds: 16 blocks' parts of 227 KB (float32 929792 elements)."""
    return MAX_CLUSTER * ((PART_BYTES_LIMIT - 16) // itemsize)


def unsupported(x: torch.Tensor, groups: int) -> str | None:
    """Why the kernel would not compute a group norm of this CUDA input, else None."""
    if x.dtype not in DTYPES:
        return f"no build for {x.dtype}"
    if x.dim() < 3 or x.numel() == 0:
        return "an input with no spatial dimension, or an empty one"
    if x.shape[1] % groups:
        return f"{x.shape[1]} channels in {groups} groups"
    hw = x.numel() // (x.shape[0] * x.shape[1])
    if hw < 16 // x.element_size():
        return f"{hw} elements a channel, fewer than a 16-byte pack"
    if not row_softmax_op.has_clusters(x.device.index):
        return f"no thread-block clusters on a GPU of compute capability {row_softmax_op.capability(x.device.index)}"
    columns = x.shape[1] // groups * hw
    if cluster_blocks(columns, x.element_size()) is None:
        return f"groups of {columns} elements, wider than a cluster holds ({max_columns(x.element_size())})"
    return None


def reference(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, groups: int, eps: float
) -> torch.Tensor:
    """What the op computes, by torch: the group norm in float32, in ``x``'s dtype."""
    w = weight.float() if weight is not None else None
    b = bias.float() if bias is not None else None
    return F.group_norm(x.float(), groups, w, b, eps).to(x.dtype)


def group_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    groups: int,
    eps: float,
    clusters: int = 0,
) -> torch.Tensor:
    """``F.group_norm(x, groups, weight, bias, eps)``, one read of each group (``clusters``: the blocks of a
    cluster, 0 for the op's own choice)."""
    row_softmax_op._forward_only(x, "kernelopt.group_norm")
    if x.device.type != "cuda":  # a CPU test of the rewrite: torch computes it
        return reference(x, weight, bias, groups, eps)
    reason = unsupported(x, groups)
    if reason is None and not x.is_contiguous():
        reason = "a non-contiguous input"  # the rewrite asks only for contiguous ones: a copy would cost a pass
    if reason is not None:
        row_softmax_op._fell_back(reason, "kernelopt.group_norm")
        return reference(x, weight, bias, groups, eps)
    columns = x.shape[1] // groups * (x.numel() // (x.shape[0] * x.shape[1]))
    blocks = clusters or cluster_blocks(columns, x.element_size())
    assert blocks is not None
    y = torch.empty_like(x)
    kernel = launcher(x.dtype, row_softmax_op.capability(x.device.index))
    kernel.run(x, y, _by_channel(weight), _by_channel(bias), groups, blocks, float(eps))
    return y


def _by_channel(t: torch.Tensor | None) -> torch.Tensor | None:
    """A weight or bias as the kernel reads it: contiguous float32 (a copy only where it is not already)."""
    return None if t is None else t.reshape(-1).float().contiguous()


def _group_norm_fake(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    groups: int,
    eps: float,
    clusters: int = 0,
) -> torch.Tensor:
    return torch.empty_like(x)


# registered on the dispatcher directly, as the row softmax's ops are (no custom_op wrappers)
row_softmax_op._LIBRARY.define("group_norm" + torch.library.infer_schema(group_norm, mutates_args=()))
for _key in ("CPU", "CUDA"):
    row_softmax_op._LIBRARY.impl("group_norm", group_norm, _key)
torch.library.register_fake("kernelopt::group_norm", _group_norm_fake, lib=row_softmax_op._LIBRARY)
