"""Graph candidates under CUDA graphs: a candidate made for the plain compile stands in for the same
graph written as one CUDA-graph partition (what ``mode="reduce-overhead"`` compiles).

The CPU has no CUDA graphs, so Inductor is made to write its partitioned wrapper for CPU ops
(``compat.cpu_graph_partitions``): the same ``Runner`` whose ``call`` forwards to ``partition_0``,
here with the partition's outputs in another order than ``call``'s, which the swap must undo.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kernelopt.capture import capture, compat
from kernelopt.capture.artifact import separate_code
from kernelopt.capture.call_sequence import (
    folded_digest,
    graph_digest,
    is_partitioned,
    single_partition,
    wrapper_facts,
)
from kernelopt.capture.graph_swap import (
    GraphCandidate,
    build_graph_kernels,
    check_graphs_live,
    from_variant,
    restore_graph,
    swap_graph,
)
from kernelopt.capture.swap import SwapError
from kernelopt.deliver.backend import KerneloptBackend
from kernelopt.verify.static_graph import check_static_graph

VARIANT = {"max_fusion_size": 1}  # one node per kernel: another call sequence


class TwoOutputs(torch.nn.Module):
    """A vendor call between generated kernels, and two outputs Inductor's partition returns swapped."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(24, 24))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.mm(x.sin() * 2.0, self.w)).relu().sum(1), x.cos() + 1.0


@pytest.fixture(scope="module")
def compiled():
    torch.manual_seed(0)
    model = TwoOutputs().eval()
    inputs = [torch.randn(16, 24)]
    plain = capture(model, inputs, {})
    variant = capture(separate_code(model, "partition_variant"), inputs, VARIANT, reset=False)
    with compat.cpu_graph_partitions():
        partitioned = capture(separate_code(model, "partitioned"), inputs, {}, reset=False)
    candidate = from_variant(plain.graphs[0], variant.graphs[0], "ko0", f"Inductor under {VARIANT}", VARIANT)
    assert candidate is not None
    return model, inputs, plain, partitioned, candidate


def test_one_partition_folds_back_to_the_plain_graph(compiled) -> None:
    _, _, plain, partitioned, candidate = compiled
    mine, theirs = plain.graphs[0].source_code, partitioned.graphs[0].source_code
    assert is_partitioned(theirs) and not is_partitioned(mine)
    assert graph_digest(theirs) != graph_digest(mine)  # other text: the exact digest cannot match
    assert folded_digest(theirs) == folded_digest(mine) == candidate.folded_digest
    partition = single_partition(theirs)
    assert partition is not None and sorted(partition.outputs) == [0, 1]
    assert partition.outputs != (0, 1)  # the partition returns them in another order: the adapter must reorder
    assert wrapper_facts(theirs) == wrapper_facts(mine)  # vendor calls read from the partition too
    assert GraphCandidate.from_dict(candidate.to_dict()) == candidate
    old = {k: v for k, v in candidate.to_dict().items() if k != "folded_digest"}  # a file from before
    assert GraphCandidate.from_dict(old).folded_digest == ""


def test_another_graph_folds_to_another_digest(compiled) -> None:
    model, inputs, plain, partitioned, _ = compiled
    source = partitioned.graphs[0].source_code
    kernel = next(iter(partitioned.graphs[0].kernels))
    changed = source.replace(f"    {kernel}(", f"    {kernel}(\n", 1).replace(f"{kernel}(\n", f"{kernel}(", 1)
    assert folded_digest(changed) == folded_digest(source)  # text alone: same statements
    dropped = source.replace("    del buf0\n", "", 1)
    assert dropped != source and folded_digest(dropped) != folded_digest(source)
    other = capture(separate_code(model, "plain_variant_digest"), inputs, VARIANT, reset=False)
    assert folded_digest(other.graphs[0].source_code) != folded_digest(plain.graphs[0].source_code)


def test_the_candidate_runs_in_the_partition_and_restore_puts_it_back(compiled) -> None:
    _, inputs, _, partitioned, candidate = compiled
    graph = partitioned.graphs[0]
    partition = single_partition(graph.source_code)
    assert partition is not None
    function = compat.partition_function(graph.module, partition.function)
    original = function.__code__
    expected = partitioned(*inputs)
    assert check_static_graph(candidate, original_source=graph.source_code).passed
    swap = swap_graph(partitioned, candidate, build_graph_kernels(candidate))
    try:
        assert function.__code__ is not original and swap.function is function
        check_graphs_live(partitioned, [swap], inputs)  # every kernel of the candidate launched
        got = partitioned(*inputs)
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b)  # the outputs in call's order, not the partition's
    finally:
        restore_graph(swap)
    assert function.__code__ is original
    assert not any(name in vars(graph.module) for name in [*candidate.kernel_names, *swap.helpers])
    for a, b in zip(partitioned(*inputs), expected, strict=True):
        torch.testing.assert_close(a, b)


def test_a_candidate_without_the_folded_digest_or_for_another_graph_is_refused(compiled) -> None:
    _, _, _, partitioned, candidate = compiled
    built = build_graph_kernels(candidate)
    with pytest.raises(SwapError, match="CUDA-graph partitions"):
        swap_graph(partitioned, dataclasses.replace(candidate, folded_digest=""), built)  # an older export
    with pytest.raises(SwapError, match="compiled differently"):
        swap_graph(partitioned, dataclasses.replace(candidate, folded_digest="0" * 64), built)


def test_a_graph_split_into_several_partitions_matches_no_candidate(compiled) -> None:
    _, _, plain, partitioned, candidate = compiled
    source = partitioned.graphs[0].source_code
    # Two partitions (what a cudagraph-unsafe op between kernels makes): call does work of its own.
    split = source.replace("runner = Runner(partitions=[partition_0,])", "runner = Runner(partitions=[partition_0, partition_0])")
    split = split.replace("        del partition0_args\n", "        del partition0_args\n        (buf9,) = self.partitions[1]([])\n", 1)
    assert split != source and is_partitioned(split)
    assert single_partition(split) is None and folded_digest(split) is None
    call_only = dataclasses.replace(candidate, kernels=())  # an exported file brings no C++ kernels
    backend = KerneloptBackend(graphs=[call_only])
    assert backend._graph_for(split) is None
    assert backend._graph_for(source) == call_only  # the one partition is matched by its folded digest
    assert backend._graph_for(plain.graphs[0].source_code) == call_only  # the plain compile by its own
