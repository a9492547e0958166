"""Launch configurations of a Triton kernel file: where they are written, and the search over them.

A kernel file sets its launch configuration in two places, and both are *sites* this
module reads and rewrites:

* an ``@triton.autotune(configs=[...])`` list: a candidate pins one
  ``triton.Config`` (the file's own or a neighbour of it), so the delivered file runs
  the fastest configuration without an autotuning pass on the user's first call;
* a launch ``kernel[grid](..., BLOCK=1024, num_warps=4)`` in ``launch``: the
  ``num_warps`` / ``num_stages`` keywords (added when absent, at Triton's defaults)
  and every constexpr keyword given as an integer literal. A keyword computed from the
  inputs (``BLOCK=triton.next_power_of_2(n)``) is the file's semantics and stays.

Rewrites replace only the text of the nodes they change (positions from the syntax
tree), so the user's comments and layout survive in the delivered file.
:class:`FileLaunchConfigOperator` walks the space nearest first (one parameter one
step, then two), the file's own autotune configs first.
"""

from __future__ import annotations

import ast
import itertools
import json
from dataclasses import dataclass

from kernelopt.search.candidate import Candidate
from kernelopt.search.nodes import Node
from kernelopt.search.operators import SearchContext

WARPS = (1, 2, 4, 8, 16, 32)
STAGES = (1, 2, 3, 4, 5)
DEFAULTS = {"num_warps": 4, "num_stages": 3}  # Triton's, for an NVIDIA GPU
MAX_BLOCK = 1 << 16

Config = dict[str, dict[str, int]]  # site id -> parameter -> value


@dataclass(frozen=True)
class Site:
    """One place a launch configuration is written: an autotune list or a launch call."""

    id: str  # "autotune:<kernel>" or "launch:<i>:<kernel>"
    kind: str  # autotune | launch
    kernel: str
    node: ast.expr  # the configs list, or the launch Call
    choices: tuple[dict[str, int], ...]  # autotune: the file's own configs; launch: the current values


def _int(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _config_values(call: ast.expr) -> dict[str, int] | None:
    """``triton.Config({"BLOCK": 128}, num_warps=4)`` as ``{"BLOCK": 128, "num_warps": 4, ...}``, or None."""
    if not (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Dict)):
        return None
    values: dict[str, int] = {}
    for k, v in zip(call.args[0].keys, call.args[0].values):
        value = _int(v)
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)) or value is None:
            return None
        values[k.value] = value
    for kw in call.keywords:
        value = _int(kw.value)
        if kw.arg not in DEFAULTS or value is None:
            return None
        values[kw.arg] = value
    return {**DEFAULTS, **values}


def _autotune_sites(tree: ast.Module) -> list[Site]:
    sites = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for dec in fn.decorator_list:
            if isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("autotune"):
                configs = next((kw.value for kw in dec.keywords if kw.arg == "configs"), None)
                if isinstance(configs, ast.List):
                    choices = [_config_values(c) for c in configs.elts]
                    if choices and all(c is not None for c in choices):
                        sites.append(Site(f"autotune:{fn.name}", "autotune", fn.name, configs, tuple(choices)))  # type: ignore[arg-type]
    return sites


def _launch_sites(tree: ast.Module, kernels: set[str], autotuned: set[str]) -> list[Site]:
    launch = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "launch"), None)
    if launch is None:
        return []
    sites: list[Site] = []
    for node in ast.walk(launch):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)):
            continue
        target = node.func.value
        if not (isinstance(target, ast.Name) and target.id in kernels) or target.id in autotuned:
            continue
        values = dict(DEFAULTS)
        for kw in node.keywords:
            value = _int(kw.value)
            if kw.arg is not None and value is not None and (kw.arg in DEFAULTS or kw.arg.isupper()):
                values[kw.arg] = value
            elif kw.arg in DEFAULTS:  # computed warps or stages: the file's to keep
                values.pop(kw.arg)
        sites.append(Site(f"launch:{len(sites)}:{target.id}", "launch", target.id, node, (values,)))
    return sites


def config_sites(source: str) -> list[Site]:
    """Every launch-configuration site of a kernel file, in source order."""
    tree = ast.parse(source)
    kernels = {
        fn.name
        for fn in tree.body
        if isinstance(fn, ast.FunctionDef)
        and any("jit" in ast.unparse(d) or "autotune" in ast.unparse(d) for d in fn.decorator_list)
    }
    autotune = _autotune_sites(tree)
    return autotune + _launch_sites(tree, kernels, {s.kernel for s in autotune})


def _segment(source: str, node: ast.AST) -> tuple[int, int]:
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    start = offsets[node.lineno - 1] + len(lines[node.lineno - 1].encode()[: node.col_offset].decode())  # type: ignore[attr-defined]
    end_line = node.end_lineno - 1  # type: ignore[attr-defined]
    end = offsets[end_line] + len(lines[end_line].encode()[: node.end_col_offset].decode())  # type: ignore[attr-defined]
    return start, end


def _config_text(values: dict[str, int]) -> str:
    meta = {k: v for k, v in values.items() if k not in DEFAULTS}
    extras = "".join(f", {k}={values[k]}" for k in DEFAULTS if k in values)
    return f"[triton.Config({json.dumps(meta)}{extras})]"


def _launch_text(source: str, call: ast.Call, values: dict[str, int]) -> str:
    """The launch call with its literal keywords set to ``values`` (missing ones appended)."""
    start, _ = _segment(source, call)
    text = source[start : _segment(source, call)[1]]
    edits = []
    seen = set()
    for kw in call.keywords:
        if kw.arg in values and _int(kw.value) is not None:
            s, e = _segment(source, kw.value)
            edits.append((s - start, e - start, str(values[kw.arg])))
            seen.add(kw.arg)
    missing = [k for k in values if k not in seen and k in DEFAULTS]
    for s, e, new in sorted(edits, reverse=True):
        text = text[:s] + new + text[e:]
    if missing:
        close = text.rstrip().rfind(")")
        text = text[:close] + "".join(f", {k}={values[k]}" for k in missing) + text[close:]
    return text


def apply_config(source: str, config: Config) -> str:
    """``source`` with each named site set to its values."""
    sites = {s.id: s for s in config_sites(source)}
    edits = []
    for site_id, values in config.items():
        site = sites.get(site_id)
        if site is None:
            raise ValueError(f"no launch-configuration site {site_id!r} in the file")
        start, end = _segment(source, site.node)
        if site.kind == "autotune":
            edits.append((start, end, _config_text(values)))
        else:
            assert isinstance(site.node, ast.Call)
            edits.append((start, end, _launch_text(source, site.node, values)))
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source


def _steps(name: str, value: int) -> list[int]:
    if name == "num_warps":
        return [w for w in WARPS if w in (value // 2, value * 2)]
    if name == "num_stages":
        return [s for s in STAGES if abs(s - value) == 1]
    if value > 0 and value & (value - 1) == 0:  # a power-of-two block size
        return [v for v in (value // 2, value * 2) if 1 <= v <= MAX_BLOCK and v >= 16]
    return []


def neighbours(values: dict[str, int], radius: int = 1) -> list[dict[str, int]]:
    """Configs ``radius`` parameters away from ``values``, each parameter one step."""
    out = []
    for names in itertools.combinations(sorted(values), radius):
        for new in itertools.product(*[_steps(n, values[n]) for n in names]):
            out.append({**values, **dict(zip(names, new))})
    return out


def _key(config: Config | None) -> str:
    return json.dumps(config or {}, sort_keys=True)


class FileLaunchConfigOperator:
    """Pin autotune configs and retune launch keywords of a kernel file, nearest first."""

    name = "launch-config"

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        source = ctx.root_source
        if source is None or n <= 0:
            return []
        sites = config_sites(source)
        if not sites:
            return []
        tried = {_key(node.candidate.config) for node in ctx.nodes}
        base: Config = dict(parent.candidate.config or {})
        options: list[Config] = []
        for site in sites:
            if site.kind == "autotune" and site.id not in base:
                options += [{**base, site.id: dict(c)} for c in site.choices]  # the file's own configs first
        for radius in (1, 2):
            for site in sites:
                current = base.get(site.id) or site.choices[0]
                options += [{**base, site.id: v} for v in neighbours(current, radius)]
        out: list[Candidate] = []
        for config in options:
            key = _key(config)
            if key in tried:
                continue
            tried.add(key)
            parent_source = parent.candidate.source or source
            try:
                changed = apply_config(parent_source, {k: v for k, v in config.items() if config.get(k) != base.get(k)})
            except (ValueError, SyntaxError):
                continue
            out.append(Candidate(ctx.target, self.name, source=changed, config=config, note=_note(sites, config)))
            if len(out) >= n:
                break
        return out


def _note(sites: list[Site], config: Config) -> str:
    """The whole change from the user's file (not the step from the parent): what a delivery's reader needs."""
    by_id = {site.id: site for site in sites}
    parts = []
    for site_id, values in config.items():
        site = by_id.get(site_id)
        if site is None or site.kind == "autotune":
            parts.append(f"{site_id}: pinned " + ", ".join(f"{k}={v}" for k, v in sorted(values.items())))
            continue
        before = site.choices[0]
        changed = ", ".join(f"{k} {before.get(k, '-')}->{v}" for k, v in values.items() if before.get(k) != v)
        if changed:
            parts.append(f"{site_id}: {changed}")
    return "; ".join(parts) or "same config"
