"""Retrieve the strategy cards that fit a kernel, and the spec card of a GPU.

Ranking is BM25 over each card's title, tags and body, computed by SQLite's FTS5
extension (standard library ``sqlite3``, an in-memory table built once per
process). Title words weigh most, then tags, then body. Filters come first: a
card is eligible when its bottleneck, kernel kinds and hardware match the
request, and a card marked ``any`` on a field matches every value of it.

If the interpreter's SQLite lacks FTS5 we say so in one line and rank with a
small pure-Python BM25 over the same fields: retrieval keeps working, the line
says what is missing.
"""

from __future__ import annotations

import functools
import math
import re
import sqlite3
import warnings
from collections import Counter
from collections.abc import Sequence

from kernelopt.knowledge.card import Card, hardware_cards, strategy_cards

# Column weights for bm25(): title, tags, body.
WEIGHTS = (4.0, 2.0, 1.0)
_WORD_RE = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "with",
        "which",
        "what",
        "when",
        "how",
        "why",
        "not",
        "no",
        "do",
        "does",
        "can",
        "should",
        "would",
        "into",
        "than",
        "then",
        "so",
        "each",
        "every",
        "all",
        "per",
        "re",
        "also",
        "only",
        "some",
        "more",
        "less",
        "very",
    ]
)


def query_terms(query: str) -> list[str]:
    """The distinct lower-case words of a query, stopwords and single letters dropped, in order."""
    seen: dict[str, None] = {}
    for word in _WORD_RE.findall(query.lower()):
        if len(word) > 1 and word not in _STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)[:64]


def fts5_available() -> bool:
    """Whether this Python's sqlite3 was built with the FTS5 extension."""
    try:
        with sqlite3.connect(":memory:") as conn:
            conn.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
        return True
    except sqlite3.OperationalError:
        return False


class CardIndex:
    """A searchable set of cards. ``retrieve`` uses one over the shipped strategy cards."""

    def __init__(self, cards: Sequence[Card], use_fts5: bool | None = None) -> None:
        self.cards = tuple(cards)
        self.uses_fts5 = fts5_available() if use_fts5 is None else use_fts5
        if self.uses_fts5:
            self._conn = sqlite3.connect(":memory:", check_same_thread=False)
            self._conn.execute("CREATE VIRTUAL TABLE cards USING fts5(title, tags, body, tokenize='porter unicode61')")
            self._conn.executemany(
                "INSERT INTO cards(rowid, title, tags, body) VALUES (?,?,?,?)",
                [(i, c.title, " ".join((c.id, *c.tags)), c.body) for i, c in enumerate(self.cards)],
            )
        else:
            warnings.warn(
                f"SQLite {sqlite3.sqlite_version} in this Python has no FTS5; ranking strategy cards with the "
                "built-in pure-Python BM25 instead (use a Python whose sqlite3 has FTS5 for the indexed search)",
                RuntimeWarning,
                stacklevel=2,
            )
            self._bm25 = _PythonBM25([(c.title, " ".join((c.id, *c.tags)), c.body) for c in self.cards])

    def search(
        self,
        query: str,
        bottleneck: str | None = None,
        kernel_kind: str | None = None,
        hardware: str | None = None,
        k: int = 4,
    ) -> list[Card]:
        """Up to ``k`` eligible cards, best BM25 match first.

        Eligible cards that match no query word follow the matching ones, the
        most specific first (exact bottleneck, kind and hardware over ``any``),
        so a planner gets ``k`` cards whenever ``k`` are eligible.
        """
        if k <= 0:
            return []
        eligible = {i for i, c in enumerate(self.cards) if c.applies_to(bottleneck, kernel_kind, hardware)}
        ranked = [i for i in self._rank(query_terms(query)) if i in eligible]
        rest = sorted(
            eligible - set(ranked),
            key=lambda i: (-self._specificity(self.cards[i], bottleneck, kernel_kind, hardware), self.cards[i].id),
        )
        return [self.cards[i] for i in (ranked + rest)[:k]]

    def _rank(self, terms: list[str]) -> list[int]:
        if not terms:
            return []
        if not self.uses_fts5:
            return self._bm25.rank(terms)
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = self._conn.execute(
            f"SELECT rowid FROM cards WHERE cards MATCH ? ORDER BY bm25(cards, {', '.join(map(str, WEIGHTS))}), rowid",
            (match,),
        )
        return [int(r[0]) for r in rows]

    @staticmethod
    def _specificity(card: Card, bottleneck: str | None, kernel_kind: str | None, hardware: str | None) -> int:
        return (
            (bottleneck is not None and card.bottleneck == bottleneck)
            + (kernel_kind is not None and kernel_kind in card.kernel_kinds)
            + (hardware is not None and hardware in card.hardware)
        )


class _PythonBM25:
    """BM25 (k1 = 1.2, b = 0.75) over weighted fields, for interpreters without FTS5."""

    K1, B = 1.2, 0.75

    def __init__(self, docs: Sequence[tuple[str, str, str]]) -> None:
        self.docs: list[dict[str, float]] = []
        for fields in docs:
            counts: dict[str, float] = {}
            for weight, text in zip(WEIGHTS, fields):
                for word in _WORD_RE.findall(text.lower()):
                    counts[_stem(word)] = counts.get(_stem(word), 0.0) + weight
            self.docs.append(counts)
        self.avg_len = sum(sum(d.values()) for d in self.docs) / max(1, len(self.docs))
        self.df: Counter[str] = Counter(w for d in self.docs for w in d)

    def rank(self, terms: list[str]) -> list[int]:
        stems = {_stem(t) for t in terms}
        n = len(self.docs)
        scores = []
        for i, doc in enumerate(self.docs):
            length = sum(doc.values())
            score = 0.0
            for term in stems:
                tf = doc.get(term, 0.0)
                if tf:
                    idf = math.log(1 + (n - self.df[term] + 0.5) / (self.df[term] + 0.5))
                    score += idf * tf * (self.K1 + 1) / (tf + self.K1 * (1 - self.B + self.B * length / self.avg_len))
            if score > 0:
                scores.append((-score, i))
        return [i for _, i in sorted(scores)]


def _stem(word: str) -> str:
    """A crude suffix stripper so that 'reductions' meets 'reduction' without FTS5's porter stemmer."""
    for suffix in ("ations", "ation", "ings", "ing", "ies", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@functools.lru_cache(maxsize=1)
def default_index() -> CardIndex:
    """The index over the shipped strategy cards, built once per process."""
    return CardIndex(strategy_cards())


def retrieve(
    query: str,
    bottleneck: str | None = None,
    kernel_kind: str | None = None,
    hardware: str | None = None,
    k: int = 4,
) -> list[Card]:
    """The ``k`` shipped strategy cards that best fit ``query`` among those eligible for the filters."""
    return default_index().search(query, bottleneck, kernel_kind, hardware, k)


def _normalize_device(name: str) -> str:
    name = re.sub(r"\(.*?\)", " ", name)  # kernelopt's labels: "NVIDIA H200 (cc 9.0, 132 SMs)"
    return " ".join(name.lower().replace("_", " ").split())


def hardware_card(device_name: str) -> Card | None:
    """The spec card of a GPU named as torch names it ("NVIDIA H200"), or None if we have none.

    Names match exactly after lower-casing, dropping parenthesised suffixes and an
    optional "nvidia " prefix: a near miss (an H100 PCIe is not an H100 SXM) gets no card
    rather than a wrong one.
    """
    wanted = _normalize_device(device_name)
    wanted_short = wanted.removeprefix("nvidia ")
    for card in hardware_cards():
        names = card.fields.get("device_names", ())
        for alias in names if isinstance(names, tuple) else (names,):
            alias_norm = _normalize_device(str(alias))
            if alias_norm in (wanted, wanted_short) or alias_norm.removeprefix("nvidia ") == wanted_short:
                return card
    return None
