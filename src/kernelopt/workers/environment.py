"""The environment a worker process starts with.

Built from an allow-list, never by copying ``os.environ``: a candidate is untrusted
code and must not find the user's API keys in its environment. Only what Python,
CUDA, Triton and Inductor need passes, and no name that looks like a secret passes
at all, not even when a caller asks for it explicitly.

This hides secrets from the environment only. A worker of the same user could still
read files that user can read, including ``/proc/<pid>/environ`` of that user's other
processes; as root, workers therefore run as a user of their own
(:mod:`kernelopt.workers.identity`).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
INHERITED_NAMES = frozenset(
    {
        "PATH",
        "LANG",
        "LC_ALL",
        "LD_LIBRARY_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_MODULE_LOADING",
        "KERNELOPT_COMPILE_WORKERS",
        "KERNELOPT_CUDA_BUILD_DIR",  # the workers' CUDA C++ build cache (pipeline.evaluator.compile_cache_env)
        "KERNELOPT_WORKER_USER",  # a worker kept root (a bench problem) drops its own workers the same way
    }
)
INHERITED_PREFIXES = ("NVIDIA_", "TRITON_", "TORCHINDUCTOR_", "TORCH_")
# Folders of ours a worker of another user could not write (Inductor sets the first in our own
# os.environ on its first compile here); such a worker makes its own in its directory.
OUR_FOLDERS = frozenset(
    {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "KERNELOPT_CUDA_BUILD_DIR"}
)


def looks_secret(name: str) -> bool:
    """True for a variable name that may hold a credential (``OPENAI_API_KEY``, ``HF_TOKEN``)."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def reject_secret_names(env: Mapping[str, str]) -> None:
    """Raise ValueError if any name in ``env`` looks like a secret.

    Raised rather than filtered for what a caller passes explicitly: silently
    dropping a variable the caller asked for would hide the mistake.
    """
    secret = sorted(name for name in env if looks_secret(name))
    if secret:
        raise ValueError(f"refusing to pass secret-looking variables to a worker: {', '.join(secret)}")


def visible_device(gpu: int, parent_env: Mapping[str, str]) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` value that pins a worker to the parent's GPU ``gpu``.

    ``gpu`` counts the GPUs this process can see, so a user's own
    ``CUDA_VISIBLE_DEVICES=2,3`` is respected: ``gpu=1`` is physical GPU 3.
    """
    if gpu < 0:
        raise ValueError(f"gpu must be >= 0, got {gpu}")
    parent = parent_env.get("CUDA_VISIBLE_DEVICES")
    if parent is None:
        return str(gpu)
    devices = [device.strip() for device in parent.split(",") if device.strip()]
    if gpu >= len(devices):
        raise ValueError(f"gpu {gpu} is not visible: CUDA_VISIBLE_DEVICES={parent!r} leaves {len(devices)}")
    return devices[gpu]


def worker_path(extra_path: Sequence[str | Path] = ()) -> list[str]:
    """``extra_path`` then this process's ``sys.path``, so the worker imports what we import.

    Passing our own path is what makes kernelopt importable in the worker whether it
    is installed, installed editable or only on ``PYTHONPATH``.
    """
    entries = [str(Path(entry).resolve()) for entry in extra_path]
    entries += [entry for entry in sys.path if entry and Path(entry).exists()]
    return list(dict.fromkeys(entries))


def _others_reach(entry: str) -> bool:
    """Whether a user of no group of ours may search every folder down to ``entry`` (and read it): an
    entry it cannot is left out of its path rather than met as a PermissionError inside an import."""
    path = Path(entry)
    try:
        for folder in [*reversed(path.parents), path]:
            mode = folder.stat().st_mode
            if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                return False
        return bool(path.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


def worker_env(
    workdir: str | Path,
    *,
    gpu: int | None = None,
    env: Mapping[str, str] | None = None,
    extra_path: Sequence[str | Path] = (),
    parent_env: Mapping[str, str] | None = None,
    other_user: bool = False,
) -> dict[str, str]:
    """The full environment for a worker whose home, temp and working directory is ``workdir``.

    ``env`` overrides everything except ``PYTHONPATH``, which it is prepended to. ``other_user``:
    the worker runs as another user (:mod:`kernelopt.workers.identity`), so our cache folders
    (:data:`OUR_FOLDERS`) are not inherited; ``env`` may still name folders made for it.
    """
    parent = os.environ if parent_env is None else parent_env
    explicit = dict(env or {})
    reject_secret_names(explicit)
    result = {
        name: value
        for name, value in parent.items()
        if (name in INHERITED_NAMES or name.startswith(INHERITED_PREFIXES))
        and not looks_secret(name)
        and not (other_user and name in OUR_FOLDERS)
    }
    if gpu is not None:
        result["CUDA_VISIBLE_DEVICES"] = visible_device(gpu, parent)
    elif "CUDA_VISIBLE_DEVICES" in parent:
        result["CUDA_VISIBLE_DEVICES"] = parent["CUDA_VISIBLE_DEVICES"]
    workdir = str(workdir)
    result.update(
        HOME=workdir,
        TMPDIR=workdir,
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        KERNELOPT_PARENT_PID=str(os.getpid()),  # the worker dies with this process (hardening.die_with_parent)
        KERNELOPT_WORKER_DIR=workdir,  # what it starts inherits this: the reaper finds them by it
    )
    python_path = worker_path(extra_path)
    if other_user:  # our working folder (sys.path[0] under `python -m`) may be root's private one
        python_path = [entry for entry in python_path if _others_reach(entry)]
    if "PYTHONPATH" in explicit:
        python_path = [explicit.pop("PYTHONPATH"), *python_path]
    result["PYTHONPATH"] = os.pathsep.join(python_path)
    result.update(explicit)
    reject_secret_names(result)  # the allow-list above must never let one through
    return result
