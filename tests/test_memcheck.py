"""Memcheck replay: the report parser on realistic output, the runner against a fake
``compute-sanitizer`` on PATH (arguments, files, environment, timeout, markers,
"unavailable"), and on a GPU the real tool against an honest and an out-of-bounds kernel."""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES

from kernelopt.measure import sanitizer as sanitizer_module
from kernelopt.measure.sanitizer import (
    SanitizerRun,
    find_compute_sanitizer,
    memcheck_command,
    parse_report,
    run_command,
    unsupported_reason,
)
from kernelopt.verify.memcheck import (
    REPLAY_MODULE,
    MemcheckResult,
    classify,
    pack_arguments,
    run_memcheck,
    write_replay,
)
from kernelopt.verify.memcheck_replay import ARGS_FILE, DONE_MARKER, READY_MARKER, SOURCE_FILE, unpack_arguments
from kernelopt.workers.workdirs import OWNER_FILE


@pytest.fixture
def tmp_path(worker_tmp: Path) -> Path:
    """Here a test's files (suites, tools) are read by workers, which may run as another user:
    ``worker_tmp`` (conftest) is a folder they can enter, where pytest's own is closed to them."""
    return worker_tmp

KERNEL = "triton_poi_fused_gelu_0"

CLEAN = """\
========= COMPUTE-SANITIZER
kernelopt-memcheck-replay: arguments on device
kernelopt-memcheck-replay: launch completed
========= ERROR SUMMARY: 0 errors
"""

INVALID_READ = """\
========= COMPUTE-SANITIZER
kernelopt-memcheck-replay: arguments on device
========= Invalid __global__ read of size 4 bytes
=========     at triton_poi_fused_gelu_0+0x1c0 in /tmp/kernelopt-memcheck-x/torchinductor/cq/cqabc.py:19
=========     by thread (104,0,0) in block (7,0,0)
=========     Address 0x7f5e3a000fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f5e3a000000 of size 4000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2e1f3f] in libcuda.so.1
=========         Host Frame: _launch in /opt/triton/backends/nvidia/driver.py:512 [0x1a2b]
=========
========= Invalid __global__ write of size 4 bytes
=========     at triton_poi_fused_gelu_0+0x2a0 in /tmp/kernelopt-memcheck-x/torchinductor/cq/cqabc.py:27
=========     by thread (105,0,0) in block (7,0,0)
=========     Address 0x7f5e3a100fa4 is out of bounds
=========     and is 5 bytes after the nearest allocation at 0x7f5e3a100000 of size 4000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2e1f3f] in libcuda.so.1
=========
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
RuntimeError: CUDA error: unspecified launch failure
========= Target application returned an error
========= ERROR SUMMARY: 48 errors
========= ERROR SUMMARY: 28 errors were not printed. Use --print-limit option to adjust the number of printed errors
"""

# Recorded from compute-sanitizer 2025.3.1 on an H200 (an unmasked Triton load of 1000 floats in a
# block of 1024, PyTorch's caching allocator off), host frames and later records cut.
REAL_INVALID_READ = """\
========= COMPUTE-SANITIZER
READY
========= Invalid __global__ read of size 16 bytes
=========     at k+0xc0 in k.py:6
=========     by thread (122,0,0) in block (0,0,0)
=========     Access to 0x7fb64a800fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7fb64a800000 of size 4,000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: launch [0x1da3] in __triton_launcher.cpython-312-x86_64-linux-gnu.so
=========         Host Frame:  [0x18218f] in python3
=========         Host Frame: run in jit.py:744
=========         Host Frame: <module> in k.py:11
========= 
========= Invalid __global__ read of size 16 bytes
=========     at k+0xc0 in k.py:6
=========     by thread (125,0,0) in block (0,0,0)
=========     Access to 0x7fb64a800fd0 is out of bounds
=========     and is 48 bytes before the nearest allocation at 0x7fb64a801000 of size 4,000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
========= 
Traceback (most recent call last):
  File "/tmp/k.py", line 12, in <module>
    torch.cuda.synchronize(); print("DONE", flush=True)
torch.AcceleratorError: CUDA error: unspecified launch failure
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

========= Target application returned an error
========= ERROR SUMMARY: 6 errors
"""

DEVICE_NOT_SUPPORTED = """\
========= COMPUTE-SANITIZER
========= Error: Device not supported
Traceback (most recent call last):
  File "/work/src/kernelopt/verify/memcheck_replay.py", line 66, in main
    args = unpack_arguments(payload["args"], "cuda")
torch.AcceleratorError: CUDA error: unknown error
========= Target application returned an error
========= ERROR SUMMARY: 0 errors
"""

CRASH = """\
========= COMPUTE-SANITIZER
kernelopt-memcheck-replay: arguments on device
Fatal Python error: Segmentation fault

Current thread 0x00007f3a (most recent call first):
  File "/opt/triton/backends/nvidia/driver.py", line 512 in __call__
========= Error: process didn't terminate successfully
========= Target application returned an error
========= ERROR SUMMARY: 0 errors
"""


# ---------------------------------------------------------------- the parser


def test_parse_clean_run() -> None:
    report = parse_report(CLEAN)
    assert report.error_count == 0
    assert report.records == []
    assert not report.process_failed


def test_parse_invalid_accesses_joins_each_record_into_one_line() -> None:
    report = parse_report(INVALID_READ)
    assert report.error_count == 48  # the total, not the "were not printed" line
    assert len(report.records) == 2
    first, second = report.records
    assert first.startswith("Invalid __global__ read of size 4 bytes at triton_poi_fused_gelu_0+0x1c0")
    assert "by thread (104,0,0) in block (7,0,0)" in first
    assert "Address 0x7f5e3a000fa0 is out of bounds" in first
    assert "Host Frame" not in first and "Traceback" not in first
    assert second.startswith("Invalid __global__ write of size 4 bytes")
    assert "Target application" not in " ".join(report.records)


def test_parse_real_2025_report() -> None:
    report = parse_report(REAL_INVALID_READ)
    assert report.error_count == 6
    assert report.records == [
        "Invalid __global__ read of size 16 bytes at k+0xc0 in k.py:6 by thread (122,0,0) in block (0,0,0) "
        "Access to 0x7fb64a800fa0 is out of bounds "
        "and is 1 bytes after the nearest allocation at 0x7fb64a800000 of size 4,000 bytes",
        "Invalid __global__ read of size 16 bytes at k+0xc0 in k.py:6 by thread (125,0,0) in block (0,0,0) "
        "Access to 0x7fb64a800fd0 is out of bounds "
        "and is 48 bytes before the nearest allocation at 0x7fb64a801000 of size 4,000 bytes",
    ]


def test_parse_ignores_the_programs_own_lines() -> None:
    text = "ERROR SUMMARY: 0 errors\nInvalid __global__ read of size 4 bytes\n"
    report = parse_report(text)
    assert report.error_count is None
    assert report.records == []


def test_parse_singular_error_summary() -> None:
    assert parse_report("========= ERROR SUMMARY: 1 error\n").error_count == 1


def test_parse_device_not_supported_is_no_error_record() -> None:
    report = parse_report(DEVICE_NOT_SUPPORTED)
    assert report.records == []
    assert "Device not supported" in unsupported_reason(DEVICE_NOT_SUPPORTED)


def test_parse_crash() -> None:
    report = parse_report(CRASH)
    assert report.process_failed
    assert report.records == []
    assert report.error_count == 0


def test_unsupported_reasons_are_one_line_with_what_to_do() -> None:
    for text in ("========= Error: Device not supported", "returned 999 (error 999)",
                 "RuntimeError: Found no NVIDIA driver on your system"):
        reason = unsupported_reason(text)
        assert reason and "\n" not in reason
    assert unsupported_reason(CLEAN) is None


def test_memcheck_command_flags() -> None:
    command = memcheck_command("/x/compute-sanitizer", ["python", "-m", "m", "D"], error_exitcode=7, print_limit=20)
    assert command == ["/x/compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "7", "--print-limit", "20",
                       "--leak-check", "no", "--report-api-errors", "no", "python", "-m", "m", "D"]


# ---------------------------------------------------------------- the verdict, from canned runs


def _verdict(output: str, returncode: int | None = 0, timed_out: bool = False) -> MemcheckResult:
    return classify(SanitizerRun(returncode, timed_out, 1.5, output), ["cs"], 86, 60.0)


def test_verdict_clean() -> None:
    result = _verdict(CLEAN)
    assert result.status == "clean" and result.clean
    assert result.error_count == 0 and result.errors == []
    assert result.to_dict()["clean"] is True


def test_verdict_errors_from_report() -> None:
    result = _verdict(INVALID_READ, returncode=86)
    assert result.status == "errors"
    assert result.error_count == 48
    assert "is out of bounds" in result.errors[0]
    assert "48 error(s)" in result.reason and "Invalid __global__ read" in result.reason


def test_verdict_errors_from_exit_code_alone() -> None:
    """A candidate that prints a clean report over the sanitizer's still loses to its exit code."""
    assert _verdict(CLEAN, returncode=86).status == "errors"


def test_verdict_unavailable_only_before_candidate_code() -> None:
    result = _verdict(DEVICE_NOT_SUPPORTED, returncode=1)
    assert result.status == "unavailable" and "Device not supported" in result.reason
    forged = READY_MARKER + "\n========= Error: Device not supported\n========= ERROR SUMMARY: 0 errors\n"
    assert _verdict(forged, returncode=1).status == "failed"


def test_verdict_early_exit_is_not_clean() -> None:
    result = _verdict(CLEAN.replace(DONE_MARKER + "\n", ""))
    assert result.status == "failed" and "before its launch completed" in result.reason


def test_verdict_crash_and_timeout_and_missing_summary() -> None:
    assert _verdict(CRASH, returncode=255).status == "failed"
    timed_out = _verdict("========= COMPUTE-SANITIZER\n" + READY_MARKER + "\n", returncode=-15, timed_out=True)
    assert timed_out.status == "failed" and "timed out after 60 s" in timed_out.reason
    no_summary = _verdict(READY_MARKER + "\n" + DONE_MARKER + "\n")
    assert no_summary.status == "failed" and "ERROR SUMMARY" in no_summary.reason


def test_verdict_names_the_exception_behind_a_cuda_error_s_advice_lines() -> None:
    """A CUDA error ends in advice lines; the reason names the error itself, and an out-of-memory
    replay says what to do (seen on an H200: row-L2's 17 GB launch beside the judge's cached blocks)."""
    oom = (
        "========= COMPUTE-SANITIZER\n"
        "Traceback (most recent call last):\n"
        '  File "memcheck_replay.py", line 71, in main\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 139 GiB\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be\n"
        "incorrect. For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        "========= Target application returned an error\n========= ERROR SUMMARY: 0 errors\n"
    )
    result = _verdict(oom, returncode=1)
    assert result.status == "failed"
    assert "torch.OutOfMemoryError: CUDA out of memory" in result.reason
    assert "no room for the replay's arguments" in result.reason and "free GPU memory" in result.reason
    other = _verdict(oom.replace("torch.OutOfMemoryError: CUDA out of memory.", "RuntimeError: CUDA error: misaligned."),
                     returncode=1)
    assert "RuntimeError: CUDA error: misaligned." in other.reason and "no room" not in other.reason
    assert "\n" not in result.reason and "\n" not in other.reason


# ---------------------------------------------------------------- arguments keep their layout


def test_pack_and_unpack_keep_shape_strides_dtype_and_exact_span() -> None:
    base = torch.arange(60, dtype=torch.float32)
    gapped = base.as_strided((3, 4), (12, 2), 10)  # a view with a storage offset and gaps
    transposed = torch.arange(12, dtype=torch.int64).reshape(3, 4).t()
    broadcast = torch.ones(1, dtype=torch.float16).expand(8)  # stride 0
    empty = torch.empty(0, 3)
    entries = pack_arguments([gapped, transposed, broadcast, empty, 4096, 0.5, None])
    assert entries[0]["storage_offset"] == 10 and entries[0]["tensor"].numel() == 1 + 2 * 12 + 3 * 2
    args = unpack_arguments(entries, "cpu")
    for original, copy in zip([gapped, transposed, broadcast, empty], args[:4]):
        assert copy.shape == original.shape and copy.stride() == original.stride()
        assert copy.dtype == original.dtype and copy.storage_offset() == 0
        assert torch.equal(copy, original)
    assert args[0].untyped_storage().nbytes() == 31 * 4  # exactly the span, nothing around it
    assert args[4:] == [4096, 0.5, None]


def test_pack_refuses_other_objects() -> None:
    with pytest.raises(TypeError, match="argument 1"):
        pack_arguments([torch.ones(2), object()])


def test_write_replay_files_load_with_weights_only(tmp_path: Path) -> None:
    write_replay(tmp_path, "SOURCE", KERNEL, [torch.ones(3), 3])
    assert (tmp_path / SOURCE_FILE).read_text() == "SOURCE"
    payload = torch.load(tmp_path / ARGS_FILE, weights_only=True)
    assert payload["kernel"] == KERNEL and payload["args"][1] == {"value": 3}


# ---------------------------------------------------------------- the tool, found and run


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)  # workers may run as another user
    return path


def test_find_compute_sanitizer_on_path_cuda_home_and_beside_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = _executable(tmp_path / "path" / "compute-sanitizer", "#!/bin/sh\n")
    in_home = _executable(tmp_path / "cuda" / "bin" / "compute-sanitizer", "#!/bin/sh\n")
    beside = _executable(tmp_path / "nsight" / "compute-sanitizer", "#!/bin/sh\n")
    monkeypatch.setattr(sanitizer_module, "find_ncu", lambda: str(tmp_path / "nsight" / "ncu"))
    empty = str(tmp_path / "nothing")
    assert find_compute_sanitizer({"PATH": str(on_path.parent)}) == str(on_path)
    assert find_compute_sanitizer({"PATH": empty, "CUDA_HOME": str(tmp_path / "cuda")}) == str(in_home)
    monkeypatch.setattr(sanitizer_module, "INSTALL_FOLDERS", (str(tmp_path / "nothing"),))
    assert find_compute_sanitizer({"PATH": empty}) == str(beside)
    monkeypatch.setattr(sanitizer_module, "find_ncu", lambda: None)
    assert find_compute_sanitizer({"PATH": empty}) is None


def test_run_command_kills_the_group_on_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = f"import subprocess, time; p = subprocess.Popen(['sleep', '60']); open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    start = time.monotonic()
    run = run_command([sys.executable, "-c", script], cwd=tmp_path, env=dict(os.environ), timeout_s=1.5,
                      output_path=tmp_path / "out.txt")
    assert run.timed_out and time.monotonic() - start < 15
    _assert_dead(int(pid_file.read_text()))


def _assert_dead(pid: int) -> None:
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"process {pid} outlived the timeout")


# A stand-in for compute-sanitizer: checks the flags and the replay's command line, records
# its arguments and environment, then behaves as BEHAVIOUR says.
FAKE = """\
#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
flags, program = args[:10], args[10:]
assert flags[:2] == ["--tool", "memcheck"], flags
assert flags[4:10] == ["--print-limit", "20", "--leak-check", "no", "--report-api-errors", "no"], flags
code = int(flags[3])
assert program[1:3] == ["-m", "{module}"], program
directory = program[3]
with open({log!r}, "w") as log:
    json.dump({{"argv": sys.argv, "env": dict(os.environ), "files": sorted(os.listdir(directory))}}, log)
print("========= COMPUTE-SANITIZER", flush=True)
{behaviour}
"""

BEHAVIOURS = {
    # Load the arguments as the replay does, on the CPU, in the child's environment: the file format end to end.
    "clean": """\
loader = "import sys, torch; from kernelopt.verify.memcheck_replay import unpack_arguments; " \\
    "p = torch.load(sys.argv[1] + '/launch.pt', weights_only=True); a = unpack_arguments(p['args'], 'cpu'); " \\
    "assert a[0].stride() == (1, 3); print('{ready}'); print('{done}')"
rc = subprocess.call([program[0], "-c", loader, directory])
print("========= ERROR SUMMARY: 0 errors")
sys.exit(rc)
""",
    "passthrough": """\
rc = subprocess.call(program)
print("========= ERROR SUMMARY: 0 errors")
sys.exit(rc)
""",
    "errors": """\
print('{ready}')
print({errors!r})
sys.exit(code)
""",
    "early_exit": """\
print('{ready}')
print("========= ERROR SUMMARY: 0 errors")
""",
    "not_supported": """\
print({not_supported!r})
sys.exit(1)
""",
    "hang": """\
print('{ready}', flush=True)
child = subprocess.Popen(["sleep", "60"])
open(os.path.join({log_dir!r}, "child.pid"), "w").write(str(child.pid))
time.sleep(60)
""",
}


@pytest.fixture
def fake_sanitizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def install(behaviour: str) -> Path:
        log = tmp_path / "fake-log.json"
        body = BEHAVIOURS[behaviour].format(
            ready=READY_MARKER, done=DONE_MARKER, errors=INVALID_READ.split("\n", 2)[2],
            not_supported=DEVICE_NOT_SUPPORTED.split("\n", 1)[1], log_dir=str(tmp_path),
        )
        text = FAKE.format(python=sys.executable, module=REPLAY_MODULE, log=str(log), behaviour=body)
        _executable(tmp_path / "bin" / "compute-sanitizer", text)
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-reach-the-replay")
        return log

    return install


def _pointwise(numel: int, masked_load: bool = True) -> str:
    """The pointwise fixture at ``numel`` elements with real masks (``numel`` need not fill a block)."""
    source = (FIXTURES / "candidates" / "original_pointwise.py").read_text()
    edits = [
        ("16777216", str(numel)),
        (", (2,): [['tt.divisibility', 16]]", ""),  # xnumel is no longer a multiple of 16
        ("xmask = tl.full([XBLOCK], True, tl.int1)", "xmask = xindex < xnumel"),
        ("tl.load(in_ptr0 + (x0), None)", "tl.load(in_ptr0 + (x0), xmask)" if masked_load else "tl.load(in_ptr0 + (x0), None)"),
        ("tl.store(out_ptr0 + (x0), tmp8, None)", "tl.store(out_ptr0 + (x0), tmp8, xmask)"),
    ]
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    return source


def _launch_args(device: str = "cpu") -> list[object]:
    return [torch.randn(1000, device=device), torch.empty(1000, device=device), 1000]


def test_runner_clean_with_fake_tool(fake_sanitizer, tmp_path: Path) -> None:
    log = fake_sanitizer("clean")
    transposed = torch.randn(4, 3).t()
    result = run_memcheck(_pointwise(1000), KERNEL, [transposed, torch.empty(12), 12], timeout_s=120)
    assert result.status == "clean", result.to_dict()
    seen = __import__("json").loads(log.read_text())
    assert seen["argv"][0].endswith("compute-sanitizer") and seen["argv"] == result.command
    assert seen["files"] == sorted([ARGS_FILE, SOURCE_FILE, "sanitizer-output.txt", OWNER_FILE])
    env = seen["env"]
    assert env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1" and env["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert "OPENAI_API_KEY" not in env
    assert env["HOME"] == seen["argv"][-1]  # its private directory
    assert not Path(seen["argv"][-1]).exists()  # removed afterwards


def test_runner_reports_errors_with_fake_tool(fake_sanitizer) -> None:
    fake_sanitizer("errors")
    result = run_memcheck(_pointwise(1000, masked_load=False), KERNEL, _launch_args(), timeout_s=60)
    assert result.status == "errors"
    assert result.exit_code == 86 and result.error_count == 48
    assert result.errors[0].startswith("Invalid __global__ read of size 4 bytes")
    assert "is out of bounds" in result.errors[0]


def test_runner_early_exit_is_failed(fake_sanitizer) -> None:
    fake_sanitizer("early_exit")
    result = run_memcheck(_pointwise(1000), KERNEL, _launch_args(), timeout_s=60)
    assert result.status == "failed" and "before its launch completed" in result.reason


def test_runner_device_not_supported_is_unavailable(fake_sanitizer) -> None:
    fake_sanitizer("not_supported")
    result = run_memcheck(_pointwise(1000), KERNEL, _launch_args(), timeout_s=60)
    assert result.status == "unavailable" and "Device not supported" in result.reason
    assert "\n" not in result.reason


def test_runner_timeout_kills_everything(fake_sanitizer, tmp_path: Path) -> None:
    fake_sanitizer("hang")
    start = time.monotonic()
    result = run_memcheck(_pointwise(1000), KERNEL, _launch_args(), timeout_s=2)
    assert time.monotonic() - start < 20
    assert result.status == "failed" and "timed out after 2 s" in result.reason
    _assert_dead(int((tmp_path / "child.pid").read_text()))


def test_runner_runs_the_real_replay(fake_sanitizer) -> None:
    """The replay itself, with the fake tool passing the command through: clean on a GPU, else unavailable."""
    fake_sanitizer("passthrough")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    result = run_memcheck(_pointwise(1000), KERNEL, _launch_args(device), timeout_s=300)
    if torch.cuda.is_available():
        assert result.status == "clean", result.to_dict()
    else:
        assert result.status == "unavailable", result.to_dict()
        assert "no CUDA device" in result.reason


def test_runner_without_the_tool_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kernelopt.verify.memcheck.find_compute_sanitizer", lambda: None)
    result = run_memcheck("", KERNEL, [])
    assert result.status == "unavailable" and not result.clean
    assert "compute-sanitizer not found" in result.reason and "\n" not in result.reason


def test_runner_refuses_a_bad_timeout() -> None:
    with pytest.raises(ValueError):
        run_memcheck("", KERNEL, [], timeout_s=0)


# ---------------------------------------------------------------- the real tool


@pytest.mark.gpu
def test_memcheck_tells_an_honest_kernel_from_an_out_of_bounds_read() -> None:
    """1000 floats: the last block reads past the input unless the load is masked."""
    honest = run_memcheck(_pointwise(1000), KERNEL, _launch_args("cuda"))
    if honest.status == "unavailable":
        pytest.skip(honest.reason)
    assert honest.status == "clean", honest.to_dict()
    cheat = run_memcheck(_pointwise(1000, masked_load=False), KERNEL, _launch_args("cuda"))
    assert cheat.status == "errors", cheat.to_dict()
    assert cheat.error_count and cheat.error_count > 0
    assert any("read" in line and "out of bounds" in line for line in cheat.errors), cheat.errors


def test_the_replay_runs_a_kernel_file_s_entry_on_its_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A kernel file's candidate (``file:launch``) is imported from its path and its entry runs once;
    here on CPU tensors through Triton's interpreter (the GPU replay is the same with ``cuda``)."""
    pytest.importorskip("triton")
    from kernelopt.verify.memcheck_replay import FILE_PREFIX, replay

    source = (Path(__file__).resolve().parents[1] / "examples" / "kernels" / "softmax_naive.py").read_text()
    x = torch.randn(6, 50)
    directory = write_replay(tmp_path / "replay", source, f"{FILE_PREFIX}launch", [x])
    replay(directory, "cpu")
    printed = capsys.readouterr().out
    assert printed.index(READY_MARKER) < printed.index(DONE_MARKER)
