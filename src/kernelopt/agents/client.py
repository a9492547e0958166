"""The client the roles talk to: concurrency limit, response cache, cost and transcripts.

:class:`LLMClient` implements :class:`~kernelopt.agents.types.ChatClient` over one
provider. Per call it

1. looks the prompt up in the store's ``llm_cache`` (a hit replays the stored
   response: no HTTP request, ``cached=True``, no cost, no tokens spent);
2. otherwise waits for one of ``max_concurrency`` slots and sends the request
   (the SDK retries rate limits, server errors and timeouts itself);
3. prices the tokens the provider reports (:mod:`kernelopt.agents.prices`);
4. writes the prompt and the response, or the error, to ``transcripts``.

What goes to the LLM is exactly the messages the caller passes; this layer adds
nothing. The roles build those messages from source code, shapes, dtypes and
measurements -- never model weights or input data.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from kernelopt.agents.llm_errors import LLMError
from kernelopt.agents.prices import ModelPrice, PriceTable, parse_prices
from kernelopt.agents.providers.base import Provider
from kernelopt.agents.types import Completion, Message
from kernelopt.store import Store
from kernelopt.store.llm_records import add_transcript, cache_response, cached_response

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Usage:
    """Running totals of one client. Tokens and cost count only requests actually sent."""

    calls: int = 0  # successful requests to the provider
    cache_hits: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_models: tuple[str, ...] = ()  # models without a price: their cost counted as 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_NODE: contextvars.ContextVar[int | None] = contextvars.ContextVar("kernelopt_llm_node", default=None)


@contextmanager
def for_node(node_id: int | None) -> Iterator[None]:
    """Transcripts written inside this block name ``node_id``: the search node the calls work from."""
    token = _NODE.set(node_id)
    try:
        yield
    finally:
        _NODE.reset(token)


class LLMClient:
    """A :class:`ChatClient` over one provider, with cache, cost accounting and transcripts."""

    def __init__(
        self,
        provider: Provider,
        *,
        store: Store | None = None,
        run_id: int | None = None,
        max_concurrency: int = 4,
        prices: Mapping[str, ModelPrice | Mapping[str, float]] | None = None,
        cache: bool = True,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        self.provider = provider
        self.spec = provider.spec
        self.run_id = run_id
        self.max_concurrency = max_concurrency
        self._prices = PriceTable(parse_prices(prices) if prices else None)
        self._use_cache = cache and store is not None
        self._db = _StoreAccess(store) if store is not None else None
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._usage = Usage()

    # -- ChatClient ---------------------------------------------------------------------

    def complete(
        self, messages: Sequence[Message], *, role: str = "", max_tokens: int = 4096, temperature: float = 0.2
    ) -> Completion:
        messages = list(messages)
        if not messages:
            raise ValueError("complete() needs at least one message")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, not {max_tokens}")
        prompt = [m.to_dict() for m in messages]
        key = self.cache_key(prompt, max_tokens=max_tokens, temperature=temperature)

        if self._use_cache:
            hit = self._cache_lookup(key)
            if hit is not None:
                completion = Completion(hit["text"], self.spec.kind, self.spec.model, cached=True)
                self._record(role, prompt, completion)
                self._add(cache_hits=1)
                return completion

        try:
            with self._slots:
                reply = self.provider.send(messages, max_tokens=max_tokens, temperature=temperature)
        except LLMError as exc:
            self._record(role, prompt, None, error=str(exc))
            self._add(errors=1)
            raise

        # The name the user chose (and priced in the config) first, then the one the server reports.
        cost = self._prices.cost(self.spec.model, reply.input_tokens, reply.output_tokens)
        if cost is None:
            cost = self._prices.cost(reply.model, reply.input_tokens, reply.output_tokens)
        unpriced = cost is None
        completion = Completion(
            reply.text, self.spec.kind, self.spec.model, reply.input_tokens, reply.output_tokens, cost or 0.0
        )
        if self._use_cache:
            stored = {
                "text": reply.text,
                "model": reply.model,
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
            }
            self._cache_store(key, stored)
        self._record(role, prompt, completion)
        self._add(
            calls=1,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cost_usd=completion.cost_usd,
            unpriced=self.spec.model if unpriced else None,
        )
        return completion

    # -- accounting -----------------------------------------------------------------------

    def usage(self) -> Usage:
        with self._lock:
            return self._usage

    def cache_key(self, prompt: list[dict[str, Any]], *, max_tokens: int, temperature: float) -> str:
        """sha256 of everything that decides the response: endpoint, model, messages, settings."""
        material = {
            "provider": self.spec.kind,
            "model": self.spec.model,
            "base_url": self.spec.base_url,
            "messages": prompt,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _add(self, *, unpriced: str | None = None, **counts: float) -> None:
        with self._lock:
            totals = asdict(self._usage)
            for name, value in counts.items():
                totals[name] += value
            if unpriced and unpriced not in totals["unpriced_models"]:
                log.warning(
                    "no price for model %s: its cost is counted as 0; add it to [prices] in the LLM config", unpriced
                )
                totals["unpriced_models"] = (*totals["unpriced_models"], unpriced)
            self._usage = Usage(**totals)

    # -- store ------------------------------------------------------------------------------

    def _cache_lookup(self, key: str) -> dict[str, Any] | None:
        assert self._db is not None
        with self._db.connection() as conn:
            return cached_response(conn, key)

    def _cache_store(self, key: str, response: dict[str, Any]) -> None:
        assert self._db is not None
        with self._db.connection() as conn:
            cache_response(conn, key, response)

    def _record(
        self, role: str, prompt: list[dict[str, Any]], completion: Completion | None, *, error: str | None = None
    ) -> None:
        if self._db is None:
            return
        with self._db.connection() as conn:
            add_transcript(
                conn,
                run_id=self.run_id,
                role=role,
                provider=self.spec.kind,
                model=self.spec.model,
                messages=prompt,
                response=completion.text if completion else None,
                input_tokens=completion.input_tokens if completion else None,
                output_tokens=completion.output_tokens if completion else None,
                cost_usd=completion.cost_usd if completion else None,
                error=error,
                node_id=_NODE.get(),
            )

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the provider's HTTP connections and any connection this client opened; not the store."""
        self.provider.close()
        if self._db is not None:
            self._db.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _StoreAccess:
    """A connection to the store valid in the calling thread.

    The store's own connection works only in the thread that opened it (sqlite3's
    ``check_same_thread``). Roles may call :meth:`LLMClient.complete` from a thread
    pool, so other threads share a second connection to the same file, one at a time
    (WAL mode lets both connections see each other's committed rows).
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._local = threading.local()
        self._lock = threading.Lock()
        self._side: sqlite3.Connection | None = None

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        if self._store_connection_usable():
            yield self._store.connection
            return
        with self._lock:
            if self._side is None:
                self._side = sqlite3.connect(
                    self._store.path, timeout=30, isolation_level=None, check_same_thread=False
                )
                self._side.execute("PRAGMA foreign_keys=ON")
            yield self._side

    def _store_connection_usable(self) -> bool:
        usable = getattr(self._local, "usable", None)
        if usable is None:
            try:
                self._store.connection.execute("SELECT 1")
                usable = True
            except sqlite3.ProgrammingError as exc:
                if "thread" not in str(exc):
                    raise
                usable = False
            self._local.usable = usable
        return usable

    def close(self) -> None:
        with self._lock:
            if self._side is not None:
                self._side.close()
                self._side = None
