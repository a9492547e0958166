"""Launch-configuration sites of a kernel file, their rewrites, and the operator that walks them."""

from __future__ import annotations

import ast
import random

from conftest import FIXTURES, ROOT

from kernelopt.search.candidate import Candidate
from kernelopt.search.file_configs import FileLaunchConfigOperator, apply_config, config_sites, neighbours
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext

SOFTMAX = (ROOT / "examples" / "kernels" / "softmax_naive.py").read_text()
AUTOTUNED = (ROOT / "examples" / "kernels" / "scale_add_autotuned.py").read_text()
IN_PLACE = (FIXTURES / "kernel_files" / "add_in_place.py").read_text()


def _node(id_: int, source: str, config=None, operator="root") -> Node:
    candidate = Candidate("k", operator, source=source, config=config)
    return Node(id_, 1, "k", None, operator, candidate.key(), candidate, 0, "evaluated", None, None, None, None)


def test_sites_are_the_autotune_list_and_each_launch_with_its_literal_keywords() -> None:
    (autotune,) = config_sites(AUTOTUNED)
    assert autotune.id == "autotune:scale_add_kernel"
    assert autotune.choices == (
        {"BLOCK": 128, "num_warps": 4, "num_stages": 3},
        {"BLOCK": 256, "num_warps": 4, "num_stages": 3},
    )
    (launch,) = config_sites(SOFTMAX)
    assert launch.id == "launch:0:softmax_kernel"
    assert launch.choices == ({"num_warps": 4, "num_stages": 3},)  # BLOCK is computed from the input: the file's
    (literal,) = config_sites(IN_PLACE)
    assert literal.choices == ({"BLOCK": 256, "num_warps": 4, "num_stages": 3},)


def test_a_rewrite_changes_only_the_configured_text_and_keeps_the_rest_of_the_file() -> None:
    pinned = apply_config(AUTOTUNED, {"autotune:scale_add_kernel": {"BLOCK": 1024, "num_warps": 8, "num_stages": 2}})
    assert 'configs=[triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=2)],' in pinned
    assert pinned.count("\n") == AUTOTUNED.count("\n") and '"""An autotuned' in pinned  # docstring and layout kept
    (site,) = config_sites(pinned)
    assert site.choices == ({"BLOCK": 1024, "num_warps": 8, "num_stages": 2},)
    warps = apply_config(SOFTMAX, {"launch:0:softmax_kernel": {"num_warps": 16, "num_stages": 2}})
    assert "BLOCK=triton.next_power_of_2(n_cols), num_warps=16, num_stages=2)" in warps
    block = apply_config(IN_PLACE, {"launch:0:add_kernel": {"BLOCK": 512, "num_warps": 4, "num_stages": 3}})
    assert "x.numel(), BLOCK=512, num_warps=4, num_stages=3)" in block
    ast.parse(block)


def test_neighbours_step_one_parameter_within_triton_s_ranges() -> None:
    near = neighbours({"BLOCK": 16, "num_warps": 32, "num_stages": 1})
    assert {"BLOCK": 32, "num_warps": 32, "num_stages": 1} in near
    assert {"BLOCK": 16, "num_warps": 16, "num_stages": 1} in near
    assert {"BLOCK": 16, "num_warps": 32, "num_stages": 2} in near
    assert len(near) == 3  # no BLOCK 8, no 64 warps, no stage 0
    assert all(
        sum(a != b for a, b in zip(sorted(c.items()), sorted({"BLOCK": 16, "num_warps": 32, "num_stages": 1}.items())))
        == 2
        for c in neighbours({"BLOCK": 16, "num_warps": 32, "num_stages": 1}, 2)
    )


def test_the_operator_pins_the_file_s_own_configs_first_then_walks_outward_and_never_repeats() -> None:
    op = FileLaunchConfigOperator()
    root = _node(1, AUTOTUNED)
    ctx = SearchContext(target="k", root_source=AUTOTUNED, nodes=[root], rng=random.Random(0))
    first = op.propose(root, ctx, 2)
    assert [c.config for c in first] == [
        {"autotune:scale_add_kernel": {"BLOCK": 128, "num_warps": 4, "num_stages": 3}},
        {"autotune:scale_add_kernel": {"BLOCK": 256, "num_warps": 4, "num_stages": 3}},
    ]
    assert all(len(config_sites(c.source or "")[0].choices) == 1 for c in first)
    history = [root, *(_node(i + 2, c.source or "", c.config, c.operator) for i, c in enumerate(first))]
    ctx.nodes = history
    more = op.propose(history[2], ctx, 50)
    keys = {c.key() for c in more}
    assert len(keys) == len(more) and not keys & {c.key() for c in first}
    assert more[0].note.startswith("autotune:scale_add_kernel: pinned BLOCK=")
    assert op.propose(root, SearchContext(target="k", root_source="x = 1\n", nodes=[root]), 4) == []


def test_a_note_names_the_whole_change_from_the_users_file_not_the_last_step() -> None:
    op = FileLaunchConfigOperator()
    root = _node(1, SOFTMAX)
    site = "launch:0:softmax_kernel"
    eight = _node(
        2,
        apply_config(SOFTMAX, {site: {"num_warps": 8, "num_stages": 3}}),
        {site: {"num_warps": 8, "num_stages": 3}},
        "launch-config",
    )
    ctx = SearchContext(target="k", root_source=SOFTMAX, nodes=[root, eight], rng=random.Random(0))
    child = next(c for c in op.propose(eight, ctx, 10) if c.config == {site: {"num_warps": 8, "num_stages": 4}})
    assert child.note == f"{site}: num_warps 4->8, num_stages 3->4"
    assert "num_warps=8, num_stages=4)" in (child.source or "")
