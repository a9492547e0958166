"""The ``knowledge`` layer: strategy cards, hardware spec cards, retrieval, experience memory.

Everything an agent may be told about how to make a kernel faster, kept apart from
the agents that tell it: this layer knows nothing of LLM providers or roles.
"""

from __future__ import annotations

from kernelopt.knowledge.card import (
    BOTTLENECKS,
    HARDWARE,
    KERNEL_KINDS,
    REQUIRED_SECTIONS,
    Card,
    CardError,
    hardware_cards,
    parse_card,
    strategy_cards,
)
from kernelopt.knowledge.memory import ExperienceRow, StrategyStats, normalize_strategy
from kernelopt.knowledge.retrieval import CardIndex, fts5_available, hardware_card, retrieve

__all__ = [
    "BOTTLENECKS",
    "HARDWARE",
    "KERNEL_KINDS",
    "REQUIRED_SECTIONS",
    "Card",
    "CardError",
    "CardIndex",
    "ExperienceRow",
    "StrategyStats",
    "fts5_available",
    "hardware_card",
    "hardware_cards",
    "normalize_strategy",
    "parse_card",
    "retrieve",
    "strategy_cards",
]
