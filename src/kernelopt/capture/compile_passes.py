"""kernelopt's own compile options: each a post-grad rewrite that
:func:`~kernelopt.capture.compat.compile_fx_with_inner_hook` runs where the options hold it (True)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kernelopt.capture.cluster_softmax import CLUSTER_SOFTMAX_OPTION, rewrite_for_cluster_softmax
from kernelopt.capture.online_softmax import ONLINE_SOFTMAX_OPTION, rewrite_for_online_softmax
from kernelopt.capture.row_softmax_op import OP_NAME as ROW_SOFTMAX_OP

COMPILE_PASSES: dict[str, Callable[[torch.fx.Graph], Any]] = {
    ONLINE_SOFTMAX_OPTION: rewrite_for_online_softmax,
    CLUSTER_SOFTMAX_OPTION: rewrite_for_cluster_softmax,
}
# The ops of kernelopt's own those rewrites put in a graph, as Inductor's wrapper calls them: what gate 1
# accepts in a graph candidate's call sequence besides the original's own calls.
OWN_OPS = frozenset({ROW_SOFTMAX_OP})
