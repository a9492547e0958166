"""Parsing real Inductor wrappers recorded on an H200 (torch 2.11, Triton 3.6)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

from kernelopt.capture import Launch, parse_output_code
from kernelopt.capture.output_code import kernel_identity

CAPTURES = FIXTURES / "inductor"
STEMS = sorted(p.name.removesuffix(".launches.json") for p in CAPTURES.glob("*.launches.json"))


def load(stem: str) -> tuple[str, list[Launch]]:
    source = (CAPTURES / f"{stem}.graph0.py").read_text()
    data = json.loads((CAPTURES / f"{stem}.launches.json").read_text())
    return source, [Launch.from_dict(d) for d in data["launches"]]


def test_fixture_set_is_complete() -> None:
    assert {"03_gemm_bias_gelu", "12_softmax_wide", "15_rmsnorm", "07_conv2d_bn_relu", "03_transformer_block"} <= set(STEMS)


@pytest.mark.parametrize("stem", STEMS)
def test_static_launch_sites_match_recorded_launches(stem: str) -> None:
    """The classification read from the text agrees with what actually launched, in order."""
    source, launches = load(stem)
    code = parse_output_code(source)
    assert [(s.kind, s.name) for s in code.launch_sites] == [(ln.kind, ln.name) for ln in launches]


@pytest.mark.parametrize("stem", STEMS)
def test_kernel_identity_and_signature(stem: str) -> None:
    source, launches = load(stem)
    code = parse_output_code(source)
    by_name = {k.name: k for k in code.kernels.values()}
    for launch in launches:
        if launch.kind != "triton":
            continue
        kernel = by_name[launch.name]
        assert kernel.language == "triton"
        assert kernel.sha256 == kernel_identity(kernel.source) and kernel.identified_by(launch.kernel_sha256 or "")
        assert f"def {kernel.name}(" in kernel.source
        # Launch args line up with the non-constexpr parameters, named and roled by them.
        assert [a.name for a in launch.args] == [p.name for p in kernel.runtime_params]
        for arg in launch.args:
            if arg.name.startswith("in_out_ptr"):
                assert arg.role == "readwrite"
            elif arg.name.startswith("out_ptr"):
                assert arg.role == "write"
            elif arg.name.startswith("in_ptr"):
                assert arg.role in ("read", "readwrite")  # readwrite if Inductor lists it as mutated
            else:
                assert arg.role == "scalar"


def test_gemm_epilogue_capture() -> None:
    source, _ = load("03_gemm_bias_gelu")
    code = parse_output_code(source)
    assert code.kinds() == ["vendor", "triton"]
    assert code.launch_sites[0].name == "extern_kernels.mm"
    (kernel,) = code.kernels.values()
    assert kernel.heuristic == "pointwise"
    assert kernel.grid_type == "Grid1D"
    assert [p.name for p in kernel.params if p.constexpr] == ["XBLOCK"]


def test_reduction_and_transformer_capture() -> None:
    softmax = parse_output_code(load("12_softmax_wide")[0])
    (kernel,) = softmax.kernels.values()
    assert kernel.heuristic in ("reduction", "persistent_reduction")
    assert [p.name for p in kernel.runtime_params][-2:] == ["xnumel", "r0_numel"]
    block = parse_output_code(load("03_transformer_block")[0])
    kinds = block.kinds()
    assert kinds.count("vendor") == 6 and kinds.count("triton") == 9
    assert {s.name for s in block.launch_sites if s.kind == "vendor"} == {"extern_kernels.mm", "extern_kernels.bmm"}


def test_in_place_kernel_marks_mutated_args() -> None:
    """A kernel that writes into its input (in_out_ptr) reports it as read and written."""
    _, launches = load("03_transformer_block")
    roles = {(ln.name, a.name): a.role for ln in launches if ln.kind == "triton" for a in ln.args}
    assert any(name.startswith("in_out_ptr") and role == "readwrite" for (_, name), role in roles.items())


def test_cpu_wrapper_parses_cpp_kernels() -> None:
    source = '''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r\'\'\'
extern "C"  void  kernel(const float* in_ptr0,
                       float* out_ptr0)
{ }
\'\'\')

async_compile.wait(globals())
del async_compile

def call(args):
    arg0_1, = args
    buf0 = empty_strided_cpu((4, 4), (4, 1), torch.float32)
    extern_kernels.mm(arg0_1, arg0_1, out=buf0)
    cpp_fused_relu_0(buf0, buf1)
    buf2 = torch.ops.aten.sort.default(buf1)
    return (buf1, )
'''
    code = parse_output_code(source)
    assert [(s.kind, s.name) for s in code.launch_sites] == [
        ("vendor", "extern_kernels.mm"),
        ("cpp", "cpp_fused_relu_0"),
        ("aten", "aten.sort.default"),
    ]
    assert [p.name for p in code.kernels["cpp_fused_relu_0"].params] == ["in_ptr0", "out_ptr0"]
