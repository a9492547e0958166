"""A wide row split across several programs that meet at a barrier: Inductor's cooperative
reduction, made safe for any number of rows.

A softmax or log-softmax over a row wider than one program's registers is written by Inductor as a
looped reduction that reads the row twice (once for its statistics, once for the output). Under
its cooperative reductions, with the reduction kept persistent, RSPLIT programs share a row: each
loads its part once, they exchange partial statistics through a workspace and a barrier, and each
writes its part of the output from registers. One read instead of two (on the H200: log-softmax
2048 x 131072, 0.647 ms against 0.814 ms, RSPLIT 16). Inductor only does this for at most 16 rows,
because its barrier needs every program of a row resident at once, and it launches the grid
cooperatively (at most what fits on the device), which refuses thousands of rows.

The candidates made here launch the same grid as an ordinary one and take that guarantee back by
construction: each program takes a ticket from an atomic counter when it starts, and the ticket,
not the program's position in the grid, says which row and which part it works on. Programs that
wait at a barrier then only ever wait for programs whose row has already started, or for tickets not
yet taken, which the next programs to start take: as long as RSPLIT programs fit on the device at
once, every barrier opens, whatever order the hardware starts programs in. The barrier itself is
Inductor's (``x_grid_barrier``), inlined with its leader chosen by the ticket's part.

The counter lives one slot past the semaphores buffer Inductor allocates for the graph (the call
allocates one more); the program that takes the last ticket sets it back to zero, so the buffer
is left as Inductor's contract wants it (zero, for the graph's next kernel and the next call).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch

from kernelopt.capture import compat
from kernelopt.capture.graph_swap import GraphCandidate, GraphKernel
from kernelopt.capture.kernel_source import heuristic_decorator, pin_launch_config

ROW_SPLIT_OPTION = "kernelopt.row_split"  # a graph option of kernelopt's own: elements of a row per program
# What the graph stage tries. On the H200 the best split gave each program about 8192 elements
# (log-softmax 131072 wide: RSPLIT 16; softmax 65536 wide: 8) or 16384 (log-softmax 50257 wide: 4).
CHUNKS = (8192, 16384)
MAX_RSPLIT = compat.MAX_ROW_SPLIT  # programs a row is split across at most (compat.row_split_compile)
# A reduction of this many elements or more the row split's compile makes cooperative
# (compat.row_split_compile); a graph without one it writes as compiled.
WIDE = 4096

_RSPLIT_ID = re.compile(r"^(?P<indent>[ \t]*)rsplit_id = tl\.program_id\(0\)[ \t]*$", re.MULTILINE)
_BARRIER = re.compile(r"^(?P<indent>[ \t]*)triton_helpers\.x_grid_barrier\((?P<sem>.+)\)[ \t]*$", re.MULTILINE)
_SEMAPHORES = re.compile(
    r"^(?P<head>[ \t]*(?P<name>semaphores_\w+) = empty_strided_cuda\(\()(?P<count>\d+)(?P<tail>, \), \(1, \), torch\.uint32\))",
    re.MULTILINE,
)


class RowSplitError(ValueError):
    """A kernel or call sequence this rewrite does not recognise (another torch's codegen): no
    candidate, rather than a guess."""


def wide_reductions(graph: torch.fx.Graph) -> int:
    """How many operations of a post-grad graph could reduce :data:`WIDE` elements or more into one: those
    whose output is ``WIDE`` times smaller than a tensor they read, or whose sizes are not known. The row
    split's compile changes nothing else (:func:`~kernelopt.capture.compile_stop.stop_where_unchanged`'s
    probe: a graph without one is not compiled again). Counted generously: a slice, or a matrix product
    with a long inner dimension, counts too, since a miss would stop a compile that had rows to split
    while a false count only costs the compile the probe could have saved."""
    count = 0
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        read = [_numel(n) for n in node.all_input_nodes]
        out = _numel(node, smallest=True)
        known = [n for n in read if n is not None]
        unknown = out is None or len(known) < len(read)
        count += unknown or (bool(known) and max(known) >= WIDE * max(out or 0, 1))
    return count


def _numel(node: torch.fx.Node, smallest: bool = False) -> int | None:
    """Elements of a node's value (the largest of a tuple's tensors, or the smallest); 0 for what holds
    no tensor; None where a size is not a known number, or the node has no value recorded (one a
    rewrite added)."""
    return _value_numel(node.meta["val"], smallest) if "val" in node.meta else None


def _value_numel(value: Any, smallest: bool = False) -> int | None:
    if isinstance(value, (tuple, list)):
        sizes = [_value_numel(v) for v in value if isinstance(v, torch.Tensor)]
        if None in sizes:
            return None
        known = [s for s in sizes if s is not None]
        return (min if smallest else max)(known) if known else 0
    if not isinstance(value, torch.Tensor):
        return 0
    numel = value.numel()
    return numel if isinstance(numel, int) else None


def is_cooperative(source: str, name: str) -> bool:
    """Whether ``name`` in ``source`` is an Inductor cooperative reduction."""
    try:
        return heuristic_decorator(source, name).func.attr == "cooperative_reduction"  # type: ignore[attr-defined]
    except ValueError:
        return False


def _ticket(indent: str, counter: int) -> str:
    lines = [
        # which row and which part of it this program works on: the order it started in
        f"kernelopt_ticket = tl.atomic_add(sem_ptr + {counter}, 1, sem='relaxed').to(tl.int32)",
        "if kernelopt_ticket == RSPLIT * tl.num_programs(1) - 1:",
        f"    tl.atomic_xchg(sem_ptr + {counter}, 0, sem='relaxed')  # the last ticket: the counter back to zero",
        "rsplit_id = kernelopt_ticket % RSPLIT",
        "kernelopt_xblock = kernelopt_ticket // RSPLIT",
    ]
    return "\n".join(indent + line for line in lines)


def _barrier(indent: str, sem: str) -> str:
    lines = [
        # triton_helpers.x_grid_barrier, its leader the ticket's first part instead of program_id(0)
        "tl.debug_barrier()",
        f"kernelopt_sem = {sem}",
        "kernelopt_one = tl.full([], 1, tl.uint32)",
        "kernelopt_arrive = tl.where(rsplit_id == 0, tl.full([], 0x80000000, tl.uint32) - (RSPLIT - kernelopt_one), "
        "kernelopt_one)",
        "kernelopt_old = tl.atomic_add(kernelopt_sem, kernelopt_arrive, sem='release')",
        "kernelopt_flipped = False",
        "while not kernelopt_flipped:",
        "    kernelopt_now = tl.atomic_add(kernelopt_sem, 0, sem='acquire')",
        "    kernelopt_flipped = ((kernelopt_old ^ kernelopt_now) & 0x80000000) != 0",
        "tl.debug_barrier()",
    ]
    return "\n".join(indent + line for line in lines)


def ticketed(source: str, name: str, config: Mapping[str, Any], counter: int) -> str:
    """Cooperative reduction ``name`` launched as an ordinary grid with ``config`` pinned (its
    ``RSPLIT`` among it): programs take their row and part by ticket from ``sem_ptr + counter``."""
    if not is_cooperative(source, name):
        raise RowSplitError(f"{name} is not a cooperative reduction")
    if "RSPLIT" not in config:
        raise RowSplitError(f"a config for {name} without RSPLIT")
    found = list(_RSPLIT_ID.finditer(source))
    if len(found) != 1:
        raise RowSplitError(f"{name} does not read its part from tl.program_id(0) once")
    match = found[0]
    head, rest = source[: match.start()], source[match.end() :]
    if "tl.program_id(" in head or "tl.program_id(0)" in rest:
        raise RowSplitError(f"{name} reads its position in the grid before or besides its part")
    if "'launch_cooperative_grid': True" not in head:
        raise RowSplitError(f"{name} is not launched as a cooperative grid")
    rest = rest.replace("tl.program_id(1)", "kernelopt_xblock")
    if "tl.program_id(" in rest:
        raise RowSplitError(f"{name} reads a third grid dimension")
    rest, barriers = _BARRIER.subn(lambda m: _barrier(m["indent"], m["sem"]), rest)
    if barriers == 0 or "x_grid_barrier" in rest:
        raise RowSplitError(f"{name} has no barrier this rewrite reads")
    # the flag sits in the decorator's triton_meta, before the kernel's body
    head = head.replace("'launch_cooperative_grid': True", "'launch_cooperative_grid': False")
    source = head + _ticket(match["indent"], counter) + rest
    return pin_launch_config(source, name, dict(config))


def with_counter(call_source: str) -> tuple[str, int]:
    """``call_source`` with its semaphores buffer one slot longer, and that slot's index (the
    ticket counter's). A call with no or several semaphores buffers is not rewritten."""
    found = list(_SEMAPHORES.finditer(call_source))
    if len(found) != 1:
        raise RowSplitError(f"the call allocates {len(found)} semaphores buffers, not one")
    m = found[0]
    count = int(m["count"])
    return call_source[: m.start()] + f"{m['head']}{count + 1}{m['tail']}" + call_source[m.end() :], count


def row_split(candidate: GraphCandidate, configs: Mapping[str, Mapping[str, Any]]) -> GraphCandidate:
    """``candidate`` (a graph compiled under :func:`kernelopt.capture.compat.row_split_compile`) with
    each cooperative reduction ticketed and launched with its config of ``configs`` (by kernel name:
    the one Inductor chose at the variant's first launch, RSPLIT among it)."""
    cooperative = [k for k in candidate.kernels if k.language == "triton" and is_cooperative(k.source, k.name)]
    if not cooperative:
        raise RowSplitError("the graph has no cooperative reduction")
    missing = [k.name for k in cooperative if k.name not in configs]
    if missing:
        raise RowSplitError(f"no launch config for {missing[0]}")
    call_source, counter = with_counter(candidate.call_source)
    kernels = tuple(
        GraphKernel(k.name, k.language, ticketed(k.source, k.name, configs[k.name], counter), k.argtypes)
        if k in cooperative
        else k
        for k in candidate.kernels
    )
    return replace(candidate, call_source=call_source, kernels=kernels)


def uses_tickets(source: str) -> bool:
    """Whether a kernel's source is one this module wrote (what the GPU test checks a winner for)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Name) and n.id == "kernelopt_ticket" for n in ast.walk(tree))
