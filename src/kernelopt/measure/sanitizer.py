"""NVIDIA compute-sanitizer: find it, run a command under memcheck, read its report.

Memcheck catches what a correctness gate cannot see: a kernel that reads past
its buffer and then masks the values away still computes the right answer. This
module knows only the tool (where it lives, which flags, what its output says);
what a report means for a candidate is decided in :mod:`kernelopt.verify.memcheck`.

Flags, and why:

- ``--tool memcheck``: out-of-bounds and misaligned global, shared and local
  accesses, and hardware exceptions. Named explicitly rather than relying on the
  default tool.
- ``--error-exitcode N``: the sanitizer itself exits with ``N`` when it found an
  error. The exit code comes from the sanitizer process, which the program under
  test does not control, so it is the evidence of errors that text printed by the
  program cannot forge or hide.
- ``--print-limit 20``: a kernel that reads out of bounds usually does so from
  every thread; the first records say what is wrong, and printing thousands makes
  the run slower. ``ERROR SUMMARY`` still counts every error.
- ``--leak-check no``: PyTorch's caching allocator and the CUDA context keep
  memory until exit by design; leaks are not what a kernel candidate can cause.
- ``--report-api-errors no``: PyTorch and Triton probe the driver with calls that
  are expected to fail (attribute queries, peer access); reported, they would be
  counted as errors of a kernel that has none.

The output is read only from lines carrying the sanitizer's ``=========`` prefix.
Availability is a separate question from the report: on gVisor machines the tool
answers "Device not supported" and the first allocation fails with error 999;
:func:`unsupported_reason` recognises that so the caller can skip with one line.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.measure.ncu import find_ncu
from kernelopt.workers.identity import WorkerIdentity
from kernelopt.workers.isolated import run_in_session

SANITIZER_NAME = "compute-sanitizer"
INSTALL_FOLDERS = ("/usr/local/cuda/bin", "/usr/local/cuda/compute-sanitizer")
PREFIX = "========="
DEFAULT_PRINT_LIMIT = 20
DEFAULT_ERROR_EXITCODE = 86  # any code the replay itself never exits with

_SUMMARY = re.compile(r"^ERROR SUMMARY:\s*(\d+)\s+errors?\s*$")
# Unindented prefixed lines that describe the run, not an error record.
_NOT_RECORDS = (
    "COMPUTE-SANITIZER",
    "ERROR SUMMARY:",
    "LEAK SUMMARY:",
    "Target application returned an error",
    "Error:",  # the tool's notes on the run ("Error: process didn't terminate successfully")
    "Internal Sanitizer Error",
    "This can occur due to",
)
_PROCESS_FAILED = "Error: process didn't terminate successfully"
# Messages that say the tool or the GPU cannot be used here, with the line we give for each.
UNSUPPORTED_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"Device not supported", re.IGNORECASE),
        'compute-sanitizer does not support this GPU or runtime ("Device not supported", as on gVisor '
        "machines); run memcheck on a bare-metal or Firecracker machine",
    ),
    (
        re.compile(r"error 999\b|CUDA_ERROR_UNKNOWN|cudaErrorUnknown|CUDA error: unknown error", re.IGNORECASE),
        "CUDA failed under compute-sanitizer with error 999 (unknown error, as on gVisor machines); "
        "run memcheck on a bare-metal or Firecracker machine",
    ),
    (
        re.compile(
            r"no CUDA-capable device|No CUDA GPUs are available|Torch not compiled with CUDA|"
            r"Found no NVIDIA driver",
            re.IGNORECASE,
        ),
        "no CUDA device is visible to the program under compute-sanitizer; memcheck needs an NVIDIA GPU",
    ),
)


def find_compute_sanitizer(env: Mapping[str, str] | None = None) -> str | None:
    """``compute-sanitizer`` on PATH, else under ``$CUDA_HOME``/``$CUDA_PATH``, /usr/local/cuda, or beside ncu."""
    environ = os.environ if env is None else env
    found = shutil.which(SANITIZER_NAME, path=environ.get("PATH"))
    if found:
        return found
    folders: list[Path] = []
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(name):
            root = Path(environ[name])
            folders += [root / "bin", root / "compute-sanitizer"]
    folders += [Path(folder) for folder in INSTALL_FOLDERS]
    ncu = find_ncu()
    if ncu:
        folders.append(Path(ncu).resolve().parent)
    for folder in folders:
        candidate = folder / SANITIZER_NAME
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def not_found_reason() -> str:
    """The one line for a machine without compute-sanitizer."""
    return (
        "compute-sanitizer not found on PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin or beside ncu; "
        "install the CUDA toolkit's compute-sanitizer or put it on PATH"
    )


def memcheck_command(
    sanitizer: str,
    program: Sequence[str],
    *,
    error_exitcode: int = DEFAULT_ERROR_EXITCODE,
    print_limit: int = DEFAULT_PRINT_LIMIT,
) -> list[str]:
    """The full command line that runs ``program`` under memcheck with the flags above."""
    return [
        sanitizer,
        "--tool",
        "memcheck",
        "--error-exitcode",
        str(error_exitcode),
        "--print-limit",
        str(print_limit),
        "--leak-check",
        "no",
        "--report-api-errors",
        "no",
        *program,
    ]


@dataclass(frozen=True)
class SanitizerReport:
    """What memcheck's output says, read from its prefixed lines only.

    ``error_count`` is the number in ``ERROR SUMMARY`` (None when the tool printed
    none: it did not finish). ``records`` has one line per printed error record, its
    header joined with the location and address lines. ``process_failed`` is the
    tool's note that the program did not terminate successfully.
    """

    error_count: int | None
    records: list[str] = field(default_factory=list)
    process_failed: bool = False
    tool_messages: list[str] = field(default_factory=list)  # every prefixed line, prefix removed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _prefixed(text: str) -> list[str]:
    """The sanitizer's lines with their prefix removed (indentation kept), in order."""
    lines = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith(PREFIX):
            lines.append(line[len(PREFIX) :].removeprefix(" "))
    return lines


def _record_detail(line: str) -> bool:
    """Indented lines worth keeping in a record's summary: where, who, which address."""
    stripped = line.strip()
    # "Access to 0x... is out of bounds" (2025 releases) or "Address 0x... is out of bounds" (earlier)
    return stripped.startswith(("at ", "by thread", "Access to ", "Address ", "and is "))


def parse_report(text: str) -> SanitizerReport:
    """Read memcheck's output (the program's own lines may be mixed in; they are ignored)."""
    lines = _prefixed(text)
    count: int | None = None
    records: list[list[str]] = []
    in_record = False
    process_failed = False
    for line in lines:
        if not line:
            in_record = False
            continue
        if not line.startswith(" "):  # a header: a new record or a note about the run
            summary = _SUMMARY.match(line)
            if summary:
                count = int(summary.group(1))
            process_failed = process_failed or line.startswith(_PROCESS_FAILED)
            in_record = not line.startswith(_NOT_RECORDS) and not _is_unsupported(line)
            if in_record:
                records.append([line])
        elif in_record and _record_detail(line) and len(records[-1]) < 5:
            records[-1].append(line.strip())
    return SanitizerReport(
        error_count=count,
        records=[" ".join(parts) for parts in records],
        process_failed=process_failed,
        tool_messages=[line.strip() for line in lines if line.strip()],
    )


def _is_unsupported(line: str) -> bool:
    return any(pattern.search(line) for pattern, _ in UNSUPPORTED_PATTERNS[:1])


def unsupported_reason(text: str) -> str | None:
    """The one-line reason when ``text`` says the tool or the GPU cannot be used here, else None.

    Looks at all of ``text``, the program's own lines included (torch's "CUDA error:
    unknown error" is not prefixed); callers pass only output from before untrusted
    code could print anything.
    """
    for pattern, reason in UNSUPPORTED_PATTERNS:
        match = pattern.search(text)
        if match:
            return reason
    return None


@dataclass(frozen=True)
class SanitizerRun:
    """How one process under the sanitizer ended: exit code (None if it could not be reaped), output."""

    returncode: int | None
    timed_out: bool
    duration_s: float
    output: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_command(
    command: Sequence[str],
    *,
    cwd: str | Path,
    env: Mapping[str, str],
    timeout_s: float,
    output_path: str | Path,
    identity: WorkerIdentity | None = None,
) -> SanitizerRun:
    """Run ``command`` in its own session with stdout and stderr merged into ``output_path``,
    as ``identity`` (None: this process's user).

    On timeout the program and every process it started are stopped and killed; after any
    exit its group is killed too, so nothing the program started outlives it. Output goes to a file,
    not a pipe, so a grandchild holding the pipe open cannot block the wait.
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    output_path = Path(output_path)
    returncode, timed_out, duration_s = run_in_session(command, cwd, env, timeout_s, output_path, identity=identity)
    return SanitizerRun(returncode, timed_out, duration_s, _read_text(output_path))


def _read_text(path: Path, limit: int = 4 << 20) -> str:
    """The output file's text; only its last ``limit`` bytes for a program that printed without end."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        file.seek(max(0, size - limit))
        return file.read().decode("utf-8", errors="replace")
