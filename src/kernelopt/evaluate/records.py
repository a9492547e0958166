"""What the evaluation worker sends back to a run, as typed records with one serialisation each.

The wire and the store carry plain dicts: a worker's reply passes the safe
unpickler's allow-list, and the store keeps JSON. Each record is built from its
dict once, at the boundary (``from_dict``), and written back with ``to_dict``,
so the run reads fields instead of looking up keys, and a reply that lacks one
fails where it arrives, by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

from kernelopt.evaluate.analysis import AnalysisReport, LaunchReport
from kernelopt.measure import op_hosts as host_paths
from kernelopt.verify.verdict import Verdict


def _missing(record: str, data: Mapping[str, Any], required: list[str]) -> None:
    absent = [name for name in required if name not in data]
    if absent:
        raise ValueError(f"a {record} record lacks {', '.join(absent)}: the worker and the run disagree on its shape")


def analysis_report_from_dict(data: Mapping[str, Any]) -> AnalysisReport:
    """The inverse of :meth:`AnalysisReport.to_dict` (unknown keys are ignored)."""
    names = {f.name for f in fields(AnalysisReport)}
    _missing(
        "analysis",
        data,
        [f.name for f in fields(AnalysisReport) if f.default is MISSING and f.default_factory is MISSING],
    )
    values = {k: v for k, v in data.items() if k in names}
    launch_names = {f.name for f in fields(LaunchReport)}
    values["launches"] = [
        LaunchReport(**{k: v for k, v in row.items() if k in launch_names}) for row in data.get("launches", [])
    ]
    return AnalysisReport(**values)


@dataclass(frozen=True)
class KernelInfo:
    """One generated Triton kernel of the captured model: its source and which graph holds it."""

    source: str
    graph: int
    heuristic: str | None = None


@dataclass
class ProblemAnalysis:
    """``analyze_problem``'s answer: the analysis, every Triton kernel's source, and each launch's config."""

    report: AnalysisReport
    kernels: dict[str, KernelInfo] = field(default_factory=dict)
    configs: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.report.to_dict(),
            "kernels": {name: asdict(k) for name, k in self.kernels.items()},
            "configs": dict(self.configs),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProblemAnalysis:
        _missing("analysis", data, ["kernels", "configs"])
        return cls(
            analysis_report_from_dict(data),
            {name: KernelInfo(**k) for name, k in data["kernels"].items()},
            dict(data["configs"]),
        )


def candidate_op_hosts(end_to_end: Mapping[str, Any] | None) -> dict[str, str]:
    """The candidate side's own-op host paths of an end-to-end reading (``end_to_end.op_hosts``), ``{}``
    where none was recorded: what a report keeps of the model it delivers."""
    return dict(((end_to_end or {}).get("op_hosts") or {}).get("candidate") or {})


def through_python(op_hosts: Mapping[str, Any] | None) -> list[str]:
    """kernelopt's own ops whose calls went through their Python host path in the candidate's process,
    each as ``op (why)``, from an end-to-end reading's ``op_hosts`` (:func:`kernelopt.measure.op_hosts.read` by side):
    such a candidate pays Python at every call of the op, so a refusal or a small gain may be that."""
    candidate = candidate_op_hosts({"op_hosts": op_hosts})
    return [f"{op} ({state})" for op, state in sorted(candidate.items()) if host_paths.through_python(state)]


def python_path_note(op_hosts: Mapping[str, Any] | None) -> str:
    """What a refusal adds where its candidate ran own ops through Python ('' where it ran none so)."""
    slow = through_python(op_hosts)
    return f"; the candidate's own ops ran Python's host path: {', '.join(slow)}" if slow else ""


def naming_host_path(verdict: Verdict, op_hosts: Mapping[str, Any] | None) -> Verdict:
    """A refused performance verdict with the own ops its candidate ran through Python named in its reason
    (unchanged where it passed, or where none did)."""
    note = python_path_note(op_hosts)
    return verdict if verdict.passed or not note else replace(verdict, reason=verdict.reason + note)


@dataclass
class FinalCheck:
    """``verify_together``'s answer: the re-stitched model's model-gate verdict and, when it passed,
    its end-to-end timing against the compiled model (or the timing evidence that voided it)."""

    model: Verdict
    end_to_end: dict[str, Any] | None = None  # judge_end_to_end's summary plus the comparison itself
    vs_eager: dict[str, Any] | None = None  # the comparison against eager
    evidence: Verdict | None = None  # set when the readings failed the judge's clock
    vs_base: dict[str, Any] | None = None  # against the base mode's compile, where the capture has options on top
    vs_base_reason: str | None = None  # why there is no vs_base although it was asked for
    graphs_gain: dict[str, Any] | None = None  # the compiled model's own CUDA-graph replays over its forward
    replayed: dict[str, Any] | None = None  # end to end as CUDA-graph replays, where graphs pay for the model
    replayed_reason: str | None = None  # why there is no replayed judgment although it was asked for

    @property
    def comparison(self) -> dict[str, Any] | None:
        return self.end_to_end["comparison"] if self.end_to_end else None

    @property
    def deciding(self) -> dict[str, Any] | None:
        """The end-to-end judgment delivery rests on: as CUDA-graph replays where graphs pay for the
        model (a CUDA-graph mode then runs it, and without graphs launch overhead the user never pays
        dilutes every kernel's gain), else the plain forward's."""
        return self.replayed if self.replayed is not None else self.end_to_end

    @property
    def faster(self) -> bool:
        """Passed the model gate, readings borne out, and faster than the compiled model beyond noise
        in the :attr:`deciding` judgment."""
        deciding = self.deciding
        return (
            self.model.passed
            and self.evidence is None
            and deciding is not None
            and deciding["comparison"]["speedup"] > 1.0
            and bool(deciding.get("beyond_noise", True))
        )

    @property
    def reason(self) -> str:
        """Why the re-stitched model was not delivered (meaningful when not :attr:`faster`)."""
        if not self.model.passed:
            return self.model.reason
        if self.evidence is not None:
            return self.evidence.reason
        if self.replayed is not None:
            why = "no end-to-end speedup beyond noise as CUDA-graph replays (the way a CUDA-graph mode runs it)"
        else:
            why = "no end-to-end speedup beyond noise"
        return why + python_path_note((self.end_to_end or {}).get("op_hosts"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model.to_dict()}
        if self.end_to_end is not None:
            out["end_to_end"] = self.end_to_end
        if self.vs_eager is not None:
            out["vs_eager"] = self.vs_eager
        if self.evidence is not None:
            out["evidence"] = self.evidence.to_dict()
        if self.vs_base is not None:
            out["vs_base"] = self.vs_base
        if self.vs_base_reason is not None:
            out["vs_base_reason"] = self.vs_base_reason
        for key in ("graphs_gain", "replayed", "replayed_reason"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FinalCheck:
        _missing("final check", data, ["model"])
        evidence = data.get("evidence")
        return cls(
            Verdict.from_dict(data["model"]),
            data.get("end_to_end"),
            data.get("vs_eager"),
            Verdict.from_dict(evidence) if evidence else None,
            data.get("vs_base"),
            data.get("vs_base_reason"),
            data.get("graphs_gain"),
            data.get("replayed"),
            data.get("replayed_reason"),
        )
