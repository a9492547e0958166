"""Worker-side entry points for kernel files: they run in a persistent evaluation worker.

The worker keeps one :class:`~kernelopt.evaluate.file_session.FileSession` per file (its
cases and the original's outputs built once), so the facts, every candidate and the final
re-evaluation of a run share them. Only plain data crosses the process boundary.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from kernelopt.evaluate.file_session import FileSession, FileSpec
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.evaluate.steps import stage
from kernelopt.measure.ncu import kernel_metrics

NCU_TIMEOUT_S = 600.0  # ncu replays the kernel once per counter pass; a big file's launch takes a while

_SESSIONS: dict[tuple, FileSession] = {}


def _session(spec: dict[str, Any], peak_gbps: float | None) -> FileSession:
    file_spec = FileSpec(**spec)
    key = file_spec.key()
    if key not in _SESSIONS:
        for old in _SESSIONS.values():
            old.close()
        _SESSIONS.clear()
        _SESSIONS[key] = FileSession(file_spec, peak_gbps)
    return _SESSIONS[key]


def file_facts(spec: dict[str, Any], peak_gbps: float | None, trials: int = 20) -> dict[str, Any]:
    """The file's shapes, the original's time and the roofline floor (the search's facts)."""
    s = _session(spec, peak_gbps)
    stage("analyze")
    return {**s.facts(), "original": s.time_original(trials), "peak_gbps": s.peak_gbps}


def helion_configs(
    spec: dict[str, Any],
    peak_gbps: float | None,
    effort: str | None = None,
    budget_s: int | None = None,
    search: str = "",
) -> dict[str, Any]:
    """Each Helion kernel's default config and, with ``effort``, Helion's own autotuner's choice (``search``:
    its algorithm by name), the kernels sharing ``budget_s``."""
    s = _session(spec, peak_gbps)
    stage("helion-autotune")
    return s.helion_configs(effort, budget_s, search)


def evaluate_file_candidates(
    spec: dict[str, Any], sources: Sequence[str], settings: dict[str, Any], peak_gbps: float | None
) -> list[dict[str, Any]]:
    """The four gates for a batch of candidate files."""
    s = _session(spec, peak_gbps)
    return s.evaluate_batch(list(sources), GateSettings(**settings))


def file_ncu_metrics(spec: dict[str, Any], timeout_s: float = NCU_TIMEOUT_S) -> dict[str, Any]:
    """Nsight Compute's counters for the file's main kernel (``spec["kernel"]``), with the reason in one line.

    Called in the evaluation worker, so ncu and the user's file it starts
    (:mod:`kernelopt.evaluate.ncu_file_probe`) run with the worker's environment and user, never
    kernelopt's. The session is not touched: the probe is a process of its own."""
    kernel = spec.get("kernel")
    if not kernel:
        return {"metrics": None, "reason": "no Triton kernel to profile in this file"}
    stage("ncu")
    probe = [sys.executable, "-m", "kernelopt.evaluate.ncu_file_probe", json.dumps(spec)]
    metrics, reason = kernel_metrics(probe, str(kernel), timeout_s=timeout_s)
    return {"metrics": metrics, "reason": reason}


def close_sessions() -> dict[str, Any]:
    for s in _SESSIONS.values():
        s.close()
    closed = len(_SESSIONS)
    _SESSIONS.clear()
    return {"closed": closed}
