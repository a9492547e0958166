"""Anthropic's Messages API through the official ``anthropic`` SDK.

System messages go in the request's ``system=`` field (the Messages API has no
system role); consecutive messages of one role are joined into one turn. Retries
and timeouts are the SDK's own, as for OpenAI.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from kernelopt.agents.llm_errors import LLMCallError
from kernelopt.agents.providers.base import ErrorContext, ProviderReply, import_sdk, map_sdk_error
from kernelopt.agents.providers.keys import ApiKey
from kernelopt.agents.providers.spec import ProviderSpec
from kernelopt.agents.types import Message

DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"


class AnthropicProvider:
    """Sends chat messages to the Anthropic Messages API (or a server speaking it)."""

    def __init__(self, spec: ProviderSpec, *, api_key: ApiKey, timeout_s: float, max_retries: int) -> None:
        self._sdk = import_sdk("anthropic")
        self.spec = spec
        self._client = self._sdk.Anthropic(
            api_key=api_key.value,
            base_url=spec.base_url or DEFAULT_ANTHROPIC_URL,
            timeout=timeout_s,
            max_retries=max_retries,
        )
        self._errors = ErrorContext(spec, self.url, api_key, max_retries, timeout_s)
        self._takes_temperature = _takes_parameter(self._client.messages.create, "temperature")

    @property
    def url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def request_params(self, messages: Sequence[Message], *, max_tokens: int, temperature: float) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        turns: list[dict[str, str]] = []
        for message in messages:
            if message.role == "system":
                continue
            if turns and turns[-1]["role"] == message.role:
                turns[-1]["content"] += "\n\n" + message.content
            else:
                turns.append({"role": message.role, "content": message.content})
        if not turns:
            raise ValueError("the Anthropic Messages API needs at least one user message besides the system prompt")
        params: dict[str, Any] = {
            "model": self.spec.model,
            "max_tokens": max_tokens,
            "messages": turns,
        }
        if self._takes_temperature:
            params["temperature"] = temperature
        if system:
            params["system"] = system
        return params

    def send(self, messages: Sequence[Message], *, max_tokens: int, temperature: float) -> ProviderReply:
        params = self.request_params(messages, max_tokens=max_tokens, temperature=temperature)
        try:
            response = self._client.messages.create(**params)
        except self._sdk.APIError as exc:
            raise map_sdk_error(self._sdk, exc, self._errors) from exc
        except ValueError as exc:  # a body that is not JSON
            raise map_sdk_error(self._sdk, exc, self._errors) from exc
        blocks = getattr(response, "content", None)
        if blocks is None:
            raise LLMCallError(f"the Anthropic API at {self.url} answered without content: retry, or check the server")
        usage = getattr(response, "usage", None)
        return ProviderReply(
            text="".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text"),
            input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            model=getattr(response, "model", None) or self.spec.model,
        )

    def close(self) -> None:
        self._client.close()


def _takes_parameter(function: Any, name: str) -> bool:
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):  # pragma: no cover - an uninspectable callable
        return False
