"""CUDA C++ candidates in a Triton kernel's slot (issue 16, point 3): recognised, checked, built once, launched
as Inductor's launchers are. The build itself needs nvcc and a GPU (tests/test_gpu_cuda_kernel.py); here
``load_inline`` is replaced by a recording stand-in, so the dispatch, the cache and the errors are tested."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest
from conftest import EXAMPLES, FIXTURES, fake_nvcc

from kernelopt.capture import cuda_kernel
from kernelopt.capture.cuda_kernel import (
    CUDA_MARKER,
    CudaBuildError,
    build_cuda_kernel,
    is_cuda_source,
    launch_prototype,
)
from kernelopt.capture.swap import SwapError, build_kernel
from kernelopt.verify.static import check_static

ROW_L2_CU = EXAMPLES.parent / "cuda" / "10_row_l2_normalize.cu"
ROW_L2_TRITON = FIXTURES / "inductor" / "10_row_l2_normalize.kernel.py"
NAME = "triton_red_fused_div_linalg_vector_norm_0"


def test_a_cuda_candidate_is_known_by_its_first_line() -> None:
    assert is_cuda_source(ROW_L2_CU.read_text())
    assert is_cuda_source(f"\n\n  {CUDA_MARKER}\n__global__ void k() {{}}")
    assert not is_cuda_source(ROW_L2_TRITON.read_text())
    assert not is_cuda_source(f"import triton\n{CUDA_MARKER}\n")  # the marker must come first
    assert not is_cuda_source("")


def test_the_bindings_declare_the_sources_launch() -> None:
    assert launch_prototype(ROW_L2_CU.read_text()).endswith(
        "void launch(torch::Tensor in_ptr0, torch::Tensor out_ptr1, int64_t xnumel, int64_t r0_numel);\n"
    )
    with pytest.raises(CudaBuildError, match="no host function"):
        launch_prototype(f"{CUDA_MARKER}\n__global__ void k() {{}}\n")


def test_gate_one_reads_a_cuda_candidate_with_the_cpp_rules_and_the_slot_contract() -> None:
    original = ROW_L2_TRITON.read_text()
    honest = check_static(ROW_L2_CU.read_text(), kernel_name=NAME, original_source=original)
    assert honest.passed and honest.details["language"] == "cuda", honest.reason
    other_stream = ROW_L2_CU.read_text().replace(
        "auto stream = at::cuda::getCurrentCUDAStream();", "cudaStream_t stream; cudaStreamCreate(&stream);"
    )
    verdict = check_static(other_stream, kernel_name=NAME, original_source=original)
    assert not verdict.passed and verdict.details["rule"] == "stream", verdict.reason
    wrong_slot = (
        ROW_L2_CU.read_text().replace(", int64_t r0_numel)", ")").replace(", xnumel, r0_numel)", ", xnumel, 65535)")
    )
    verdict = check_static(wrong_slot, kernel_name=NAME, original_source=original)
    assert not verdict.passed and verdict.details["rule"] == "signature", verdict.reason


class FakeExtensions:
    """Stands in for torch.utils.cpp_extension.load_inline: records each build, returns a module."""

    def __init__(self, fail: str | None = None) -> None:
        self.builds: list[dict] = []
        self.calls: list[tuple] = []
        self.fail = fail

    def load_inline(self, **kw):
        self.builds.append(kw)
        if self.fail:
            raise RuntimeError(f"Error building extension 'x':\n[1/2] nvcc ...\n{self.fail}\nninja: build stopped")
        return types.SimpleNamespace(launch=lambda *args: self.calls.append(args))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeExtensions:
    ext = FakeExtensions()
    fake_nvcc(monkeypatch, tmp_path, ext.load_inline)
    return ext


def test_a_source_builds_once_in_a_folder_named_by_its_hash_and_launches_like_triton(fake, tmp_path) -> None:
    source = ROW_L2_CU.read_text()
    first = build_kernel(source, NAME)  # through the swap layer's one entry point
    again = build_cuda_kernel(source, NAME)
    assert len(fake.builds) == 1, "the same source is built once per process"
    build = fake.builds[0]
    key = cuda_kernel.source_key(source)
    assert build["build_directory"] == str(tmp_path / "builds" / key) and Path(build["build_directory"]).is_dir()
    assert build["name"] == f"kopt_cuda_{key}" and build["functions"] == ["launch"]
    assert build["cuda_sources"] == source and "void launch(" in build["cpp_sources"]
    assert "--use_fast_math" not in build["extra_cuda_cflags"]
    first.run("x", "y", 4, 5, stream=123)  # the wrapper's call: the stream is the current one, not an argument
    assert fake.calls == [("x", "y", 4, 5)] and again.key == first.key == key
    build_cuda_kernel(source.replace("132", "264"), NAME)
    assert len(fake.builds) == 2  # another source, another build


def test_a_compile_error_reaches_the_repairer_as_nvcc_s_first_error(monkeypatch, fake) -> None:
    fake.fail = 'kernel.cu(12): error: identifier "vv" is undefined'
    with pytest.raises(SwapError, match=r'does not compile: kernel.cu\(12\): error: identifier "vv" is undefined'):
        build_kernel(ROW_L2_CU.read_text(), NAME)


def test_a_machine_that_cannot_build_cuda_says_what_to_install_before_any_build(monkeypatch, tmp_path) -> None:
    """PyTorch from pip on a GPU machine often comes without the CUDA toolkit: each of nvcc and ninja missing
    is one line with its fix, and a build there stops at it (the Repairer gets no compiler error to chase)."""
    from torch.utils import cpp_extension

    from kernelopt.capture import cuda_toolchain

    original = cuda_toolchain.missing

    def asked() -> str | None:
        original.cache_clear()
        cuda_toolchain.nvcc_missing.cache_clear()
        return original()

    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    assert "PyTorch finds no CUDA toolkit" in (asked() or "") and "set CUDA_HOME" in (asked() or "")
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(home))
    assert asked() == f"no nvcc at {home}/bin/nvcc (PyTorch's CUDA_HOME is {home}): install the CUDA toolkit there or set CUDA_HOME"
    (home / "bin" / "nvcc").write_text("#!/bin/sh\n")
    monkeypatch.setattr(cuda_toolchain.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "ninja", None)  # the wheel is not installed either
    assert asked() == "no ninja (PyTorch's extensions build with it): pip install ninja"
    monkeypatch.setitem(sys.modules, "ninja", types.SimpleNamespace(BIN_DIR=str(tmp_path / "wheel")))
    assert asked() is None  # the wheel's binary, put on PATH for the build
    monkeypatch.setenv("PATH", "/usr/bin")
    cuda_toolchain.ensure_ninja()
    assert os.environ["PATH"].split(os.pathsep)[0] == str(tmp_path / "wheel")

    monkeypatch.setattr(cuda_kernel, "_BUILT", {})
    monkeypatch.setattr(cuda_toolchain, "missing", lambda: "no ninja (PyTorch's extensions build with it): pip install ninja")
    with pytest.raises(CudaBuildError, match=rf"this machine cannot build CUDA C\+\+ \({NAME}\): no ninja .*pip install ninja"):
        build_cuda_kernel(ROW_L2_CU.read_text(), NAME)
    original.cache_clear()  # what this machine really has, asked again by the next test


def test_kernelopt_verify_takes_a_cuda_file_and_refuses_a_cheat_before_any_gpu(tmp_path, monkeypatch) -> None:
    from kernelopt.api import verify as api_verify

    problem = EXAMPLES / "level1/10_row_l2_normalize.py"
    cheat = tmp_path / "other_stream.cu"
    cheat.write_text(
        ROW_L2_CU.read_text().replace(
            "auto stream = at::cuda::getCurrentCUDAStream();", "cudaStream_t stream; cudaStreamCreate(&stream);"
        )
    )
    report = api_verify.verify(problem, NAME, cheat)  # no GPU here: gate 1 decides first
    assert not report.passed and report.verdicts[0].gate == "static" and "cudaStreamCreate" in report.verdicts[0].reason
    seen = {}

    def judge(request, *args, **kwargs):
        seen["request"] = request
        raise RuntimeError("stop here")

    monkeypatch.setattr(api_verify, "verify_candidate", judge)
    monkeypatch.setattr(api_verify.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(api_verify, "device_label", lambda: "test GPU")
    monkeypatch.setattr(api_verify, "peak_bandwidth", lambda store: 4000.0)
    with pytest.raises(RuntimeError, match="stop here"):
        api_verify.verify(problem, NAME, ROW_L2_CU, train=True)
    assert seen["request"].candidate_source == ROW_L2_CU.read_text() and seen["request"].train


def test_a_build_for_an_architecture_names_it_to_nvcc_whatever_the_arch_list_says(fake, monkeypatch) -> None:
    """kernelopt's own ops (thread-block clusters: sm_90) build for the GPU they run on: a
    TORCH_CUDA_ARCH_LIST without it would build a library that cannot launch there."""
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    source = ROW_L2_CU.read_text()
    built = build_cuda_kernel(source, NAME, arch=(9, 0))
    (build,) = fake.builds
    assert "-gencode=arch=compute_90,code=sm_90" in build["extra_cuda_cflags"]
    plain = build_cuda_kernel(source, NAME)  # another build: the folder's key holds the architecture
    assert len(fake.builds) == 2 and plain.key != built.key == Path(build["build_directory"]).name
    assert not any(flag.startswith("-gencode") for flag in fake.builds[1]["extra_cuda_cflags"])


def test_the_row_softmax_op_builds_each_dtype_pair_for_its_device_s_architecture(monkeypatch) -> None:
    import torch

    from kernelopt.capture.rewrites import cuda_library, row_softmax_kernel

    asked: list[tuple] = []

    def build(source: str, name: str, arch: tuple[int, int]) -> object:
        asked.append((name, arch, "launch_vec<__nv_bfloat16, float, " in source))
        entry = types.SimpleNamespace
        return entry(kopt_row_softmax=entry(), kopt_row_softmax_bulk=entry(), kopt_error_string=entry())

    monkeypatch.setattr(cuda_library, "build_library", build)
    row_softmax_kernel.launcher.cache_clear()
    try:
        row_softmax_kernel.launcher(torch.bfloat16, torch.float32, (9, 0))
        row_softmax_kernel.launcher(torch.bfloat16, torch.float32, (9, 0))  # kept
        row_softmax_kernel.launcher(torch.bfloat16, torch.float32, (10, 0))
    finally:
        row_softmax_kernel.launcher.cache_clear()
    assert asked == [("kernelopt.row_softmax", (9, 0), True), ("kernelopt.row_softmax", (10, 0), True)]
