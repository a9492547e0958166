"""Nsight Compute for a kernel-file run, without a GPU: a fake ``ncu`` on PATH that logs what it was asked,
runs the probe it was handed (the user's file, on CPU tensors through Triton's interpreter) and prints
counters for one kernel name only; the agents through the real OpenAI SDK to a scripted local server."""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic")
pytest.importorskip("triton")

from conftest import ROOT
from llm_servers import Reply, ScriptedLLMServer

from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.measure import ncu
from kernelopt.measure.ncu import ANALYST_METRICS
from kernelopt.pipeline.optimize_file import optimize_file
from kernelopt.search.termination import Budget
from kernelopt.store import Store

PATH = ROOT / "examples" / "kernels" / "softmax_naive.py"
SOURCE = PATH.read_text()
WARPS = {1: SOURCE.replace("num_warps=4", "num_warps=8"), 2: SOURCE.replace("num_warps=4", "num_warps=2")}
KERNEL = "softmax_kernel"  # the kernel softmax_naive.py's launch launches
HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def counters_csv(dram_pct: str) -> str:
    row = '"0","1","python3","h","{k}","1","7","(128, 1, 1)","(6, 1, 1)","0","9.0","Command line profiler metrics","{m}","{u}","{v}"'
    return "\n".join(
        [
            "==PROF== Connected to process 1",
            HEADER,
            row.format(k=KERNEL, m="dram__throughput.avg.pct_of_peak_sustained_elapsed", u="%", v=dram_pct),
            row.format(k=KERNEL, m="launch__registers_per_thread", u="register/thread", v="38"),
            "==PROF== Disconnected from process 1",
        ]
    )


FAKE_NCU = """#!{python}
import json, os, subprocess, sys
args = sys.argv[1:]
with open({log!r}, "a") as log:  # what it was asked, and where it runs: a worker's environment, no secret in it
    log.write(json.dumps({{"argv": args, "worker_dir": os.environ.get("KERNELOPT_WORKER_DIR"),
                          "secret": os.environ.get("KERNELOPT_TEST_TOKEN")}}) + "\\n")
program = args[args.index("--metrics") + 2:]  # what ncu profiles follows its options
ran = subprocess.run(program)
if ran.returncode:
    print("==ERROR== The application returned an error code (%d)." % ran.returncode, file=sys.stderr)
    sys.exit(ran.returncode)
print(open({csv!r}).read())
"""


class FakeNcu:
    """A fake ``ncu`` in a folder the worker's user may enter; ``calls`` are the argument lists it got."""

    def __init__(self, folder: Path) -> None:
        self.bin, self.log, self.csv = folder / "bin", folder / "ncu.log", folder / "counters.csv"
        self.bin.mkdir()
        self.bin.chmod(0o755)
        self.csv.write_text(counters_csv("87.25"))
        self.csv.chmod(0o644)
        script = self.bin / "ncu"
        script.write_text(FAKE_NCU.format(python=sys.executable, log=str(self.log), csv=str(self.csv)))
        script.chmod(0o755)

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def calls(self) -> list[list[str]]:
        return [record["argv"] for record in self.records()]


def _path_without_ncu() -> str:
    return os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "ncu").exists())


@pytest.fixture
def fake_ncu(worker_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNcu:
    fake = FakeNcu(worker_tmp)
    monkeypatch.setenv("PATH", str(fake.bin) + os.pathsep + _path_without_ncu())  # the worker inherits PATH
    return fake


@pytest.fixture
def server():
    s = ScriptedLLMServer("openai").start()
    yield s
    s.stop()


def reply(obj: dict) -> Reply:
    return Reply(text=json.dumps(obj), input_tokens=900, output_tokens=300)


def one_round(server: ScriptedLLMServer, round: int = 1) -> None:
    """Analyst, Planner, Coder (a file that passes gates 1-3, another each round), Judge: one LLM proposal and its
    record (the Judge answers at the next proposal: a resumed process's first request). A resumed run's Analyst,
    given the same prompt, is answered from the store's response cache: round 2 has no reply for it."""
    analyst = {"bottleneck": "memory-bound", "evidence": ["dram 87.25 % of peak"], "headroom_us": 5.0, "notes": "dram"}
    server.enqueue(
        *([reply(analyst)] if round == 1 else []),
        reply({"strategy": "more-warps", "change": "num_warps 8", "expected_effect": "-5%", "evidence": ["rows"], "risks": []}),
        reply({"source": WARPS[round], "summary": "other warps"}),
        reply({"strategy": "more-warps", "what_worked": "8 warps", "why": "more loads in flight", "apply_when": "wide rows",
               "avoid_when": "never", "speedup": None, "success": False}),
    )


def run(path: Path, store: Store, server: ScriptedLLMServer, events: list, **kw):
    return optimize_file(
        path, store, operators=[], device="cpu", sizes={"ROWS": 6, "COLS": 50},
        budget=kw.pop("budget", Budget(max_evaluations=1, patience=3)),
        settings=GateSettings(kernel_seeds=(0,), model_seeds=(0,), trials=4, kernel_distributions=("neg",)),
        llm=f"openai-compatible:kernel-coder@{server.base_url}", on_event=lambda kind, data: events.append((kind, data)),
        **kw,
    )


def analyst_prompts(server: ScriptedLLMServer) -> list[str]:
    texts = [json.dumps(r.body) for r in server.requests]
    return [t for t in texts if "Hardware counters (Nsight Compute)" in t]


def transcribed_analyst_prompts(store: Store, run_id: int) -> list[str]:
    """Every Analyst prompt of the run, a cache hit's too (the transcripts keep them all)."""
    rows = store.connection.execute(
        "SELECT prompt FROM transcripts WHERE run_id=? AND role='analyst' ORDER BY id", (run_id,)
    ).fetchall()
    return [json.dumps(json.loads(r[0])) for r in rows]


def test_a_file_run_profiles_its_main_kernel_in_the_worker_and_the_analyst_reads_the_counters(
    tmp_path, fake_ncu, server, monkeypatch
) -> None:
    monkeypatch.setenv("KERNELOPT_TEST_TOKEN", "s3cret")  # ours: ncu and the file it runs must not see it
    one_round(server)
    store, events = Store(tmp_path / "k.db"), []
    report = run(PATH, store, server, events, export_path=tmp_path / "s_kopt.py")
    assert store.run(report.run_id).status == "done"
    (record,) = fake_ncu.records()
    assert record["worker_dir"] and record["secret"] is None  # ncu ran in the evaluation worker, not in our process
    call = record["argv"]
    option = {name: call[call.index(name) + 1] for name in ("--kernel-name", "--clock-control", "--nvtx-include", "--metrics")}
    assert option == {"--kernel-name": f"regex:^{KERNEL}$", "--clock-control": "none",
                      "--nvtx-include": "kernelopt_profile/", "--metrics": ",".join(ANALYST_METRICS)}
    program = call[call.index("--metrics") + 2:]
    assert program[1:3] == ["-m", "kernelopt.evaluate.ncu_file_probe"]
    assert json.loads(program[3])["path"] == str(PATH.resolve()) and json.loads(program[3])["kernel"] == KERNEL
    (prompt,) = analyst_prompts(server)
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed = 87.25" in prompt
    assert "launch__registers_per_thread = 38.0" in prompt and "Nsight Compute was not available" not in prompt
    stored = store.measurements(report.run_id, f"ncu/{KERNEL}")[f"ncu/{KERNEL}"]
    assert stored["metrics"]["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 87.25
    assert report.ncu == f"Nsight Compute: read 2 metrics for {KERNEL} (the Analyst's counters)"
    assert not [d for k, d in events if k == "warning" and "counters" in d["message"]]
    assert ("stage", {"stage": f"Nsight Compute on {KERNEL}"}) in events


class Killed(BaseException):
    """The run killed where it stands (as a signal would), past every handler of the run's own."""


def killed_at_the_search(store: Store, server: ScriptedLLMServer) -> int:
    """A run killed right after its facts and its profile were stored, before any agent was asked."""

    def kill(kind: str, data: dict) -> None:
        if kind == "stage" and str(data.get("stage", "")).startswith("search on"):
            raise Killed

    with pytest.raises(Killed):
        optimize_file(
            PATH, store, operators=[], device="cpu", sizes={"ROWS": 6, "COLS": 50}, on_event=kill,
            llm=f"openai-compatible:kernel-coder@{server.base_url}",
        )
    (run,) = store.connection.execute("SELECT id FROM runs").fetchall()
    assert server.requests == [] and store.run(run[0]).status != "done"
    return int(run[0])


def test_a_resumed_file_run_reads_the_stored_counters_back_instead_of_profiling_again(tmp_path, fake_ncu, server) -> None:
    store = Store(tmp_path / "k.db")
    run_id = killed_at_the_search(store, server)
    assert len(fake_ncu.calls()) == 1
    fake_ncu.csv.write_text(counters_csv("11.5"))  # a second profile would show other numbers
    one_round(server)
    events: list = []
    resumed = run(PATH, store, server, events, resume_run=run_id, export_path=tmp_path / "s_kopt.py")
    assert resumed.run_id == run_id and store.run(run_id).status == "done" and resumed.evaluations == 1
    assert len(fake_ncu.calls()) == 1  # not profiled again
    assert ("stage", {"stage": f"Nsight Compute on {KERNEL}"}) not in events
    (prompt,) = analyst_prompts(server)  # the resumed process's Analyst: the counters of the first process
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed = 87.25" in prompt and "11.5" not in prompt
    assert resumed.ncu == f"Nsight Compute: read 2 metrics for {KERNEL} (the Analyst's counters)"


def test_a_resumed_run_without_counters_says_so_again(tmp_path, fake_ncu, server) -> None:
    (fake_ncu.bin / "ncu").write_text("#!/bin/sh\necho 'ERR_NVGPUCTRPERM' >&2\nexit 3\n")
    store = Store(tmp_path / "k.db")
    run_id = killed_at_the_search(store, server)
    (fake_ncu.bin / "ncu").unlink()  # gone now: the resumed run must not look for it
    one_round(server)
    events: list = []
    resumed = run(PATH, store, server, events, resume_run=run_id, export_path=tmp_path / "s_kopt.py")
    warned = [d["message"] for k, d in events if k == "warning" and "counters" in d["message"]]
    assert len(warned) == 1 and resumed.warnings == warned
    assert warned[0].startswith(f"no hardware counters for {KERNEL} (recorded when the run started): ncu read no")
    assert "ERR_NVGPUCTRPERM" in warned[0] and resumed.evaluations == 1
    (prompt,) = analyst_prompts(server)
    assert "no hardware counters: Nsight Compute was not available" in prompt


def test_no_ncu_on_the_machine_is_one_warning_line_and_the_run_goes_on(tmp_path, worker_tmp, server, monkeypatch) -> None:
    if any(glob.glob(pattern) for pattern in ncu.NCU_CANDIDATES):
        pytest.skip("Nsight Compute is installed where find_ncu looks beside PATH")
    monkeypatch.setenv("PATH", _path_without_ncu())
    one_round(server)
    store, events = Store(tmp_path / "k.db"), []
    report = run(PATH, store, server, events, export_path=tmp_path / "s_kopt.py")
    assert store.run(report.run_id).status == "done" and report.evaluations == 1
    warned = [d["message"] for k, d in events if k == "warning" and "counters" in d["message"]]
    assert warned == [
        f"no hardware counters for {KERNEL}: ncu not found; install Nsight Compute or put ncu on PATH; "
        "the agents work from the roofline numbers only"
    ]
    assert report.ncu is None and report.warnings == warned
    (prompt,) = analyst_prompts(server)
    assert "no hardware counters: Nsight Compute was not available" in prompt
    from rich.console import Console

    from kernelopt.cli.kernel_file_cmd import print_file_report

    console = Console(record=True, width=300)
    print_file_report(report, console)
    assert f"warning: {warned[0]}" in console.export_text()
    import html

    from kernelopt.report.write import write_run_report

    page = write_run_report(store, report.run_id, tmp_path / "run.html").read_text()
    assert f"<td>warning</td><td>{html.escape(warned[0])}</td>" in page  # the run's page says it too


def test_an_ncu_that_reads_no_counters_says_why(tmp_path, fake_ncu, server) -> None:
    (fake_ncu.bin / "ncu").write_text(
        "#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission' >&2\nexit 3\n"
    )
    one_round(server)
    events: list = []
    report = run(PATH, Store(tmp_path / "k.db"), server, events, export_path=tmp_path / "s_kopt.py")
    (warned,) = [d["message"] for k, d in events if k == "warning" and "counters" in d["message"]]
    assert warned.startswith(f"no hardware counters for {KERNEL}: ncu read no counters for {KERNEL} (exit 3)")
    assert "ERR_NVGPUCTRPERM" in warned and "\n" not in warned and report.ncu is None


def test_a_file_run_without_the_agents_does_not_profile(tmp_path, fake_ncu) -> None:
    report = optimize_file(
        PATH, Store(tmp_path / "k.db"), operators=["eviction-policy"], device="cpu", sizes={"ROWS": 6, "COLS": 50},
        budget=Budget(max_evaluations=1, patience=3),
        settings=GateSettings(kernel_seeds=(0,), model_seeds=(0,), trials=4, kernel_distributions=("neg",)),
        export_path=tmp_path / "s_kopt.py",
    )
    assert fake_ncu.calls() == [] and report.ncu is None
