"""Our example models (examples/models/): each loads as a problem and runs at its small sizes on the CPU;
the graph-break one really compiles to more than one graph."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from conftest import ROOT

from kernelopt.problem import load_problem

MODELS = ROOT / "examples" / "models"
NEEDS = {"llama_decoder_bf16": "transformers", "gpt2_bf16": "transformers", "timm_resnet": "timm"}


@pytest.mark.parametrize("path", sorted(MODELS.glob("*.py")), ids=lambda p: p.stem)
def test_each_example_model_loads_and_runs_small(path) -> None:
    needs = NEEDS.get(path.stem)
    if needs and importlib.util.find_spec(needs) is None:
        pytest.skip(f"needs {needs} (pip install -e '.[models]')")
    problem = load_problem(path).small()
    (out,) = problem.check("cpu")
    assert out.isfinite().all() and out.numel() > 0
    if "bf16" in path.stem:
        assert out.dtype == torch.bfloat16


def test_the_graph_break_model_compiles_to_two_graphs() -> None:
    problem = load_problem(MODELS / "graph_break_mlp.py").small()
    model, inputs = problem.build_model(), problem.make_inputs()
    graphs = []

    def count(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=count)(*inputs)
    assert len(graphs) >= 2
