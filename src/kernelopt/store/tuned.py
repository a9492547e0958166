"""The store's cache of verified kernels, keyed by the Inductor kernel each replaces.

Every ``optimize`` that delivers adds its winners; ``torch.compile(model,
backend="kernelopt")`` reads the ones verified on this device with this torch
and Triton, and swaps each in only where a compiled graph holds the very kernel
source it was verified against (:mod:`kernelopt.deliver.backend`).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from kernelopt.store.db import Store


@dataclass(frozen=True)
class TunedKernel:
    original_sha256: str
    name: str
    source: str
    speedup: float | None = None
    run_id: int | None = None


def add_tuned(
    store: Store, kernel: TunedKernel, *, device: str, torch_version: str, triton_version: str | None
) -> None:
    """Keep ``kernel`` (a later verification of the same original replaces an earlier one)."""
    store.connection.execute(
        "INSERT OR REPLACE INTO tuned_kernels(original_sha256, name, device, torch, triton, source, speedup, run_id,"
        " created_at) VALUES (?,?,?,?,?,?,?,?,?)",
        (
            kernel.original_sha256,
            kernel.name,
            device,
            torch_version,
            triton_version or "",
            kernel.source,
            kernel.speedup,
            kernel.run_id,
            time.time(),
        ),
    )


def tuned_for(store: Store, *, device: str, torch_version: str, triton_version: str | None) -> list[TunedKernel]:
    """The kernels verified on ``device`` with these versions (none in a store older than the cache)."""
    try:
        rows = store.connection.execute(
            "SELECT original_sha256, name, source, speedup, run_id FROM tuned_kernels"
            " WHERE device=? AND torch=? AND triton=? ORDER BY created_at",
            (device, torch_version, triton_version or ""),
        ).fetchall()
    except sqlite3.OperationalError as exc:  # a read-only store of schema 2 has no such table
        if "no such table" in str(exc):
            return []
        raise
    return [TunedKernel(r[0], r[1], r[2], r[3], r[4]) for r in rows]
