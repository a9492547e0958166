"""What every provider offers the client, and the SDK-error → one-line-message mapping.

Both official SDKs share one exception hierarchy shape (AuthenticationError,
NotFoundError, RateLimitError, InternalServerError, APITimeoutError, ...), so one
function maps either, given the SDK module.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from kernelopt.agents.llm_errors import LLMCallError, LLMError, LLMSetupError
from kernelopt.agents.providers.keys import ApiKey
from kernelopt.agents.providers.spec import ProviderSpec
from kernelopt.agents.types import Message

PROVIDER_LABELS = {"openai": "OpenAI", "anthropic": "Anthropic", "openai-compatible": "openai-compatible"}


@dataclass(frozen=True)
class ProviderReply:
    """The text and token usage of one successful response."""

    text: str
    input_tokens: int
    output_tokens: int
    model: str  # as the server reports it (may carry a snapshot suffix)


class Provider(Protocol):
    """One configured endpoint: sends messages, returns a reply or raises an :class:`LLMError`."""

    spec: ProviderSpec

    @property
    def url(self) -> str: ...

    def send(self, messages: Sequence[Message], *, max_tokens: int, temperature: float) -> ProviderReply: ...

    def close(self) -> None: ...


def import_sdk(name: str) -> ModuleType:
    """Import an SDK lazily, so kernelopt without the ``llm`` extra still runs its LLM-free parts."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise LLMSetupError(f"the {name} package is not installed: pip install 'kernelopt[llm]'") from None


@dataclass(frozen=True)
class ErrorContext:
    """What a message about a failed request needs to name."""

    spec: ProviderSpec
    url: str
    key: ApiKey
    max_retries: int
    timeout_s: float

    @property
    def label(self) -> str:
        return PROVIDER_LABELS[self.spec.kind]


def map_sdk_error(sdk: ModuleType, exc: BaseException, ctx: ErrorContext) -> LLMError:
    """Turn an SDK exception into a one-line LLMError saying what happened and what to do."""
    label, url, model = ctx.label, ctx.url, ctx.spec.model
    attempts = f"after {ctx.max_retries} retries" if ctx.max_retries else "(retries disabled)"
    status = getattr(exc, "status_code", None)
    if isinstance(exc, (sdk.AuthenticationError, sdk.PermissionDeniedError)):
        if ctx.key.variable is None:
            return LLMSetupError(
                f"the {label} server at {url} rejected the request without a key ({status}): "
                "export OPENAI_API_KEY=... or set api_key_env in the LLM config",
                status=status,
            )
        return LLMSetupError(
            f"the {label} API rejected the key in {ctx.key.variable} ({status}): check the key", status=status
        )
    if isinstance(exc, sdk.NotFoundError):
        hint = " (and that the URL ends in /v1)" if ctx.spec.kind == "openai-compatible" else ""
        return LLMSetupError(f"model {model} is not known to {label} at {url}: check --llm{hint}", status=status)
    if isinstance(exc, sdk.RateLimitError):
        return LLMCallError(
            f"the {label} API at {url} still answered {status} (rate limit) {attempts}: "
            "retry later, lower max_concurrency or raise max_retries in the LLM config",
            status=status,
        )
    if isinstance(exc, sdk.APIStatusError) and status is not None and status >= 500:
        return LLMCallError(
            f"the {label} API at {url} still answered {status} (server error) {attempts}: "
            "retry later or raise max_retries in the LLM config",
            status=status,
        )
    if isinstance(exc, sdk.APITimeoutError):
        return LLMCallError(
            f"the {label} API at {url} did not answer within {ctx.timeout_s:g} s {attempts}: "
            "raise timeout_s in the LLM config or check the server"
        )
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({_one_line(cause)})" if cause is not None else ""
        return LLMCallError(f"cannot reach the {label} API at {url}{detail} {attempts}: check the URL and the network")
    if isinstance(exc, sdk.APIStatusError):
        return LLMCallError(
            f"the {label} API at {url} refused the request ({status}): {_server_message(exc)}", status=status
        )
    return LLMCallError(f"the {label} API at {url} sent an answer kernelopt cannot read: {_one_line(exc)}")


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _one_line(error["message"])
    return _one_line(getattr(exc, "message", exc))


def _one_line(value: object, limit: int = 200) -> str:
    text = " ".join(str(value).split()) or type(value).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
