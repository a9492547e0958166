"""``kernelopt analyze``: capture one problem and report where its GPU time goes (the arithmetic
is :mod:`kernelopt.evaluate.analysis`'s); the run is recorded in the store."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from kernelopt.capture import capture
from kernelopt.config import Settings, resolve
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.analysis import AnalysisReport, analyze_artifact
from kernelopt.measure.environment import device_label, versions
from kernelopt.measure.peak import peak_bandwidth
from kernelopt.problem import Problem
from kernelopt.store import Store

__all__ = ["AnalysisReport", "analyze"]


def analyze(
    problem: Problem,
    store: Store | None = None,
    seed: int = 0,
    trials: int | None = None,
    profile_iterations: int = 10,
    options: dict[str, Any] | None = None,
    config: Settings | None = None,
) -> AnalysisReport:
    """Capture, time and attribute one problem on the current CUDA device.

    ``trials`` None: the ``analyze_trials`` setting of ``config`` (default:
    :func:`~kernelopt.config.load_settings`)."""
    trials = resolve(config, analyze_trials=trials).analyze_trials
    if not torch.cuda.is_available():
        raise KerneloptError(
            "kernelopt analyze needs an NVIDIA GPU with CUDA; torch sees none "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda})"
        )
    device = torch.device("cuda")
    label = device_label()
    run_id = None
    if store is not None:
        run_id = store.start_run("analyze", problem.name, label, versions(), {"seed": seed, "options": options or {}})
    with store.recording(run_id) if store is not None and run_id is not None else contextlib.nullcontext():
        report = _analyze(problem, store, device, label, seed, trials, profile_iterations, options)
    report.versions = versions()
    if store is not None and run_id is not None:
        report.run_id = run_id
        store.add_measurement(run_id, "analysis", report.to_dict())
        store.finish_run(run_id)
    return report


def _analyze(
    problem: Problem,
    store: Store | None,
    device: torch.device,
    label: str,
    seed: int,
    trials: int,
    profile_iterations: int,
    options: dict[str, Any] | None,
) -> AnalysisReport:
    peak = peak_bandwidth(store)
    model = problem.build_model(seed, device)
    inputs = problem.make_inputs(seed, device)
    artifact = capture(model, inputs, options)
    return analyze_artifact(problem.name, label, peak, model, inputs, artifact, trials, profile_iterations)
