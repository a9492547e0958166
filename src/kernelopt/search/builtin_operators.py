"""The LLM-free operators: launch-config tuning and cache-eviction choices.

Both start from Inductor's own tuned kernel and edit only what keeps the
launcher contract: the decorator (a pinned ``fixed_config``) or load hints.
The root node is Inductor's heuristic config, the baseline every speedup is
measured against; an operator expanding it expands Inductor's
coordinate-descent config instead (``facts["inductor_tuned_config"]``, measured
in the worker; :func:`expansion_point`), unless that config was evaluated and
failed. So the first round already tries eviction hints and neighbouring configs
on top of Inductor's tuned result rather than below it (on the H200 the row-L2
search ran out of its wall budget in round 1, before any child of the tuned
config was tried). ``launch-config`` first proposes the tuned config itself,
then walks outward, nearest first, across block sizes, warps and pipeline
stages, including configs Inductor's heuristics never enumerate;
``eviction-policy`` tries ``evict_first`` / ``evict_last`` hints per load,
which Inductor sets by a fixed rule and never searches.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from kernelopt.capture.kernel_source import pin_launch_config
from kernelopt.search.candidate import Candidate
from kernelopt.search.launch_configs import config_distance, launch_config_space
from kernelopt.search.nodes import PENDING, Node
from kernelopt.search.operators import SearchContext, register_operator

_LOAD_RE = re.compile(r"tl\.load\((?P<args>[^\n]*?)\)(?=\s*(?:$|\n|\.to\())", re.M)
_EVICT_RE = re.compile(r",\s*eviction_policy='[a-z_]+'")
POLICIES = (None, "evict_first", "evict_last")


def _config_key(config: dict[str, Any] | None) -> str:
    return json.dumps(sorted((config or {}).items()))


def expansion_point(parent: Node, ctx: SearchContext) -> tuple[str | None, dict[str, Any]]:
    """The source and config an operator builds on: the parent's, but for the root, Inductor's
    coordinate-descent config when the run has one and it has not failed its evaluation."""
    config = dict(parent.candidate.config or ctx.root_config or {})
    tuned = ctx.facts.get("inductor_tuned_config")
    source = parent.candidate.source
    if (
        not parent.is_root
        or not tuned
        or ctx.kernel is None
        or source is None
        or _config_key(tuned) == _config_key(config)
    ):
        return source, config
    failed = any(
        n.status != PENDING
        and not n.passed
        and n.operator == LaunchConfigOperator.name
        and _config_key(n.candidate.config) == _config_key(tuned)
        and n.parent_id == parent.id
        for n in ctx.nodes
    )
    if failed:
        return source, config
    return pin_launch_config(source, ctx.kernel.name, tuned), dict(tuned)


def _describe(old: dict[str, Any], new: dict[str, Any]) -> str:
    changes = [f"{k} {old.get(k)}->{v}" for k, v in new.items() if old.get(k) != v]
    return ", ".join(changes) or "same config"


@register_operator("launch-config")
class LaunchConfigOperator:
    """Pin launch configs near the parent's, nearest first (coordinate-descent order, then wider)."""

    name = "launch-config"

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        if ctx.kernel is None or parent.candidate.source is None or n <= 0:
            return []
        start, base = expansion_point(parent, ctx)
        suffix = " (from Inductor's tuned config)" if start != parent.candidate.source else ""
        tried = {_config_key(node.candidate.config) for node in ctx.nodes} | {_config_key(ctx.root_config)}
        out = []
        tuned = ctx.facts.get("inductor_tuned_config")
        if tuned and _config_key(tuned) not in tried:  # Inductor's tuned result first: the search starts there
            source = pin_launch_config(parent.candidate.source, ctx.kernel.name, tuned)
            out.append(
                Candidate(
                    ctx.target,
                    self.name,
                    source=source,
                    config=dict(tuned),
                    note=f"Inductor's coordinate-descent choice ({_describe(parent.candidate.config or ctx.root_config or {}, tuned)})",
                )
            )
            tried.add(_config_key(tuned))
        space = [c for c in launch_config_space(ctx.kernel, include_stages=True) if _config_key(c) not in tried]
        noise = {_config_key(c): ctx.rng.random() for c in space}  # seeded tie-break
        space.sort(key=lambda c: (config_distance(c, base), noise[_config_key(c)]))
        for config in space[: n - len(out)]:
            source = pin_launch_config(parent.candidate.source, ctx.kernel.name, config)
            out.append(
                Candidate(ctx.target, self.name, source=source, config=config, note=_describe(base, config) + suffix)
            )
        return out


def set_eviction(source: str, policies: tuple[str | None, ...]) -> str:
    """Give the i-th ``tl.load`` of ``source`` eviction policy ``policies[i]`` (None: no hint)."""
    matches = list(_LOAD_RE.finditer(source))
    out, last = [], 0
    for match, policy in zip(matches, policies):
        args = _EVICT_RE.sub("", match.group("args"))
        if policy is not None:
            args += f", eviction_policy='{policy}'"
        out.append(source[last : match.start()])
        out.append(f"tl.load({args})")
        last = match.end()
    out.append(source[last:])
    return "".join(out)


def current_eviction(source: str) -> tuple[str | None, ...]:
    found = []
    for match in _LOAD_RE.finditer(source):
        m = re.search(r"eviction_policy='([a-z_]+)'", match.group("args"))
        found.append(m.group(1) if m else None)
    return tuple(found)


@register_operator("eviction-policy")
class EvictionPolicyOperator:
    """Try other L2 eviction hints on the parent's loads (a space Inductor fixes by rule)."""

    name = "eviction-policy"
    max_loads = 6  # 3^6 assignments at most

    def propose(self, parent: Node, ctx: SearchContext, n: int) -> list[Candidate]:
        source, config = expansion_point(parent, ctx)
        if source is None:  # the model target: options, no kernel source (a kernel file's source serves)
            return []
        current = current_eviction(source)
        if not current or len(current) > self.max_loads:
            return []
        options = [p for p in itertools.product(POLICIES, repeat=len(current)) if p != current]
        options.sort(key=lambda p: (sum(a != b for a, b in zip(p, current)), ctx.rng.random()))
        out = []
        for policies in options[:n]:
            note = "eviction " + ", ".join(f"load{i}={p or 'none'}" for i, p in enumerate(policies) if p != current[i])
            if source != parent.candidate.source:
                note += " (on Inductor's tuned config)"
            out.append(
                Candidate(
                    ctx.target, self.name, source=set_eviction(source, policies), config=config or None, note=note
                )
            )
        return out
