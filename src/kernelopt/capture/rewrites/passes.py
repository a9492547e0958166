"""kernelopt's own compile options: each a post-grad rewrite that :func:`compile_with_options` hands to
:func:`~kernelopt.capture.compat.compile_fx_with_inner_hook` where the options hold it (True). Every
compile of kernelopt's (capture, export, backend) comes through here, so a result verified under an
option is rebuilt under it; the fence in ``compat`` knows only Inductor's own options."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from kernelopt.capture import compat
from kernelopt.capture.rewrites.cluster_group_norm import CLUSTER_GROUP_NORM_OPTION, rewrite_for_cluster_group_norm
from kernelopt.capture.rewrites.cluster_norm import (
    CLUSTER_NORM_BULK_OPTION,
    CLUSTER_NORM_OPTION,
    rewrite_for_cluster_norm,
    rewrite_for_cluster_norm_bulk,
)
from kernelopt.capture.rewrites.cluster_softmax import (
    CLUSTER_SOFTMAX_BULK_OPTION,
    CLUSTER_SOFTMAX_OPTION,
    rewrite_for_cluster_softmax,
    rewrite_for_cluster_softmax_bulk,
)
from kernelopt.capture.rewrites.group_norm_op import OP_NAME as GROUP_NORM_OP
from kernelopt.capture.rewrites.group_rows import GROUP_ROWS_OPTION, rewrite_for_group_rows
from kernelopt.capture.rewrites.online_softmax import ONLINE_SOFTMAX_OPTION, rewrite_for_online_softmax
from kernelopt.capture.rewrites.row_softmax_op import NORM_OP_NAME as ROW_NORM_OP
from kernelopt.capture.rewrites.row_softmax_op import OP_NAME as ROW_SOFTMAX_OP
from kernelopt.capture.rewrites.var_sums import VAR_SUMS_OPTION, rewrite_for_var_sums

# Each returns how many changes it made; they run in this order whatever the options' (the group norm's
# op and group_rows find a group norm by its var_mean, which var_sums rewrites; the op takes it whole).
COMPILE_PASSES: dict[str, Callable[[torch.fx.Graph], int]] = {
    ONLINE_SOFTMAX_OPTION: rewrite_for_online_softmax,
    CLUSTER_SOFTMAX_OPTION: rewrite_for_cluster_softmax,
    CLUSTER_SOFTMAX_BULK_OPTION: rewrite_for_cluster_softmax_bulk,
    CLUSTER_NORM_OPTION: rewrite_for_cluster_norm,
    CLUSTER_NORM_BULK_OPTION: rewrite_for_cluster_norm_bulk,
    CLUSTER_GROUP_NORM_OPTION: rewrite_for_cluster_group_norm,
    GROUP_ROWS_OPTION: rewrite_for_group_rows,
    VAR_SUMS_OPTION: rewrite_for_var_sums,
}
# The ops of kernelopt's own those rewrites put in a graph, as Inductor's wrapper calls them: what gate 1
# accepts in a graph candidate's call sequence besides the original's own calls.
OWN_OPS = frozenset({ROW_SOFTMAX_OP, ROW_NORM_OP, GROUP_NORM_OP})
# The rewrites that hand a graph's ops to those kernels of kernelopt's own (a softmax, an L2 norm, a group
# norm held on chip across a Hopper cluster): what one of them finds in a capture is work no launch config
# of Inductor's kernels reaches, so the graph stage runs for it (search.targets.structure_pays).
OWN_OP_OPTIONS = (
    CLUSTER_SOFTMAX_OPTION,
    CLUSTER_SOFTMAX_BULK_OPTION,
    CLUSTER_NORM_OPTION,
    CLUSTER_NORM_BULK_OPTION,
    CLUSTER_GROUP_NORM_OPTION,
)


def split_options(options: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[Callable[[torch.fx.Graph], int]]]:
    """``options`` as Inductor's own config patches and the rewrites of kernelopt's options set to True."""
    options = options or {}
    patches = {k: v for k, v in options.items() if k not in COMPILE_PASSES}
    rewrites = [rewrite for name, rewrite in COMPILE_PASSES.items() if options.get(name)]
    return patches, rewrites


def compile_with_options(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    on_graph: Callable[[Any], None],
    options: Mapping[str, Any] | None = None,
) -> Any:
    """Compile ``gm`` with Inductor under ``options`` (Inductor's and kernelopt's own), handing each
    compiled graph to ``on_graph``."""
    patches, rewrites = split_options(options)
    return compat.compile_fx_with_inner_hook(gm, example_inputs, on_graph, patches, rewrites)


def is_compile_option(name: str) -> bool:
    """Whether :func:`compile_with_options` takes ``name``: one of kernelopt's own compile options (a
    post-grad rewrite) or an option of this torch's Inductor."""
    return name in COMPILE_PASSES or compat.has_inductor_option(name)
