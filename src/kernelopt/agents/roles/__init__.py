"""The five LLM roles: Analyst, Planner, Coder, Repairer, Judge.

Each role renders its prompt file (``kernelopt/agents/prompts/<role>.md``) with
source code, shapes, dtypes and measurements only, asks a :class:`ChatClient`
for one JSON object, validates it with pydantic and repairs malformed replies a
bounded number of times. They return a :class:`RoleResult` holding the output
and every call made (with the prompt version), for the caller's transcript.
"""

from __future__ import annotations

from kernelopt.agents.roles.analyst import Analyst
from kernelopt.agents.roles.base import (
    Prompt,
    PromptError,
    Role,
    RoleCall,
    RoleOutputError,
    RoleResult,
    TensorInPromptError,
    assert_no_tensors,
    json_objects,
    load_prompt,
    parse_reply,
)
from kernelopt.agents.roles.coder import Coder, contract_problem
from kernelopt.agents.roles.judge import Judge, measured_speedup, verified_faster
from kernelopt.agents.roles.models import Analysis, Experience, KernelCandidate, Plan
from kernelopt.agents.roles.planner import Planner, collapsed_strategies
from kernelopt.agents.roles.repairer import Repairer

ROLES = ("analyst", "planner", "coder", "repairer", "judge")

__all__ = [
    "ROLES",
    "Analysis",
    "Analyst",
    "Coder",
    "Experience",
    "Judge",
    "KernelCandidate",
    "Plan",
    "Planner",
    "Prompt",
    "PromptError",
    "Repairer",
    "Role",
    "RoleCall",
    "RoleOutputError",
    "RoleResult",
    "TensorInPromptError",
    "assert_no_tensors",
    "collapsed_strategies",
    "contract_problem",
    "json_objects",
    "load_prompt",
    "measured_speedup",
    "parse_reply",
    "verified_faster",
]
