"""The structured outputs of the five roles (pydantic v2 models).

The field descriptions are part of the prompt: each role shows its model's JSON
schema to the LLM. Extra keys in a reply are ignored; missing or mistyped ones
send the reply back with the validation error.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from kernelopt.knowledge.memory import normalize_strategy

Bottleneck = Literal["memory-bound", "compute-bound", "latency-bound", "at-roofline"]
Language = Literal["triton", "cuda"]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]

_SOURCE_FENCE_RE = re.compile(r"\A\s*```[A-Za-z]*[ \t]*\n(.*?)\n?```\s*\Z", re.S)


class _Output(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class Analysis(_Output):
    """The Analyst's diagnosis of one kernel."""

    bottleneck: Bottleneck = Field(
        description="what limits the kernel: memory-bound, compute-bound, latency-bound, or at-roofline "
        "(already at about 90 % or more of the measured ceiling)"
    )
    evidence: list[Text] = Field(
        min_length=1, description="facts behind the class, each quoting a given number or a source line"
    )
    headroom_us: float = Field(ge=0, description="microseconds a perfect rewrite could save, at most the kernel time")
    notes: str = Field(default="", description="where the time goes, in one or two sentences")


class Plan(_Output):
    """One concrete change the Coder will make."""

    strategy: Text = Field(description="the id of the strategy card followed, or a short kebab-case name")
    change: Text = Field(description="exactly what to change in this kernel: loops, loads, block sizes, warps")
    expected_effect: Text = Field(description="the expected gain with its reason, a number where possible")
    evidence: list[Text] = Field(min_length=1, description="measurements or source lines that support the plan")
    risks: list[Text] = Field(default_factory=list, description="what could break correctness or speed")
    language: Language = Field(
        default="triton",
        description="what the Coder writes: triton (the default: the kernel rewritten in Triton) or cuda (CUDA "
        "C++ in the Triton kernel's slot, for a change Triton cannot express, e.g. one block per SM walking rows "
        "so a second pass over a row reads it from L2, warp-level reductions with shuffles)",
    )

    @field_validator("strategy")
    @classmethod
    def _normalize(cls, value: str) -> str:
        return normalize_strategy(value)


class KernelCandidate(_Output):
    """A complete replacement kernel module."""

    source: Text = Field(description="the complete module text: imports, decorators and the kernel function")
    summary: Text = Field(description="what changed, in one or two sentences")

    @field_validator("source")
    @classmethod
    def _unfence(cls, value: str) -> str:
        m = _SOURCE_FENCE_RE.match(value)  # a model that wrapped the code in a Markdown fence
        return (m.group(1) if m else value).strip("\n") + "\n"


class Experience(_Output):
    """The Judge's record of one attempt, kept in the experience memory."""

    strategy: Text = Field(description="the strategy of the plan that was tried")
    what_worked: Text = Field(description="what the change did to the kernel and its time, or why it failed")
    why: Text = Field(description="the cause, tied to the measurements")
    apply_when: Text = Field(description="kernel features under which this strategy should be tried again")
    avoid_when: Text = Field(description="kernel features under which it should not be tried")
    speedup: float | None = Field(
        default=None, description="baseline time / candidate time as measured; null if not timed"
    )
    success: bool = Field(description="true only if every gate passed, performance included")

    @field_validator("strategy")
    @classmethod
    def _normalize(cls, value: str) -> str:
        return normalize_strategy(value)
