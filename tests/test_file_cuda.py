"""CUDA C++ in a Triton kernel file's kernel slot (issue 16, item 3): the slot binding, gate 1 and its
cheats, the ``.cu`` delivery and ``load_kernel``, ``kernelopt verify``'s one-line errors. No nvcc build
runs here: ``load_inline`` is replaced by a stand-in whose ``launch`` records its arguments and computes
the softmax with PyTorch (tests/test_gpu_kernel_file.py builds and judges the real source on the H200)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest
import torch
from conftest import ROOT, fake_nvcc, forge_record
from typer.testing import CliRunner

import kernelopt
from kernelopt.capture.cuda_slot import CudaSlot, bind_cuda_slot
from kernelopt.cli.main import app
from kernelopt.errors import KerneloptError
from kernelopt.pipeline.optimize_file import FileReport, deliver
from kernelopt.pipeline.records import Winner
from kernelopt.verify.static_file_cuda import launched_kernels, resolve_slot
from kernelopt.verify.static_kernel_file import check_static_file

pytest.importorskip("triton")
KERNELS = ROOT / "examples" / "kernels"
SOFTMAX = KERNELS / "softmax_naive.py"
CU = KERNELS / "softmax_naive.cu"
RUNTIME = ("x_ptr", "y_ptr", "n_cols", "x_stride", "y_stride")
STREAM = "auto stream = at::cuda::getCurrentCUDAStream();"


def _import(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Recorder:
    """A built candidate's stand-in: records each call's arguments; writes a softmax into the output."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def run(self, *args, stream=None) -> None:
        self.calls.append(args)
        if len(args) == 5 and isinstance(args[1], torch.Tensor):
            args[1].copy_(torch.softmax(args[0], dim=-1))


class FakeExtensions:
    """Stands in for ``torch.utils.cpp_extension.load_inline``; ``fail`` makes the build fail like nvcc."""

    def __init__(self) -> None:
        self.builds: list[dict] = []
        self.recorder = Recorder()
        self.fail: str | None = None

    def load_inline(self, **kw):
        self.builds.append(kw)
        if self.fail:
            raise RuntimeError(f"Error building extension 'x':\n[1/2] nvcc ...\n{self.fail}\nninja: build stopped")
        return types.SimpleNamespace(launch=lambda *args: self.recorder.run(*args))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeExtensions:
    ext = FakeExtensions()
    fake_nvcc(monkeypatch, tmp_path, ext.load_inline)
    return ext


# -- the slot ---------------------------------------------------------------------------------------


def test_the_rebound_kernel_receives_exactly_the_runtime_arguments_of_the_file_s_own_launch() -> None:
    module = _import(SOFTMAX, "kopt_test_softmax_slot")
    recorder = Recorder()
    slot = bind_cuda_slot(module, "softmax_kernel", recorder, RUNTIME)
    assert isinstance(module.softmax_kernel, CudaSlot) and module.softmax_kernel is slot
    x = torch.randn(6, 50)[:, :40]  # a view: the strides are the file's, not the row length
    y = module.launch(x)  # launch is the file's own, byte for byte
    ((got_x, got_y, n_cols, x_stride, y_stride),) = recorder.calls  # BLOCK and num_warps were dropped
    assert got_x is x and got_y is y and (n_cols, x_stride, y_stride) == (40, 50, 40)
    assert all(type(v) is int for v in (n_cols, x_stride, y_stride))  # sizes stay Python scalars
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))


def test_an_autotuned_kernel_s_slot_gets_its_runtime_scalars_and_no_config_values() -> None:
    module = _import(KERNELS / "scale_add_autotuned.py", "kopt_test_scale_add_slot")
    recorder = Recorder()
    bind_cuda_slot(module, "scale_add_kernel", recorder, ("x_ptr", "y_ptr", "out_ptr", "scale", "n"))
    x, y = torch.randn(10), torch.randn(10)
    out = module.launch(x, y)
    ((gx, gy, gout, scale, n),) = recorder.calls
    assert gx is x and gy is y and gout is out and (scale, n) == (0.5, 10)


def test_a_launch_that_misses_a_runtime_argument_is_one_clear_error() -> None:
    slot = CudaSlot("k", Recorder(), ("x_ptr", "n"), __import__("inspect").signature(lambda x_ptr, n, BLOCK=4: None))
    with pytest.raises(TypeError, match=r"k\[grid\]\(\.\.\.\) passes no value for runtime parameter n"):
        slot[(1,)](torch.ones(1), BLOCK=8)


def test_the_candidate_s_process_builds_the_source_and_runs_it_inside_the_original(fake, monkeypatch, tmp_path) -> None:
    from kernelopt.evaluate import runner_file

    monkeypatch.chdir(tmp_path)
    runner_file.start("cpu", "launch", "softmax_kernel", RUNTIME)
    assert runner_file.load(SOFTMAX.read_text(), original=True)["error"] is None
    reply = runner_file.load(CU.read_text())
    assert reply["error"] is None and len(fake.builds) == 1 and fake.builds[0]["cuda_sources"] == CU.read_text()
    module = runner_file._state().modules[reply["digest"]]
    x = torch.randn(6, 50)
    torch.testing.assert_close(module.launch(x), torch.softmax(x, dim=-1))
    assert len(fake.recorder.calls) == 1
    original = runner_file._state().modules[runner_file.ORIGINAL]
    assert not isinstance(original.softmax_kernel, CudaSlot)  # the original's own module is left alone
    fake.fail = 'kernel.cu(40): error: identifier "vv" is undefined'
    broken = runner_file.load(CU.read_text().replace("acc.max = v;", "acc.max = vv;"))
    assert broken["error"] == 'candidate for softmax_kernel does not compile: kernel.cu(40): error: identifier "vv" is undefined'


# -- gate 1 -----------------------------------------------------------------------------------------


def _gate1(cu: str, kernel: str | None = None, python: str | None = None, original: str | None = None):
    return check_static_file(
        "triton", cu, original_source=original or SOFTMAX.read_text(), kernel=kernel, python_source=python
    )


def test_the_hand_written_softmax_passes_gate_one_against_its_file() -> None:
    verdict = _gate1(CU.read_text())
    assert verdict.passed and verdict.details["kernel"] == "softmax_kernel", verdict.reason
    assert verdict.details["runtime"] == list(RUNTIME) and verdict.details["language"] == "cuda"
    assert launched_kernels(SOFTMAX.read_text()) == ["softmax_kernel"]


@pytest.mark.parametrize(
    ("cheat", "rule", "shown"),
    [
        (lambda s: s.replace(STREAM, "cudaStream_t stream; cudaStreamCreate(&stream);"), "stream", "cudaStreamCreate"),
        (
            lambda s: s.replace("  MaxSum acc{-INFINITY, 0.0f};", "  if (blockIdx.x % 2 == 1) {\n    return;\n  }\n  MaxSum acc{-INFINITY, 0.0f};"),
            "skip",
            "blockIdx.x % 2 == 1",
        ),
        (
            lambda s: s.replace("  __shared__ MaxSum row_total;", "  __shared__ MaxSum row_total;\n  static float cache[32768];"),
            "state",
            "static",
        ),
        (
            lambda s: s.replace("  float* y = y_ptr.data_ptr<float>();", "  float* y;\n  cudaMalloc(&y, n_cols * 4);"),
            "allocation",
            "cudaMalloc",
        ),
        (lambda s: s.replace("int64_t y_stride) {\n  const int64_t rows", "int64_t y_stride, int64_t rows_) {\n  const int64_t rows"), "signature", "5"),
    ],
    ids=["other-stream", "early-return-on-blockIdx", "static-buffer", "host-allocation", "extra-parameter"],
)
def test_gate_one_refuses_cpp_cheats_in_a_file_s_slot(cheat, rule: str, shown: str) -> None:
    source = cheat(CU.read_text())
    assert source != CU.read_text()
    verdict = _gate1(source)
    assert not verdict.passed and verdict.details["rule"] == rule and shown in verdict.reason, verdict.reason


def test_gate_one_refuses_a_python_part_that_is_not_the_original_and_a_slot_launch_does_not_launch() -> None:
    other = SOFTMAX.read_text().replace("num_warps=4", "num_warps=8")
    verdict = _gate1(CU.read_text(), python=other)
    assert not verdict.passed and verdict.details["rule"] == "python", verdict.reason
    assert _gate1(CU.read_text(), python=SOFTMAX.read_text()).passed
    verdict = _gate1(CU.read_text(), kernel="reference")
    assert not verdict.passed and verdict.details["rule"] == "slot" and "name one of: softmax_kernel" in verdict.reason


def test_a_file_that_launches_two_kernels_needs_the_slot_named() -> None:
    two = SOFTMAX.read_text().replace(
        "\n\ndef launch(x):", "\n\n@triton.jit\ndef other_kernel(a_ptr):\n    pass\n\n\ndef launch(x):"
    ).replace("    return y\n", "    other_kernel[(1,)](y)\n    return y\n", 1)
    assert launched_kernels(two) == ["softmax_kernel", "other_kernel"]
    with pytest.raises(ValueError, match="launches 2 kernels .*with --kernel NAME"):
        resolve_slot(two, None)
    assert resolve_slot(two, "other_kernel") == "other_kernel"


def test_a_cuda_candidate_for_a_helion_file_is_refused_by_gate_one() -> None:
    helion = (KERNELS / "helion_rms_scale.py").read_text()
    verdict = check_static_file("helion", CU.read_text(), original_source=helion)
    assert not verdict.passed and "Helion file's candidates are helion.Config choices" in verdict.reason


# -- gate 1: each tensor read as its dtype ----------------------------------------------------------

F32 = {"x_ptr": "float32", "y_ptr": "float32"}
BF16 = {"x_ptr": "bfloat16", "y_ptr": "bfloat16"}
X_READ = "  const float* x = x_ptr.data_ptr<float>();"
BF16_CU = (
    CU.read_text()
    .replace(X_READ, "  const float* x = reinterpret_cast<const float*>(x_ptr.data_ptr<at::BFloat16>());")
    .replace("  float* y = y_ptr.data_ptr<float>();", "  float* y = reinterpret_cast<float*>(y_ptr.data_ptr<at::BFloat16>());")
)  # typed reads of the right dtype, whatever the pointers are cast to after (the kernel is still fp32: gate 2's)


def _typed(cu: str, dtypes: dict[str, str]):
    return check_static_file("triton", cu, original_source=SOFTMAX.read_text(), dtypes=dtypes)


def test_each_tensor_s_typed_read_is_checked_against_the_dtype_the_file_passes() -> None:
    assert _typed(CU.read_text(), F32).passed
    verdict = _typed(CU.read_text(), BF16)
    assert not verdict.passed and verdict.details["rule"] == "dtype"
    line = next(i for i, text in enumerate(CU.read_text().splitlines(), 1) if "x_ptr.data_ptr<float>()" in text)
    assert verdict.reason.startswith(
        f"line {line}: x_ptr.data_ptr<float>() reads the bfloat16 tensor x_ptr as float*; "
        "read it as x_ptr.data_ptr<at::BFloat16>() (at::BFloat16 or __nv_bfloat16)"
    ), verdict.reason
    assert "and 1 more finding" in verdict.reason  # y_ptr's read too
    assert _typed(BF16_CU, BF16).passed and not _typed(BF16_CU, F32).passed
    assert _typed(CU.read_text(), {}).passed  # no dtypes known (gate 1 before the file ran): nothing compared


@pytest.mark.parametrize(
    ("read", "shown"),
    [
        ("  const float* x = (const float*) x_ptr.data_ptr();", "reads the bfloat16 tensor x_ptr as float*"),
        ("  const float* x = reinterpret_cast<const float*>(x_ptr.data_ptr());", "tensor x_ptr as float*"),
        ("  const float* x = static_cast<const float*>(x_ptr.const_data_ptr());", "tensor x_ptr as float*"),
        ("  void* raw = x_ptr.data_ptr();\n  const float* x = static_cast<const float*>(raw);", "as void*"),
        ("  using scalar_t = float;\n  const float* x = x_ptr.data_ptr<scalar_t>();", "tensor x_ptr as float*"),
        ("  const float* x = (const float*) x_ptr.data_ptr<scalar_t>();", "a type gate 1 does not know"),
        ("  const float* x = reinterpret_cast<const float*>(x_ptr.data_ptr<uint16_t>());", "as uint16_t*"),
        ("  const float* x = read_x(x_ptr);", "tensor x_ptr is passed on whole"),
    ],
    ids=["c-cast", "reinterpret-cast", "static-cast-const", "void-pointer", "alias", "template", "same-size-int", "whole"],
)
def test_gate_one_refuses_a_bfloat16_tensor_read_as_float_however_it_is_spelled(read: str, shown: str) -> None:
    cu = BF16_CU.replace(
        "  const float* x = reinterpret_cast<const float*>(x_ptr.data_ptr<at::BFloat16>());", read
    )
    verdict = _typed(cu, BF16)
    assert not verdict.passed and verdict.details["rule"] == "dtype" and shown in verdict.reason, verdict.reason
    assert "\n" not in verdict.reason


@pytest.mark.parametrize(
    "read",
    [
        "  const float* x = (const float*) x_ptr.data_ptr();",
        "  const float4* x4 = reinterpret_cast<const float4*>(x_ptr.data_ptr());\n  const float* x = x_ptr.data_ptr<float>();",
        "  using elem = float;\n  typedef elem value_t;\n  const float* x = x_ptr.const_data_ptr<const value_t>();",
        "  TORCH_CHECK(reinterpret_cast<uintptr_t>(x_ptr.data_ptr()) % 4 == 0);\n" + X_READ,
    ],
    ids=["c-cast", "vector-type", "aliases", "address-as-a-number"],
)
def test_gate_one_passes_every_honest_spelling_of_a_float_read(read: str) -> None:
    verdict = _typed(CU.read_text().replace(X_READ, read), F32)
    assert verdict.passed, verdict.reason


def test_the_judge_reads_the_dtypes_from_the_file_s_own_launch_and_refuses_a_float_read_of_bfloat16(
    tmp_path: Path,
) -> None:
    from kernelopt.evaluate.file_session import FileSession, FileSpec
    from kernelopt.evaluate.gate_settings import GateSettings

    path = tmp_path / "softmax_bf16.py"
    path.write_text(
        SOFTMAX.read_text()
        .replace("ROWS = 4096\nCOLS = 32768", "ROWS = 6\nCOLS = 50")
        .replace("torch.randn(ROWS, COLS)", "torch.randn(ROWS, COLS, dtype=torch.bfloat16)")
    )
    session = FileSession(FileSpec(str(path), {}, 0, "cpu"))
    try:
        assert session.slot_dtypes() == BF16  # the scalars (n_cols, strides) have none
        result = session.evaluate(CU.read_text(), GateSettings(kernel_seeds=(0,), model_seeds=(0,), trials=2))
        (static,) = result["verdicts"]
        assert not static["passed"] and static["details"]["rule"] == "dtype"
        assert "x_ptr.data_ptr<float>() reads the bfloat16 tensor x_ptr as float*" in static["reason"]
        assert session.static(BF16_CU).passed  # nothing compiled: gate 1 alone
    finally:
        session.close()


# -- delivery ---------------------------------------------------------------------------------------


@pytest.fixture
def delivered(tmp_path: Path) -> tuple[Path, Path]:
    """softmax_naive.cu delivered for a copy of the file, as a run that verified it would."""
    original = tmp_path / "softmax_naive.py"
    original.write_text(SOFTMAX.read_text())
    report = FileReport("softmax_naive", "triton", 1, "cpu", 10.0, None, speedup=1.4, speedup_iqr=(1.3, 1.5))
    report.best, report.kernel = Winner("verify", "your file", CU.read_text(), [], node=None), "softmax_kernel"
    written, _record = deliver(original, original.read_text(), report, tmp_path / "out" / "softmax_naive_kopt.cu", {})
    return Path(written), original


def test_a_cuda_winner_is_delivered_as_a_cu_file_with_its_record(delivered) -> None:
    cu, original = delivered
    assert cu.suffix == ".cu" and cu.read_text() == CU.read_text()
    record = json.loads(cu.with_suffix(".json").read_text())
    assert record["language"] == "cuda" and record["kernel"] == "softmax_kernel"
    assert record["delivered"]["sha256"] == hashlib.sha256(cu.read_bytes()).hexdigest()
    assert record["original"] == {"path": str(original.resolve()), "sha256": hashlib.sha256(original.read_bytes()).hexdigest()}


def test_the_default_name_of_a_cuda_delivery_is_stem_kopt_cu(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = FileReport("softmax_naive", "triton", 1, "cpu", 10.0, None, kernel="softmax_kernel")
    report.best = Winner("verify", "your file", CU.read_text(), [])
    written, record = deliver(SOFTMAX, SOFTMAX.read_text(), report, None, {})
    assert (written, record) == ("softmax_naive_kopt.cu", "softmax_naive_kopt.json")


def test_load_kernel_builds_the_cu_and_returns_the_original_module_with_the_slot_bound(fake, delivered) -> None:
    cu, _original = delivered
    module = kernelopt.load_kernel(cu)
    assert isinstance(module.softmax_kernel, CudaSlot) and len(fake.builds) == 1
    x = torch.randn(6, 50)
    torch.testing.assert_close(module.launch(x), torch.softmax(x, dim=-1))
    assert fake.recorder.calls[0][2:] == (50, 50, 50)


def test_load_kernel_refuses_an_edited_cu_a_changed_original_and_a_forged_record(fake, delivered) -> None:
    cu, original = delivered
    good = cu.read_text()
    cu.write_text(good.replace("THREADS = 1024", "THREADS = 512"))
    with pytest.raises(KerneloptError, match="its bytes are not the ones verified"):
        kernelopt.load_kernel(cu)
    forge_record(cu, good.replace(STREAM, "cudaStream_t stream; cudaStreamCreate(&stream);"))
    with pytest.raises(KerneloptError, match="gate 1 refuses it.*cudaStreamCreate"):
        kernelopt.load_kernel(cu)
    forge_record(cu, good)  # the verified source back, its record matching again
    original.write_text(original.read_text().replace("num_warps=4", "num_warps=8"))  # its Python part changed
    with pytest.raises(KerneloptError, match="runs inside its original file.*not there with the digest"):
        kernelopt.load_kernel(cu)
    assert fake.builds == []  # nothing was built for a refused delivery


# -- kernelopt verify -------------------------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "softmax_small.py"
    path.write_text(SOFTMAX.read_text().replace("ROWS = 4096\nCOLS = 32768", "ROWS = 6\nCOLS = 50"))
    return path


def _verify(*args: str):
    return CliRunner().invoke(app, ["verify", *args])


def test_the_cli_names_the_problem_and_the_fix_for_a_bad_cuda_request(small: Path, tmp_path: Path) -> None:
    unmarked = tmp_path / "mine.cu"
    unmarked.write_text(CU.read_text().replace("// kernelopt: cuda\n", ""))
    result = _verify(str(small), "--candidate", str(unmarked))
    assert result.exit_code != 0 and "first line must be `// kernelopt: cuda`; add it" in result.output
    result = _verify(str(small), "--candidate", str(CU), "--kernel", "nope")
    assert result.exit_code != 0 and "--kernel nope: launch() launches no kernel of that name; name one of: softmax_kernel" in result.output
    result = _verify(str(small), "--candidate", str(small), "--kernel", "softmax_kernel")
    assert result.exit_code != 0 and "is a whole kernel file: leave --kernel out" in result.output
    result = _verify(str(KERNELS / "helion_rms_scale.py"), "--candidate", str(CU))
    assert result.exit_code != 0 and "helion kernel file, whose candidates are helion.Config choices" in result.output
    result = _verify(str(small), "--candidate", str(CU), "--export", str(tmp_path / "x_kopt.py"))
    assert result.exit_code != 0 and "a CUDA C++ delivery is a .cu file" in result.output


def test_a_cuda_cheat_is_refused_by_gate_one_before_any_worker(small: Path, tmp_path: Path) -> None:
    from kernelopt.api.verify_file import verify_file
    from kernelopt.store import Store

    cheat = tmp_path / "cheat.cu"
    cheat.write_text(CU.read_text().replace("  float* y = y_ptr.data_ptr<float>();", "  float* y = (float*)malloc(4);"))
    store = Store(tmp_path / "k.db")
    report = verify_file(small, cheat, store, kernel="softmax_kernel", device="cpu")
    assert not report.passed and [v.gate for v in report.verdicts] == ["static"] and report.run_id is None
    assert report.verdicts[0].details["rule"] == "allocation" and store.runs() == []


def test_a_cuda_candidate_that_does_not_build_fails_in_the_worker_with_the_build_time_apart(small: Path, tmp_path: Path) -> None:
    """Through the evaluation worker and the candidate's process: on a machine without a CUDA build of PyTorch
    no build is tried, and what to install is the verdict, in one line."""
    from rich.console import Console

    from kernelopt.api.verify_file import verify_file
    from kernelopt.cli.format import print_verify
    from kernelopt.store import Store

    if torch.cuda.is_available():
        pytest.skip("here the source would build: tests/test_gpu_kernel_file.py judges it")
    store = Store(tmp_path / "k.db")
    report = verify_file(small, CU, store, device="cpu")
    static, built = report.verdicts
    assert static.passed and static.details["kernel"] == "softmax_kernel"
    assert not built.passed and built.gate == "correctness" and built.details["rule"] == "build"
    assert built.reason.startswith("this machine cannot build CUDA C++ (softmax_kernel): PyTorch finds no CUDA toolkit")
    assert "\n" not in built.reason and isinstance(report.raw["build_s"], float) and report.run_id is not None
    console = Console(record=True, width=200)
    print_verify(report, console)
    printed = console.export_text()
    assert "verify softmax_kernel in softmax_small" in printed and "CUDA C++ build" in printed and "REJECTED" in printed
    assert not (tmp_path / "softmax_small_kopt.cu").exists()


def test_memcheck_s_replay_runs_the_original_file_with_its_slot_bound_to_the_cuda_source(fake, tmp_path, capsys) -> None:
    from kernelopt.verify.memcheck import CudaSlotReplay, write_replay
    from kernelopt.verify.memcheck_replay import CUDA_FILE, DONE_MARKER, FILE_PREFIX, SOURCE_FILE, replay

    x = torch.randn(6, 50)
    cuda = CudaSlotReplay(CU.read_text(), "softmax_kernel", RUNTIME)
    directory = write_replay(tmp_path / "replay", SOFTMAX.read_text(), f"{FILE_PREFIX}launch", [x], cuda)
    assert (directory / SOURCE_FILE).read_text() == SOFTMAX.read_text()  # the Python that runs is the original
    assert (directory / CUDA_FILE).read_text() == CU.read_text()
    replay(directory, device="cpu")
    assert DONE_MARKER in capsys.readouterr().out
    (call,) = fake.recorder.calls  # the launch went through the built source, not Triton
    assert torch.equal(call[0], x) and call[2:] == (50, 50, 50) and len(fake.builds) == 1


def test_the_slot_takes_runtime_arguments_by_position_or_by_keyword_around_constexprs() -> None:
    import inspect

    recorder = Recorder()
    slot = CudaSlot("k", recorder, ("x_ptr", "n"), inspect.signature(lambda x_ptr, BLOCK, n, EVEN=1: None))
    x = torch.ones(2)
    slot[(1,)](x, 64, 7, num_warps=4)  # positional, a constexpr between the two (the direct path)
    slot[(1,)](x, 64, n=8)  # the size by keyword (bound by the signature)
    slot[(1,)](x_ptr=x, BLOCK=64, n=9, EVEN=0, num_stages=2)
    assert [(a is x, n) for a, n in recorder.calls] == [(True, 7), (True, 8), (True, 9)]
