"""Which LLM to use: the ``--llm`` text and the TOML config file.

Accepted ``--llm`` forms::

    openai:MODEL                      the OpenAI API (OPENAI_API_KEY)
    anthropic:MODEL                   the Anthropic API (ANTHROPIC_API_KEY)
    openai-compatible:MODEL@URL       any server speaking the OpenAI Chat Completions API
                                      (vLLM, SGLang, Ollama, llama.cpp, OpenRouter); URL is
                                      the base URL including /v1, e.g. http://localhost:8000/v1

The config file (all keys optional)::

    llm = "anthropic:claude-sonnet-4-5"
    base_url = "http://localhost:8000/v1"  # for openai-compatible:MODEL given without @URL
    api_key_env = "MY_LLM_KEY"             # read the key from this variable instead
    max_concurrency = 4                    # requests in flight at once
    timeout_s = 300                        # per request attempt
    max_retries = 4                        # the SDK's retries on 429 / 5xx / timeouts
    [prices."my-model"]                    # USD per million tokens, over the built-in table
    input_per_mtok = 0.5
    output_per_mtok = 1.5
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from kernelopt.agents.llm_errors import LLMSetupError
from kernelopt.agents.prices import ModelPrice, parse_prices

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = None

ProviderKind = Literal["openai", "anthropic", "openai-compatible"]
PROVIDER_KINDS: tuple[ProviderKind, ...] = ("openai", "anthropic", "openai-compatible")
ACCEPTED_FORMS = "openai:MODEL, anthropic:MODEL or openai-compatible:MODEL@URL"

_URL = re.compile(r"^https?://[^\s/@]+(/\S*)?$")


@dataclass(frozen=True)
class ProviderSpec:
    """A provider kind, a model name, and for OpenAI-compatible servers their base URL."""

    kind: ProviderKind
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        text = f"{self.kind}:{self.model}"
        return f"{text}@{self.base_url}" if self.base_url else text


def parse_llm_spec(text: str, *, default_base_url: str | None = None, source: str = "--llm") -> ProviderSpec:
    """Parse an ``--llm`` text.

    ``default_base_url`` (the config's ``base_url``) stands in for a missing ``@URL`` of an
    ``openai-compatible`` spec; ``source`` names where the text came from in error messages.
    """
    raw = (text or "").strip()
    kind, sep, rest = raw.partition(":")
    if not sep or kind not in PROVIDER_KINDS:
        raise LLMSetupError(f"cannot read {source} {raw!r}: use {ACCEPTED_FORMS}")
    base_url: str | None = None
    if kind == "openai-compatible":
        model, at, url = rest.partition("@")
        if at:
            base_url = url.strip()
        elif default_base_url:
            base_url = default_base_url
        else:
            raise LLMSetupError(
                f"{source} {raw!r} has no server URL: use openai-compatible:MODEL@URL, "
                "e.g. openai-compatible:qwen2.5-coder@http://localhost:8000/v1"
            )
    else:
        model = rest
        if "@" in model:
            raise LLMSetupError(
                f"{source} {raw!r}: {kind}:MODEL takes no @URL; for another server use openai-compatible:MODEL@URL"
            )
    model = model.strip()
    if not model or any(c.isspace() for c in model):
        raise LLMSetupError(f"{source} {raw!r} names no model: use {ACCEPTED_FORMS}")
    if base_url is not None and not _URL.match(base_url):
        raise LLMSetupError(f"{source} {raw!r}: {base_url!r} is not an http(s) URL: use e.g. http://localhost:8000/v1")
    return ProviderSpec(kind, model, base_url.rstrip("/") if base_url else None)


@dataclass(frozen=True)
class LLMConfig:
    """Provider settings from the config file; every field has a working default."""

    llm: ProviderSpec | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    max_concurrency: int = 4
    timeout_s: float = 300.0
    max_retries: int = 4
    prices: Mapping[str, ModelPrice] | None = None

    def spec_for(self, text_or_spec: ProviderSpec | str | None) -> ProviderSpec:
        """The spec to use: the ``--llm`` one when given, else the config's ``llm``.

        The config's ``base_url`` fills in the URL of an ``openai-compatible`` spec without one.
        """
        if isinstance(text_or_spec, ProviderSpec):
            if text_or_spec.kind == "openai-compatible" and text_or_spec.base_url is None and self.base_url:
                return replace(text_or_spec, base_url=self.base_url)
            return text_or_spec
        if text_or_spec:
            return parse_llm_spec(text_or_spec, default_base_url=self.base_url)
        if self.llm is None:
            raise LLMSetupError(f"no LLM chosen: pass --llm ({ACCEPTED_FORMS}) or set llm in the LLM config file")
        return self.llm


_KEYS = ("llm", "base_url", "api_key_env", "max_concurrency", "timeout_s", "max_retries", "prices")


def load_llm_config(path: str | Path) -> LLMConfig:
    """Read and check an LLM config file; every problem is one line naming the file and the key."""
    path = Path(path)
    if tomllib is None:  # pragma: no cover - Python 3.10
        raise LLMSetupError(f"reading {path} needs Python 3.11 (tomllib): upgrade Python or pass --llm")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LLMSetupError(f"LLM config {path} does not exist: check the path") from None
    except OSError as exc:
        raise LLMSetupError(f"cannot read LLM config {path} ({exc.strerror or exc}): check the path") from None
    except UnicodeDecodeError:
        raise LLMSetupError(f"LLM config {path} is not UTF-8 text: save it as a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise LLMSetupError(f"LLM config {path} is not valid TOML ({exc}): fix the file") from None
    return config_from_mapping(data, where=str(path))


def config_from_mapping(data: Mapping[str, Any], *, where: str = "the LLM config") -> LLMConfig:
    """Build an :class:`LLMConfig` from already-parsed TOML (or any mapping)."""
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise LLMSetupError(f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(_KEYS)}")
    base_url = _optional_str(data, "base_url", where)
    if base_url is not None and not _URL.match(base_url):
        raise LLMSetupError(f"{where}: base_url {base_url!r} is not an http(s) URL: use e.g. http://localhost:8000/v1")
    llm_text = _optional_str(data, "llm", where)
    llm = parse_llm_spec(llm_text, default_base_url=base_url, source=f"llm in {where}") if llm_text else None
    api_key_env = _optional_str(data, "api_key_env", where)
    if api_key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env):
        raise LLMSetupError(f"{where}: api_key_env {api_key_env!r} is not an environment variable name")
    prices = data.get("prices")
    if prices is not None and not isinstance(prices, Mapping):
        raise LLMSetupError(
            f'{where}: prices must be a table like [prices."MODEL"] input_per_mtok = ..., output_per_mtok = ...'
        )
    return LLMConfig(
        llm=llm,
        base_url=base_url.rstrip("/") if base_url else None,
        api_key_env=api_key_env,
        max_concurrency=_number(data, "max_concurrency", where, default=4, integer=True, minimum=1),
        timeout_s=_number(data, "timeout_s", where, default=300.0, integer=False, minimum=0.001),
        max_retries=_number(data, "max_retries", where, default=4, integer=True, minimum=0),
        prices=parse_prices(prices, where=where) if prices is not None else None,
    )


def _optional_str(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise LLMSetupError(f"{where}: {key} must be a non-empty string, not {value!r}")
    return value.strip()


def _number(data: Mapping[str, Any], key: str, where: str, *, default: Any, integer: bool, minimum: float) -> Any:
    value = data.get(key, default)
    wanted = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, wanted) or value < minimum:
        kind = "an integer" if integer else "a number"
        raise LLMSetupError(f"{where}: {key} must be {kind} >= {minimum:g}, not {value!r}")
    return value if integer else float(value)
