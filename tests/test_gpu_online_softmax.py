"""GPU test of the online-softmax graph option (``kernelopt.capture.rewrites.online_softmax``): log-softmax over
a 50257-wide vocabulary with a temperature, compiled as max-autotune-no-cudagraphs compiles it (the
problem's best stock mode on the H200), regenerated with the rewrite among Inductor's passes: the
online softmax reads each row twice instead of three times, and the candidate goes through the gates;
then logits normalised by their logsumexp (a ``Categorical``'s), and token log-probabilities from bf16
logits, the same way. The speed is printed, not asserted (benchmarks hold speed)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import EXAMPLES

from kernelopt.capture import compat
from kernelopt.capture.rewrites.online_softmax import ONLINE_SOFTMAX_OPTION

pytestmark = pytest.mark.gpu

OPTION = {ONLINE_SOFTMAX_OPTION: True}

LOGSUMEXP_PROBLEM = """
import torch


class Model(torch.nn.Module):
    def forward(self, logits):
        return logits - torch.logsumexp(logits, dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(2048, 50257)]


def get_init_inputs():
    return []
"""


def read_once_less_through_the_gates(problem: Path) -> None:
    """``problem`` compiled as max-autotune-no-cudagraphs compiles it, then under the option: one pass
    over the rows fewer, and the candidate through the gates (a screen that finds it slower stops
    before the model gate)."""
    from kernelopt.evaluate import worker_targets
    from kernelopt.evaluate.gate_settings import GateSettings
    from kernelopt.evaluate.session import ProblemSpec

    options = compat.mode_options("max-autotune-no-cudagraphs")
    spec = asdict(ProblemSpec(str(problem), {}, options=options))
    ((variant,),) = worker_targets.graph_variants(spec, [OPTION], None)
    print("variant", variant)
    assert variant["available"], variant["reason"]
    assert variant["rereads"] < variant["compiled"]["rereads"]  # the online softmax: one pass fewer

    settings = asdict(GateSettings(model_seeds=(0, 1, 2), trials=30, screen_trials=10))
    result = worker_targets.evaluate_graph(spec, 0, OPTION, settings, None)
    gates = {v["gate"]: v for v in result["verdicts"]}
    print({g: (v["passed"], v["reason"][:200]) for g, v in gates.items()}, result.get("screen"), result.get("timings"))
    assert gates["static"]["passed"], gates["static"]
    if "model" in gates:
        assert gates["model"]["passed"], gates["model"]


@pytest.fixture(autouse=True)
def root_workers(monkeypatch) -> None:
    monkeypatch.setenv("KERNELOPT_WORKER_USER", "root")  # CUDA IPC between users is refused


def test_the_vocab_log_softmax_is_read_once_less_and_passes_the_gates() -> None:
    read_once_less_through_the_gates(EXAMPLES / "level1/24_log_softmax_vocab.py")


def test_a_softmax_without_a_scale_compiles_as_it_was() -> None:
    """Where no graph holds a scaled softmax the option changes nothing: the one graph's compile stops
    before code generation (``compile_stop.stop_where_unchanged``) and there is no candidate."""
    from kernelopt.evaluate import worker_targets
    from kernelopt.evaluate.session import ProblemSpec

    spec = asdict(ProblemSpec(str(EXAMPLES / "level1/12_softmax_wide.py"), {"batch_size": 64}))
    ((variant,),) = worker_targets.graph_variants(spec, [OPTION], None)
    assert not variant["available"] and "found nothing to rewrite" in variant["reason"], variant


def test_logits_normalised_by_their_logsumexp_are_read_once_less_and_pass_the_gates(tmp_path) -> None:
    problem = tmp_path / "normalised_logits.py"
    problem.write_text(LOGSUMEXP_PROBLEM)
    read_once_less_through_the_gates(problem)


def test_token_log_probs_from_bf16_logits_are_read_once_less() -> None:
    """examples/problems/level1/26_token_log_probs.py at full size (1024 x 128256, bf16 logits upcast):
    the logsumexp found through the cast."""
    read_once_less_through_the_gates(EXAMPLES / "level1/26_token_log_probs.py")
