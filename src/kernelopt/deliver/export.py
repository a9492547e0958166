"""Verified, re-stitched models as self-contained exported files (``.kopt.json``), and loading them back.

An exported model is one JSON file: the problem's source text and sizes, the
seed its weights come from, the Inductor options, the replacement table
(graph, kernel name, sha256 of the original source, replacement source) and
the verification record. Loading recompiles the problem with Inductor, checks
every original kernel's hash, swaps the replacements in and proves they run.
A different torch or Triton would compile different kernels, so it is refused.

An exported file is untrusted input too (it may have been edited since it was
verified), so every replacement passes the static gate before anything of it
runs: its candidate-only part before the problem is compiled, the full check
against the freshly captured original before the swap imports it.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelopt.capture import Artifact, capture
from kernelopt.capture.swap import KernelAddress, Swap, check_swaps_live, find_kernel, swap_kernel
from kernelopt.errors import KerneloptError
from kernelopt.measure.environment import triton_version
from kernelopt.problem import Problem, load_problem
from kernelopt.verify.static import check_static, check_static_candidate
from kernelopt.verify.verdict import Verdict

FORMAT = "kernelopt-artifact"  # the file format marker, kept so earlier exports still load
FORMAT_VERSION = 2  # 2: the file carries a digest of everything in it


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
) -> Path:
    """Write the exported file (atomically: a killed run never leaves half a file)."""
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
        "verification": verification,
    }
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
    if doc.get("format_version") != FORMAT_VERSION:
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
        self, artifact: Artifact, swaps: list[Swap], problem: Problem | None, example_inputs: list[Any]
    ) -> None:
        self.artifact = artifact
        self.swaps = swaps
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
    check_replacements_static(path, replacements)
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
    swaps = [swap_kernel(artifact, r.address, r.source) for r in replacements]
    check_swaps_live(artifact, swaps, inputs)
    return LoadedModel(artifact, swaps, problem, inputs)
