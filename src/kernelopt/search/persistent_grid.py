"""Persistent-grid candidates: a multi-pass reduction that walks its rows with fewer programs.

A looped reduction Inductor writes for a wide row reads the row once per pass (a norm, then the
division by it; a maximum and a sum, then the output) and marks the first pass's loads
``evict_last`` so the second finds the row in L2. That only holds while the rows being worked on
at once fit there: on the H200 a 2048 x 131072 fp32 log-softmax has 4 programs of 16 warps on each
of 132 SMs, 528 rows of 512 KB in flight against a 50 MB L2, and its second pass comes from memory
(``benchmarks/h200-2026-12-03-suite-modes``). Neither a launch config nor an eviction hint changes
how many rows are in flight; this rewrite does. The launch grid stays Inductor's (one program per
tile of XBLOCK rows: the launcher computes it), the first ``programs`` programs walk every tile
with a stride of ``programs``, and the others return at once, so at most ``programs`` tiles are
in flight. Each tile is computed by the same code as before, in the same order: the outputs are
the original's, bit for bit. Whether the smaller grid still moves enough bytes at once to keep
memory busy is the performance gate's question; the operator proposes the count that fits L2
(as it is, and with its loads pipelined over three stages, which keeps more of them in flight per
program) and one or two per-SM counts beside it.
"""

from __future__ import annotations

import math
import re

from kernelopt.capture.kernel_source import pin_launch_config
from kernelopt.search.builtin_operators import expansion_point
from kernelopt.search.candidate import Candidate
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext, register_operator

L2_SHARE = 0.5  # of L2 the tiles in flight may fill: the outputs written meanwhile pass through it too
PIPELINED = 3  # num_stages of the pipelined variant: each program keeps its next loads in flight
_PROGRAM_ID = "tl.program_id("
_XOFFSET_RE = re.compile(r"^(?P<indent>[ \t]+)xoffset = tl\.program_id\(0\) \* XBLOCK[ \t]*$")
_CONST_RE = r"^[ \t]+{name} = (?P<value>\d+)[ \t]*$"
_DTYPE_BYTES = {"fp64": 8, "i64": 8, "fp32": 4, "i32": 4, "fp16": 2, "bf16": 2, "i16": 2, "i8": 1, "u8": 1}


def _function_span(lines: list[str], kernel_name: str) -> tuple[int, int] | None:
    """(index of the ``def`` line, index one past the function's last line) of ``kernel_name``."""
    start = next((i for i, line in enumerate(lines) if line.startswith(f"def {kernel_name}(")), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][:1] in (" ", "\t")):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return start, end


def grid_stride(source: str, kernel_name: str, programs: int) -> str | None:
    """``source`` with ``kernel_name``'s tiles walked by its first ``programs`` programs (the rest
    return at once), or None where the kernel is not a one-dimensional grid whose only use of the
    program id is Inductor's ``xoffset = tl.program_id(0) * XBLOCK``."""
    if programs < 1:
        raise ValueError(f"programs must be at least 1, got {programs}")
    lines = source.split("\n")
    span = _function_span(lines, kernel_name)
    if span is None:
        return None
    start, end = span
    body = lines[start + 1 : end]
    if sum(line.count(_PROGRAM_ID) for line in body) != 1 or any(line.strip().startswith("return") for line in body):
        return None
    at = next((i for i, line in enumerate(body) if _XOFFSET_RE.match(line)), None)
    if at is None:
        return None
    indent = _XOFFSET_RE.match(body[at]).group("indent")  # type: ignore[union-attr]
    rest = body[at + 1 :]
    if any(line.strip() and not line.startswith(indent) for line in rest):
        return None  # the offset is set inside a block: not the function's top level
    walked = [
        f"{indent}if tl.program_id(0) < {programs}:  # kernelopt: {programs} programs walk every tile",
        f"{indent}    for ko_tile in tl.range(tl.program_id(0), tl.cdiv(xnumel, XBLOCK), {programs}):",
        f"{indent}        xoffset = ko_tile * XBLOCK",
        *[f"{indent}        {line[len(indent) :]}" if line.strip() else line for line in rest],
    ]
    return "\n".join([*lines[: start + 1], *body[:at], *walked, *lines[end:]])


def _constant(body: str, name: str) -> int | None:
    match = re.search(_CONST_RE.format(name=name), body, re.M)
    return int(match.group("value")) if match else None


def _passes(body: str) -> int:
    return len(re.findall(r"^[ \t]+for r0_offset in ", body, re.M))


def _input_bytes(source: str) -> int:
    """The widest element among the kernel's input pointers (``'in_ptr0': '*fp32'``), 4 if unread."""
    sizes = [_DTYPE_BYTES.get(d, 4) for d in re.findall(r"'in(?:_out)?_ptr\d+': '\*(\w+)'", source)]
    return max(sizes, default=4)


def program_counts(source: str, kernel_name: str, xblock: int, l2_bytes: int | None) -> list[int]:
    """The program counts worth trying for a multi-pass looped reduction, most promising first: the
    count whose tiles in flight fill :data:`L2_SHARE` of L2 (where L2 is known), then one program per
    SM and one per two SMs; [] where the kernel reads its rows in one pass, or its tiles would fit anyway."""
    lines = source.split("\n")
    span = _function_span(lines, kernel_name)
    if span is None:
        return []
    body = "\n".join(lines[span[0] : span[1]])
    xnumel, rnumel = _constant(body, "xnumel"), _constant(body, "r0_numel")
    sms = re.search(r"multi_processor_count=(\d+)", source)
    if xnumel is None or rnumel is None or _passes(body) < 2 or xblock < 1:
        return []
    tiles = math.ceil(xnumel / xblock)
    tile_bytes = xblock * rnumel * _input_bytes(source)
    if l2_bytes and tiles * tile_bytes <= L2_SHARE * l2_bytes:
        return []  # every row fits L2 at once: nothing to gain from fewer in flight
    counts = [max(1, int(L2_SHARE * l2_bytes) // tile_bytes)] if l2_bytes else []
    if sms:
        counts += [int(sms.group(1)), int(sms.group(1)) // 2]
    out: list[int] = []
    for count in counts:
        if 1 <= count < tiles and count not in out:
            out.append(count)
    return out


@register_operator("persistent-grid")
class PersistentGridOperator:
    """Walk a multi-pass reduction's rows with as many programs as keep its rows in flight within L2
    (``facts["l2_bytes"]``: the worker's device), on the config the parent runs (Inductor's tuned one
    for the root)."""

    name = "persistent-grid"

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        if ctx.kernel is None or n <= 0 or re.search(r"ko_tile in tl\.range", parent.candidate.source or ""):
            return []
        source, config = expansion_point(parent, ctx)
        xblock = config.get("XBLOCK") if config else None
        if source is None or not isinstance(xblock, int):
            return []  # no pinned config: the tile a program covers is the autotuner's choice
        counts = program_counts(source, ctx.kernel.name, xblock, ctx.facts.get("l2_bytes"))
        # fewer programs keep fewer loads in flight: the first count also with loads pipelined
        plans = [(c, config) for c in counts[:1]] + [(c, {**config, "num_stages": PIPELINED}) for c in counts[:1]]
        plans += [(c, config) for c in counts[1:]]
        if config.get("num_stages") == PIPELINED:
            plans = [(c, cfg) for c, cfg in plans if cfg is config]
        out = []
        for count, cfg in plans[:n]:
            walked = grid_stride(source, ctx.kernel.name, count)
            if walked is None:
                return []
            note = f"{count} programs walk the rows (XBLOCK {xblock})"
            if cfg is not config:
                walked = pin_launch_config(walked, ctx.kernel.name, cfg)
                note += f", num_stages {cfg['num_stages']}"
            if source != parent.candidate.source:
                note += " (on Inductor's tuned config)"
            out.append(Candidate(ctx.target, self.name, source=walked, config=cfg, note=note))
        return out
