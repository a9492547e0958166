"""Replay one launch of a candidate under compute-sanitizer's memcheck.

Gate 2 compares outputs, so a kernel that reads past its buffer and masks the
values away passes it. Memcheck sees the read itself. A candidate that has passed
the gates is replayed once on one recorded launch: its source and arguments are
written to a private directory, and ``compute-sanitizer --tool memcheck ...
python -m kernelopt.verify.memcheck_replay DIR`` runs in its own session with a
worker's allow-listed environment (:func:`kernelopt.workers.environment.worker_env`),
as the user workers run as (:mod:`kernelopt.workers.identity`), and a timeout. The
sanitizer slows kernels by one to two orders of magnitude, hence the generous default.

The verdict is one of four, and only ``clean`` means checked and clean:

- ``clean``: the sanitizer exited 0 with ``ERROR SUMMARY: 0 errors`` and the replay
  printed its completion line after synchronizing.
- ``errors``: the sanitizer exited with our error code, counted errors, or printed
  error records; ``errors`` holds the first records.
- ``unavailable``: no compute-sanitizer here, or the tool or GPU cannot be used
  ("Device not supported", error 999, no CUDA device), said in one line. Read only
  from output printed before any candidate code ran.
- ``failed``: anything else (a timeout, a crash, a replay that stopped early, a
  candidate that does not build); ``reason`` says which.

Memcheck finds accesses outside any allocation. Each tensor is given its own
allocation of exactly its span (see :mod:`kernelopt.verify.memcheck_replay`), so a
read one element past a tensor is caught; a kernel reading the wrong element
inside its own tensors is the correctness gates' business. The candidate runs in
the replay's process and could print the completion line itself; the sanitizer's
exit code, which it does not control, is what decides ``errors``.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from kernelopt.measure.sanitizer import (
    DEFAULT_ERROR_EXITCODE,
    DEFAULT_PRINT_LIMIT,
    SanitizerRun,
    find_compute_sanitizer,
    memcheck_command,
    not_found_reason,
    parse_report,
    run_command,
    unsupported_reason,
)
from kernelopt.problem.layouts import span_elements
from kernelopt.verify.memcheck_replay import ARGS_FILE, CUDA_FILE, DONE_MARKER, READY_MARKER, SOURCE_FILE
from kernelopt.workers.environment import worker_env
from kernelopt.workers.hardening import protect_parent_environment
from kernelopt.workers.identity import hand_over, worker_identity
from kernelopt.workers.workdirs import make_workdir

MemcheckStatus = Literal["clean", "errors", "unavailable", "failed"]

REPLAY_MODULE = "kernelopt.verify.memcheck_replay"
DEFAULT_TIMEOUT_S = 900.0
MAX_ERROR_LINES = 5
OUTPUT_FILE = "sanitizer-output.txt"
TAIL_CHARS = 4000
REASON_TAIL_CHARS = 300
# Set for the replay: an allocation per tensor (see memcheck_replay), and Inductor's
# compile work kept in the one process the sanitizer watches.
REPLAY_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1"}
_VALUE_TYPES = (bool, int, float, str, type(None))


@dataclass(frozen=True)
class MemcheckResult:
    """How one memcheck replay of a candidate launch ended.

    ``errors`` holds up to a few error records, one line each (kind, location,
    address); ``error_count`` is the sanitizer's ``ERROR SUMMARY`` count, None when
    it printed none. ``reason`` is one line for a person.
    """

    status: MemcheckStatus
    reason: str
    errors: list[str] = field(default_factory=list)
    error_count: int | None = None
    duration_s: float = 0.0
    exit_code: int | None = None
    command: list[str] = field(default_factory=list)
    output_tail: str = ""

    @property
    def clean(self) -> bool:
        return self.status == "clean"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "clean": self.clean}


def pack_arguments(args: Sequence[Any]) -> list[dict[str, Any]]:
    """CPU copies of launch arguments for ``torch.save``, each tensor with its layout.

    A tensor entry holds the memory span its view addresses (from its first element,
    as :func:`kernelopt.problem.layouts.exact_clone` copies it) plus its shape,
    strides and storage offset; its dtype is the copy's. Other arguments must be
    plain values (ints, floats, bools, strings, None): anything else raises TypeError.
    """
    entries: list[dict[str, Any]] = []
    for index, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            tensor = arg.detach()
            span = span_elements(tensor)
            flat = torch.empty(span, dtype=tensor.dtype)
            if span:
                flat.copy_(torch.as_strided(tensor, (span,), (1,), tensor.storage_offset()))
            entries.append(
                {
                    "tensor": flat,
                    "shape": list(tensor.shape),
                    "stride": list(tensor.stride()),
                    "storage_offset": int(tensor.storage_offset()),
                }
            )
        elif isinstance(arg, _VALUE_TYPES):
            entries.append({"value": arg})
        else:
            raise TypeError(f"launch argument {index} is a {type(arg).__name__}; expected a tensor or a plain value")
    return entries


@dataclass(frozen=True)
class CudaSlotReplay:
    """A kernel file's CUDA C++ candidate: its source, the kernel it replaces and that kernel's runtime
    parameters (the replay imports the original file and binds the slot, as the candidate's process does)."""

    source: str
    slot: str
    runtime: tuple[str, ...]


def write_replay(
    directory: str | Path, source: str, kernel_name: str, args: Sequence[Any], cuda: CudaSlotReplay | None = None
) -> Path:
    """Write what :mod:`kernelopt.verify.memcheck_replay` reads into ``directory``; returns it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in (SOURCE_FILE, CUDA_FILE, ARGS_FILE, OUTPUT_FILE):  # never write through a planted link
        (directory / name).unlink(missing_ok=True)
    (directory / SOURCE_FILE).write_text(source)
    payload: dict[str, Any] = {"kernel": kernel_name, "args": pack_arguments(args)}
    if cuda is not None:
        (directory / CUDA_FILE).write_text(cuda.source)
        payload["cuda"] = {"slot": cuda.slot, "runtime": list(cuda.runtime)}
    torch.save(payload, directory / ARGS_FILE)
    return directory


def run_memcheck(
    source: str,
    kernel_name: str,
    args: Sequence[Any],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    gpu: int | None = None,
    sanitizer: str | None = None,
    print_limit: int = DEFAULT_PRINT_LIMIT,
    error_exitcode: int = DEFAULT_ERROR_EXITCODE,
    workdir: str | Path | None = None,
    cuda: CudaSlotReplay | None = None,
) -> MemcheckResult:
    """Launch ``kernel_name`` from ``source`` once on ``args`` under memcheck and say what it found.

    ``args`` are the launch's arguments as the kernel's ``run`` takes them (a
    snapshot's ``args``); tensors may be on any device. ``gpu`` pins the replay to
    one of the GPUs this process sees; ``sanitizer`` overrides where the tool is
    looked for. ``workdir`` is used and kept instead of a fresh temporary directory. With ``cuda``,
    ``source`` is a kernel file and the CUDA C++ candidate runs in its slot.
    A caller's mistake (an argument that cannot be saved) raises; everything the
    candidate or the tool does is reported in the result.
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    tool = sanitizer or find_compute_sanitizer()
    if tool is None:
        return MemcheckResult("unavailable", not_found_reason())
    protect_parent_environment()
    identity = worker_identity()
    keep = workdir is not None
    directory = Path(workdir) if workdir is not None else make_workdir("kernelopt-memcheck-")
    try:
        directory = write_replay(directory.resolve(), source, kernel_name, args, cuda)
        hand_over(directory, identity)
        env = worker_env(directory, gpu=gpu, env=REPLAY_ENV, other_user=identity is not None)
        command = memcheck_command(
            tool,
            [sys.executable, "-m", REPLAY_MODULE, str(directory)],
            error_exitcode=error_exitcode,
            print_limit=print_limit,
        )
        run = run_command(
            command, cwd=directory, env=env, timeout_s=timeout_s, output_path=directory / OUTPUT_FILE, identity=identity
        )
        return classify(run, command, error_exitcode, timeout_s)
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)


def classify(run: SanitizerRun, command: list[str], error_exitcode: int, timeout_s: float) -> MemcheckResult:
    """The verdict on one sanitizer run of the replay (pure: all it needs is in ``run``)."""
    lines = run.output.splitlines()
    ready = READY_MARKER in lines
    done = DONE_MARKER in lines
    report = parse_report(run.output)

    def result(status: MemcheckStatus, reason: str) -> MemcheckResult:
        return MemcheckResult(
            status,
            reason,
            report.records[:MAX_ERROR_LINES],
            report.error_count,
            run.duration_s,
            run.returncode,
            list(command),
            run.output[-TAIL_CHARS:],
        )

    if not ready:  # no candidate code has run: every line so far is the tool's or ours
        unsupported = unsupported_reason(run.output)
        if unsupported:
            return result("unavailable", unsupported)
        if run.timed_out:
            return result("failed", f"timed out after {timeout_s:.0f} s before the arguments were on the GPU")
        cause = _exception_line(run.output)
        if cause and "out of memory" in cause.lower():
            return result(
                "failed",
                f"the GPU had no room for the replay's arguments beside what the judge and its workers hold "
                f"(exit {run.returncode}): {cause}; free GPU memory (fewer jobs on this GPU) and evaluate again",
            )
        return result(
            "failed",
            "the replay stopped before its arguments were on the GPU "
            f"(exit {run.returncode}): {cause or _last_lines(run.output)}",
        )
    found = report.error_count or len(report.records)
    if run.returncode == error_exitcode or found:
        first = f": {report.records[0]}" if report.records else ""
        count = report.error_count if report.error_count is not None else len(report.records)
        return result("errors", f"memcheck found {count} error(s) in the candidate's launch{first}")
    if run.timed_out:
        return result(
            "failed",
            f"timed out after {timeout_s:.0f} s under compute-sanitizer (it slows kernels "
            "10-100x); pass a larger timeout_s",
        )
    if not done:
        return result(
            "failed", f"the replay ended before its launch completed (exit {run.returncode}): {_last_lines(run.output)}"
        )
    if report.error_count is None:
        return result(
            "failed", f"compute-sanitizer printed no ERROR SUMMARY (exit {run.returncode}); the tool did not finish"
        )
    if run.returncode != 0 or report.process_failed:
        return result(
            "failed",
            f"the replay completed its launch but exited with code {run.returncode}: {_last_lines(run.output)}",
        )
    return result("clean", "memcheck found no errors in the candidate's launch")


_EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception): .+")


def _exception_line(text: str) -> str:
    """The last ``SomethingError: message`` line: what stopped the replay, which a CUDA error's
    advice lines ("might be asynchronously reported ...") would otherwise push out of the tail."""
    lines = [line.strip() for line in text.splitlines() if _EXCEPTION_LINE.match(line)]
    return lines[-1][:REASON_TAIL_CHARS] if lines else ""


def _last_lines(text: str) -> str:
    """The end of the output, on one line: usually the exception that stopped the replay."""
    tail = " ".join(line.strip() for line in text.strip().splitlines()[-6:])
    return tail[-REASON_TAIL_CHARS:] or "no output"
