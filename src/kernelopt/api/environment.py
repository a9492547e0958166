"""What machine and software a measurement was taken on (recorded with every run)."""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
from typing import Any

import torch

import kernelopt


def device_label() -> str:
    """A stable name for the current device, used as the key of per-device facts in the store."""
    if not torch.cuda.is_available():
        return f"cpu ({platform.processor() or platform.machine()})"
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return f"{props.name} (cc {props.major}.{props.minor}, {props.multi_processor_count} SMs)"


@functools.lru_cache(maxsize=1)
def driver_version() -> str | None:
    """The NVIDIA driver version from nvidia-smi, or None where it is not installed."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def versions() -> dict[str, Any]:
    """Versions and numeric settings that change what a measurement means."""
    return {
        "kernelopt": kernelopt.__version__,
        "torch": str(torch.__version__),
        "triton": triton_version(),
        "cuda": torch.version.cuda,
        "driver": driver_version(),
        "python": platform.python_version(),
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
    }
