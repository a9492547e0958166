"""Persistent-grid candidates on Inductor's own reductions: the rewrite computes the original's
outputs bit for bit (Triton's interpreter on the CPU), passes the static gate, and is proposed only
for multi-pass reductions whose rows in flight would not fit L2."""

from __future__ import annotations

import importlib.util
import random
import re
import sys
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES

from kernelopt.capture.kernel_source import pin_launch_config
from kernelopt.capture.output_code import triton_kernel_def
from kernelopt.search.candidate import Candidate, EvaluationResult
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext, available_operators
from kernelopt.search.persistent_grid import PersistentGridOperator, grid_stride, program_counts
from kernelopt.verify.static import check_static

ROW_L2 = (FIXTURES / "inductor" / "10_row_l2_normalize.kernel.py").read_text()
ROW_L2_NAME = "triton_red_fused_div_linalg_vector_norm_0"
H200_L2 = 50 * 2**20
TUNED = {"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16, "num_stages": 1}


def _small(source: str, rows: int, width: int) -> str:
    """The same kernel as Inductor wrote it, at ``rows`` x ``width`` (its sizes are constants)."""
    return (
        source.replace("xnumel = 32768", f"xnumel = {rows}")
        .replace("r0_numel = 65535", f"r0_numel = {width}")
        .replace("65535*x0", f"{width}*x0")
    )


def _jit(source: str, name: str, tmp_path: Path, tag: str):
    """The ``@triton.jit`` function of an Inductor module, without Inductor's launcher around it."""
    body = source[source.index("@triton.jit") :]
    path = tmp_path / f"{tag}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n" + body)
    spec = importlib.util.spec_from_file_location(f"ko_grid_{tag}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


@pytest.mark.parametrize(("rows", "xblock", "programs"), [(8, 1, 3), (8, 2, 3), (8, 1, 1), (6, 1, 5)])
def test_the_walked_kernel_computes_the_originals_outputs_bit_for_bit(
    tmp_path: Path, rows: int, xblock: int, programs: int
) -> None:
    width = 1023  # not a multiple of R0_BLOCK: the masked tail of every pass is walked too (Inductor wrote
    # this kernel for rows a multiple of XBLOCK: it masks no rows)
    original = _small(ROW_L2, rows, width)
    walked = grid_stride(original, ROW_L2_NAME, programs)
    assert walked is not None
    x = torch.randn(rows, width)
    outs = []
    for tag, source in (("original", original), ("walked", walked)):
        kernel = _jit(source, ROW_L2_NAME, tmp_path, f"{tag}_{rows}_{xblock}_{programs}")
        out = torch.full_like(x, float("nan"))
        kernel[(-(-rows // xblock),)](x, out, rows, width, XBLOCK=xblock, R0_BLOCK=256)  # Inductor's grid
        outs.append(out)
    assert not outs[1].isnan().any()  # every tile was walked: none left unwritten
    assert torch.equal(outs[0], outs[1])


def test_every_tile_is_walked_once(tmp_path: Path) -> None:
    """A kernel that adds into its output (as an in-place one reads what it writes) would count a tile
    walked twice twice: the programs past the count return, and the tiles they would have had are
    the first programs' to walk."""
    store = "tl.store(out_ptr1 + (r0_1 + 1023*x0), tmp7, r0_mask)"
    adding = _small(ROW_L2, 7, 1023).replace(
        store, "tl.store(out_ptr1 + (r0_1 + 1023*x0), tl.load(out_ptr1 + (r0_1 + 1023*x0), r0_mask) + tmp7, r0_mask)"
    )
    walked = grid_stride(adding, ROW_L2_NAME, 3)
    assert walked is not None and store not in adding
    unguarded = walked.replace("if tl.program_id(0) < 3:", "if tl.program_id(0) < 1000:")  # every program walks
    x = torch.randn(7, 1023)
    expected = x / torch.norm(x, p=2, dim=1, keepdim=True)
    for tag, source, once in (("walked", walked, True), ("unguarded", unguarded, False)):
        out = torch.zeros_like(x)
        _jit(source, ROW_L2_NAME, tmp_path, f"adding_{tag}")[(7,)](x, out, 7, 1023, XBLOCK=1, R0_BLOCK=256)
        assert torch.allclose(out, expected) is once, tag


def test_the_walked_kernel_passes_the_static_gate_and_keeps_inductors_module() -> None:
    walked = grid_stride(ROW_L2, ROW_L2_NAME, 100)
    assert walked is not None
    verdict = check_static(walked, kernel_name=ROW_L2_NAME, original_source=ROW_L2)
    assert verdict.passed, verdict.reason
    head = ROW_L2[: ROW_L2.index("    xoffset = ")]
    assert walked.startswith(head)  # decorator, signature and constants untouched
    assert "if tl.program_id(0) < 100:" in walked and walked.count("tl.program_id(") == 2
    assert "        xoffset = ko_tile * XBLOCK" in walked


def test_kernels_the_rewrite_does_not_understand_are_left_alone() -> None:
    assert grid_stride(ROW_L2, "triton_no_such_kernel", 4) is None
    two_d = ROW_L2.replace("    x0 = xindex", "    y0 = tl.program_id(1)\n    x0 = xindex")
    assert grid_stride(two_d, ROW_L2_NAME, 4) is None  # a second program id: not a one-dimensional walk
    returns = ROW_L2.replace("    x0 = xindex", "    if xoffset > 4:\n        return\n    x0 = xindex")
    assert grid_stride(returns, ROW_L2_NAME, 4) is None  # an early return would end the walk for every tile
    with pytest.raises(ValueError, match="at least 1"):
        grid_stride(ROW_L2, ROW_L2_NAME, 0)


def test_program_counts_keep_the_rows_in_flight_within_l2() -> None:
    # 32768 rows of 65535 fp32 (256 KB): 100 rows fill half of a 50 MB L2, then one per SM, one per two
    assert program_counts(ROW_L2, ROW_L2_NAME, 1, H200_L2) == [100, 132, 66]
    assert program_counts(ROW_L2, ROW_L2_NAME, 2, H200_L2) == [50, 132, 66]
    assert program_counts(ROW_L2, ROW_L2_NAME, 1, None) == [132, 66]  # L2 unknown: per-SM counts only
    assert program_counts(_small(ROW_L2, 64, 65535), ROW_L2_NAME, 1, H200_L2) == []  # 16 MB in all: fits L2
    one_pass = re.sub(r"    for r0_offset in tl\.range\(0, r0_numel, R0_BLOCK\):\n(?:        .*\n)+?    tmp3 = ", "    tmp3 = ", ROW_L2)
    assert one_pass.count("for r0_offset in") == 1
    assert program_counts(one_pass, ROW_L2_NAME, 1, H200_L2) == []  # read once: no second pass to save


def _node(id_: int, candidate: Candidate, parent: int | None = None) -> Node:
    result = EvaluationResult(True, 1.0, None, "baseline")
    return Node(id_, 1, ROW_L2_NAME, parent, candidate.operator, candidate.key(), candidate, 1, "evaluated",
                1.0, None, None, result)  # fmt: skip


def _context(nodes: list[Node], facts: dict) -> SearchContext:
    kernel = triton_kernel_def(ROW_L2_NAME, ROW_L2)
    return SearchContext(ROW_L2_NAME, kernel, ROW_L2, TUNED, nodes, random.Random(0), facts)


def test_the_operator_walks_the_parents_config_and_never_walks_twice() -> None:
    assert "persistent-grid" in available_operators()
    root = _node(1, Candidate(ROW_L2_NAME, "root", source=ROW_L2, config=TUNED))
    proposals = PersistentGridOperator().propose(root, _context([root], {"l2_bytes": H200_L2}), 4)
    assert [c.note for c in proposals] == [
        "100 programs walk the rows (XBLOCK 1)",
        "100 programs walk the rows (XBLOCK 1), num_stages 3",
        "132 programs walk the rows (XBLOCK 1)",
        "66 programs walk the rows (XBLOCK 1)",
    ]
    counts, stages = (100, 100, 132, 66), (1, 3, 1, 1)
    for cand, count, stage in zip(proposals, counts, stages):
        walked = grid_stride(ROW_L2, ROW_L2_NAME, count)
        assert walked is not None and cand.config == {**TUNED, "num_stages": stage}
        assert cand.source == (walked if stage == 1 else pin_launch_config(walked, ROW_L2_NAME, cand.config))
    assert len(PersistentGridOperator().propose(root, _context([root], {"l2_bytes": H200_L2}), 1)) == 1
    child = _node(2, proposals[0], parent=1)
    assert PersistentGridOperator().propose(child, _context([root, child], {"l2_bytes": H200_L2}), 4) == []
    untuned = _node(1, Candidate(ROW_L2_NAME, "root", source=ROW_L2, config=None))
    ctx = SearchContext(ROW_L2_NAME, triton_kernel_def(ROW_L2_NAME, ROW_L2), ROW_L2, None, [untuned], random.Random(0), {})
    assert PersistentGridOperator().propose(untuned, ctx, 4) == []  # the autotuner picks XBLOCK: no tile to count
