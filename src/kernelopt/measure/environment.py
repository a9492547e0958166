"""What machine and software a measurement was taken on (recorded with every run)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

import kernelopt


def device_label(index: int | None = None) -> str:
    """A stable name for the current device (or GPU ``index``), used as the key of per-device facts in the
    store and as the device a scoreboard's rows were measured on."""
    if not torch.cuda.is_available():
        return f"cpu ({platform.processor() or platform.machine()})"
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index)
    return f"{props.name} (cc {props.major}.{props.minor}, {props.multi_processor_count} SMs)"


def gpu_labels(count: int, timeout_s: float = 120.0) -> list[str]:
    """:func:`device_label` of the first ``count`` GPUs, read in a child process: a process that only
    hands work to workers (the bench) keeps no CUDA context of its own, which would hold memory on the
    GPUs they measure on. Raises ``RuntimeError`` where the child cannot say."""
    script = (
        "import json, sys; from kernelopt.measure.environment import device_label; "
        "print(json.dumps([device_label(i) for i in range(int(sys.argv[1]))]))"
    )
    path = os.pathsep.join(entry for entry in sys.path if entry)  # the child imports what this process imports
    done = subprocess.run(
        [sys.executable, "-c", script, str(count)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env={**os.environ, "PYTHONPATH": path},
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"could not read the GPUs' names: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return [str(label) for label in json.loads(lines[-1])]


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
