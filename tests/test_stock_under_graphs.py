"""Against a CUDA-graph stock mode, kernelopt's verified kernels are timed under that mode's CUDA graphs,
through the backend, as a user of that mode runs them; against any other mode, as kernelopt.load rebuilds
them. On a CPU, Inductor skips CUDA graphs and no replacement matches: the choice and its wiring are what
is checked here (the timing itself needs the GPU)."""

from __future__ import annotations

import torch
from conftest import EXAMPLES
from test_backend import HONEST, KERNEL

from kernelopt.capture.swap import KernelAddress
from kernelopt.deliver.backend import KerneloptBackend
from kernelopt.deliver.export import Replacement, export_model
from kernelopt.pipeline.stock_modes import CUDA_GRAPH_MODES, optimized_for
from kernelopt.problem import load_problem


def test_under_a_cuda_graph_mode_the_verified_kernels_run_through_the_backend_with_that_mode(tmp_path, monkeypatch) -> None:
    problem = load_problem(EXAMPLES / "level1/12_softmax_wide.py").small()
    path = export_model(tmp_path / "m.kopt.json", problem, [Replacement(KernelAddress(0, KERNEL.name, KERNEL.sha256), HONEST)],
                        {"passed": True})  # fmt: skip
    seen: list[tuple[str | None, dict]] = []
    real = KerneloptBackend.__call__

    def spy(self, gm, inputs, mode=None, options=None):
        seen.append((mode, self.compile_options(mode, options)))
        return real(self, gm, inputs, mode=mode, options=options)

    monkeypatch.setattr(KerneloptBackend, "__call__", spy)
    assert set(CUDA_GRAPH_MODES) == {"reduce-overhead", "max-autotune"}
    inputs = problem.make_inputs(0, "cpu")
    torch._dynamo.reset()
    ours, under = optimized_for(problem, 0, str(path), "reduce-overhead", device="cpu")
    with torch.no_grad():
        torch.testing.assert_close(ours(*inputs), problem.build_model(0, "cpu")(*inputs))
    assert under == "reduce-overhead" and seen and seen[0][0] == "reduce-overhead"
    assert seen[0][1]["triton.cudagraphs"] is True  # the mode's own options reached Inductor
    torch._dynamo.reset()
    seen.clear()
    plain, under = optimized_for(problem, 0, None, "reduce-overhead", device="cpu")  # nothing delivered
    with torch.no_grad():
        plain(*inputs)
    assert under is None and seen == []  # torch.compile's default, not the backend
