"""OpenAI's Chat Completions API through the official ``openai`` SDK.

The same class serves any OpenAI-compatible server (vLLM, SGLang, Ollama,
llama.cpp server, OpenRouter) by pointing the SDK's ``base_url`` at it. Retries
(exponential backoff on 429, 5xx, connection errors and timeouts, honouring
``retry-after``) and timeouts are the SDK's own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kernelopt.agents.llm_errors import LLMCallError
from kernelopt.agents.providers.base import ErrorContext, ProviderReply, import_sdk, map_sdk_error
from kernelopt.agents.providers.keys import ApiKey
from kernelopt.agents.providers.spec import ProviderSpec
from kernelopt.agents.types import Message

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"

# OpenAI's reasoning models accept only the default temperature; sending one is a 400.
# Models not matched here but refusing it too are found by their 400 (see send()).
_FIXED_TEMPERATURE = re.compile(r"^(o\d|gpt-5)")


class OpenAIProvider:
    """Sends chat messages to an OpenAI or OpenAI-compatible endpoint."""

    def __init__(self, spec: ProviderSpec, *, api_key: ApiKey, timeout_s: float, max_retries: int) -> None:
        self._sdk = import_sdk("openai")
        self.spec = spec
        self._client = self._sdk.OpenAI(
            api_key=api_key.value,
            base_url=spec.base_url or DEFAULT_OPENAI_URL,
            timeout=timeout_s,
            max_retries=max_retries,
        )
        self._errors = ErrorContext(spec, self.url, api_key, max_retries, timeout_s)
        self._send_temperature = not (spec.kind == "openai" and _FIXED_TEMPERATURE.match(spec.model))

    @property
    def url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def request_params(self, messages: Sequence[Message], *, max_tokens: int, temperature: float) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.spec.model, "messages": [m.to_dict() for m in messages]}
        if self.spec.kind == "openai":
            # The official API deprecates max_tokens in favour of max_completion_tokens (the
            # only one reasoning models accept); compatible servers know max_tokens best.
            params["max_completion_tokens"] = max_tokens
        else:
            params["max_tokens"] = max_tokens
        if self._send_temperature:
            params["temperature"] = temperature
        return params

    def send(self, messages: Sequence[Message], *, max_tokens: int, temperature: float) -> ProviderReply:
        params = self.request_params(messages, max_tokens=max_tokens, temperature=temperature)
        try:
            try:
                response = self._client.chat.completions.create(**params)
            except self._sdk.BadRequestError as exc:
                if "temperature" not in params or "temperature" not in str(exc).lower():
                    raise
                # The model takes only its default temperature: drop it, now and for later calls.
                self._send_temperature = False
                del params["temperature"]
                response = self._client.chat.completions.create(**params)
        except self._sdk.APIError as exc:
            raise map_sdk_error(self._sdk, exc, self._errors) from exc
        except ValueError as exc:  # a body that is not JSON
            raise map_sdk_error(self._sdk, exc, self._errors) from exc
        choices = getattr(response, "choices", None)
        if not choices:
            raise LLMCallError(
                f"the {self._errors.label} API at {self.url} answered without a choice: retry, or check the server"
            )
        usage = getattr(response, "usage", None)
        return ProviderReply(
            text=choices[0].message.content or "",
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            model=getattr(response, "model", None) or self.spec.model,
        )

    def close(self) -> None:
        self._client.close()
