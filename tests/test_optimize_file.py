"""``optimize`` on a kernel file, end to end on CPU tensors: the run, its store, the delivery and its record."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from kernelopt.cli.main import app
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.pipeline.optimize_file import FileReport, deliver, file_operators, optimize_file
from kernelopt.pipeline.records import Winner
from kernelopt.search.nodes import NodeStore
from kernelopt.search.termination import Budget
from kernelopt.store import Store

pytest.importorskip("triton")
SOFTMAX = ROOT / "examples" / "kernels" / "softmax_naive.py"
SMALL = {"ROWS": 6, "COLS": 50}
LIGHT = GateSettings(kernel_seeds=(0,), model_seeds=(0,), trials=4, kernel_distributions=("neg",))


def test_a_cpu_run_searches_records_every_node_and_delivers_only_what_passed(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    export = tmp_path / "out" / "softmax.kopt.py"
    report = optimize_file(
        SOFTMAX, store, budget=Budget(max_evaluations=3), settings=LIGHT, sizes=SMALL, export_path=export, device="cpu"
    )
    run = store.run(report.run_id)
    assert run.status == "done" and run.kind == "optimize" and run.args["input"] == "triton"
    nodes = NodeStore(store, report.run_id).nodes("softmax_naive")
    assert len(nodes) == report.evaluations + 1 and report.evaluations == 3  # the root is never evaluated
    assert {n.operator for n in nodes} <= {"root", "launch-config", "eviction-policy"}
    assert all(n.result is not None for n in nodes if n.operator != "root")
    assert report.original_us and report.original_us > 0
    assert store.measurements(report.run_id, "file_report")["file_report"]["run_id"] == report.run_id
    if report.best is None:  # the interpreter's timings rarely clear the margin: then nothing is written
        assert report.exported is None and not export.exists() and "the original stays" in report.final_reason
    else:
        assert report.final_reason.startswith("verified") and export.read_text() == report.best.source


def test_the_delivery_is_the_judged_source_with_a_record_of_both_digests(tmp_path: Path) -> None:
    source = SOFTMAX.read_text().replace("num_warps=4", "num_warps=8")
    report = FileReport("softmax_naive", "triton", 7, "NVIDIA H200", 10.0, 2.0, speedup=1.2, speedup_iqr=(1.1, 1.3))
    report.best = Winner("launch-config", "num_warps 4->8", source, [{"gate": "static", "passed": True}], node=3)
    written, record = deliver(SOFTMAX, SOFTMAX.read_text(), report, tmp_path / "s.kopt.py", {"sizes": {}})
    assert Path(written).read_text() == source
    data = json.loads(Path(record).read_text())
    assert data["delivered"]["sha256"] == hashlib.sha256(source.encode()).hexdigest()
    assert data["original"]["sha256"] == hashlib.sha256(SOFTMAX.read_bytes()).hexdigest()
    assert (data["speedup"], data["speedup_iqr"], data["node"], data["run_id"]) == (1.2, [1.1, 1.3], 3, 7)


def test_without_an_export_path_the_file_lands_under_an_importable_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = FileReport("softmax_naive", "triton", 1, "cpu", 10.0, None, speedup=1.1, speedup_iqr=(1.05, 1.15))
    report.best = Winner("launch-config", "n", SOFTMAX.read_text(), [], node=2)
    written, record = deliver(SOFTMAX, SOFTMAX.read_text(), report, None, {})
    assert (written, record) == ("softmax_naive_kopt.py", "softmax_naive_kopt.json")
    assert (tmp_path / written).exists() and (tmp_path / record).exists()


def test_operators_that_only_mean_something_for_a_model_are_refused() -> None:
    assert [op.name for op in file_operators(["launch-config", "eviction-policy"])] == [
        "launch-config",
        "eviction-policy",
    ]
    with pytest.raises(
        KerneloptError,
        match="compiler-knobs do not apply to a triton kernel file; choose from launch-config, eviction-policy",
    ):
        file_operators(["compiler-knobs"])


def test_resuming_another_file_s_run_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    other = store.start_run("optimize", "15_rmsnorm", "cpu", {}, {})
    with pytest.raises(KerneloptError, match="not a kernel-file run of softmax_naive"):
        optimize_file(SOFTMAX, store, resume_run=other, sizes=SMALL, device="cpu")


@pytest.mark.parametrize("flag", [["--train"], ["--stock-modes"], ["--max-targets", "2"], ["--cuda-graphs", "off"]])
def test_the_cli_reads_the_kind_and_refuses_model_only_flags_in_one_line(flag: list[str]) -> None:
    result = CliRunner().invoke(app, ["optimize", str(SOFTMAX), *flag])
    assert result.exit_code != 0
    assert f"{flag[0]} applies to a model; " in result.output and "is a triton kernel file" in result.output


def test_the_cli_refuses_llm_agents_for_a_helion_file_before_asking_for_a_gpu() -> None:
    pytest.importorskip("helion")
    helion = ROOT / "examples" / "kernels" / "helion_rms_scale.py"
    result = CliRunner().invoke(app, ["optimize", str(helion), "--llm", "openai:gpt-x"])
    assert result.exit_code != 0 and "the LLM agents rewrite Triton kernel files only" in result.output
    result = CliRunner().invoke(app, ["optimize", str(helion), "--operators", "eviction-policy"])
    assert (
        result.exit_code != 0
        and "do not apply to a helion kernel file; choose from helion-autotune, helion-config" in result.output
    )


def test_nodes_and_the_report_page_speak_of_the_user_s_file(tmp_path: Path) -> None:
    from kernelopt.report import write_run_report

    store = Store(tmp_path / "k.db")
    report = optimize_file(SOFTMAX, store, budget=Budget(max_evaluations=1), settings=LIGHT, sizes=SMALL, device="cpu",
                           export_path=tmp_path / "out_kopt.py")
    page = write_run_report(store, report.run_id, tmp_path / "run.html").read_text()
    assert "vs the original file" in page and "the user's file (the baseline)" in page  # in the search graph's records
    assert "vs torch.compile" not in page and "Amdahl bound" not in page
    listing = CliRunner().invoke(app, ["nodes", str(report.run_id), "--store", str(tmp_path / "k.db")])
    assert listing.exit_code == 0 and "the user's file (the baseline)" in listing.output


def test_a_resumed_run_keeps_its_evaluations_and_continues_the_same_search(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    out = tmp_path / "out_kopt.py"  # a winner by chance on CPU timings is delivered here, not in the repo
    first = optimize_file(SOFTMAX, store, budget=Budget(max_evaluations=2), settings=LIGHT, sizes=SMALL, device="cpu",
                          export_path=out)  # fmt: skip
    before = {n.id: n.result for n in NodeStore(store, first.run_id).nodes("softmax_naive") if n.result is not None}
    again = optimize_file(SOFTMAX, store, budget=Budget(max_evaluations=4), settings=LIGHT, sizes=SMALL, device="cpu",
                          resume_run=first.run_id, export_path=out)  # fmt: skip
    after = {n.id: n.result for n in NodeStore(store, again.run_id).nodes("softmax_naive") if n.result is not None}
    assert again.run_id == first.run_id and again.evaluations == 4
    assert all(after[i] == result for i, result in before.items())  # nothing judged twice


TWO = ROOT / "tests" / "fixtures" / "kernel_files" / "two_kernels.py"


def test_kernel_picks_the_agents_kernel_of_a_file_and_a_name_it_does_not_launch_is_one_line() -> None:
    from kernelopt.pipeline.optimize_file import main_kernel
    from kernelopt.problem.kernel_file import load_kernel_file

    two = load_kernel_file(TWO)
    assert main_kernel(two) == "scale_kernel" and main_kernel(two, "add_kernel") == "add_kernel"
    with pytest.raises(KerneloptError) as caught:
        main_kernel(two, "nope")
    assert str(caught.value) == (
        f"{TWO}: --kernel nope: the file defines no @triton.jit kernel of that name; "
        "it defines doubled, scale_kernel, add_kernel"
    )
    with pytest.raises(
        KerneloptError, match=r"--kernel doubled: launch\(\) does not launch it .*: scale_kernel, add_kernel$"
    ):
        main_kernel(two, "doubled")  # a helper called from a kernel: no slot for the agents' C++
    with pytest.raises(KerneloptError, match="helion file's kernels are all tuned: leave --kernel out"):
        main_kernel(load_kernel_file(ROOT / "examples" / "kernels" / "helion_rms_scale.py"), "rms_scale")


@pytest.mark.parametrize(
    ("path", "flags", "shown"),
    [
        (TWO, ["--kernel", "nope", "--llm", "openai:gpt-x"], "--kernel nope: the file defines no @triton.jit kernel"),
        (TWO, ["--kernel", "add_kernel"], "--kernel add_kernel picks the kernel the LLM agents rewrite; add --llm"),
        (ROOT / "examples" / "problems" / "level1" / "15_rmsnorm.py", ["--kernel", "triton_red_fused_0"],
         "--kernel applies to a kernel file; "),
    ],
    ids=["unknown-name", "without-llm", "model-problem"],
)  # fmt: skip
def test_the_cli_refuses_a_kernel_it_cannot_use_before_asking_for_a_gpu(
    path: Path, flags: list[str], shown: str
) -> None:
    result = CliRunner().invoke(app, ["optimize", str(path), *flags])
    assert result.exit_code != 0 and shown in " ".join(result.output.split()), result.output
    assert "GPU" not in result.output


def test_a_resumed_run_keeps_its_kernel_and_refuses_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt.pipeline import optimize_file as module

    store = Store(tmp_path / "k.db")
    run = store.start_run(
        "optimize", "two_kernels", "cpu", {}, {"input": "triton", "kernel": "add_kernel", "sizes": {}}
    )
    with pytest.raises(
        KerneloptError, match=f"run {run} was started with --kernel add_kernel: resume it with the same"
    ):
        optimize_file(TWO, store, resume_run=run, kernel="scale_kernel", llm="openai:gpt-x", device="cpu")
    searched = []

    def search(kernel_file, store, run_id, spec, *rest):  # the search itself is not this test's business
        searched.append(spec.kernel)
        return FileReport(kernel_file.name, kernel_file.kind, run_id, "cpu", 1.0, None, kernel=spec.kernel)

    monkeypatch.setattr(module, "_run", search)
    assert optimize_file(TWO, store, resume_run=run, device="cpu").kernel == "add_kernel"  # not the first launched
    assert searched == ["add_kernel"]
