"""Gate 2's runner on the CPU: kernels stood in by Python functions, launched where the GPU would run them."""

from __future__ import annotations

import pytest
import torch

from kernelopt.capture.output_code import triton_kernel_def
from kernelopt.verify import subkernel

SOURCE = """
@triton_heuristics.pointwise(size_hints={'x': 64}, filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*i64', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_sign_0', 'mutated_arg_names': []})
@triton.jit
def triton_poi_sign_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tmp0 = tl.load(in_ptr0 + (x0), None)
    tl.store(out_ptr0 + (x0), (tmp0 > 0).to(tl.int64), None)
"""
LOWEST = torch.iinfo(torch.int64).min


def original(args) -> None:
    x, out, _ = args
    out.copy_((x > 0).long())
    out[0] = LOWEST  # a legitimate value that equals the first sentinel


def skips_first(args) -> None:
    x, out, _ = args
    out[1:].copy_((x[1:] > 0).long())  # never writes element 0


@pytest.fixture(autouse=True)
def cpu_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subkernel, "launch", lambda kernel, args: kernel(args))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)


def test_an_element_left_unwritten_is_caught_even_where_the_original_writes_the_sentinel() -> None:
    kernel = triton_kernel_def("triton_poi_sign_0", SOURCE)
    snapshot = [torch.randn(64), torch.empty(64, dtype=torch.int64), 64]
    single = subkernel.run_case(kernel, original, skips_first, "snapshot", snapshot)
    assert single.passed  # with one sentinel the skipped element is invisible ...
    verdict = subkernel.run_subkernel_gate(kernel, original, skips_first, [snapshot], seeds=(1,))
    assert not verdict.passed  # ... alternating sentinels across cases expose it
    assert "out_ptr0" in verdict.reason
    honest = subkernel.run_subkernel_gate(kernel, original, original, [snapshot], seeds=(1, 2))
    assert honest.passed and honest.details["n_cases"] == 9


def test_the_search_runs_the_snapshot_and_one_random_case_the_final_check_all() -> None:
    from kernelopt.errors import KerneloptError
    from kernelopt.evaluate.session import GateSettings, final_settings, search_settings

    kernel = triton_kernel_def("triton_poi_sign_0", SOURCE)
    snapshot = [torch.randn(64), torch.empty(64, dtype=torch.int64), 64]
    search = search_settings()
    light = subkernel.run_subkernel_gate(kernel, original, skips_first, [snapshot], search.kernel_seeds,
                                         search.kernel_distributions)
    assert [c["case"] for c in light.details["cases"]] == ["snapshot", "seed 1, distribution neg"]
    assert not light.passed  # two cases still alternate the sentinels
    full = final_settings(search)
    honest = subkernel.run_subkernel_gate(kernel, original, original, [snapshot], full.kernel_seeds,
                                          full.kernel_distributions)
    assert honest.passed and honest.details["n_cases"] == 1 + 3 * 4  # every seed x every distribution
    with pytest.raises(KerneloptError, match="unknown input distribution"):
        GateSettings(kernel_distributions=("uniform",))


def writes_past_the_end(args) -> None:
    x, out, _ = args
    out.copy_((x > 0).long())
    torch.as_strided(out, (out.numel() + 1,), (1,), out.storage_offset())[-1] = 7  # one element past the view


def test_a_write_outside_the_buffer_is_caught_by_the_guard_regions() -> None:
    kernel = triton_kernel_def("triton_poi_sign_0", SOURCE)
    snapshot = [torch.randn(64), torch.empty(64, dtype=torch.int64), 64]
    honest = lambda args: args[1].copy_((args[0] > 0).long())
    assert subkernel.run_case(kernel, honest, honest, "snapshot", snapshot).passed
    verdict = subkernel.run_case(kernel, honest, writes_past_the_end, "snapshot", snapshot)
    assert not verdict.passed and verdict.details["rule"] == "guard_region"
    assert "out_ptr0: the candidate wrote outside the buffer" in verdict.reason
