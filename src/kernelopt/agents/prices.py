"""What tokens cost: a small built-in price table, overridable from the LLM config.

Prices are USD per million tokens, the providers' published list prices for
standard (non-batch, non-cached) requests when this table was written (2025).
They change: check them, and put the ones you pay in the config's ``[prices]``
table, which takes precedence. A model found nowhere costs 0 and is flagged in
the client's usage (``unpriced_models``) so that a total is never silently low.

A model name matches a table entry exactly, or as the entry followed by a
snapshot suffix (``-2024-08-06``, ``-20250514``, ``-latest``), so that
``claude-sonnet-4-20250514`` finds ``claude-sonnet-4`` but ``gpt-4o-mini`` never
finds ``gpt-4o``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelopt.agents.llm_errors import LLMSetupError


@dataclass(frozen=True)
class ModelPrice:
    """USD per million input and output tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1_000_000


DEFAULT_PRICES: dict[str, ModelPrice] = {
    # OpenAI
    "gpt-5.1": ModelPrice(1.25, 10.00),
    "gpt-5": ModelPrice(1.25, 10.00),
    "gpt-5-mini": ModelPrice(0.25, 2.00),
    "gpt-5-nano": ModelPrice(0.05, 0.40),
    "gpt-4.1": ModelPrice(2.00, 8.00),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40),
    "gpt-4o": ModelPrice(2.50, 10.00),
    "gpt-4o-mini": ModelPrice(0.15, 0.60),
    "o1": ModelPrice(15.00, 60.00),
    "o3": ModelPrice(2.00, 8.00),
    "o3-mini": ModelPrice(1.10, 4.40),
    "o4-mini": ModelPrice(1.10, 4.40),
    # Anthropic
    "claude-opus-4-5": ModelPrice(5.00, 25.00),
    "claude-opus-4-1": ModelPrice(15.00, 75.00),
    "claude-opus-4": ModelPrice(15.00, 75.00),
    "claude-sonnet-4-5": ModelPrice(3.00, 15.00),
    "claude-sonnet-4": ModelPrice(3.00, 15.00),
    "claude-3-7-sonnet": ModelPrice(3.00, 15.00),
    "claude-haiku-4-5": ModelPrice(1.00, 5.00),
    "claude-3-5-haiku": ModelPrice(0.80, 4.00),
}

_SNAPSHOT_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)")


class PriceTable:
    """Looks up a model's price: the overrides first, then the built-in table."""

    def __init__(
        self, overrides: Mapping[str, ModelPrice] | None = None, *, defaults: Mapping[str, ModelPrice] = DEFAULT_PRICES
    ) -> None:
        self._prices: dict[str, ModelPrice] = {**defaults, **(overrides or {})}

    def lookup(self, model: str) -> ModelPrice | None:
        if model in self._prices:
            return self._prices[model]
        # Longest entry first, so a more specific name always wins over its prefix.
        for name in sorted(self._prices, key=len, reverse=True):
            if model.startswith(name) and _SNAPSHOT_SUFFIX.fullmatch(model[len(name) :]):
                return self._prices[name]
        return None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """The cost in USD, or None when the model has no price."""
        price = self.lookup(model)
        return None if price is None else price.cost(input_tokens, output_tokens)


def parse_prices(raw: Mapping[str, Any], *, where: str = "the LLM config") -> dict[str, ModelPrice]:
    """``{"model": {"input_per_mtok": x, "output_per_mtok": y}}`` → ModelPrice per model, or a one-line error."""
    prices: dict[str, ModelPrice] = {}
    for model, entry in raw.items():
        if isinstance(entry, ModelPrice):
            prices[model] = entry
            continue
        if not isinstance(entry, Mapping) or set(entry) != {"input_per_mtok", "output_per_mtok"}:
            raise LLMSetupError(
                f'{where}: prices."{model}" must have exactly input_per_mtok and output_per_mtok (USD per million tokens)'
            )
        values = []
        for key in ("input_per_mtok", "output_per_mtok"):
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise LLMSetupError(f'{where}: prices."{model}".{key} must be a number >= 0, not {value!r}')
            values.append(float(value))
        prices[model] = ModelPrice(*values)
    return prices
