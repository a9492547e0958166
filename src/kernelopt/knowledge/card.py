"""Strategy and hardware cards: markdown files with a small front-matter header.

A card is knowledge we wrote ourselves, shipped as package data under
``kernelopt/knowledge/cards/`` (strategy cards) and ``cards/hardware/`` (one per
GPU). The header is a YAML-like block between ``---`` lines with one
``key: value`` per line; a value in brackets is a list (``[a, b]``). We parse it
ourselves rather than depend on a YAML library: the format is ours and small.

Strategy cards carry five sections in their body (``REQUIRED_SECTIONS``) so that
a planner sees, for every idea, when it applies, what to change, what to expect,
when not to use it, and a snippet.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from kernelopt.errors import KerneloptError

BOTTLENECKS = ("memory-bound", "compute-bound", "latency-bound", "any")
KERNEL_KINDS = ("pointwise", "reduction", "persistent_reduction", "template", "scan", "any")
HARDWARE = ("hopper", "ampere", "any")
REQUIRED_FIELDS = ("id", "title", "bottleneck", "kernel_kinds", "hardware", "tags")
REQUIRED_SECTIONS = ("When it applies", "What to change", "Expected effect", "When not to apply", "Example")

_FRONT_MATTER_RE = re.compile(r"\A---\n(.*?)\n---\n(.*)\Z", re.S)
_SECTION_RE = re.compile(r"^## (.+?)\s*$", re.M)
_SECTION_LEVEL_RE = re.compile(r"^#{1,6} ")
_NUMBER_RE = re.compile(r"-?\d+(\.\d+)?")


class CardError(KerneloptError):
    """A card file that does not follow the card format (a bug in the shipped cards)."""


@dataclass(frozen=True)
class Card:
    """One strategy or hardware card.

    ``fields`` holds the header keys beyond the common ones (the numbers of a
    hardware card: ``sms``, ``l2_mb``, ``hbm_tbps``, ...), with numbers parsed.
    """

    id: str
    title: str
    bottleneck: str
    kernel_kinds: tuple[str, ...]
    hardware: tuple[str, ...]
    tags: tuple[str, ...]
    body: str
    source: str  # the resource path, for messages
    fields: Mapping[str, Any] = field(default_factory=dict)

    def sections(self) -> dict[str, str]:
        """The body's ``## `` sections by heading, text stripped."""
        parts = _SECTION_RE.split(self.body)
        return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}

    def section(self, heading: str) -> str:
        return self.sections().get(heading, "")

    def applies_to(self, bottleneck: str | None, kernel_kind: str | None, hardware: str | None) -> bool:
        """True when the card is eligible for these filters (None: no filter; "any" always matches)."""
        return (
            _matches(bottleneck, (self.bottleneck,))
            and _matches(kernel_kind, self.kernel_kinds)
            and _matches(hardware, self.hardware)
        )

    def demoted_body(self, levels: int = 2) -> str:
        """The body with its Markdown headings moved ``levels`` down, to nest it in a prompt section."""
        lines, in_code = [], False
        for line in self.body.strip().splitlines():
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and _SECTION_LEVEL_RE.match(line):
                hashes = len(line) - len(line.lstrip("#"))
                line = "#" * min(6, hashes + levels) + line[hashes:]
            lines.append(line)
        return "\n".join(lines)

    def prompt_text(self) -> str:
        """The card as a prompt shows it: title and id as a level-3 heading, the body nested below."""
        return f"### {self.title} (strategy id: {self.id})\n\n{self.demoted_body()}\n"


def _matches(wanted: str | None, offered: tuple[str, ...]) -> bool:
    return wanted is None or "any" in offered or wanted.lower() in offered


def _parse_value(raw: str) -> Any:
    raw = raw.strip()
    if raw.startswith("[") and raw.endswith("]"):
        return tuple(item.strip() for item in raw[1:-1].split(",") if item.strip())
    if _NUMBER_RE.fullmatch(raw):
        return float(raw) if "." in raw else int(raw)
    return raw


def parse_card(text: str, source: str = "<string>") -> Card:
    """Parse one card file's text; raises :class:`CardError` naming the file and the problem."""
    m = _FRONT_MATTER_RE.match(text.replace("\r\n", "\n"))
    if not m:
        raise CardError(f"{source}: a card starts with a '---' front-matter block closed by '---'")
    header: dict[str, Any] = {}
    for lineno, line in enumerate(m.group(1).splitlines(), start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise CardError(f"{source}: line {lineno}: expected 'key: value', got {line!r}")
        header[key.strip()] = _parse_value(value)
    missing = [name for name in REQUIRED_FIELDS if name not in header]
    if missing:
        raise CardError(f"{source}: front matter lacks {', '.join(missing)}")

    def as_tuple(name: str, allowed: tuple[str, ...] | None) -> tuple[str, ...]:
        value = header.pop(name)
        items = value if isinstance(value, tuple) else (str(value),)
        items = tuple(str(i).strip().lower() if allowed else str(i).strip() for i in items)
        if not items:
            raise CardError(f"{source}: {name} is empty")
        if allowed is not None:
            unknown = [i for i in items if i not in allowed]
            if unknown:
                raise CardError(f"{source}: {name} has {', '.join(unknown)}; allowed: {', '.join(allowed)}")
        return items

    bottleneck = str(header.pop("bottleneck")).strip().lower()
    if bottleneck not in BOTTLENECKS:
        raise CardError(f"{source}: bottleneck {bottleneck!r} is not one of {', '.join(BOTTLENECKS)}")
    card_id, title = str(header.pop("id")).strip(), str(header.pop("title")).strip()
    return Card(
        id=card_id,
        title=title,
        bottleneck=bottleneck,
        kernel_kinds=as_tuple("kernel_kinds", KERNEL_KINDS),
        hardware=as_tuple("hardware", HARDWARE),
        tags=as_tuple("tags", None),
        body=m.group(2).strip() + "\n",
        source=source,
        fields=header,
    )


def _read_dir(*parts: str) -> tuple[Card, ...]:
    folder = resources.files("kernelopt.knowledge").joinpath("cards", *parts)
    cards = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_file() and entry.name.endswith(".md"):
            cards.append(parse_card(entry.read_text(encoding="utf-8"), "/".join(("cards", *parts, entry.name))))
    if not cards:
        raise CardError(
            f"no cards found in kernelopt/knowledge/{'/'.join(('cards', *parts))}; "
            "the package was installed without its data files (reinstall kernelopt)"
        )
    ids = [c.id for c in cards]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise CardError(f"duplicate card ids: {', '.join(dupes)}")
    return tuple(cards)


@functools.lru_cache(maxsize=1)
def strategy_cards() -> tuple[Card, ...]:
    """Every shipped strategy card, sorted by file name."""
    return _read_dir()


@functools.lru_cache(maxsize=1)
def hardware_cards() -> tuple[Card, ...]:
    """Every shipped hardware spec card."""
    return _read_dir("hardware")
