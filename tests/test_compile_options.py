"""kernelopt's own compile options resolved above the private-API fence: ``rewrites/passes`` splits a
compile's options into Inductor's config patches and the rewrites it hands ``compat``."""

from __future__ import annotations

import pytest
import torch

from kernelopt.capture import compat
from kernelopt.capture.rewrites.cluster_softmax import CLUSTER_SOFTMAX_OPTION
from kernelopt.capture.rewrites.online_softmax import ONLINE_SOFTMAX_OPTION, rewrite_for_online_softmax
from kernelopt.capture.rewrites.passes import compile_with_options, is_compile_option, split_options


def test_options_split_into_inductor_patches_and_the_rewrites_set_true() -> None:
    options = {ONLINE_SOFTMAX_OPTION: True, CLUSTER_SOFTMAX_OPTION: False, "split_reductions": False}
    patches, rewrites = split_options(options)
    assert patches == {"split_reductions": False}
    assert rewrites == [rewrite_for_online_softmax]
    assert split_options(None) == ({}, [])
    assert is_compile_option(ONLINE_SOFTMAX_OPTION) and is_compile_option("split_reductions")
    assert not is_compile_option("kernelopt.row_split") and not is_compile_option("no_such_option")


def test_a_compile_runs_the_rewrite_of_an_option_and_the_fence_refuses_it_raw(monkeypatch) -> None:
    """Through ``compile_with_options`` an option's rewrite runs on the compiled graph; handed straight to
    the fence, the same option is not one of Inductor's and the compile fails loudly."""
    from kernelopt.capture.rewrites import passes

    calls: list[int] = []

    def counted(graph: torch.fx.Graph) -> int:
        calls.append(len(graph.nodes))
        return rewrite_for_online_softmax(graph)

    monkeypatch.setitem(passes.COMPILE_PASSES, ONLINE_SOFTMAX_OPTION, counted)

    def backend(gm: torch.fx.GraphModule, inputs: list) -> object:
        return compile_with_options(gm, inputs, lambda cg: None, {ONLINE_SOFTMAX_OPTION: True})

    x = torch.randn(8, 300)
    torch._dynamo.reset()
    with compat.fresh_compile():
        got = torch.compile(lambda t: torch.softmax(t * 0.5, dim=-1), backend=backend)(x)
    torch.testing.assert_close(got, torch.softmax(x * 0.5, dim=-1))
    assert len(calls) == 1 and calls[0] > 0

    def raw(gm: torch.fx.GraphModule, inputs: list) -> object:
        return compat.compile_fx_with_inner_hook(gm, inputs, lambda cg: None, {ONLINE_SOFTMAX_OPTION: True})

    torch._dynamo.reset()
    with pytest.raises(Exception, match="online_softmax"), compat.fresh_compile():
        torch.compile(lambda t: torch.softmax(t * 0.5, dim=-1), backend=raw)(x)
    torch._dynamo.reset()
    assert len(calls) == 1
