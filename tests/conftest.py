"""Shared test configuration: ``gpu`` tests skip cleanly where torch sees no CUDA device; no test writes
into the user's own ``~/.cache/kernelopt`` (the store and caches live in a temporary folder); ``worker_tmp``."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "problems"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if not torch.cuda.is_available():
    # Triton decides at import whether it interprets: set before anything imports it, and inherited by
    # the workers the tests start, so kernel files run on CPU tensors.
    os.environ.setdefault("TRITON_INTERPRET", "1")


_HOME: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    # Set in the environment so worker processes the tests start inherit it too.
    home = Path(tempfile.mkdtemp(prefix="kernelopt-tests-"))
    home.chmod(0o755)  # workers may run as a user of their own (kernelopt.workers.identity)
    _HOME.append(home)
    os.environ["KERNELOPT_STORE"] = str(home / "kernelopt.db")
    os.environ["KERNELOPT_CACHE"] = str(home / "cache")


def pytest_unconfigure(config: pytest.Config) -> None:
    for home in _HOME:
        shutil.rmtree(home, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA (none visible to torch)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def worker_tmp() -> Iterator[Path]:
    """A fresh folder a test's worker processes may write in. ``tmp_path`` lies under pytest's
    private folder (mode 700), which a worker that runs as a user of its own (the tests run as
    root) cannot enter."""
    from kernelopt.workers.identity import hand_over, worker_identity

    directory = Path(tempfile.mkdtemp(prefix="kernelopt-test-"))
    hand_over(directory, worker_identity())
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def fake_nvcc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, load_inline) -> None:
    """Builds of CUDA C++ candidates through ``load_inline`` (a stand-in for nvcc and ninja on a machine
    without them), with no build cached from an earlier test and the builds under ``tmp_path``."""
    from kernelopt.capture import cuda_kernel, cuda_toolchain

    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", load_inline)
    monkeypatch.setattr(cuda_kernel, "_BUILT", {})
    monkeypatch.setattr(cuda_toolchain, "missing", lambda: None)
    monkeypatch.setattr(cuda_toolchain.shutil, "which", lambda name: "/usr/bin/ninja")
    monkeypatch.setenv("KERNELOPT_CUDA_BUILD_DIR", str(tmp_path / "builds"))


def forge_record(delivered: Path, text: str) -> None:
    """Write ``text`` as a delivered kernel file and forge its record's digest to match, as an attacker who
    can write both files would: only gate 1, run again on load, stands between it and the user."""
    import hashlib
    import json

    delivered.write_text(text)
    record = delivered.with_suffix(".json")
    data = json.loads(record.read_text())
    data["delivered"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    record.write_text(json.dumps(data))


def compiled_and_eager_step(step, x, linear, rewrite):
    """``step(x)`` compiled with ``rewrite`` as a post-grad pass and run backward, then run eagerly:
    ``(loss, weight grad, eager loss, eager weight grad, what each call of the rewrite returned)``."""
    import torch

    from kernelopt.capture import compat

    seen: list = []

    def watched(graph) -> None:
        seen.append(rewrite(graph))

    torch._dynamo.reset()
    with compat.fresh_compile(), compat.post_grad_pass(watched):
        got = torch.compile(step)(x)
        got.backward()
    torch._dynamo.reset()
    grad, linear.weight.grad = linear.weight.grad, None
    ref = step(x)
    ref.backward()
    return got, grad, ref, linear.weight.grad, seen


@pytest.fixture
def hopper(monkeypatch: pytest.MonkeyPatch) -> None:
    """kernelopt's cluster rewrites (``kernelopt.cluster_softmax``, ``kernelopt.cluster_norm``) as they run on
    an sm_90 GPU with the CUDA toolkit, on CPU tensors (the op computes them by torch)."""
    from kernelopt.capture import cuda_toolchain
    from kernelopt.capture.rewrites import cluster_softmax, row_softmax_op

    monkeypatch.setattr(cluster_softmax, "on_cluster_gpu", lambda value: True)
    monkeypatch.setattr(row_softmax_op, "capability", lambda device: (9, 0))
    monkeypatch.setattr(cuda_toolchain, "nvcc_missing", lambda: None)


def captured_under(model, x, options: dict):
    """``model`` on ``x`` captured under compile ``options``, the compile fresh (a cached compile of the same
    graph runs no post-grad pass)."""
    from kernelopt.capture import capture, compat

    with compat.fresh_compile():
        return capture(model, [x], options)


def graph_variant_judged(path: Path, source: str, options: dict):
    """The problem ``source`` (written to ``path``) captured, regenerated under compile ``options`` as a
    graph candidate, and judged as the graph stage judges one on the CPU: gate 1 on its call sequence, then
    its own candidate process against the float64 reference through the model gate. ``(candidate,
    result)``; the candidate is None where the options changed nothing."""
    from dataclasses import asdict

    from kernelopt.capture import capture, compat
    from kernelopt.capture.artifact import separate_code
    from kernelopt.capture.graph_swap import from_variant
    from kernelopt.evaluate.gate_settings import GateSettings
    from kernelopt.evaluate.graph_candidate import evaluate_graph
    from kernelopt.evaluate.remote import ReferenceRunner, RemoteRunner
    from kernelopt.evaluate.restitched import RestitchedModel
    from kernelopt.evaluate.session import ProblemSpec
    from kernelopt.problem import load_problem

    path.write_text(source)
    problem = load_problem(path)
    cpu = torch.device("cpu")
    model, inputs = problem.build_model(0, cpu), problem.make_inputs(0, cpu)
    with compat.fresh_compile():
        artifact = capture(model, inputs, {})
        variant = capture(separate_code(model, "graph_variant"), inputs, options, reset=False)
    candidate = from_variant(artifact.graphs[0], variant.graphs[0], "ko0", "test", options)
    if candidate is None:
        return None, None
    spec = asdict(ProblemSpec(str(path), {}, 0, {}))
    runner = RemoteRunner(device="cpu", spec=spec, timeout_s=300)
    reference = ReferenceRunner(device="cpu", spec=spec, timeout_s=300)
    restitched = RestitchedModel(problem, model, artifact, inputs, cpu, runner, reference)
    try:
        settings = GateSettings((0,), (0, 1), trials=10, margin=0.0)
        return candidate, evaluate_graph(restitched, artifact.graphs[0].source_code, candidate, settings)
    finally:
        runner.close()
        reference.close()
