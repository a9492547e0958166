"""The worker process: ``python -m kernelopt.workers.entry <dir> [memory_limit_bytes]``.

It runs the one call described in ``<dir>/call.pkl`` and writes ``<dir>/result.pkl``.
This module imports nothing heavy (no torch) so that a worker starts fast and fits
under a small memory limit; the target imports what it needs.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import pickle
import resource
import sys
import traceback
from pathlib import Path
from typing import Any

from kernelopt.workers.hardening import adopt_orphans, die_with_parent_from_env, no_new_privileges
from kernelopt.workers.protocol import CALL_FILE, RESULT_FILE
from kernelopt.workers.reaper import kill_tree

MESSAGE_LIMIT = 300


def _message(exc: BaseException) -> str:
    try:
        return " ".join(str(exc).split())
    except Exception:
        return "<exception message unavailable>"


def one_line(exc: BaseException) -> str:
    """``"ValueError: message"`` on one bounded line, for reports and logs."""
    text = _message(exc)
    if len(text) > MESSAGE_LIMIT:
        text = text[: MESSAGE_LIMIT - 3] + "..."
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def is_out_of_memory(exc: BaseException) -> bool:
    """MemoryError, or torch's ``OutOfMemoryError`` matched by name: torch need not be imported."""
    return isinstance(exc, MemoryError) or any(cls.__name__ == "OutOfMemoryError" for cls in type(exc).__mro__)


def apply_memory_limit(limit_bytes: int) -> None:
    """Cap the address space (and data segment) of this process.

    Applied here, first thing in the worker, rather than in a ``preexec_fn``: that
    hook is unsafe when the parent has threads. Soft and hard limits are both set,
    so the target cannot raise them again. RLIMIT_AS counts virtual memory, and a
    CUDA context reserves far more than any limit worth setting, so GPU workers
    must run without it and rely on CUDA's own out-of-memory errors.
    """
    for limit in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
        resource.setrlimit(limit, (limit_bytes, limit_bytes))


def _error_payload(exc: BaseException, prefix: str = "") -> dict[str, Any]:
    oom = is_out_of_memory(exc)
    summary = one_line(exc)
    if oom and exc.__traceback__ is not None:
        # The failing frames still hold what filled the memory; free it before
        # formatting, which itself needs memory.
        traceback.clear_frames(exc.__traceback__)
    try:
        formatted = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:
        formatted = summary + "\n"
    return {
        "status": "oom" if oom else "error",
        "summary": prefix + summary,
        "message": _message(exc)[:MESSAGE_LIMIT],
        "traceback": formatted,
    }


def _load_target(target: str) -> Any:
    module_name, _, function_name = target.partition(":")
    module = importlib.import_module(module_name)
    function = module
    for part in function_name.split("."):
        function = getattr(function, part)
    if not callable(function):
        raise TypeError(f"{target} is not callable")
    return function


def _run(workdir: Path) -> dict[str, Any]:
    call = pickle.loads((workdir / CALL_FILE).read_bytes())
    target = call["target"]
    try:
        function = _load_target(target)
    except BaseException as exc:
        return _error_payload(exc, prefix=f"cannot load target {target!r}: ")
    try:
        value = function(*call["args"], **call["kwargs"])
    except BaseException as exc:
        return _error_payload(exc)
    return {"status": "ok", "value": value}


def _write_result(workdir: Path, payload: dict[str, Any]) -> None:
    try:
        data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as exc:
        data = pickle.dumps(
            _error_payload(exc, prefix="result cannot be pickled: "),
            protocol=pickle.HIGHEST_PROTOCOL,
        )
    partial = workdir / (RESULT_FILE + ".partial")
    partial.write_bytes(data)
    os.replace(partial, workdir / RESULT_FILE)  # the parent never sees half a file


def main(argv: list[str]) -> None:
    """Run the call, write the result, and exit without interpreter teardown.

    ``os._exit`` skips atexit handlers and module teardown, where CUDA and Triton
    processes are known to hang or crash after the work is already done. Before it, every
    process the call started is killed: the worker adopted them all, daemons included
    (:func:`~kernelopt.workers.hardening.adopt_orphans`).
    """
    faulthandler.enable()  # a Python traceback in the log when the target segfaults
    no_new_privileges()
    die_with_parent_from_env()
    adopt_orphans()
    workdir = Path(argv[1])
    if len(argv) > 2:
        apply_memory_limit(int(argv[2]))
    _write_result(workdir, _run(workdir))
    kill_tree(os.getpid(), include_root=False)  # nothing the call started outlives it, daemons included
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
