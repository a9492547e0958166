"""Helion kernel files: a config baked into the kernel's decorator, and the two operators over configs.

A Helion kernel is Python that Helion compiles to Triton under a ``helion.Config``
(block sizes, warps, stages, indexing, ...). A candidate is the user's file with one
config baked in: ``@helion.kernel(config=helion.Config(...))``, every other byte as the
user wrote it, so the delivered file runs that config with no autotuning pass.

* ``helion-autotune``: Helion's own autotuner, through its public API
  (``BoundKernel.autotune``) at the effort the run names and within its time budget,
  run once in the evaluation worker before the search
  (:func:`kernelopt.evaluate.file_targets.helion_autotune`); the operator proposes
  its result first, so the search starts where a Helion user's own tuning ends.
* ``helion-config``: walks outward from the parent's config, one field one step:
  each block size halved or doubled, warps halved or doubled, stages up or down.
  Configs Helion rejects fail their evaluation like any candidate.
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


def _helion_facts(ctx: SearchContext) -> dict[str, Any]:
    return (ctx.facts.get("kernel_file") or {}).get("helion") or {}


class HelionAutotuneOperator:
    """Proposes the config Helion's own autotuner chose (measured before the search), once."""

    name = "helion-autotune"

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        facts = _helion_facts(ctx)
        tuned = facts.get("tuned")
        if not tuned or n <= 0 or ctx.root_source is None:
            return []
        if any(_key(node.candidate.config) == _key(tuned) for node in ctx.nodes):
            return []
        source = bake_config(ctx.root_source, facts["kernel"], tuned)
        note = f"Helion's autotuner ({facts.get('effort')} effort, {facts.get('seconds', 0):.0f} s)"
        return [Candidate(ctx.target, self.name, source=source, config=dict(tuned), note=note)]


class HelionConfigOperator:
    """Walks Helion configs outward from the parent's (the default config at the root), nearest first."""

    name = "helion-config"

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        facts = _helion_facts(ctx)
        base = parent.candidate.config or facts.get("default")
        if not base or n <= 0 or ctx.root_source is None:
            return []
        tried = {_key(node.candidate.config) for node in ctx.nodes} | {_key(facts.get("default"))}
        options = neighbours(base)
        options += [c for first in neighbours(base) for c in neighbours(first)]  # then two steps
        out = []
        for config in itertools.islice((c for c in options if _key(c) not in tried), 10 * n):
            key = _key(config)
            if key in tried:
                continue
            tried.add(key)
            changed = ", ".join(f"{k} {base.get(k)}->{v}" for k, v in config.items() if base.get(k) != v)
            source = bake_config(ctx.root_source, facts["kernel"], config)
            out.append(Candidate(ctx.target, self.name, source=source, config=config, note=changed))
            if len(out) >= n:
                break
        return out
