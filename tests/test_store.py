"""The SQLite store: schema, runs, measurements, device facts, refusal of foreign files."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from kernelopt.errors import StoreError
from kernelopt.store import SCHEMA_VERSION, Store


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "sub" / "kernelopt.db"  # parent does not exist yet: Store creates it


@pytest.fixture
def store(db_path: Path):
    with Store(db_path) as s:
        yield s


def test_wal_and_schema_version(store: Store, db_path: Path) -> None:
    assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.schema_version() == SCHEMA_VERSION
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "measurements", "devices"} <= tables


def test_run_round_trip(store: Store) -> None:
    versions = {"torch": "2.13", "triton": None, "nested": {"a": [1, 2]}}
    args = {"seed": 3, "trials": 30}
    before = time.time()
    run_id = store.start_run("analyze", "01_relu", "cpu (x86_64)", versions, args)
    run = store.run(run_id)
    assert (run.id, run.kind, run.problem, run.device) == (run_id, "analyze", "01_relu", "cpu (x86_64)")
    assert run.versions == versions and run.args == args
    assert run.status == "running" and run.error is None and run.finished_at is None
    assert before <= run.started_at <= time.time()

    store.finish_run(run_id)
    done = store.run(run_id)
    assert done.status == "done" and done.error is None
    assert done.finished_at is not None and done.finished_at >= done.started_at

    other = store.start_run("verify", "suite", "cpu", {})
    assert store.run(other).args == {}
    store.finish_run(other, "failed", "it broke")
    failed = store.run(other)
    assert failed.status == "failed" and failed.error == "it broke" and failed.finished_at is not None

    assert [r.id for r in store.runs()] == [run_id, other]
    assert [r.id for r in store.runs("verify")] == [other]
    assert store.runs("optimize") == []


def test_finish_run_unknown_status(store: Store) -> None:
    run_id = store.start_run("analyze", "p", "cpu", {})
    with pytest.raises(ValueError, match="unknown run status"):
        store.finish_run(run_id, "maybe")
    assert store.run(run_id).status == "running"


def test_missing_run(store: Store) -> None:
    with pytest.raises(StoreError, match="no run 42"):
        store.run(42)


def test_measurements_round_trip_and_prefix(store: Store) -> None:
    run_id = store.start_run("analyze", "p", "cpu", {})
    other = store.start_run("analyze", "q", "cpu", {})
    store.add_measurement(run_id, "eager", {"median_ms": 1.5, "spread": [1.4, 1.6]})
    store.add_measurement(run_id, "launch/0", {"us": 3})
    store.add_measurement(run_id, "launch/1", {"us": 4})
    store.add_measurement(other, "launch/9", {"us": 9})
    assert store.measurements(run_id) == {
        "eager": {"median_ms": 1.5, "spread": [1.4, 1.6]},
        "launch/0": {"us": 3},
        "launch/1": {"us": 4},
    }
    assert store.measurements(run_id, "launch/") == {"launch/0": {"us": 3}, "launch/1": {"us": 4}}
    assert store.measurements(other, "launch/") == {"launch/9": {"us": 9}}
    assert store.measurements(run_id, "nothing") == {}


def test_measurement_prefix_is_literal(store: Store) -> None:
    run_id = store.start_run("analyze", "p", "cpu", {})
    for key in ("a%b", "axxb", "a_c", "abc", "ABC"):
        store.add_measurement(run_id, key, key)
    assert store.measurements(run_id, "a%") == {"a%b": "a%b"}  # "%" is not a wildcard
    assert store.measurements(run_id, "a_") == {"a_c": "a_c"}  # nor is "_"
    assert store.measurements(run_id, "ab") == {"abc": "abc"}  # and case matters


def test_device_bandwidth_upsert(store: Store) -> None:
    assert store.device_bandwidth("H200") is None
    store.set_device_bandwidth("H200", 4000.0, {"ms": 1.0})
    assert store.device_bandwidth("H200") == 4000.0
    store.set_device_bandwidth("H200", 4300.0, {"ms": 0.9})
    assert store.device_bandwidth("H200") == 4300.0
    rows = store._conn.execute("SELECT measurement FROM devices WHERE name='H200'").fetchall()
    assert rows == [('{"ms": 0.9}',)]


def test_reopen_keeps_everything(db_path: Path) -> None:
    with Store(db_path) as s:
        run_id = s.start_run("analyze", "p", "cpu", {"torch": "x"}, {"seed": 1})
        s.add_measurement(run_id, "summary", [1, 2, 3])
        s.finish_run(run_id)
        s.set_device_bandwidth("gpu", 123.0, {})
    with Store(db_path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        run = s.run(run_id)
        assert run.status == "done" and run.versions == {"torch": "x"} and run.args == {"seed": 1}
        assert s.measurements(run_id) == {"summary": [1, 2, 3]}
        assert s.device_bandwidth("gpu") == 123.0


def test_newer_schema_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError) as info:
        Store(path)
    assert "newer" in str(info.value) and str(path) in str(info.value)


def test_garbage_file_refused(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not an sqlite database, just some text\n" * 200)
    with pytest.raises(StoreError) as info:
        Store(path)
    assert str(path) in str(info.value)
    assert path.read_bytes().startswith(b"this is not an sqlite database")  # left as it was


def test_two_connections_see_each_others_writes(db_path: Path) -> None:
    with Store(db_path) as a, Store(db_path) as b:
        run_id = a.start_run("optimize", "p", "cpu", {})
        assert b.run(run_id).status == "running"
        b.add_measurement(run_id, "node/1", {"ok": True})
        b.finish_run(run_id)
        assert a.measurements(run_id) == {"node/1": {"ok": True}}
        assert a.run(run_id).status == "done"


def test_version_1_store_is_migrated_forward_keeping_its_runs(tmp_path) -> None:
    import sqlite3

    from kernelopt.store.db import MIGRATIONS, SCHEMA_VERSION, Store

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(f"BEGIN;{MIGRATIONS[1]}\nPRAGMA user_version=1;COMMIT;")
    conn.execute(
        "INSERT INTO runs(kind, problem, device, versions, started_at) VALUES ('analyze', 'p', 'd', '{}', 0)"
    )
    conn.close()
    with Store(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert [r.problem for r in store.runs()] == ["p"]
        tables = {r[0] for r in store.connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"nodes", "transcripts", "llm_cache", "experiences"} <= tables


def test_a_read_only_open_creates_and_changes_nothing(tmp_path) -> None:
    missing = tmp_path / "typo" / "k.db"
    with pytest.raises(StoreError, match="no store at"):
        Store(missing, read_only=True)
    assert not missing.parent.exists()  # no directory, no database
    path = tmp_path / "k.db"
    with Store(path) as db:
        run_id = db.start_run("analyze", "p", "cpu", {})
    before = path.read_bytes()
    with Store(path, read_only=True) as db:
        assert [r.id for r in db.runs()] == [run_id]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            db.start_run("analyze", "p", "cpu", {})
    assert path.read_bytes() == before


def test_a_foreign_sqlite_file_is_refused_untouched(tmp_path) -> None:
    path = tmp_path / "theirs.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE accounts(id INTEGER)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    for read_only in (False, True):
        with pytest.raises(StoreError, match="not a kernelopt store .its tables: accounts"):
            Store(path, read_only=read_only)
    assert path.read_bytes() == before  # no kernelopt tables, still the rollback journal
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["accounts"]


def test_an_unknown_run_kind_is_refused(tmp_path) -> None:
    with Store(tmp_path / "k.db") as db, pytest.raises(ValueError, match="unknown run kind 'bench'"):
        db.start_run("bench", "p", "cpu", {})


def test_the_tests_never_touch_the_users_own_cache() -> None:
    from kernelopt.config import load_settings

    s = load_settings()
    own = Path.home() / ".cache" / "kernelopt"
    assert own not in s.store.parents and own not in (s.cache, *s.cache.parents)
    assert s.sources["store"] == "env KERNELOPT_STORE"
