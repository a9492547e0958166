"""The group-norm op's C++ host path (kernelopt.capture.rewrites.group_norm_host) as far as a CPU reaches it:
which plans it may repeat, what Python's path hands it, how it is put at the op's CUDA key and why not, and
that its source compiles against this torch's headers (where nvcc is). Its launches are the GPU test's
(tests/test_gpu_group_norm.py)."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
import torch

from kernelopt.capture.cuda_kernel import CudaBuildError
from kernelopt.capture.rewrites import group_norm_host, group_norm_kernel, group_norm_op, row_softmax_op

EPS = 1e-5


class FakeHost:
    """What :class:`group_norm_host.Host` does, recorded: its registration and the plans handed to it."""

    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.registered = False
        self.kept: list[group_norm_kernel.LaunchShape] = []

    def register(self) -> str | None:
        self.registered = self.refuse is None
        return self.refuse

    def unregister(self) -> None:
        self.registered = False

    def keep(self, library, shape) -> bool:
        self.kept.append(shape)
        return True

    def counts(self) -> tuple[int, int, int]:
        return len(self.kept), 0, 0


@pytest.fixture
def host_on_cpu(monkeypatch):
    """The op's CUDA path on CPU tensors as on an sm_90 GPU (as ``planned_on_cpu`` in
    test_cluster_group_norm.py), its launches recorded, with a :class:`FakeHost` at its CUDA key."""
    monkeypatch.setattr(row_softmax_op, "capability", lambda device: (9, 0))
    monkeypatch.setattr(group_norm_op, "l2_and_sms", lambda device: (50 * 2**20, 132))
    monkeypatch.setattr(group_norm_op, "_resident", lambda x, groups, blocks: 14)
    monkeypatch.setattr(group_norm_op, "_PLANS", {})
    library = group_norm_kernel.Library.__new__(group_norm_kernel.Library)
    launches: list[tuple] = []
    library.launch = lambda x, y, params, shape, offset, silu, eps: launches.append((x, params, shape))
    monkeypatch.setattr(group_norm_op, "launcher", lambda dtype, arch: library)
    host = FakeHost()
    monkeypatch.setattr(group_norm_op, "_HOST", host)
    monkeypatch.setattr(group_norm_op, "_HOST_UNUSED", None)
    return host, launches


def _call(x, w, b, groups=4, scale=None, shift=None, offset=0.0, input_bias=None, form=""):
    return group_norm_op.planned(x, w, b, groups, EPS, scale, shift, offset, False, input_bias, 0, form, 0)


def _last_plan() -> group_norm_op.Plan:
    return list(group_norm_op._PLANS.values())[-1]


def test_a_launch_with_nothing_made_by_torch_before_it_is_handed_to_the_host_path(host_on_cpu) -> None:
    """Python's path hands the C++ kernel a plan at each call it makes (the C++ kernel keeps it for the
    signature it asked for, once): a plan whose launch takes the arguments as they are."""
    host, launches = host_on_cpu
    x = torch.randn(2, 8, 16, 16)
    w, b = torch.rand(8) + 0.5, torch.randn(8)
    _call(x, w, b)
    _call(x, w.reshape(1, 8, 1, 1), b.reshape(1, 8, 1, 1))  # Inductor's views of them: no copy, the same data
    scale = torch.randn(2, 16)[:, :8, None, None]  # a linear layer's output read in place, strided
    _call(x, w, b, scale=scale, shift=scale, offset=1.0)
    x16 = torch.randn(2, 16, 16, 16).to(memory_format=torch.channels_last)  # read in place, its bias added
    _call(x16, None, None, input_bias=torch.randn(16))
    assert len(launches) == 4 and host.kept == [launch[2] for launch in launches]
    assert all(plan.host for plan in group_norm_op._PLANS.values())


@pytest.mark.parametrize(
    "case",
    ["copied layout", "input bias added by torch", "parameter cast", "strided weight", "input cloned", "fallback"],
)
def test_a_launch_torch_prepares_stays_pythons_at_every_call(host_on_cpu, case: str) -> None:
    """A copy, a clone, an add or a cast before the launch is torch's, in Python: such a plan is never
    handed to the C++ kernel, so that it cannot launch on arguments Python would have changed first."""
    host, launches = host_on_cpu
    x, w, b = torch.randn(2, 8, 16, 16), torch.rand(8) + 0.5, torch.randn(8)
    args: dict = {}
    if case == "copied layout":
        x = x.to(memory_format=torch.channels_last)  # 2 channels a group: 8 bytes a pixel, copied contiguous
    elif case == "input bias added by torch":
        args = {"input_bias": torch.randn(8)}  # the contiguous kernel adds none
    elif case == "parameter cast":
        x, w = x.to(torch.bfloat16), w.to(torch.bfloat16)  # with a float32 bias: the weight cast at each call
    elif case == "strided weight":
        w = torch.rand(16)[::2]
    elif case == "input cloned":
        x = torch.randn(8 * 256 * 256 + 1)[1:].view(1, 8, 256, 256)  # the reread form, off a 16-byte boundary
        w = b = None
        args = {"groups": 1}
    elif case == "fallback":
        x, w, b = x.double(), w.double(), b.double()  # no build for float64: torch's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the fallback's own warning)
        for _ in range(2):
            _call(x, w, b, **args)
    assert host.kept == [] and not _last_plan().host
    assert len(launches) == (0 if case == "fallback" else 2)


def test_the_first_cuda_call_puts_the_host_path_in_place_and_goes_on_in_python(host_on_cpu, monkeypatch) -> None:
    """The first call's Python path builds and registers the C++ kernel (over Python's, which stays under it)
    and launches itself; calls after it are the C++ kernel's."""
    host, launches = host_on_cpu
    loaded: list[int] = []
    monkeypatch.setattr(group_norm_op, "_HOST", None)
    monkeypatch.setattr(group_norm_host, "load", lambda kept: (loaded.append(kept), host)[1])
    x, w, b = torch.randn(2, 8, 16, 16), torch.rand(8) + 0.5, torch.randn(8)
    _call(x, w, b)
    assert loaded == [group_norm_op.PLANS_KEPT] and host.registered and group_norm_op._HOST is host
    assert len(launches) == 1 and host.kept == []  # nothing asked of it yet: the first call registered it
    assert group_norm_op.host_counts() == (0, 0, 0)
    group_norm_op.drop_host()
    assert not host.registered and group_norm_op._HOST is None and group_norm_op.host_counts() is None
    _call(x, w, b)  # dropped: Python's until put back
    assert len(loaded) == 1 and not host.registered
    assert group_norm_op.use_host() is None and host.registered and len(loaded) == 2


def test_a_host_path_that_does_not_build_is_said_once_and_python_goes_on(host_on_cpu, monkeypatch) -> None:
    """No nvcc, a build that fails or a registration refused: one warning naming why, and every call
    through Python's path, launched as before (nothing asked again at each call)."""
    _, launches = host_on_cpu
    tried: list[int] = []

    def no_build(kept: int):
        tried.append(kept)
        raise CudaBuildError("kernelopt.group_norm_host does not compile: an error")

    monkeypatch.setattr(group_norm_op, "_HOST", None)
    monkeypatch.setattr(group_norm_host, "load", no_build)
    x, w, b = torch.randn(2, 8, 16, 16), torch.rand(8) + 0.5, torch.randn(8)
    with pytest.warns(UserWarning, match=r"each call goes through Python \(.*does not compile: an error\)"):
        _call(x, w, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _call(x, w, b)
    assert len(tried) == 1 and len(launches) == 2 and group_norm_op._HOST is None
    monkeypatch.setattr(group_norm_op, "_HOST_UNUSED", None)
    refusing = FakeHost(refuse="the C++ host path did not register: a kernel is there")
    monkeypatch.setattr(group_norm_host, "load", lambda kept: refusing)
    with pytest.warns(UserWarning, match="did not register: a kernel is there"):
        assert group_norm_op.use_host() == "the C++ host path did not register: a kernel is there"
    assert group_norm_op._HOST is None and not refusing.registered


def test_the_build_is_host_cpp_against_this_torch() -> None:
    """nvcc builds the source as host C++ with torch's ABI, headers and libraries (those torch's own
    extension builder uses), keyed by the source, which names torch's version and the plans kept."""
    from torch.utils import cpp_extension

    flags = group_norm_host.flags()
    includes, lib = group_norm_host.torch_paths()
    assert {str(p) for p in includes} <= set(cpp_extension.include_paths()) and [str(lib)] == cpp_extension.library_paths()
    assert f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}" in flags
    assert {"-lc10", "-lc10_cuda", "-ltorch_cpu"} <= set(flags) and "-shared" in flags
    source = group_norm_host.source(256)
    assert torch.__version__ in source.splitlines()[0] and "constexpr size_t PLANS_KEPT = 256;" in source
    assert "__" + "PLANS_KEPT__" not in source
    assert group_norm_host.library_path(256) != group_norm_host.library_path(128)
    assert group_norm_host.library_path(256).name == "kernelopt_group_norm_host.so"


def test_the_c_kernel_reads_the_ops_arguments_in_its_schemas_order() -> None:
    """The C++ kernel reads the boxed arguments by position: the schema it was written against."""
    schema = torch.ops.kernelopt.group_norm.default._schema
    names = [a.name for a in schema.arguments]
    assert names == [
        "x", "weight", "bias", "groups", "eps", "scale", "shift", "scale_offset", "silu", "input_bias", "clusters",
        "form", "in_flight",
    ]  # fmt: skip
    source = group_norm_host.source(256)
    assert "constexpr size_t ARGS = 13;" in source and "TENSORS[5] = {1, 2, 5, 6, 9}" in source
    assert [names[i] for i in (1, 2, 5, 6, 9)] == ["weight", "bias", "scale", "shift", "input_bias"]
    planned = torch.ops.kernelopt.group_norm_planned.default._schema
    assert str(planned).partition("(")[2] == str(schema).partition("(")[2]  # arguments and returns alike


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on PATH")
def test_the_source_compiles_against_this_torchs_headers(tmp_path: Path) -> None:
    """The C++ source compiles (not linked: a CPU torch has no c10_cuda) with the build's own flags; a CPU
    torch's headers lack the CUDA build's generated macros header, written here as the CUDA build has it."""
    includes, _ = group_norm_host.torch_paths()
    stub = tmp_path / "stub"
    if not (includes[0] / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").exists():
        (stub / "c10" / "cuda" / "impl").mkdir(parents=True)
        (stub / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text("#define C10_CUDA_BUILD_SHARED_LIBS\n")
    flags = [f for f in group_norm_host.flags() if not f.startswith(("-l", "-L", "-rpath")) and f != "-Xlinker"]
    source = tmp_path / "host.cpp"
    source.write_text(group_norm_host.source(256))
    built = subprocess.run(
        ["nvcc", *flags, f"-I{stub}", "-c", str(source), "-o", str(tmp_path / "host.o")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]


def test_a_compile_that_hands_a_group_norm_to_the_op_builds_the_host_path_first(hopper, monkeypatch) -> None:
    """The candidate processes that judge a graph share the compiling process's build folder: the compile
    builds the C++ host path there (on a GPU machine), so that their first call loads it; a build that
    fails does not stop the compile (the first call says why)."""
    from test_cluster_group_norm import _decomposed

    from kernelopt.capture.rewrites.cluster_group_norm import rewrite_for_cluster_group_norm

    built: list[int] = []
    monkeypatch.setattr(group_norm_op, "_HOST", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(group_norm_host, "build", lambda kept: built.append(kept))
    assert rewrite_for_cluster_group_norm(_decomposed((2, 8, 64, 64), 4).graph) == 1
    assert built == [group_norm_op.PLANS_KEPT]

    def fails(kept: int):
        raise CudaBuildError("kernelopt.group_norm_host does not compile: an error")

    monkeypatch.setattr(group_norm_host, "build", fails)
    assert rewrite_for_cluster_group_norm(_decomposed((2, 8, 64, 64), 4).graph) == 1
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a CPU machine: nothing to build for
    monkeypatch.setattr(group_norm_host, "build", lambda kept: pytest.fail("no build without a GPU"))
    assert rewrite_for_cluster_group_norm(_decomposed((2, 8, 64, 64), 4).graph) == 1
