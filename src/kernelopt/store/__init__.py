"""The ``store`` layer: SQLite persistence for runs, measurements and device facts."""

from __future__ import annotations

from kernelopt.store.db import SCHEMA_VERSION, Run, Store, default_store_path

__all__ = ["SCHEMA_VERSION", "Run", "Store", "default_store_path"]
