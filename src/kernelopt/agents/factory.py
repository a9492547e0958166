"""Build an :class:`LLMClient` from an ``--llm`` text or spec and an optional config."""

from __future__ import annotations

from pathlib import Path

from kernelopt.agents.client import LLMClient
from kernelopt.agents.providers.base import Provider
from kernelopt.agents.providers.keys import ApiKey, resolve_api_key
from kernelopt.agents.providers.spec import LLMConfig, ProviderSpec, load_llm_config
from kernelopt.store import Store


def make_provider(spec: ProviderSpec, config: LLMConfig | None = None, api_key: ApiKey | None = None) -> Provider:
    """The provider for ``spec``; the key (``api_key``, else the environment's) is checked now, so a
    missing one stops before any work."""
    config = config or LLMConfig()
    key = api_key or resolve_api_key(spec, api_key_env=config.api_key_env)
    if spec.kind == "anthropic":
        from kernelopt.agents.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider(spec, api_key=key, timeout_s=config.timeout_s, max_retries=config.max_retries)
    from kernelopt.agents.providers.openai_provider import OpenAIProvider

    return OpenAIProvider(spec, api_key=key, timeout_s=config.timeout_s, max_retries=config.max_retries)


def make_client(
    spec_or_text: ProviderSpec | str | None,
    *,
    store: Store | None = None,
    run_id: int | None = None,
    config: LLMConfig | str | Path | None = None,
    cache: bool = True,
    api_key: ApiKey | None = None,
) -> LLMClient:
    """An :class:`LLMClient` for ``--llm`` (or the config's ``llm`` when None).

    ``config`` is an :class:`LLMConfig` or the path of a TOML config file. Raises a
    one-line :class:`~kernelopt.agents.providers.LLMSetupError` for a bad spec or config,
    a missing key, or a missing ``llm`` extra. ``api_key`` stands in for the environment's (a bench
    worker's relay token, :mod:`kernelopt.agents.relay`).
    """
    if config is not None and not isinstance(config, LLMConfig):
        config = load_llm_config(config)
    config = config or LLMConfig()
    spec = config.spec_for(spec_or_text)
    return LLMClient(
        make_provider(spec, config, api_key),
        store=store,
        run_id=run_id,
        max_concurrency=config.max_concurrency,
        prices=config.prices,
        cache=cache,
    )
