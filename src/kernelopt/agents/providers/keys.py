"""API keys come from the environment only; never from files, flags or the store.

A missing key for OpenAI or Anthropic stops the run before any request, with one
line naming the variable. An OpenAI-compatible server gets ``api_key_env`` from the
config, else ``OPENAI_API_KEY`` when set, else a placeholder: local servers (vLLM,
Ollama, llama.cpp) ignore the key, and the SDK insists on having one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from kernelopt.agents.llm_errors import LLMSetupError
from kernelopt.agents.providers.spec import ProviderSpec

DEFAULT_KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "openai-compatible": "OPENAI_API_KEY"}
PLACEHOLDER_KEY = "not-needed"


@dataclass(frozen=True)
class ApiKey:
    """The key and the variable it came from (None for the placeholder)."""

    value: str
    variable: str | None

    def __repr__(self) -> str:  # never print the key itself
        return f"ApiKey(variable={self.variable!r})"


def resolve_api_key(
    spec: ProviderSpec, *, api_key_env: str | None = None, environ: Mapping[str, str] | None = None
) -> ApiKey:
    """The key for ``spec``, or a one-line :class:`LLMSetupError` saying which variable to set."""
    env = os.environ if environ is None else environ
    variable = api_key_env or DEFAULT_KEY_VARS[spec.kind]
    value = env.get(variable, "").strip()
    if value:
        return ApiKey(value, variable)
    if spec.kind == "openai-compatible":
        if api_key_env:  # the user named a variable on purpose: an empty one is a mistake
            raise LLMSetupError(
                f"{api_key_env} (api_key_env in the LLM config) is not set: export {api_key_env}=... "
                "or remove api_key_env for a server that needs no key"
            )
        return ApiKey(PLACEHOLDER_KEY, None)
    raise LLMSetupError(f"{variable} is not set: export {variable}=... or use --llm openai-compatible:MODEL@URL")
