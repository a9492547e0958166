"""Verified, re-stitched models as self-contained exported files (``.kopt.json``), and loading them back.

An exported model is one JSON file: the problem's source text and sizes, the
seed its weights come from, the Inductor options, the replacement table
(graph, kernel name, sha256 of the original source, replacement source), the
graph candidates (a graph's changed call sequence with its own kernels, and the
digest of the graph it was made for) and the verification record. Loading
recompiles the problem with Inductor, checks every original kernel's hash and
every changed graph's digest, swaps the replacements in and proves they run.
A different torch or Triton would compile different kernels, so it is refused.

An exported file is untrusted input too (it may have been edited since it was
verified), so every replacement passes the static gate before anything of it
runs: its candidate-only part before the problem is compiled, the full check
against the freshly captured original before the swap imports it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelopt.capture import Artifact, capture
from kernelopt.capture.graph_swap import GraphCandidate, GraphSwap, build_graph_kernels, check_graphs_live, swap_graph
from kernelopt.capture.swap import KernelAddress, Swap, check_swaps_live, find_kernel, swap_kernel
from kernelopt.errors import KerneloptError
from kernelopt.measure.environment import triton_version
from kernelopt.problem import Problem, load_problem
from kernelopt.verify.static import check_static, check_static_candidate
from kernelopt.verify.static_graph import check_static_graph
from kernelopt.verify.verdict import Verdict

log = logging.getLogger(__name__)

FORMAT = "kernelopt-artifact"  # the file format marker, kept so earlier exports still load
FORMAT_VERSION = 3  # 2: the file carries a digest of everything in it; 3: and graph candidates
READABLE_VERSIONS = (2, 3)  # a version-2 file has no graph candidates


@dataclass(frozen=True)
class Replacement:
    address: KernelAddress
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.address.to_dict(), "source": self.source}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Replacement:
        return cls(KernelAddress.from_dict(d), d["source"])


def export_model(
    path: str | Path,
    problem: Problem,
    replacements: Sequence[Replacement],
    verification: dict[str, Any],
    seed: int = 0,
    options: dict[str, Any] | None = None,
    graphs: Sequence[GraphCandidate] = (),
    run_mode: str | None = None,
) -> Path:
    """Write the exported file (atomically: a killed run never leaves half a file). ``run_mode``: the
    torch.compile mode it runs under (:func:`record_run_mode`)."""
    path = Path(path)
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "torch": str(torch.__version__),
        "triton": triton_version(),
        "problem": {
            "name": problem.name,
            "file": problem.path.name,
            "source": problem.path.read_text(),
            "overrides": problem.overrides,
            "seed": seed,
            "train": problem.train,
        },
        "options": options or {},
        "replacements": [r.to_dict() for r in replacements],
        "graphs": [g.to_dict() for g in graphs],
        "verification": verification,
        **({"run_mode": run_mode} if run_mode else {}),
    }
    return _write(path, doc)


def record_run_mode(path: str | Path, mode: str) -> Path:
    """Record in an export the CUDA-graph mode (``reduce-overhead``, ``max-autotune``) it ran fastest
    under when every stock mode was timed against it, so that ``kernelopt.backend(path)`` compiles
    under it without the user naming the mode: the file then runs as it was scored."""
    doc = read_export(path)
    doc["run_mode"] = mode
    return _write(Path(path), doc)


def _write(path: Path, doc: dict[str, Any]) -> Path:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(seal(doc), indent=1, sort_keys=True))
    tmp.replace(path)
    return path


def content_digest(doc: dict[str, Any]) -> str:
    """sha256 of the file's whole content but its digest: problem, replacements, verification record."""
    body = {k: v for k, v in doc.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its digest set (what :func:`export_model` writes)."""
    doc["digest"] = content_digest(doc)
    return doc


def read_export(path: str | Path) -> dict[str, Any]:
    """The exported file's content, refused unless its format is this kernelopt's and its digest matches.

    The digest catches a file edited or damaged after export (a replacement swapped,
    the verification record rewritten); it is not a signature: whoever can write the
    file can write a new digest. A ``.kopt`` file runs kernel code when loaded, so
    trust one as you would trust any code you run."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise KerneloptError(f"{path}: not a readable kernelopt artifact ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise KerneloptError(f"{path}: not a kernelopt artifact (no '{FORMAT}' format marker)")
    if doc.get("format_version") not in READABLE_VERSIONS:
        raise KerneloptError(
            f"{path}: artifact format {doc.get('format_version')} is not {FORMAT_VERSION}; re-export it with this kernelopt"
        )
    if doc.get("digest") != content_digest(doc):
        raise KerneloptError(
            f"{path}: its content does not match its digest (changed after export); "
            "a .kopt file runs kernel code when loaded: re-export it instead of editing it"
        )
    return doc


def check_versions(doc: dict[str, Any], path: str | Path) -> None:
    """Refuse a torch / Triton other than the one the replacements were verified with."""
    here = {"torch": str(torch.__version__), "triton": triton_version()}
    for name, version in here.items():
        if doc.get(name) != version:
            raise KerneloptError(
                f"{path}: verified with {name} {doc.get(name)}, but this is {name} {version}; "
                f"Inductor would generate different kernels: re-run kernelopt verify or optimize under {name} {version}"
            )


class LoadedModel:
    """A compiled model running verified replacement kernels; call it like the original."""

    def __init__(
        self,
        artifact: Artifact,
        swaps: list[Swap],
        problem: Problem | None,
        example_inputs: list[Any],
        graph_swaps: list[GraphSwap] | None = None,
    ) -> None:
        self.artifact = artifact
        self.swaps = swaps
        self.graph_swaps = graph_swaps or []
        self.problem = problem
        self.example_inputs = example_inputs

    def __call__(self, *inputs: Any) -> Any:
        return self.artifact(*inputs)


def _materialise_problem(doc: dict[str, Any]) -> Problem:
    info = doc["problem"]
    digest = hashlib.sha256(info["source"].encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "kernelopt-artifacts" / digest
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / info["file"]
    if not file.exists() or file.read_text() != info["source"]:
        file.write_text(info["source"])
    return load_problem(file, overrides=info["overrides"] or None, name=info["name"], train=bool(info.get("train")))


def _refuse_unless_passed(verdict: Verdict, path: str | Path, kernel: str) -> None:
    if not verdict.passed:
        raise KerneloptError(
            f"{path}: the replacement for kernel {kernel} fails the static gate "
            f"({verdict.details.get('rule')}): {verdict.reason}"
        )


def check_replacements_static(
    path: str | Path, replacements: Sequence[Replacement], artifact: Artifact | None = None
) -> None:
    """Refuse, with one line naming the kernel and the rule, a replacement gate 1 rejects.

    Without ``artifact`` only the candidate-only part runs (no original is known yet);
    with it, each replacement is checked against the original kernel it replaces.
    """
    for r in replacements:
        if artifact is None:
            verdict = check_static_candidate(r.source, kernel_name=r.address.name)
        else:
            _, _, original = find_kernel(artifact, r.address.name, r.address.graph)
            verdict = check_static(r.source, kernel_name=r.address.name, original_source=original.source)
        _refuse_unless_passed(verdict, path, r.address.name)


def graph_candidates(doc: dict[str, Any]) -> list[GraphCandidate]:
    """The graph candidates of an exported file's content (none in a version-2 file)."""
    return [GraphCandidate.from_dict(g) for g in doc.get("graphs") or []]


def check_graphs_static(path: str | Path, graphs: Sequence[GraphCandidate], artifact: Artifact | None = None) -> None:
    """Refuse, with one line naming the graph and the rule, a graph candidate gate 1 rejects. Without
    ``artifact`` only its kernels' candidate-only rules run (and C++ kernels are refused: an exported
    file brings none); with it, the whole candidate is checked against the graph it replaces."""
    for graph in graphs:
        if artifact is None:
            for kernel in graph.kernels:
                if kernel.language != "triton":
                    raise KerneloptError(f"{path}: graph {graph.graph}'s kernel {kernel.name} is {kernel.language}: "
                                         "an exported graph candidate brings Triton kernels only")  # fmt: skip
                _refuse_unless_passed(check_static_candidate(kernel.source, kernel_name=kernel.name), path, kernel.name)
            continue
        if not 0 <= graph.graph < len(artifact.graphs):
            raise KerneloptError(
                f"{path}: the model compiled into {len(artifact.graphs)} graph(s), no graph {graph.graph}"
            )
        verdict = check_static_graph(graph, original_source=artifact.graphs[graph.graph].source_code, allow_cpp=False)
        if not verdict.passed:
            raise KerneloptError(
                f"{path}: graph {graph.graph}'s call sequence fails the static gate ({verdict.details.get('rule')}): "
                f"{verdict.reason}"
            )


def load(
    path: str | Path,
    model: torch.nn.Module | None = None,
    device: str | torch.device = "cuda",
    example_inputs: Sequence[Any] | None = None,
) -> LoadedModel:
    """Rebuild a verified model from an exported artifact.

    Without ``model``, the weights are rebuilt from the problem's seed (as they were
    when verified); pass your own ``nn.Module`` to run the replacements on its weights.
    Without ``example_inputs`` (inputs of the verified shapes), the problem's own are
    made; with both, the problem file in the export is never executed."""
    doc = read_export(path)
    check_versions(doc, path)
    replacements = [Replacement.from_dict(r) for r in doc["replacements"]]
    graphs = graph_candidates(doc)
    check_replacements_static(path, replacements)
    check_graphs_static(path, graphs)
    if doc.get("run_mode"):
        log.warning(
            "%s runs fastest under torch.compile mode=%r (CUDA graphs), which kernelopt.load does not apply: "
            "torch.compile(model, backend=kernelopt.backend(%r)) does",
            path, doc["run_mode"], str(path),
        )  # fmt: skip
    seed = int(doc["problem"]["seed"])
    problem = _materialise_problem(doc) if model is None or example_inputs is None else None
    if model is None:
        assert problem is not None
        model = problem.build_model(seed, device)
    if example_inputs is None:
        assert problem is not None
        inputs = problem.make_inputs(seed, device)
    else:
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in example_inputs]
    artifact = capture(model, inputs, doc.get("options") or {})
    check_replacements_static(path, replacements, artifact)
    check_graphs_static(path, graphs, artifact)
    swaps = [swap_kernel(artifact, r.address, r.source) for r in replacements]
    graph_swaps = [swap_graph(artifact, g, build_graph_kernels(g)) for g in graphs]
    check_swaps_live(artifact, swaps, inputs)
    if graph_swaps:
        check_graphs_live(artifact, graph_swaps, inputs)
    return LoadedModel(artifact, swaps, problem, inputs, graph_swaps)
