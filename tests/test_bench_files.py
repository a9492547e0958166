"""``kernelopt bench`` over a folder of kernel files, on a CPU (Triton's interpreter, ``TRITON_INTERPRET=1``).

The real runs go through ``optimize_file`` on two tiny Triton files written here; the CLI's printing
and its refusals use the fake target of ``bench_targets.py`` (``scripted_file``), which returns the row a
file's ``FAKE = ...`` line holds.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kernelopt.cli.main import app
from kernelopt.config import load_settings
from kernelopt.errors import KerneloptError
from kernelopt.pipeline.bench import run_bench
from kernelopt.pipeline.bench_files import FileBenchEvent, run_file_bench
from kernelopt.problem.suite_kinds import KERNEL_FILES, MODELS, suite_kinds
from kernelopt.report.file_scoreboard import FileOutcome
from kernelopt.store import Store

pytest.importorskip("triton")
TESTS_DIR = Path(__file__).resolve().parent
FAKE_TARGET = "bench_targets:scripted_file"

ELEMENTWISE = '''
import torch
import triton
import triton.language as tl

N = {n}


@triton.jit
def {name}_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, {expr}, mask=mask)


def launch(x):
    y = torch.empty_like(x)
    {name}_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64, num_warps=4)
    return y


def reference(x):
    return {torch_expr}


def get_inputs():
    return [torch.randn(N)]
'''
NO_INPUTS = '''
import triton

@triton.jit
def k(x_ptr):
    pass

def launch(x):
    return x
'''
CUDA_SLOT = "// kernelopt: cuda\n#include <torch/extension.h>\nvoid launch(torch::Tensor x) {}\n"
MODEL = '''
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1
def get_inputs():
    return [torch.randn(4)]
def get_init_inputs():
    return []
'''
FAKE_FILE = '''
import triton

FAKE = {fake!r}

@triton.jit
def k(x_ptr):
    pass

def launch(x):
    return x
'''


def _kernel_folder(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "add_one.py").write_text(ELEMENTWISE.format(name="add_one", n=200, expr="x + 1.0", torch_expr="x + 1.0"))
    (root / "twice.py").write_text(ELEMENTWISE.format(name="twice", n=150, expr="x * 2.0", torch_expr="x * 2.0"))
    (root / "twice.cu").write_text(CUDA_SLOT)
    return root


def _bench(root: Path, out: Path, events: list[FileBenchEvent] | None = None, **kwargs: Any):
    selection = kwargs.pop("selection", None)
    kinds = suite_kinds(root.resolve(), selection)
    config = load_settings({"effort": "quick", "budget": 2})
    options = {"budget": 2, "patience": 3, "operators": None, **kwargs.pop("options", {})}
    return run_file_bench(
        root.resolve(), kinds, results_dir=out, options=options, config=config, device="cpu", command="test",
        worker_timeout_s=300.0, on_event=events.append if events is not None else None, selection=selection, **kwargs,
    )


def _runs(store: Path) -> list[tuple[str, str]]:
    with Store(store) as db:
        return [(r.kind, r.problem) for r in db.runs()]


def test_a_folder_of_kernel_files_is_benched_file_by_file_and_resumes_after_a_kill(tmp_path: Path) -> None:
    root = _kernel_folder(tmp_path / "kernels")
    (root / "no_inputs.py").write_text(NO_INPUTS)
    out, store = tmp_path / "out", tmp_path / "bench.db"
    report = _bench(root, out, options={"store": str(store)})

    rows = {o.name: o for o in report.outcomes}
    assert sorted(rows) == ["add_one", "no_inputs", "twice"]
    for name in ("add_one", "twice"):
        row = rows[name]
        assert (row.status, row.kind, row.operators) == ("ok", "triton", ["launch-config", "eviction-policy"])
        assert 1 <= row.evaluations <= 2 and row.original_us and row.original_us > 0
        assert row.run_id is not None and row.details["device"] == "cpu"
        if row.delivered:  # the interpreter's timings rarely clear the margin; where one did, it is on disk
            assert row.speedup and row.speedup > 1.0 and Path(row.exported or "").is_file()
            assert Path(row.exported or "").parent == (out / "kernels").resolve()
            assert json.loads(Path(row.record or "").read_text())["run_id"] == row.run_id
        else:
            assert row.speedup is None and row.exported is None and "the original stays" in row.reason
    broken = rows["no_inputs"]
    assert broken.status == "load_error" and "get_inputs" in broken.reason and broken.run_id is None
    # each file is one optimize run of its own in the store, as kernelopt optimize FILE makes
    assert sorted(_runs(store)) == [("optimize", "add_one"), ("optimize", "twice")]
    with Store(store) as db:
        assert {db.run(rows[n].run_id).args["input"] for n in ("add_one", "twice")} == {"triton"}  # type: ignore[arg-type]

    document = json.loads((out / "results.json").read_text())
    assert document["meta"]["input"] == "kernel-files"
    assert [o["name"] for o in document["outcomes"]] == ["add_one", "no_inputs", "twice"]
    assert document["summary"]["status_counts"]["ok"] == 2 and document["summary"]["status_counts"]["load_error"] == 1
    (skipped,) = document["summary"]["skipped"]
    assert skipped["name"] == "twice.cu" and skipped["kind"] == "cuda"
    assert f"kernelopt verify {root.resolve() / 'twice.py'} --candidate" in skipped["reason"]
    with open(out / "results.csv") as f:
        assert [r["name"] for r in csv.DictReader(f)] == ["add_one", "no_inputs", "twice"]
    assert "| twice.cu" not in (out / "results.md").read_text() and "twice.cu (cuda)" in (out / "results.md").read_text()
    table = (out / "results.md").read_text()  # each worker's seconds, the file's that does not load too (it loads there)
    assert "| evaluations | wall s | run |" in table
    for name in ("add_one", "no_inputs"):
        row = rows[name]
        assert row.worker_s and f"| {row.evaluations} | {row.worker_s:.0f} | {row.run_id or ''} |" in table

    # A kill after add_one finished leaves results.json as it was written then: add_one's row alone.
    document["outcomes"] = [o for o in document["outcomes"] if o["name"] == "add_one"]
    (out / "results.json").write_text(json.dumps(document))
    with pytest.raises(KerneloptError, match="exists; pass --resume"):
        _bench(root, out, options={"store": str(store)})
    events: list[FileBenchEvent] = []
    again = _bench(root, out, events, resume=True, options={"store": str(store)})
    assert [(e.kind, e.name) for e in events] == [
        ("skip", "add_one"), ("start", "no_inputs"), ("done", "no_inputs"), ("start", "twice"), ("done", "twice"),
    ]
    assert again.resumed == ["add_one"] and {o.name: o.run_id for o in again.outcomes}["add_one"] == rows["add_one"].run_id
    assert sorted(_runs(store)) == [("optimize", "add_one"), ("optimize", "twice"), ("optimize", "twice")]
    assert len(json.loads((out / "results.json").read_text())["meta"]["resumed"]) == 1


def test_selection_and_sizes_reach_each_file(tmp_path: Path) -> None:
    root = _kernel_folder(tmp_path / "kernels")
    report = _bench(root, tmp_path / "out", selection=["twice"], sizes={"N": 70}, options={"store": str(tmp_path / "s.db")})
    (row,) = report.outcomes
    assert row.name == "twice" and row.status == "ok" and row.details["sizes"] == {"N": 70}
    with Store(tmp_path / "s.db") as db:
        assert db.run(row.run_id).args["sizes"] == {"N": 70}  # type: ignore[arg-type]
    with pytest.raises(KerneloptError, match="made with --size N=70"):
        _bench(root, tmp_path / "out", resume=True, selection=["twice"], sizes={"N": 80})


def test_files_run_in_the_order_given_and_the_rows_keep_the_folders_order(tmp_path: Path) -> None:
    root = _kernel_folder(tmp_path / "kernels")
    events: list[FileBenchEvent] = []
    report = _bench(root, tmp_path / "out", events, selection=["twice", "add_one"], options={"store": str(tmp_path / "s.db")})
    assert [e.name for e in events if e.kind == "start"] == ["twice", "add_one"]
    assert [o.name for o in report.outcomes] == ["add_one", "twice"]


def test_what_a_folder_holds_is_read_without_running_it(tmp_path: Path) -> None:
    root = _kernel_folder(tmp_path / "kernels")
    (root / "boom.py").write_text("raise SystemExit('ran at import')\n")  # unreadable as a kind: a load-error row
    kinds = suite_kinds(root)
    assert kinds.input == KERNEL_FILES
    assert [(n, k) for n, _, k in kinds.kernels] == [("add_one", "triton"), ("twice", "triton")]
    assert [n for n, _ in kinds.cuda] == ["twice.cu"] and [n for n, _ in kinds.unreadable] == ["boom"]
    (root / "sub").mkdir()
    (root / "sub" / "model.py").write_text(MODEL)
    with pytest.raises(KerneloptError, match=r"mixes 1 model problem\(s\) \(such as sub/model\) and 2 kernel file"):
        suite_kinds(root)
    assert suite_kinds(root, ["sub/model"]).input == MODELS and suite_kinds(root, ["add_one"]).input == KERNEL_FILES
    with pytest.raises(KerneloptError, match="no problem matches nope"):
        suite_kinds(root, ["add_one", "nope"])
    with pytest.raises(KerneloptError, match="holds kernel files, not model problems"):
        run_bench(root, problems=["twice"], results_dir=tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_a_file_bench_never_resumes_a_model_bench(tmp_path: Path) -> None:
    root = _kernel_folder(tmp_path / "kernels")
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"meta": {"suite": str(root)}, "outcomes": []}))
    with pytest.raises(KerneloptError, match="results of a bench of model problems, not of kernel files"):
        _bench(root, out, resume=True)
    with pytest.raises(KerneloptError, match="helion-config do not apply to a triton kernel file"):
        _bench(root, tmp_path / "out2", options={"operators": ["helion-config"]})


def test_an_outcome_from_a_worker_is_checked() -> None:
    row = {"name": "a", "path": "a.py", "kind": "triton", "status": "ok", "delivered": True, "speedup": 1.2}
    assert FileOutcome.from_dict(row).score == 1.2
    assert FileOutcome.from_dict({**row, "delivered": False, "speedup": None}).score == 1.0
    assert FileOutcome.from_dict({**row, "status": "crash"}).score is None
    for bad, field in (({"speedup": None}, "verified speedup"), ({"speedup": float("nan")}, "speedup"),
                       ({"status": "fine"}, "status"), ({"evaluations": -1}, "evaluations")):
        with pytest.raises(ValueError, match=field):
            FileOutcome.from_dict({**row, **bad})


# -- the command ------------------------------------------------------------------------


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def _fake_folder(root: Path, files: dict[str, Any]) -> Path:
    root.mkdir(parents=True)
    for name, fake in files.items():
        (root / f"{name}.py").write_text(FAKE_FILE.format(fake=fake))
    return root


def _cli(root: Path, out: Path, *extra: str):
    args = ["bench", str(root), "--out", str(out), "--worker-target", FAKE_TARGET, "--worker-path", str(TESTS_DIR)]
    return _runner().invoke(app, [*args, *extra])


def test_cli_bench_of_kernel_files_prints_a_row_per_file(tmp_path: Path) -> None:
    fast = {"delivered": True, "speedup": 1.25, "speedup_iqr": [1.2, 1.3], "original_us": 40.0, "optimized_us": 32.0,
            "evaluations": 3}
    root = _fake_folder(tmp_path / "kernels", {"a_fast": fast, "b_kept": {"original_us": 10.0, "evaluations": 2}})
    result = _cli(root, tmp_path / "out", "--budget", "3", "--time-limit", "20", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    rows = {o["name"]: o for o in document["outcomes"]}
    assert rows["a_fast"]["speedup"] == 1.25 and rows["b_kept"]["delivered"] is False
    options = rows["a_fast"]["details"]["options"]
    assert (options["budget"], options["time_limit_s"], options["operators"]) == (3, 20.0, None)
    assert document["summary"]["geomean_speedup"] == pytest.approx((1.25 * 1.0) ** 0.5)

    table = _cli(root, tmp_path / "out", "--resume")
    assert table.exit_code == 0, table.output
    for text in ("a_fast", "1.250× (1.200–1.300)", "original kept", "delivered: 1",
                 "taken from the earlier run: 2 file(s)"):
        assert text in table.stdout, text
    assert "already done: ok" in table.stderr and f"report: {tmp_path / 'out' / 'report.html'}" in table.stdout
    assert (root / "calls.log").read_text().split() == ["a_fast.py", "b_kept.py"]  # the resume ran nothing

    # the model bench's readers refuse these rows rather than score them against torch.compile
    merged = _runner().invoke(app, ["bench-merge", str(tmp_path / "merged"), str(tmp_path / "out")])
    assert merged.exit_code == 2 and "holds the results of a bench of kernel files" in merged.stderr
    assert not (tmp_path / "merged").exists()


def test_a_kernel_file_bench_writes_its_html_report_and_kernelopt_report_renders_it_again(tmp_path: Path) -> None:
    """The page of a bench over kernel files: each file's speedup over its own original, no torch.compile
    column, what was not benched and the failures; written at the bench's end and by kernelopt report."""
    import html

    fast = {"delivered": True, "speedup": 1.25, "speedup_iqr": [1.2, 1.3], "original_us": 40.0, "optimized_us": 32.0,
            "evaluations": 3}
    root = _fake_folder(tmp_path / "kernels", {"a_fast": fast, "b_kept": {"original_us": 10.0, "evaluations": 2},
                                               "c_broken": {"status": "run_error", "reason": "no get_inputs"}})
    (root / "a_fast.cu").write_text(CUDA_SLOT)
    out = tmp_path / "out"
    result = _cli(root, out, "--json")
    assert result.exit_code == 0, result.output
    written = json.loads(result.stdout)["report"]
    assert written == str(out / "report.html") and json.loads(result.stdout)["report_error"] is None
    page = html.unescape((out / "report.html").read_text())
    assert "kernelopt bench (kernel files)" in page and "3 kernel files" in page
    assert "1.250× (1.200–1.300)" in page and "original kept" in page and "no get_inputs" in page
    assert "a_fast.cu" in page and "a CUDA C++ candidate for one kernel" in page  # listed, not benched
    assert "torch.compile mode." in page and "vs compile" not in page  # its baseline is the file itself
    assert 'data-figure="per-file"' in page
    seconds = {o["name"]: o["details"]["worker_s"] for o in json.loads((out / "results.json").read_text())["outcomes"]}
    assert f"<td class=num>3</td><td class=num>{seconds['a_fast']:.0f}</td>" in page  # evaluations, then wall s
    (out / "report.html").unlink()
    again = _runner().invoke(app, ["report", str(out)])
    assert again.exit_code == 0, again.output
    assert f"report: {out / 'report.html'}" in again.stdout and (out / "report.html").is_file()
    plain = _cli(root, tmp_path / "out2", "--no-report")
    assert plain.exit_code == 0 and not (tmp_path / "out2" / "report.html").exists()
    assert "report:" not in plain.stdout


def test_rerun_runs_a_finished_file_again_and_removes_the_delivery_it_did_not_make_again(tmp_path: Path) -> None:
    out = tmp_path / "out"
    delivery, record = out / "kernels" / "a_fast_kopt.py", out / "kernels" / "a_fast_kopt.json"
    fast = {"delivered": True, "speedup": 1.25, "original_us": 40.0, "optimized_us": 32.0, "evaluations": 3,
            "exported": str(delivery), "record": str(record)}
    root = _fake_folder(tmp_path / "kernels", {"a_fast": fast, "b_kept": {"evaluations": 1}})
    args = {"target": FAKE_TARGET, "extra_path": [str(TESTS_DIR)]}
    _bench(root, out, **args)
    delivery.parent.mkdir()  # what the real worker writes, written here for the fake
    delivery.write_text("# the first run's delivery\n")
    record.write_text("{}\n")
    (root / "a_fast.py").write_text(FAKE_FILE.format(fake={"evaluations": 2}))  # the second run delivers nothing

    with pytest.raises(KerneloptError, match="--rerun runs problems of earlier results again: add --resume"):
        _bench(root, out, rerun=["a_fast"], **args)
    with pytest.raises(KerneloptError, match="--rerun zzz: no file of this bench's selection"):
        _bench(root, out, resume=True, rerun=["zzz"], **args)

    def killed_at_start(event: FileBenchEvent) -> None:
        if event.kind == "start":
            raise KeyboardInterrupt  # killed before the rerun finished: the earlier row and its delivery stay

    with pytest.raises(KeyboardInterrupt):
        run_file_bench(root.resolve(), suite_kinds(root.resolve()), results_dir=out, resume=True, rerun=["a_fast"],
                       options={"operators": None}, device="cpu", command="test", on_event=killed_at_start, **args)
    kept = json.loads((out / "results.json").read_text())
    assert [o["delivered"] for o in kept["outcomes"]] == [True, False] and "replaced" not in kept["meta"]
    assert delivery.is_file() and record.is_file()

    events: list[FileBenchEvent] = []
    report = _bench(root, out, events, resume=True, rerun=["a_fast"], **args)
    assert (root / "calls.log").read_text().split() == ["a_fast.py", "b_kept.py", "a_fast.py"]
    assert [(e.kind, e.name) for e in events] == [("start", "a_fast"), ("done", "a_fast"), ("skip", "b_kept")]
    assert report.resumed == ["b_kept"]
    rows = {o.name: o for o in report.outcomes}
    assert rows["a_fast"].delivered is False and rows["a_fast"].evaluations == 2 and rows["a_fast"].exported is None
    meta = json.loads((out / "results.json").read_text())["meta"]
    assert meta["resumed"][-1]["rerun"] == ["a_fast"]
    (replaced,) = meta["replaced"]
    assert (replaced["name"], replaced["status"], replaced["delivered"], replaced["speedup"]) == ("a_fast", "ok", True, 1.25)
    # the first run's delivery, which no row stands behind now, is gone, and the record says so
    assert not delivery.exists() and not record.exists()
    assert replaced["removed"] == [str(delivery), str(record)] and rows["a_fast"].details["replaced"] == replaced
    scoreboard = (out / "results.md").read_text()
    assert f"- a_fast: run again with --rerun at {replaced['replaced_at']}; the row it replaced: ok, 1.250x delivered" in scoreboard
    assert "its delivery, not made again, removed" in scoreboard and "- b_kept: run again" not in scoreboard


def test_cli_reruns_a_kernel_file(tmp_path: Path) -> None:
    root = _fake_folder(tmp_path / "kernels", {"a": {"evaluations": 1}, "b": {"evaluations": 1}})
    assert _cli(root, tmp_path / "out").exit_code == 0
    result = _cli(root, tmp_path / "out", "--resume", "--rerun", " b, ", "--json")
    assert result.exit_code == 0, result.output
    assert [r["name"] for r in json.loads(result.stdout)["meta"]["replaced"]] == ["b"]
    assert (root / "calls.log").read_text().split() == ["a.py", "b.py", "b.py"]


def test_cli_a_file_that_hangs_costs_its_row(tmp_path: Path) -> None:
    root = _fake_folder(tmp_path / "kernels", {"a_sleeps": "sleep", "b_kept": {"evaluations": 1}})
    result = _cli(root, tmp_path / "out", "--timeout", "3", "--json")
    assert result.exit_code == 0, result.output
    rows = {o["name"]: o for o in json.loads(result.stdout)["outcomes"]}
    assert rows["a_sleeps"]["status"] == "timeout" and rows["b_kept"]["status"] == "ok"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--stock-modes", "reduce-overhead"], "--stock-modes applies to a bench of model problems"),
        (["--max-targets", "2"], "--max-targets applies to a bench of model problems"),
        (["--cuda-graphs", "off"], "--cuda-graphs applies to a bench of model problems"),
        (["--gpus", "2"], "--gpus applies to a bench of model problems"),
        (["--shard", "1/2"], "--shard applies to a bench of model problems"),
        (["--stop-after", "60"], "--stop-after applies to a bench of model problems"),
        (["--slot", "600"], "--slot applies to a bench of model problems"),
        (["--llm", "openai:gpt-4o"], "--llm applies to a bench of model problems"),
        (["--operators", "helion-autotune"], "helion-autotune do not apply to a triton kernel file"),
        (["--size", "NOPE=3"], "--size NOPE: no selected problem"),
        (["--problems", "zzz"], "no problem matches zzz"),
    ],
)
def test_cli_refuses_what_cannot_apply_to_kernel_files_in_one_line(tmp_path: Path, flags: list[str], message: str) -> None:
    root = _fake_folder(tmp_path / "kernels", {"a": {"evaluations": 1}})
    result = _cli(root, tmp_path / "out", *flags)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert not (root / "calls.log").exists() and not (tmp_path / "out").exists()


def test_cli_refuses_a_mixed_folder_naming_the_fix(tmp_path: Path) -> None:
    root = _fake_folder(tmp_path / "mixed", {"a": {"evaluations": 1}})
    (root / "model.py").write_text(MODEL)
    result = _cli(root, tmp_path / "out")
    assert result.exit_code == 2 and "bench one kind per run" in result.stderr and "--problems" in result.stderr
    picked = _cli(root, tmp_path / "out", "--problems", "a", "--json")
    assert picked.exit_code == 0, picked.output
    assert [o["name"] for o in json.loads(picked.stdout)["outcomes"]] == ["a"]


def test_a_resumed_file_bench_checks_the_machines_gpu_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the model bench: rows measured on one device and a machine whose GPU is another stop in one line
    before any file runs."""
    import torch

    from kernelopt.pipeline import bench_files

    root = tmp_path / "kernels"
    root.mkdir()
    (root / "add_one.py").write_text(ELEMENTWISE.format(name="add_one", n=200, expr="x + 1.0", torch_expr="x + 1.0"))
    out = tmp_path / "out"
    _bench(root, out)  # on this machine's CPU: its rows say "cpu"
    before = (out / "results.json").read_bytes()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(bench_files, "machine_gpus", lambda count: ["Fake GPU 80GB"])
    kinds = suite_kinds(root.resolve())
    with pytest.raises(KerneloptError, match=r"holds rows measured on cpu, and this machine's GPU is Fake GPU 80GB"):
        run_file_bench(root.resolve(), kinds, results_dir=out, resume=True, rerun=["add_one"], command="test")
    assert (out / "results.json").read_bytes() == before
