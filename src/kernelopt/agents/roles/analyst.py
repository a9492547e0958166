"""The Analyst: what limits one kernel, from its roofline, counters and source."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelopt.agents.roles.base import Role, RoleResult, assert_no_tensors
from kernelopt.agents.roles.context import kernel_view, launch_view, measurement_lines
from kernelopt.agents.roles.models import Analysis
from kernelopt.capture.output_code import KernelDef
from kernelopt.knowledge.card import Card


class Analyst(Role[Analysis]):
    name = "analyst"
    output_model = Analysis

    def run(
        self,
        kernel: KernelDef,
        roofline: Mapping[str, Any] | Any,
        ncu_metrics: Mapping[str, Any] | None = None,
        hardware: Card | None = None,
        launch: Mapping[str, Any] | None = None,
    ) -> RoleResult[Analysis]:
        """Classify the kernel's bottleneck.

        ``roofline`` is :meth:`Roofline.to_dict` (or the Roofline itself), optionally
        with ``flops``, ``share_pct`` and ``amdahl_bound``; ``ncu_metrics`` maps
        Nsight Compute metric names to values and may be empty.
        """
        assert_no_tensors({"kernel": kernel, "roofline": roofline, "ncu_metrics": ncu_metrics, "launch": launch})
        facts = dict(roofline.to_dict() if hasattr(roofline, "to_dict") else roofline)
        time_us = facts.get("time_us")
        context = {
            "kernel": kernel_view(kernel),
            "roofline": measurement_lines(facts),
            "ncu": sorted((ncu_metrics or {}).items()),
            "hardware": hardware,
            "launch": launch_view(launch),
        }

        def check(analysis: Analysis) -> str | None:
            if isinstance(time_us, (int, float)) and analysis.headroom_us > time_us * 1.0001:
                return f"headroom_us: {analysis.headroom_us} exceeds the kernel time of {time_us} us"
            return None

        return self.ask(context, check)
