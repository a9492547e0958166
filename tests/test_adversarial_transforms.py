"""The adversarial candidates, built from real H200 kernels: which gate each must reach.

Cheats the static gate can see must fail it; the rest must pass it (so a later
gate has to catch them, which the GPU test checks); honest candidates pass it.
"""

from __future__ import annotations

import ast

import pytest
from adversarial import CHEATS, GELU_CHEATS, HONEST
from conftest import FIXTURES

from kernelopt.capture import parse_output_code
from kernelopt.capture.kernel_source import pin_launch_config
from kernelopt.verify import check_static, kernel_signature


def kernel_of(stem: str):
    code = parse_output_code((FIXTURES / "inductor" / f"{stem}.graph0.py").read_text())
    return next(k for k in code.kernels.values() if k.language == "triton")


RMSNORM = kernel_of("15_rmsnorm")
GELU = kernel_of("03_gemm_bias_gelu")


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_reaches_its_gate(name: str) -> None:
    transform, gate = CHEATS[name]
    candidate = transform(RMSNORM.source)
    assert candidate != RMSNORM.source
    verdict = check_static(candidate, kernel_name=RMSNORM.name, original_source=RMSNORM.source)
    assert verdict.passed == (gate != "static"), verdict.reason


@pytest.mark.parametrize("name, rule", [("unmasked_load", "mask"), ("device_clock", "device_clock"),
                                        ("compile_time_python", "kernel_call"), ("approximate_exp", "precision")])
def test_new_static_classes_name_their_rule(name: str, rule: str) -> None:
    transform, _ = CHEATS[name]
    verdict = check_static(transform(RMSNORM.source), kernel_name=RMSNORM.name, original_source=RMSNORM.source)
    assert verdict.details["rule"] == rule, verdict.reason


def test_every_inductor_kernel_passes_against_itself() -> None:
    for fixture in sorted((FIXTURES / "inductor").glob("*.graph0.py")):
        for kernel in parse_output_code(fixture.read_text()).kernels.values():
            if kernel.language == "triton":
                verdict = check_static(kernel.source, kernel_name=kernel.name, original_source=kernel.source)
                assert verdict.passed, (fixture.name, verdict.reason)


def test_gelu_value_shortcut_passes_static() -> None:
    transform, gate = GELU_CHEATS["value_shortcut"]
    candidate = transform(GELU.source)
    assert "libdevice.tanh" not in candidate
    assert check_static(candidate, kernel_name=GELU.name, original_source=GELU.source).passed


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_candidates_pass_static(name: str) -> None:
    candidate = HONEST[name](RMSNORM.source)
    verdict = check_static(candidate, kernel_name=RMSNORM.name, original_source=RMSNORM.source)
    assert verdict.passed, verdict.reason


def test_pin_launch_config_keeps_contract() -> None:
    pinned = pin_launch_config(GELU.source, GELU.name, {"XBLOCK": 512, "num_warps": 8})
    tree = ast.parse(pinned)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == GELU.name)
    dec = fn.decorator_list[0]
    assert ast.unparse(dec.func) == "triton_heuristics.fixed_config"
    config = ast.literal_eval(next(k.value for k in dec.keywords if k.arg == "config"))
    assert config == {"XBLOCK": 512, "num_warps": 8, "num_stages": 1}
    assert kernel_signature(pinned, GELU.name).runtime == kernel_signature(GELU.source, GELU.name).runtime
    body = GELU.source[GELU.source.index(f"def {GELU.name}("):]
    assert pinned.endswith(body)
    assert "'mutated_arg_names': ['in_out_ptr0']" in pinned  # Inductor's metadata carried over verbatim
    with pytest.raises(ValueError, match="no kernel"):
        pin_launch_config(GELU.source, "nope", {})
