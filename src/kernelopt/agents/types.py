"""Plain data shared by providers and roles (no SDK imports here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Completion:
    """One model response with what it cost."""

    text: str
    provider: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ChatClient(Protocol):
    """What the roles need from an LLM: messages in, one completion out."""

    def complete(
        self, messages: list[Message], *, role: str = "", max_tokens: int = 4096, temperature: float = 0.2
    ) -> Completion: ...
