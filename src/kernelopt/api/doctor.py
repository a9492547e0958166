"""``kernelopt doctor``: can this machine run kernelopt, and what are its ceilings?"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from kernelopt.capture import cuda_toolchain
from kernelopt.capture.compat import MIN_TORCH, torch_version
from kernelopt.errors import KerneloptError
from kernelopt.measure.environment import device_label, versions
from kernelopt.measure.ncu import ncu_status
from kernelopt.measure.peak import peak_bandwidth
from kernelopt.store import Store
from kernelopt.workers.identity import decide


@dataclass
class Diagnosis:
    device: str
    gpu: bool
    versions: dict[str, Any]
    torch_supported: bool
    peak_copy_gbps: float | None
    ncu_path: str | None
    ncu_counters: bool
    ncu_reason: str
    workers: str  # which user workers run as, and why: one line
    cuda_builds: str | None  # why CUDA C++ cannot be built here (nvcc, ninja), None where it can
    problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def diagnose(store: Store | None, remeasure: bool = False) -> Diagnosis:
    """Everything kernelopt relies on, each with a one-line problem and fix where it is missing."""
    problems = []
    gpu = torch.cuda.is_available()
    supported = torch_version() >= MIN_TORCH
    if not supported:
        problems.append(f"torch {torch.__version__} is older than {MIN_TORCH[0]}.{MIN_TORCH[1]}: pip install -U torch")
    info = versions()
    if not gpu:
        problems.append("no CUDA GPU visible to torch: analyze, verify and optimize need an NVIDIA GPU")
    if info["triton"] is None:
        problems.append("Triton is not installed: Inductor cannot generate GPU kernels (pip install triton)")
    bandwidth = peak_bandwidth(store, remeasure=remeasure) if gpu else None
    ncu = ncu_status() if gpu else None
    if ncu is not None and not ncu.counters:
        problems.append(
            f"Nsight Compute counters unavailable ({ncu.reason}); agents will work from roofline numbers only"
        )
    cuda_builds = cuda_toolchain.missing()
    if cuda_builds is not None:
        # kernelopt's own op needs nvcc alone: without ninja only the candidates' builds are out
        refused = (
            ""
            if cuda_toolchain.nvcc_missing() is None
            else ", and the kernelopt.cluster_softmax, cluster_norm and cluster_group_norm options are refused unless "
            "their ops were built for this GPU where "
            "nvcc is (kernelopt build-op) into this machine's KERNELOPT_CUDA_BUILD_DIR"
        )
        problems.append(f"no CUDA C++ builds ({cuda_builds}): the LLM agents plan Triton only{refused}")
    try:
        decision = decide()
        workers = decision.reason
        if decision.problem:
            problems.append(decision.reason)
    except KerneloptError as exc:  # an explicit worker_user that cannot work
        workers = str(exc)
        problems.append(workers)
    return Diagnosis(
        device=device_label(),
        gpu=gpu,
        versions=info,
        torch_supported=supported,
        peak_copy_gbps=bandwidth,
        ncu_path=ncu.path if ncu else None,
        ncu_counters=bool(ncu and ncu.counters),
        ncu_reason=ncu.reason if ncu else "not probed: no GPU",
        workers=workers,
        cuda_builds=cuda_builds,
        problems=problems,
    )
