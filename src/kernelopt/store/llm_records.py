"""The store's LLM tables: transcripts (every prompt and response) and the response cache.

Functions take a ``sqlite3.Connection`` rather than a :class:`Store` so a caller
working from several threads can pass a connection valid in its thread.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Transcript:
    id: int
    run_id: int | None
    node_id: int | None
    role: str
    provider: str
    model: str
    messages: list[dict[str, Any]]
    response: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    error: str | None
    created_at: float


def add_transcript(
    conn: sqlite3.Connection,
    *,
    run_id: int | None,
    role: str,
    provider: str,
    model: str,
    messages: list[dict[str, Any]],
    response: str | None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cost_usd: float | None = None,
    error: str | None = None,
    node_id: int | None = None,
) -> int:
    cur = conn.execute(
        "INSERT INTO transcripts(run_id, node_id, role, provider, model, prompt, response, input_tokens, "
        "output_tokens, cost_usd, error, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            run_id,
            node_id,
            role,
            provider,
            model,
            json.dumps(messages),
            response,
            input_tokens,
            output_tokens,
            cost_usd,
            error,
            time.time(),
        ),
    )
    assert cur.lastrowid is not None  # an INSERT always sets it
    return int(cur.lastrowid)


def transcripts(conn: sqlite3.Connection, run_id: int | None = None) -> list[Transcript]:
    """All transcripts, or one run's, in the order they were written."""
    sql = (
        "SELECT id, run_id, node_id, role, provider, model, prompt, response, input_tokens, output_tokens, "
        "cost_usd, error, created_at FROM transcripts"
    )
    if run_id is None:
        rows = conn.execute(sql + " ORDER BY id")
    else:
        rows = conn.execute(sql + " WHERE run_id=? ORDER BY id", (run_id,))
    return [
        Transcript(
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            json.loads(row[6]),
            row[7],
            row[8],
            row[9],
            row[10],
            row[11],
            row[12],
        )
        for row in rows
    ]


def cached_response(conn: sqlite3.Connection, key: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT response FROM llm_cache WHERE key=?", (key,)).fetchone()
    return json.loads(row[0]) if row else None


def cache_response(conn: sqlite3.Connection, key: str, response: dict[str, Any]) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO llm_cache(key, response, created_at) VALUES (?,?,?)",
        (key, json.dumps(response, sort_keys=True), time.time()),
    )
