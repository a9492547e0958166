"""Edits of an Inductor kernel's source that keep its launcher contract.

Pinning a launch config rewrites only the decorator: the ``@triton.jit``
function, its signature and Inductor's metadata stay byte-for-byte, so the
wrapper's ``.run(...)`` call and the grid computed from ``grid_type`` still fit.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from kernelopt.capture.output_code import size_hints


def heuristic_decorator(source: str, name: str) -> ast.Call:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            for dec in node.decorator_list:
                if (
                    isinstance(dec, ast.Call)
                    and isinstance(dec.func, ast.Attribute)
                    and isinstance(dec.func.value, ast.Name)
                    and dec.func.value.id == "triton_heuristics"
                ):
                    return dec
            raise ValueError(f"kernel {name} has no @triton_heuristics decorator to replace")
    raise ValueError(f"source defines no kernel {name}")


def pin_launch_config(source: str, name: str, config: dict[str, Any]) -> str:
    """The same kernel, launched with exactly ``config`` (block sizes, num_warps, num_stages)."""
    dec = heuristic_decorator(source, name)
    keywords = {k.arg: ast.get_source_segment(source, k.value) for k in dec.keywords}
    missing = [k for k in ("triton_meta", "inductor_meta") if k not in keywords]
    if missing:
        raise ValueError(f"kernel {name}'s decorator lacks {', '.join(missing)}")
    config = dict(config)
    config.setdefault("num_warps", 4)
    config.setdefault("num_stages", 1)
    new = (
        f"triton_heuristics.fixed_config(config={config!r}, filename=__file__, "
        f"triton_meta={keywords['triton_meta']}, inductor_meta={keywords['inductor_meta']})"
    )
    lines = source.splitlines(keepends=True)
    assert dec.end_lineno is not None and dec.end_col_offset is not None  # parsed from source: always set
    start = sum(len(line) for line in lines[: dec.lineno - 1]) + dec.col_offset
    end = sum(len(line) for line in lines[: dec.end_lineno - 1]) + dec.end_col_offset
    return source[:start] + new + source[end:]


AUTOTUNED_DECORATORS = ("pointwise", "reduction", "persistent_reduction")  # Inductor's heuristics that tune at run time


def as_launched(source: str, name: str, config: dict[str, Any] | None) -> str:
    """The kernel exactly as the captured model launched it: a kernel whose decorator autotunes at its
    first launch (and under max-autotune runs coordinate descent) pinned to ``config``, the launch config
    it settled on in the capture; any other kernel, or one without a recorded config, as it is. Built
    from its source in another process, the original would otherwise tune again and may settle
    elsewhere (on the H200 the same mode's log-softmax kernel read 0.416 ms in one process, 0.526 ms in
    the next), and gate 4 would time a candidate against a kernel the model does not run."""
    if not config:
        return source
    try:
        decorator = heuristic_decorator(source, name)
    except (SyntaxError, ValueError):
        return source
    if not isinstance(decorator.func, ast.Attribute) or decorator.func.attr not in AUTOTUNED_DECORATORS:
        return source
    try:
        return pin_launch_config(source, name, config)
    except ValueError:  # no triton_meta / inductor_meta to keep: launched as written
        return source


def renamed(source: str, old: str, new: str) -> str:
    """A Triton kernel's source under another name: its ``def`` and Inductor's ``kernel_name``
    metadata (the only two places a generated kernel names itself)."""
    source = re.sub(rf"\bdef {re.escape(old)}\(", f"def {new}(", source, count=1)
    return source.replace(f"'kernel_name': '{old}'", f"'kernel_name': '{new}'")


_ROW_LOOP = re.compile(r"^\s*for r0_offset in ", re.MULTILINE)


def second_passes(source: str) -> int:
    """How many times an Inductor Triton kernel loops over its rows again after a first pass (its
    looped softmax or norm: statistics, then the output): each one a read of the rows from memory
    that a split of the row across programs holding it (:mod:`~kernelopt.capture.row_split`) saves."""
    return max(0, len(_ROW_LOOP.findall(source)) - 1)


_EXTENT = re.compile(r"^\s+(x|r0_)numel = (\d+)$", re.MULTILINE)
# A looped reduction into at most this many values runs on at most as many programs (one an output at
# least), so a few SMs of the GPU's hundred and more read all its elements...
SERIAL_MAX_OUTPUTS = 16
# ...which costs more than the split Inductor would have made once it reduces this many elements (16 MB of
# float32: a few hundred microseconds at one SM's bandwidth, against a few at the whole GPU's).
SERIAL_MIN_ELEMENTS = 1 << 22


def serial_reduction(source: str) -> bool:
    """Whether an Inductor Triton kernel is a looped reduction of at least :data:`SERIAL_MIN_ELEMENTS`
    elements into at most :data:`SERIAL_MAX_OUTPUTS` values: the whole tensor read by a few programs.
    ``split_reductions=False`` writes one for a norm over a whole tensor (the 1 GiB Frobenius norm on the
    H200: one program, 0.03x, its gates 100 s and more). Its cooperative form, which splits the reduction
    across programs, is not one. Extents as the kernel states them, else its size hints."""
    if "@triton_heuristics.reduction(" not in source:
        return False
    extents = size_hints(source)
    extents.update({axis: int(n) for axis, n in _EXTENT.findall(source)})
    outputs, elements = extents.get("x"), extents.get("r0_")
    return (
        outputs is not None
        and elements is not None
        and outputs <= SERIAL_MAX_OUTPUTS
        and (outputs * elements >= SERIAL_MIN_ELEMENTS)
    )
