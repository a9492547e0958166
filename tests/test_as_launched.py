"""The original kernel gate 4 times in a worker is the captured one, at the launch config the captured
model ran it with (``kernelopt.capture.kernel_source.as_launched``): rebuilt from its source alone, an
autotuned kernel tunes again in the worker and may settle elsewhere. Real captures (H200 fixtures)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

from kernelopt.capture import parse_output_code
from kernelopt.capture.kernel_source import as_launched
from kernelopt.verify import check_static

CAPTURES = FIXTURES / "inductor"


def captured(stem: str) -> list[tuple[object, dict | None]]:
    """Each Triton kernel of a capture with the config its first recorded launch ran."""
    code = parse_output_code((CAPTURES / f"{stem}.graph0.py").read_text())
    launches = json.loads((CAPTURES / f"{stem}.launches.json").read_text())["launches"]
    configs = {}
    for launch in launches:
        configs.setdefault(launch["name"], launch.get("config"))
    return [(kernel, configs.get(kernel.name)) for kernel in code.kernels.values()]


@pytest.mark.parametrize("stem", ["12_softmax_wide", "15_rmsnorm", "03_transformer_block"])
def test_an_autotuned_kernel_is_pinned_to_the_config_it_ran_and_passes_gate_1(stem: str) -> None:
    kernels = captured(stem)
    assert any(config for _, config in kernels)  # the capture recorded what its kernels ran
    for kernel, config in kernels:
        pinned = as_launched(kernel.source, kernel.name, config)
        if config:
            assert f"triton_heuristics.fixed_config(config={dict(config)!r}" in pinned
            body = kernel.source[kernel.source.index("@triton.jit") :]
            assert pinned.endswith(body)  # the kernel itself byte for byte: only the decorator moves
            verdict = check_static(pinned, kernel_name=kernel.name, original_source=kernel.source)
            assert verdict.passed, verdict.reason  # what a pinned candidate would be: the same contract
        else:
            assert pinned == kernel.source


def test_no_config_a_fixed_one_or_no_inductor_decorator_is_launched_as_written() -> None:
    kernel, config = captured("12_softmax_wide")[0]
    assert config
    assert as_launched(kernel.source, kernel.name, None) == kernel.source
    pinned = as_launched(kernel.source, kernel.name, config)
    assert as_launched(pinned, kernel.name, {"XBLOCK": 2, "num_warps": 8}) == pinned  # already fixed: kept
    plain = "import triton\n@triton.jit\ndef k(x):\n    pass\n"
    assert as_launched(plain, "k", config) == plain
