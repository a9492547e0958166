"""LLM providers: OpenAI, Anthropic and OpenAI-compatible servers through the official SDKs.

The SDKs are imported only when a provider is built, so this package imports
without the ``llm`` extra; building a provider without it is a one-line error.
"""

from __future__ import annotations

from kernelopt.agents.llm_errors import LLMCallError, LLMError, LLMSetupError
from kernelopt.agents.providers.base import Provider, ProviderReply
from kernelopt.agents.providers.keys import ApiKey, resolve_api_key
from kernelopt.agents.providers.spec import (
    ACCEPTED_FORMS,
    LLMConfig,
    ProviderKind,
    ProviderSpec,
    config_from_mapping,
    load_llm_config,
    parse_llm_spec,
)

__all__ = [
    "ACCEPTED_FORMS",
    "ApiKey",
    "LLMCallError",
    "LLMConfig",
    "LLMError",
    "LLMSetupError",
    "Provider",
    "ProviderKind",
    "ProviderReply",
    "ProviderSpec",
    "config_from_mapping",
    "load_llm_config",
    "parse_llm_spec",
    "resolve_api_key",
]
