"""``torch.compile(model, backend=kernelopt.backend(path))``: Inductor, plus the verified kernels that match."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import EXAMPLES, FIXTURES
from torch import nn

import kernelopt
from kernelopt.capture import parse_output_code
from kernelopt.capture.swap import KernelAddress
from kernelopt.deliver.backend import KerneloptBackend, swap_matching
from kernelopt.deliver.export import Replacement, export_model, seal
from kernelopt.errors import KerneloptError
from kernelopt.problem import load_problem

OUTPUT = parse_output_code((FIXTURES / "inductor" / "12_softmax_wide.graph0.py").read_text())
(VAR, KERNEL) = next(iter(OUTPUT.kernels.items()))
HONEST = KERNEL.source.replace("tl.store(", "tl.store(", 1)  # the same kernel: a replacement the gate accepts


def test_only_a_kernel_with_the_verified_source_is_replaced() -> None:
    namespace = {var: f"inductor's {var}" for var in OUTPUT.kernels}
    built: list[tuple[str, str]] = []

    def build(source: str, name: str) -> str:
        built.append((name, source))
        return f"ours {name}"

    stale = Replacement(KernelAddress(0, KERNEL.name, "0" * 64), HONEST)  # verified against another source
    other = Replacement(KernelAddress(0, "triton_per_other_9", KERNEL.sha256), HONEST)  # another kernel's name
    assert swap_matching(namespace, OUTPUT, [stale, other], build) == []
    assert namespace[VAR] == f"inductor's {VAR}" and not built
    exact = Replacement(KernelAddress(3, KERNEL.name, KERNEL.sha256), HONEST)  # any graph index: source decides
    assert swap_matching(namespace, OUTPUT, [exact], build) == [KERNEL.name]
    assert namespace[VAR] == f"ours {KERNEL.name}" and built == [(KERNEL.name, HONEST)]


def test_a_kernel_verified_in_another_process_is_replaced_there_too() -> None:
    """The process that verified the replacement stamped the kernel with its own Triton backend hash;
    this compile's differs only there, so the kernel is the one verified. A changed body is not."""
    import re

    from kernelopt.capture.output_code import parse_output_code, source_hash

    assert "'backend_hash': '" in KERNEL.source
    text = (FIXTURES / "inductor" / "12_softmax_wide.graph0.py").read_text()
    here = parse_output_code(re.sub(r"'backend_hash': '[0-9A-Fa-f]*'", "'backend_hash': 'ABCDEF'", text))
    (var, kernel) = next(iter(here.kernels.items()))
    assert kernel.source != KERNEL.source
    namespace = {v: f"inductor's {v}" for v in here.kernels}
    verified_there = Replacement(KernelAddress(0, KERNEL.name, KERNEL.sha256), HONEST)
    assert swap_matching(namespace, here, [verified_there], lambda source, name: "ours") == [KERNEL.name]
    legacy = Replacement(KernelAddress(0, KERNEL.name, source_hash(KERNEL.source)), HONEST)  # a full-text address
    assert swap_matching({var: "inductor's"}, here, [legacy], lambda source, name: "ours") == []
    assert swap_matching({VAR: "inductor's"}, OUTPUT, [legacy], lambda source, name: "ours") == [KERNEL.name]


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.lin(x).relu(), dim=-1)


def test_on_a_cpu_the_backend_is_exactly_inductor_and_says_what_went_unused(tmp_path, caplog) -> None:
    torch.manual_seed(0)
    model, x = Small().eval(), torch.randn(4, 16)
    problem = load_problem(EXAMPLES / "level1/12_softmax_wide.py").small()
    path = export_model(tmp_path / "m.kopt.json", problem, [Replacement(KernelAddress(0, KERNEL.name, KERNEL.sha256),
                                                                        HONEST)], {"passed": True})
    tuned = kernelopt.backend(path)
    with torch.no_grad():
        torch._dynamo.reset()
        ours = torch.compile(model, backend=tuned)(x)
        torch._dynamo.reset()
        by_name = torch.compile(model, backend="kernelopt")(x)  # the registered entry point
        torch._dynamo.reset()
        inductor = torch.compile(model)(x)
    torch.testing.assert_close(ours, inductor, rtol=0, atol=0)
    torch.testing.assert_close(by_name, inductor, rtol=0, atol=0)
    assert tuned.report.graphs >= 1 and tuned.report.used == {}  # C++ kernels on a CPU: nothing matches
    line = tuned.say_unused()
    assert line is not None and "\n" not in line and KERNEL.name in line and "1 of 1" in line
    tuned.say_unused()
    assert sum("not used" in r.message for r in caplog.records) == 1  # said once


def test_a_file_whose_replacement_fails_the_static_gate_is_refused(tmp_path) -> None:
    cheat = HONEST.replace("def triton", "import os\nos.system('true')\ndef triton", 1)
    with pytest.raises(KerneloptError, match="fails the static gate"):
        KerneloptBackend([Replacement(KernelAddress(0, KERNEL.name, KERNEL.sha256), cheat)])
    problem = load_problem(EXAMPLES / "level1/12_softmax_wide.py").small()
    path = export_model(tmp_path / "m.kopt.json", problem, [], {"passed": True})
    doc = json.loads(path.read_text())
    doc["triton"] = "0.0.1"
    path.write_text(json.dumps(seal(doc)))
    with pytest.raises(KerneloptError, match="verified with triton 0.0.1"):
        kernelopt.backend(path)


def test_the_users_mode_and_options_reach_inductor_on_top_of_the_exports(tmp_path, monkeypatch) -> None:
    """torch.compile hands a custom backend its mode and options: they used to raise TypeError here."""
    from kernelopt.capture import compat

    problem = load_problem(EXAMPLES / "level1/12_softmax_wide.py").small()
    replacement = Replacement(KernelAddress(0, KERNEL.name, KERNEL.sha256), HONEST)
    path = export_model(tmp_path / "m.kopt.json", problem, [replacement], {"passed": True},
                        options={"coordinate_descent_tuning": True, "max_autotune": False})
    tuned = kernelopt.backend(path)
    assert tuned.compile_options() == {"coordinate_descent_tuning": True, "max_autotune": False}
    assert tuned.compile_options("reduce-overhead") == {"coordinate_descent_tuning": True, "max_autotune": False,
                                                        "triton.cudagraphs": True}
    merged = tuned.compile_options("max-autotune", {"max_autotune": False})
    assert merged["triton.cudagraphs"] is True and merged["max_autotune"] is False  # the user's options last
    with pytest.raises(KerneloptError, match="mode='fast'.*not a mode this torch knows; pass one of default") as bad:
        tuned.compile_options("fast")
    assert "\n" not in str(bad.value)
    seen: list[dict] = []
    real = compat.compile_fx_with_inner_hook

    def spy(gm, inputs, hook, options, rewrites=()):
        seen.append(dict(options))
        return real(gm, inputs, hook, options, rewrites)

    monkeypatch.setattr(compat, "compile_fx_with_inner_hook", spy)
    torch.manual_seed(0)
    model, x = Small().eval(), torch.randn(4, 16)
    with torch.no_grad():
        torch._dynamo.reset()
        got = torch.compile(model, backend=tuned, mode="reduce-overhead")(x)  # CUDA graphs: skipped on a CPU
        torch._dynamo.reset()
        by_name = torch.compile(model, backend="kernelopt", options={"max_autotune": False})(x)
        torch._dynamo.reset()
    torch.testing.assert_close(got, model(x))
    torch.testing.assert_close(by_name, model(x))
    assert seen[0]["triton.cudagraphs"] is True and seen[0]["coordinate_descent_tuning"] is True
    assert seen[-1] == {"max_autotune": False}
