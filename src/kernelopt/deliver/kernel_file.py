"""A delivered kernel file, imported only after it is checked against its verification record.

``optimize`` and ``verify`` deliver a faster kernel file exactly as it was judged, with a record
beside it (``<name>.json``: the sha256 of the delivered file and of the original, every verdict).
:func:`load_kernel` is the way back in: it refuses a file whose bytes are not the ones verified (an
edit, a merge, a file swapped in), runs gate 1 again against the original where the original is
still at its recorded path with its recorded digest, and only then imports the file. A delivered
file is code: this guards against it changing after verification, not against trusting kernelopt.

A CUDA C++ delivery (``<stem>_kopt.cu``) runs inside the original file, in the slot of the kernel its
record names: the original must then be at its recorded path with its recorded digest (it is the
delivery's Python part), gate 1 runs again, the original is imported, the source built with
``load_inline`` and the kernel's name rebound to it (:mod:`kernelopt.capture.cuda_slot`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from kernelopt.capture.cuda_kernel import is_cuda_source
from kernelopt.errors import KerneloptError

RECORD_FORMAT = "kernelopt-kernel-file/1"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _record(path: Path) -> dict:
    record = path.with_suffix(".json")
    if not record.is_file():
        raise KerneloptError(
            f"{path}: no verification record beside it ({record.name}); deliver files with kernelopt optimize or verify"
        )
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError) as exc:
        raise KerneloptError(
            f"{record}: not a readable verification record ({type(exc).__name__}); verify the file again"
        ) from exc
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        raise KerneloptError(
            f"{record}: not a kernel-file verification record (format {RECORD_FORMAT}); verify the file again"
        )
    return data


def _original(data: dict) -> tuple[Path, str | None]:
    """The original's recorded path, and its text where the file there still has the recorded digest."""
    original = Path((data.get("original") or {}).get("path") or "")
    if original.is_file() and _sha256(original.read_bytes()) == (data.get("original") or {}).get("sha256"):
        return original, original.read_text()
    return original, None


def check_delivery(path: str | Path) -> dict:
    """The verification record of the delivered file at ``path``, after checking the file against it."""
    return _checked(path)[0]


def _checked(path: str | Path) -> tuple[dict, str, Path, str | None]:
    """The record, the delivered text, the original's path and its text (where its digest still holds),
    each read once and checked: what :func:`load_kernel` builds is the text the digests vouched for."""
    path = Path(path)
    if not path.is_file():
        raise KerneloptError(f"{path}: no such kernel file")
    data = _record(path)
    source = path.read_bytes()
    if _sha256(source) != (data.get("delivered") or {}).get("sha256"):
        raise KerneloptError(
            f"{path}: its bytes are not the ones verified (sha256 differs from {path.with_suffix('.json').name}); "
            "it changed after verification: run kernelopt verify on it again"
        )
    original, original_source = _original(data)
    cuda = data.get("language") == "cuda" or is_cuda_source(source.decode(errors="replace"))
    if cuda and original_source is None:
        raise KerneloptError(
            f"{path}: a CUDA C++ delivery runs inside its original file, and {original} is not there with the "
            "digest its record vouches for; put the verified original back, or verify again"
        )
    if original_source is not None:
        from kernelopt.verify.static_kernel_file import check_static_file

        verdict = check_static_file(
            str(data.get("kind", "triton")),
            source.decode(),
            original_source=original_source,
            kernel=data.get("kernel") if cuda else None,
            python_source=original_source if cuda else None,
        )
        if not verdict.passed:
            raise KerneloptError(f"{path}: gate 1 refuses it against {original}: {verdict.reason}")
    return data, source.decode(), original, original_source


def load_kernel(path: str | Path) -> ModuleType:
    """Import the delivered kernel file at ``path`` once it matches its verification record; a CUDA C++
    delivery comes back as the original file's module with its kernel slot bound to the built source."""
    data, source, original, original_source = _checked(path)
    path = Path(path).resolve()
    name = f"kernelopt_delivered_{_sha256(str(path).encode())[:12]}"
    if not is_cuda_source(source):
        return _import(name, path)
    from kernelopt.capture.cuda_kernel import CudaBuildError, build_cuda_kernel
    from kernelopt.capture.cuda_slot import bind_cuda_slot
    from kernelopt.verify.static_file_cuda import resolve_slot, slot_runtime

    assert original_source is not None  # _checked refused it otherwise
    slot = resolve_slot(original_source, data.get("kernel"))
    try:
        launcher = build_cuda_kernel(source, slot)
    except CudaBuildError as exc:
        raise KerneloptError(f"{path}: {exc}; it built where it was verified: check nvcc and torch here") from exc
    module = _import(name, original)
    bind_cuda_slot(module, slot, launcher, slot_runtime(original_source, slot))
    return module


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton's @jit looks its module up here
    spec.loader.exec_module(module)
    return module
