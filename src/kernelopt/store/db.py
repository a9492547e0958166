"""The store: one SQLite file (WAL mode) holding every run and measurement.

Why SQLite: one file, crash-safe with WAL, readable by concurrent processes,
in the standard library. The schema is versioned; migrations run forward in
order, and a file written by a newer kernelopt is refused with a clear message
rather than half-read.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelopt.errors import StoreError

SCHEMA_VERSION = 3
RUN_KINDS = ("analyze", "verify", "optimize")  # bench records an optimize run per problem
DEFAULT_PATH_ENV = "KERNELOPT_STORE"  # the ``store`` setting's variable (kernelopt.config)

# Migration N brings a store from version N-1 to N. Never edit a shipped one: append.
MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,              -- analyze | verify | optimize | bench
        problem TEXT NOT NULL,           -- problem name or suite path
        device TEXT NOT NULL,
        versions TEXT NOT NULL,          -- JSON: torch, triton, kernelopt, cuda, driver
        args TEXT NOT NULL DEFAULT '{}', -- JSON: the command's options
        status TEXT NOT NULL DEFAULT 'running',  -- running | done | failed
        error TEXT,
        started_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE TABLE measurements (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        key TEXT NOT NULL,               -- e.g. eager, compiled, launch/3, summary
        value TEXT NOT NULL,             -- JSON
        created_at REAL NOT NULL
    );
    CREATE INDEX measurements_run ON measurements(run_id, key);
    CREATE TABLE devices (
        name TEXT PRIMARY KEY,           -- e.g. "NVIDIA H200 (cc 9.0)"
        peak_copy_gbps REAL NOT NULL,
        measurement TEXT NOT NULL,       -- JSON timing behind the number
        measured_at REAL NOT NULL
    );
    """,
    2: """
    -- The search graph: one row per candidate, persisted before it is evaluated so a
    -- killed run resumes without losing or repeating a finished evaluation.
    CREATE TABLE nodes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        target TEXT NOT NULL,            -- kernel name, or "<model>" for whole-model candidates
        parent_id INTEGER REFERENCES nodes(id),
        operator TEXT NOT NULL,          -- what made it: root, launch-config, compiler-knobs, llm, ...
        key TEXT NOT NULL,               -- hash of the candidate (dedup)
        payload TEXT NOT NULL,           -- JSON: source / options / note
        round INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'pending',   -- pending | evaluated
        fitness REAL,                    -- verified speedup; 0 when a gate failed
        failed_gate TEXT,
        reason TEXT,
        result TEXT,                     -- JSON: verdicts, timings
        created_at REAL NOT NULL,
        finished_at REAL,
        UNIQUE(run_id, target, key)
    );
    CREATE INDEX nodes_run ON nodes(run_id, target, status);
    -- LLM prompts and responses, kept per run; the cache replays a response by prompt hash.
    CREATE TABLE transcripts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id INTEGER REFERENCES runs(id),
        node_id INTEGER REFERENCES nodes(id),
        role TEXT NOT NULL,              -- analyst | planner | coder | repairer | judge
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        prompt TEXT NOT NULL,            -- JSON: the messages sent
        response TEXT,                   -- the text received
        input_tokens INTEGER,
        output_tokens INTEGER,
        cost_usd REAL,
        error TEXT,
        created_at REAL NOT NULL
    );
    CREATE TABLE llm_cache (
        key TEXT PRIMARY KEY,            -- hash of provider, model, messages and settings
        response TEXT NOT NULL,          -- JSON: text and usage
        created_at REAL NOT NULL
    );
    -- Experience memory: what a strategy did to which kind of kernel, across runs.
    CREATE TABLE experiences (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id INTEGER REFERENCES runs(id),
        strategy TEXT NOT NULL,
        bottleneck TEXT NOT NULL,        -- memory-bound | compute-bound | latency-bound | ...
        kernel_kind TEXT NOT NULL,       -- pointwise | reduction | persistent_reduction | template | ...
        speedup REAL,
        success INTEGER NOT NULL,        -- 1 when verified faster
        record TEXT NOT NULL,            -- JSON: the judge's record (what, why, when to apply, when not)
        created_at REAL NOT NULL
    );
    CREATE INDEX experiences_lookup ON experiences(bottleneck, kernel_kind, strategy);
    """,
    3: """
    -- Verified replacement kernels, keyed by the original kernel Inductor generated: what
    -- torch.compile(backend="kernelopt") swaps in where a compiled graph holds that kernel.
    CREATE TABLE tuned_kernels (
        original_sha256 TEXT NOT NULL,   -- sha256 of Inductor's kernel source the replacement was verified against
        name TEXT NOT NULL,              -- the kernel's name in that source
        device TEXT NOT NULL,            -- measure.environment.device_label() where it was verified
        torch TEXT NOT NULL,
        triton TEXT NOT NULL,
        source TEXT NOT NULL,            -- the replacement kernel module
        speedup REAL,                    -- its verified kernel speedup
        run_id INTEGER REFERENCES runs(id),
        created_at REAL NOT NULL,
        PRIMARY KEY (original_sha256, name, device, torch, triton)
    );
    """,
}


def default_store_path() -> Path:
    """The ``store`` setting: ``$KERNELOPT_STORE``, the settings file, or ``~/.cache/kernelopt/kernelopt.db``."""
    from kernelopt.config import load_settings

    return load_settings().store


@dataclass(frozen=True)
class Run:
    id: int
    kind: str
    problem: str
    device: str
    versions: dict[str, Any]
    args: dict[str, Any]
    status: str
    error: str | None
    started_at: float
    finished_at: float | None


class Store:
    """Runs, measurements and device facts in one SQLite file."""

    def __init__(self, path: str | Path | None = None, *, read_only: bool = False) -> None:
        """Open (a writing command: create or upgrade) the store at ``path``.

        ``read_only`` is for commands that only read (``runs``, ``nodes``, ``transcripts``):
        they never create a file or a directory, never switch the journal mode and never
        migrate. Either way an SQLite file that is not a kernelopt store is refused before
        anything in it changes."""
        self.path = Path(path) if path is not None else default_store_path()
        self.read_only = read_only
        if read_only and not self.path.is_file():
            raise StoreError(
                f"no store at {self.path}; check the path, or run analyze, verify, optimize or bench to make one"
            )
        try:
            if read_only:
                self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"cannot open the store at {self.path} ({exc}); pass --store PATH to use another file"
            ) from exc
        try:
            self._refuse_foreign()
            if read_only:
                self._check_readable()
                return
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(
                f"{self.path} is not a kernelopt store ({exc}); move it away or pass --store PATH"
            ) from exc
        except StoreError:
            self._conn.close()
            raise

    # -- schema ----------------------------------------------------------------------

    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _refuse_foreign(self) -> None:
        """An SQLite file with tables of its own and no kernelopt schema is someone else's: leave it alone."""
        tables = sorted(
            row[0]
            for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if not str(row[0]).startswith("sqlite_")
        )
        if tables and (self.schema_version() == 0 or "runs" not in tables):
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise StoreError(
                f"{self.path} is an SQLite database but not a kernelopt store (its tables: {shown}); "
                "pass --store PATH to use another file"
            )

    def _check_readable(self) -> None:
        """An older store reads as it is (what it lacks reads as empty); a newer one is refused."""
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {current}, newer than this kernelopt's {SCHEMA_VERSION}; "
                "upgrade kernelopt or pass --store PATH"
            )

    def _migrate(self) -> None:
        try:
            current = self.schema_version()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path} is not a kernelopt store ({exc}); move it away or pass --store PATH"
            ) from exc
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {current}, newer than this kernelopt's {SCHEMA_VERSION}; "
                "upgrade kernelopt or pass --store PATH"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            # One script, one transaction: a killed migration leaves the old version intact.
            self._conn.executescript(f"BEGIN;{MIGRATIONS[version]}\nPRAGMA user_version={version};COMMIT;")

    @property
    def connection(self) -> sqlite3.Connection:
        """The SQLite connection (autocommit), for the per-table modules of this package."""
        return self._conn

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ------------------------------------------------------------------------

    def start_run(
        self, kind: str, problem: str, device: str, versions: dict[str, Any], args: dict[str, Any] | None = None
    ) -> int:
        if kind not in RUN_KINDS:
            raise ValueError(f"unknown run kind {kind!r}; expected one of {', '.join(RUN_KINDS)}")
        cur = self._conn.execute(
            "INSERT INTO runs(kind, problem, device, versions, args, started_at) VALUES (?,?,?,?,?,?)",
            (
                kind,
                problem,
                device,
                json.dumps(versions, sort_keys=True),
                json.dumps(args or {}, sort_keys=True),
                time.time(),
            ),
        )
        assert cur.lastrowid is not None  # an INSERT always sets it
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, status: str = "done", error: str | None = None) -> None:
        if status not in ("done", "failed"):
            raise ValueError(f"unknown run status {status!r}")
        self._conn.execute(
            "UPDATE runs SET status=?, error=?, finished_at=? WHERE id=?", (status, error, time.time(), run_id)
        )

    @contextmanager
    def recording(self, run_id: int) -> Iterator[None]:
        """Everything a run does after it is recorded: whatever escapes (an error, Ctrl-C, a bad
        option found late) marks the run failed with its first line, so no run stays "running";
        the caller finishes it as done."""
        try:
            yield
        except BaseException as exc:
            reason = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.finish_run(run_id, "failed", reason[:500])
            raise

    def run(self, run_id: int) -> Run:
        row = self._conn.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"no run {run_id} in {self.path}; list runs with kernelopt runs")
        return _run_from_row(row)

    def runs(self, kind: str | None = None) -> list[Run]:
        sql = "SELECT * FROM runs"
        params: tuple[str, ...] = ()
        if kind:
            sql, params = sql + " WHERE kind=?", (kind,)
        return [_run_from_row(r) for r in self._conn.execute(sql + " ORDER BY id", params)]

    # -- measurements ----------------------------------------------------------------

    def add_measurement(self, run_id: int, key: str, value: Any) -> None:
        self._conn.execute(
            "INSERT INTO measurements(run_id, key, value, created_at) VALUES (?,?,?,?)",
            (run_id, key, json.dumps(value, sort_keys=True), time.time()),
        )

    def measurements(self, run_id: int, prefix: str = "") -> dict[str, Any]:
        # An exact, case-sensitive prefix match: LIKE would treat "%" and "_" in keys as
        # wildcards (it has no default escape character) and ignore ASCII case.
        rows = self._conn.execute(
            "SELECT key, value FROM measurements WHERE run_id=? AND substr(key, 1, length(?)) = ? ORDER BY id",
            (run_id, prefix, prefix),
        )
        return {key: json.loads(value) for key, value in rows}

    # -- devices ---------------------------------------------------------------------

    def set_device_bandwidth(self, device: str, gbps: float, measurement: dict[str, Any]) -> None:
        self._conn.execute(
            "INSERT INTO devices(name, peak_copy_gbps, measurement, measured_at) VALUES (?,?,?,?) "
            "ON CONFLICT(name) DO UPDATE SET peak_copy_gbps=excluded.peak_copy_gbps, "
            "measurement=excluded.measurement, measured_at=excluded.measured_at",
            (device, gbps, json.dumps(measurement, sort_keys=True), time.time()),
        )

    def device_bandwidth(self, device: str) -> float | None:
        row = self._conn.execute("SELECT peak_copy_gbps FROM devices WHERE name=?", (device,)).fetchone()
        return float(row[0]) if row else None


def _run_from_row(row: tuple) -> Run:
    id_, kind, problem, device, versions, args, status, error, started, finished = row
    return Run(id_, kind, problem, device, json.loads(versions), json.loads(args), status, error, started, finished)
