"""What machine and software a measurement was taken on (recorded with every run)."""

from __future__ import annotations

import functools
import hashlib
import platform
import shutil
import subprocess
from pathlib import Path
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


def source_digest(root: str | Path | None = None) -> str:
    """A short hash of kernelopt's own files (every file under the package, by relative
    path and content): which code produced a result, also where there is no git checkout
    (the lent GPU machine gets a copy of the working tree without ``.git``)."""
    return _digest(str(root) if root is not None else str(Path(kernelopt.__file__).parent))


@functools.lru_cache(maxsize=4)
def _digest(root: str) -> str:
    base = Path(root)
    digest = hashlib.sha256()
    for path in sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(base).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def versions() -> dict[str, Any]:
    """Versions and numeric settings that change what a measurement means."""
    return {
        "kernelopt": kernelopt.__version__,
        "kernelopt_source": source_digest(),
        "torch": str(torch.__version__),
        "triton": triton_version(),
        "cuda": torch.version.cuda,
        "driver": driver_version(),
        "python": platform.python_version(),
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
    }
