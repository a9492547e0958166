"""Helion kernel files: a config baked into the kernel's decorator, and the two operators over configs.

A Helion kernel is Python that Helion compiles to Triton under a ``helion.Config``
(block sizes, warps, stages, indexing, ...). A candidate is the user's file with one
config baked in: ``@helion.kernel(config=helion.Config(...))``, every other byte as the
user wrote it, so the delivered file runs that config with no autotuning pass.

* ``helion-autotune``: Helion's own autotuner, through its public API
  (``BoundKernel.autotune``) at the effort the run names and within its time budget,
  run once per kernel in the evaluation worker before the search
  (:func:`kernelopt.evaluate.file_helion.helion_configs`); the operator proposes
  their results first, so the search starts where a Helion user's own tuning ends.
* ``helion-config``: walks outward from the parent's configs, one field of one kernel's
  one step: each block size halved or doubled, warps halved or doubled, stages up or
  down, the kernels in turn. Configs Helion rejects fail their evaluation like any candidate.

A candidate's config is one config per Helion kernel the file runs (kernel name -> config;
a file with ``launch`` may define several), every one baked, so the delivered file runs no
autotuning pass for any of them.
"""

from __future__ import annotations

import ast
import itertools
import json
from typing import Any

from kernelopt.search.candidate import Candidate
from kernelopt.search.file_configs import _segment
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext

WARPS = (1, 2, 4, 8, 16, 32)
MAX_STAGES = 8
MAX_BLOCK = 1 << 14


def _is_helion_kernel(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return ast.unparse(target).split(".")[-1] == "kernel"


def kernel_decorator(source: str, kernel: str) -> ast.expr:
    """The ``@helion.kernel`` decorator of function ``kernel``."""
    tree = ast.parse(source)
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == kernel:
            for dec in fn.decorator_list:
                if _is_helion_kernel(dec):
                    return dec
    raise ValueError(f"no @helion.kernel function {kernel!r} in the file")


def config_text(config: dict[str, Any]) -> str:
    """``helion.Config(...)`` with literal keyword arguments, in a stable order."""
    return "helion.Config(" + ", ".join(f"{k}={config[k]!r}" for k in sorted(config)) + ")"


def _helion_bound(tree: ast.Module) -> bool:
    return any(
        isinstance(s, ast.Import) and any(a.name == "helion" and a.asname is None for a in s.names) for s in tree.body
    )


def bake_config(source: str, kernel: str, config: dict[str, Any]) -> str:
    """``source`` with ``kernel``'s decorator given ``config`` (its ``config=`` / ``configs=`` replaced);
    ``import helion`` added where the file does not bind that name."""
    dec = kernel_decorator(source, kernel)
    start, end = _segment(source, dec)
    if isinstance(dec, ast.Call):
        kept = [ast.get_source_segment(source, kw) for kw in dec.keywords if kw.arg not in ("config", "configs")]
        args = [ast.get_source_segment(source, a) for a in dec.args]
        inner = ", ".join([*(a or "" for a in args), *(k or "" for k in kept), f"config={config_text(config)}"])
        text = f"{ast.get_source_segment(source, dec.func)}({inner})"
    else:
        text = f"{ast.get_source_segment(source, dec)}(config={config_text(config)})"
    baked = source[:start] + text + source[end:]
    tree = ast.parse(baked)
    if not _helion_bound(tree):
        first = next((s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))), tree.body[0])
        lines = baked.splitlines(keepends=True)
        lines.insert(first.lineno - 1, "import helion\n")
        baked = "".join(lines)
    return baked


def _steps(name: str, value: Any) -> list[Any]:
    if name == "num_warps" and isinstance(value, int):
        return [w for w in WARPS if w in (value // 2, value * 2)]
    if name == "num_stages" and isinstance(value, int):
        return [s for s in (value - 1, value + 1) if 1 <= s <= MAX_STAGES]
    return []


def neighbours(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Configs one step from ``config``: one block size, the warps or the stages."""
    out = []
    for i, block in enumerate(config.get("block_sizes") or []):
        if isinstance(block, int) and block > 0:
            for new in (block // 2, block * 2):
                if 1 <= new <= MAX_BLOCK and new != block:
                    sizes = list(config["block_sizes"])
                    sizes[i] = new
                    out.append({**config, "block_sizes": sizes})
    for name in ("num_warps", "num_stages"):
        for new in _steps(name, config.get(name)):
            out.append({**config, name: new})
    return out


def _key(config: dict[str, Any] | None) -> str:
    return json.dumps(config or {}, sort_keys=True)


def bake_configs(source: str, configs: dict[str, dict[str, Any]]) -> str:
    """``source`` with each kernel's config of ``configs`` (kernel name -> config) baked in."""
    for kernel, config in configs.items():
        source = bake_config(source, kernel, config)
    return source


def _helion_facts(ctx: SearchContext) -> dict[str, Any]:
    return (ctx.facts.get("kernel_file") or {}).get("helion") or {}


def _tunable(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The Helion stage's entries of the kernels it could configure (those the file's launch calls)."""
    return [k for k in facts.get("kernels") or [] if k.get("default")]


def joint_default(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every configurable kernel's default config: a candidate's config is one config per kernel, all baked,
    so the delivered file runs no autotuning pass for any of them."""
    return {k["kernel"]: k["default"] for k in _tunable(facts)}


def _changes(base: dict[str, Any], config: dict[str, Any]) -> str:
    return ", ".join(f"{k} {base.get(k)}->{v}" for k, v in config.items() if base.get(k) != v)


class HelionAutotuneOperator:
    """Proposes the configs Helion's own autotuner chose (measured before the search) baked together, once:
    each kernel's tuned config, or its default where the tuner failed on it."""

    name = "helion-autotune"

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        facts = _helion_facts(ctx)
        kernels = _tunable(facts)
        if not any(k.get("tuned") for k in kernels) or n <= 0 or ctx.root_source is None:
            return []
        joint = {k["kernel"]: k.get("tuned") or k["default"] for k in kernels}
        if any(_key(node.candidate.config) == _key(joint) for node in ctx.nodes):
            return []
        note = f"Helion's autotuner ({facts.get('effort')} effort, {facts.get('seconds', 0):.0f} s)"
        if len(kernels) > 1:
            note += ": " + ", ".join(f"{k['kernel']} {'tuned' if k.get('tuned') else 'default'}" for k in kernels)
        source = bake_configs(ctx.root_source, joint)
        return [Candidate(ctx.target, self.name, source=source, config=joint, note=note)]


class HelionConfigOperator:
    """Walks Helion configs outward from the parent's (the default configs at the root), nearest first: one
    kernel's config one step, the kernels in turn, then two steps."""

    name = "helion-config"

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        facts = _helion_facts(ctx)
        base = parent.candidate.config or joint_default(facts)
        if not base or n <= 0 or ctx.root_source is None:
            return []
        tried = {_key(node.candidate.config) for node in ctx.nodes} | {_key(joint_default(facts))}
        one = [[(kernel, c) for c in neighbours(config)] for kernel, config in base.items()]
        two = [
            [(kernel, c) for first in neighbours(config) for c in neighbours(first)] for kernel, config in base.items()
        ]
        turns = [*_in_turn(one), *_in_turn(two)]  # every kernel's nearest first: none waits for another's walk
        out = []
        for kernel, config in itertools.islice(((k, c) for k, c in turns if _key({**base, k: c}) not in tried), 10 * n):
            joint = {**base, kernel: config}
            key = _key(joint)
            if key in tried:
                continue
            tried.add(key)
            note = (f"{kernel}: " if len(base) > 1 else "") + _changes(base[kernel], config)
            source = bake_configs(ctx.root_source, joint)
            out.append(Candidate(ctx.target, self.name, source=source, config=joint, note=note))
            if len(out) >= n:
                break
        return out


def _in_turn(lists: list[list[Any]]) -> list[Any]:
    """The items of ``lists`` taken one from each in turn (round robin), in order within each."""
    return [item for row in itertools.zip_longest(*lists) for item in row if item is not None]
