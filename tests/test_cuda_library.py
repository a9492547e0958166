"""kernelopt's own CUDA code built by nvcc alone into a shared library (capture/rewrites/cuda_library)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from kernelopt.capture import cuda_toolchain
from kernelopt.capture.cuda_kernel import CudaBuildError
from kernelopt.capture.rewrites import (
    cuda_library,
    group_norm_host,
    group_norm_kernel,
    group_norm_op,
    row_softmax_kernel,
)

NAME = "kernelopt.test_library"


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("KERNELOPT_CUDA_BUILD_DIR", str(tmp_path / "builds"))
    monkeypatch.setattr(cuda_toolchain, "nvcc_missing", lambda: None)
    return tmp_path / "builds"


def test_a_library_is_built_once_per_source_and_architecture_and_whole(builds: Path, monkeypatch) -> None:
    """The second ask loads the first build; another architecture is another build; nvcc writes a partial
    file that is moved into place only once it succeeded."""
    runs: list[list[str]] = []
    loaded: list[str] = []

    def nvcc(command: list[str], cwd: Path, **_: object) -> subprocess.CompletedProcess[str]:
        runs.append(command)
        (Path(cwd) / command[-1]).write_text("ELF")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(cuda_library.subprocess, "run", nvcc)
    monkeypatch.setattr(cuda_library.ctypes, "CDLL", lambda path: loaded.append(path) or path)
    monkeypatch.setattr(cuda_toolchain, "nvcc", lambda: "/opt/cuda/bin/nvcc")
    first = cuda_library.build_library("__global__ void k() {}", NAME, (9, 0))
    again = cuda_library.build_library("__global__ void k() {}", NAME, (9, 0))
    other = cuda_library.build_library("__global__ void k() {}", NAME, (10, 0))
    assert first == again != other and len(runs) == 2
    assert runs[0][0] == "/opt/cuda/bin/nvcc" and "-gencode=arch=compute_90,code=sm_90" in runs[0]
    assert {"-shared", "-fPIC", "-O3"} <= set(runs[0]) and "--use_fast_math" not in runs[0]
    assert Path(first).name == "kernelopt_test_library.so" and Path(first).parent.parent == builds
    assert not list(Path(first).parent.glob("partial-*"))


def test_a_source_that_does_not_compile_says_the_compilers_first_error_and_leaves_no_library(builds, monkeypatch) -> None:
    def nvcc(command: list[str], cwd: Path, **_: object) -> subprocess.CompletedProcess[str]:
        (Path(cwd) / command[-1]).write_text("half")
        return subprocess.CompletedProcess(command, 2, "", 'source.cu(3): error: identifier "x" is undefined\n1 error')

    monkeypatch.setattr(cuda_library.subprocess, "run", nvcc)
    with pytest.raises(CudaBuildError) as failed:
        cuda_library.build_library("bad", NAME, (9, 0))
    assert str(failed.value) == f'{NAME} does not compile: source.cu(3): error: identifier "x" is undefined'
    folder = cuda_library.library_path("bad", NAME, cuda_library.flags_for((9, 0))).parent
    assert not list(folder.glob("*.so"))


def test_a_machine_without_nvcc_says_what_to_install_before_building(builds, monkeypatch) -> None:
    why = "no nvcc at /opt/cuda/bin/nvcc (PyTorch's CUDA_HOME is /opt/cuda): install the CUDA toolkit there or set CUDA_HOME"
    monkeypatch.setattr(cuda_toolchain, "nvcc_missing", lambda: why)
    with pytest.raises(CudaBuildError) as refused:
        cuda_library.build_library("__global__ void k() {}", NAME, (9, 0))
    assert str(refused.value) == f"this machine cannot build CUDA C++ ({NAME}): {why}"


def test_a_build_already_in_place_loads_on_a_machine_without_nvcc(builds, monkeypatch) -> None:
    """A build made where nvcc is (``kernelopt build-op``) into the folder a machine without the toolkit
    reads is loaded there as it is; anything else still needs nvcc and says so."""
    monkeypatch.setattr(cuda_toolchain, "nvcc_missing", lambda: "no nvcc here")
    monkeypatch.setattr(cuda_library.subprocess, "run", lambda *a, **k: pytest.fail("nothing to build"))
    monkeypatch.setattr(cuda_library.ctypes, "CDLL", lambda path: path)
    library = cuda_library.library_path("__global__ void k() {}", NAME, cuda_library.flags_for((9, 0)))
    library.parent.mkdir(parents=True)
    library.write_bytes(b"ELF")
    assert cuda_library.build_library("__global__ void k() {}", NAME, (9, 0)) == str(library)
    with pytest.raises(CudaBuildError, match="no nvcc here"):
        cuda_library.build_library("__global__ void k() {}", NAME, (10, 0))  # no build for that GPU


def test_build_op_builds_every_dtype_pair_the_op_launches(builds, monkeypatch) -> None:
    """``kernelopt build-op --arch 9.0`` (a Docker stage with the toolkit, say): the five builds the row op can
    ask for and the group norm's three, where a machine without nvcc finds them; a wrong architecture is one
    line."""
    from typer.testing import CliRunner

    from kernelopt.cli.main import app

    def nvcc(command: list[str], cwd: Path, **_: object) -> subprocess.CompletedProcess[str]:
        (Path(cwd) / command[-1]).write_text("ELF")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(cuda_library.subprocess, "run", nvcc)
    monkeypatch.setattr(cuda_toolchain, "nvcc", lambda: "/opt/cuda/bin/nvcc")
    result = CliRunner().invoke(app, ["build-op", "--arch", "9.0"])
    assert result.exit_code == 0, result.output
    built = sorted(builds.glob("lib-*/kernelopt_row_softmax.so"))
    assert len(built) == len(row_softmax_kernel.PAIRS) == 5 and all(str(b) in result.output for b in built)
    group_norms = sorted(builds.glob("lib-*/kernelopt_group_norm.so"))  # and the group norm's, one a dtype
    assert len(group_norms) == 3 and all(str(b) in result.output for b in group_norms)
    (host,) = builds.glob("lib-*/kernelopt_group_norm_host.so")  # its C++ host path, one for every GPU
    assert str(host) in result.output and (host.parent / "source.cpp").is_file()
    assert host == group_norm_host.library_path(group_norm_op.PLANS_KEPT)
    assert all(group_norm_kernel.prebuilt(d, (9, 0)) for d in group_norm_kernel.DTYPES)
    pairs = [(torch.float32, torch.float32), (torch.bfloat16, torch.float32), (torch.float16, torch.float16)]
    assert all(row_softmax_kernel.prebuilt(i, o, (9, 0)) for i, o in pairs)
    assert not row_softmax_kernel.prebuilt(torch.float32, torch.float32, (10, 0))
    wrong = CliRunner().invoke(app, ["build-op", "--arch", "sm90"])
    assert wrong.exit_code == 2 and "--arch 'sm90': give MAJOR.MINOR, e.g. --arch 9.0" in wrong.output
    old = CliRunner().invoke(app, ["build-op", "--arch", "8.0"])
    assert old.exit_code == 2 and "sm_80 has no thread-block clusters" in old.output


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit), not a GPU")
def test_the_op_builds_in_seconds_and_its_entry_point_answers_through_ctypes(builds, monkeypatch) -> None:
    """The real build of one dtype pair, loaded: its C entry point takes the arguments as declared and
    hands back the CUDA runtime's error with its text (here, with no GPU to launch on, an error)."""
    monkeypatch.setattr(cuda_toolchain, "nvcc", lambda: shutil.which("nvcc"))
    row_softmax_kernel.launcher.cache_clear()
    try:
        library = row_softmax_kernel.launcher(torch.bfloat16, torch.float32, (9, 0))
    finally:
        row_softmax_kernel.launcher.cache_clear()
    error = library._launch(None, None, 1, 4096, 1, 1, 1.0, 0, 0, 0, 0.0, None)
    assert error != 0 and library._error(error).decode()  # e.g. "no CUDA-capable device is detected"
    assert list(builds.glob("lib-*/kernelopt_row_softmax.so"))


@pytest.mark.parametrize(
    ("nvcc", "ninja", "said"),
    [
        (None, "no ninja (PyTorch's extensions build with it): pip install ninja", "the LLM agents plan Triton only"),
        ("no nvcc at /x/bin/nvcc", "no nvcc at /x/bin/nvcc", "and the kernelopt.cluster_softmax, cluster_norm and "
         "cluster_group_norm options are refused unless their ops were built for this GPU where nvcc is (kernelopt "
         "build-op) into this machine's KERNELOPT_CUDA_BUILD_DIR"),
    ],
)
def test_doctor_says_the_cluster_op_is_refused_only_without_nvcc(monkeypatch, nvcc, ninja, said) -> None:
    """The op builds with nvcc alone: a machine with nvcc and no ninja loses the candidates' CUDA C++ only."""
    from kernelopt.api import doctor

    monkeypatch.setattr(cuda_toolchain, "missing", lambda: ninja)
    monkeypatch.setattr(cuda_toolchain, "nvcc_missing", lambda: nvcc)
    (line,) = [p for p in doctor.diagnose(None).problems if p.startswith("no CUDA C++ builds")]
    assert line == f"no CUDA C++ builds ({ninja}): {said}" if nvcc is None else line.endswith(said)
    assert ("cluster_softmax" in line) == (nvcc is not None)


def test_the_op_hands_its_launch_the_rows_flags_and_stream_and_names_a_failed_launch(monkeypatch) -> None:
    """What crosses into the library: both tensors' addresses, rows and columns of a 3-d input, the flags
    as ints, the current stream of the input's device with that device current; a CUDA error comes back as
    a one-line error with the runtime's own text."""
    import types

    launches: list[tuple] = []
    current: list[object] = []

    class Entry:
        def __init__(self, answer: int) -> None:
            self.answer = answer

        def __call__(self, *args: object) -> object:
            launches.append(args)
            return self.answer

    library = types.SimpleNamespace(
        kopt_row_softmax=Entry(0), kopt_row_softmax_bulk=Entry(0),
        kopt_error_string=lambda error: b"too many resources requested for launch",
    )  # fmt: skip
    # the device made current and its stream read (row_softmax_kernel._on_device, tested on its own)
    monkeypatch.setattr(row_softmax_kernel, "_on_device", lambda x, launch: current.append(x.device) or launch(0xBEEF))
    op = row_softmax_kernel.Library(library)  # type: ignore[arg-type]
    x, y = torch.zeros(2, 3, 4096), torch.zeros(2, 3, 4096)
    op.run(x, y, 2, True, 0.5, True, False)
    assert launches == [(x.data_ptr(), y.data_ptr(), 6, 4096, 2, 1, 0.5, 1, 0, 0, 0.0, 0xBEEF)] and current == [x.device]
    launches.clear()
    op.run_bulk(x, y, 4, 256, 2.0, False, True)  # the shared-memory form: block width, no active-count pointer
    assert launches == [(x.data_ptr(), y.data_ptr(), 6, 4096, 4, 256, 2.0, 0, 1, 0, 0.0, 0xBEEF, None)]
    launches.clear()
    op.run(x, y, 2, True, 1.0, False, False, norm=True, eps=1e-12)  # the L2-normalisation build, its eps
    op.run_bulk(x, y, 2, 512, 1.0, False, False, norm=True, eps=0.0)
    assert [call[7:11] for call in launches] == [(0, 0, 1, 1e-12), (0, 0, 1, 0.0)]
    library.kopt_row_softmax.answer = 7
    failing = row_softmax_kernel.Library(library)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError) as failed:
        failing.run(x, y, 2, False, 1.0, False, False)
    assert str(failed.value) == "kernelopt.row_softmax launch failed: too many resources requested for launch (CUDA error 7)"
