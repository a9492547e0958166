"""``kernelopt bench`` on a CPU: the scoreboard's arithmetic, and a suite that survives its problems.

The worker target is the fake in ``bench_targets.py``: each problem file written here
says, in a ``FAKE = ...`` line, which outcome the fake returns or how it fails.
"""

from __future__ import annotations

import csv
import html
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kernelopt.cli.main import app
from kernelopt.errors import KerneloptError
from kernelopt.pipeline.bench import CSV_COLUMNS, BenchEvent, run_bench, suite_root
from kernelopt.report.metrics import (
    ProblemOutcome,
    fast_p,
    geomean_speedup,
    slower_than_baseline,
    summarize,
)

TESTS_DIR = Path(__file__).resolve().parent
TARGET = "bench_targets:scripted"


@pytest.fixture
def tmp_path(worker_tmp: Path) -> Path:
    """Here a test's files (suites, tools) are read by workers, which may run as another user:
    ``worker_tmp`` (conftest) is a folder they can enter, where pytest's own is closed to them."""
    return worker_tmp

PROBLEM = '''import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []


FAKE = {fake!r}
'''
BROKEN = "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    pass\n\n\ndef get_init_inputs():\n    return []\n"
FAST = {
    "eager_ms": 2.0,
    "compiled_ms": 1.0,
    "max_autotune_ms": 0.8,
    "optimized_ms": 0.5,
    "evaluations": 12,
    "gpu_s": 6.0,
    "details": {"device": "Fake GPU 141GB"},
}


# -- arithmetic ------------------------------------------------------------------------


def _outcome(name: str, speedup: float | None, *, correct: bool = True, status: str = "ok") -> ProblemOutcome:
    """An outcome whose speedup over torch.compile is exactly ``speedup`` (optimized = 1 ms)."""
    return ProblemOutcome(
        name=name, path=f"{name}.py", status=status, reason="", correct=correct,
        eager_ms=None if speedup is None else 2 * speedup,
        compiled_ms=speedup, max_autotune_ms=None,
        optimized_ms=None if speedup is None else 1.0,
    )


def _hand_case() -> list[ProblemOutcome]:
    return [
        _outcome("a", 2.5),
        _outcome("b", 1.2),
        _outcome("c", 0.9),
        _outcome("d", 3.0, correct=False),  # fast but wrong: counts in no numerator
    ]


def test_fast_p_hand_computed() -> None:
    outcomes = _hand_case()
    assert fast_p(outcomes, 0, "compile") == 0.75  # fast_0 is the correctness rate
    assert fast_p(outcomes, 1, "compile") == 0.5
    assert fast_p(outcomes, 1.5, "compile") == 0.25
    assert fast_p(outcomes, 2, "compile") == 0.25
    assert fast_p(outcomes, 2, "eager") == 0.5  # eager times are twice the compiled ones: 5, 2.4
    assert fast_p(outcomes, 0, "max_autotune") == 0.0  # no max-autotune time, no speedup


def test_fast_p_is_strict_and_counts_failed_problems() -> None:
    outcomes = [_outcome("one", 1.0), _outcome("two", 2.0), _outcome("crashed", None, correct=False, status="crash")]
    assert fast_p(outcomes, 0, "compile") == pytest.approx(2 / 3)
    assert fast_p(outcomes, 1, "compile") == pytest.approx(1 / 3)  # 1.0 is not > 1
    assert fast_p(outcomes, 2, "compile") == 0.0  # nor 2.0 > 2
    with pytest.raises(ValueError):
        fast_p([], 1, "compile")
    with pytest.raises(ValueError):
        fast_p(outcomes, 1, "inductor")


def test_geomean_and_slower_than_baseline() -> None:
    outcomes = _hand_case()
    assert geomean_speedup(outcomes, "compile") == pytest.approx(2.7 ** (1 / 3))
    assert geomean_speedup(outcomes, "eager") == pytest.approx(2 * 2.7 ** (1 / 3))
    assert geomean_speedup(outcomes, "max_autotune") is None
    assert slower_than_baseline(outcomes) == ["c"]  # 0.9x; "d" is incorrect, so not counted
    within_noise = [_outcome("noise", 1 / 1.009), _outcome("slow", 1 / 1.02)]
    assert slower_than_baseline(within_noise) == ["slow"]


def test_summarize_hand_computed() -> None:
    summary = summarize(_hand_case())
    assert summary["problems"] == 4 and summary["correct"] == 3
    assert summary["fast_p"]["compile"] == {"0": 0.75, "1": 0.5, "1.5": 0.25, "2": 0.25}
    assert set(summary["fast_p"]) == {"eager", "compile", "max_autotune", "best_stock"}
    assert summary["geomean_speedup"]["compile"] == pytest.approx(2.7 ** (1 / 3))
    assert summary["slower_than_baseline"] == ["c"]
    assert summary["status_counts"]["ok"] == 4
    assert summarize([])["fast_p"]["compile"]["1"] is None
    json.dumps(summary, allow_nan=False)


def test_outcome_round_trip_and_validation() -> None:
    outcome = ProblemOutcome("p", "p.py", "ok", "", True, 2.0, 1.0, 0.9, 0.5, 3, 1.5, {"device": "X"})
    data = outcome.to_dict()
    assert data["speedup_vs_eager"] == 4.0 and data["speedup_vs_compile"] == 2.0
    assert data["speedup_vs_max_autotune"] == pytest.approx(1.8)
    assert ProblemOutcome.from_dict(json.loads(json.dumps(data))) == outcome
    base = {"name": "p", "path": "p.py", "status": "ok", "correct": True}
    # measured interleaved in one process, the ratio against max-autotune wins over two processes' medians
    interleaved = ProblemOutcome("p", "p.py", "ok", "", True, 2.0, 1.0, 0.9, 0.5, 3, 1.5, {}, max_autotune_speedup=1.7)
    assert interleaved.speedup_vs_max_autotune == 1.7 and interleaved.to_dict()["speedup_vs_max_autotune"] == 1.7
    assert ProblemOutcome.from_dict(json.loads(json.dumps(interleaved.to_dict()))) == interleaved
    assert summarize([interleaved])["geomean_speedup"]["max_autotune"] == pytest.approx(1.7)
    for bad in ({"status": "fine"}, {"correct": "yes"}, {"optimized_ms": math.nan}, {"eager_ms": -1.0},
                {"eager_ms": "1"}, {"evaluations": 1.5}, {"details": []}, {"max_autotune_speedup": 0.0}):
        with pytest.raises(ValueError):
            ProblemOutcome.from_dict({**base, **bad})


# -- run_bench ---------------------------------------------------------------------------


def _suite(root: Path, files: dict[str, Any]) -> Path:
    """``files``: name -> FAKE literal, or None for a file that fails to load."""
    level = root / "level1"
    level.mkdir(parents=True)
    for name, fake in files.items():
        (level / f"{name}.py").write_text(BROKEN if fake is None else PROBLEM.format(fake=fake))
    return root


def _standard_suite(root: Path) -> Path:
    return _suite(root, {"01_fast": FAST, "02_raises": "raise", "03_segfault": "segfault", "04_broken": None})


def _calls(suite: Path) -> list[str]:
    log = suite / "level1" / "calls.log"
    return log.read_text().split() if log.exists() else []


def _bench(suite: Path, out: Path, **options: Any):
    options.setdefault("worker_timeout_s", 60.0)
    return run_bench(suite, results_dir=out, target=TARGET, extra_path=[TESTS_DIR], **options)


def test_suite_survives_every_kind_of_failure(tmp_path: Path) -> None:
    suite = _standard_suite(tmp_path / "suite")
    events: list[BenchEvent] = []
    report = _bench(suite, tmp_path / "out", time_limit_s=30.0, extra_options={"flag": 7}, on_event=events.append)

    by_name = {o.name: o for o in report.outcomes}
    assert list(by_name) == ["level1/01_fast", "level1/02_raises", "level1/03_segfault", "level1/04_broken"]
    fast = by_name["level1/01_fast"]
    assert (fast.status, fast.correct, fast.speedup_vs_compile, fast.evaluations) == ("ok", True, 2.0, 12)
    assert fast.details["options"] == {"flag": 7, "name": "level1/01_fast", "time_limit_s": 30.0}
    raised = by_name["level1/02_raises"]
    assert raised.status == "run_error" and not raised.correct
    assert "RuntimeError: fake failure inside the target" in raised.reason
    crashed = by_name["level1/03_segfault"]
    assert crashed.status == "crash" and "SIGSEGV" in crashed.reason
    broken = by_name["level1/04_broken"]
    assert broken.status == "load_error" and "defines no get_inputs" in broken.reason
    assert _calls(suite) == ["01_fast.py", "02_raises.py", "03_segfault.py"]  # no worker for the broken file
    assert [(e.kind, e.index) for e in events if e.kind == "done"] == [("done", i) for i in (1, 2, 3, 4)]

    summary = report.summary
    assert summary["problems"] == 4 and summary["correct"] == 1
    assert summary["fast_p"]["compile"] == {"0": 0.25, "1": 0.25, "1.5": 0.25, "2": 0.0}  # 2.0 is not > 2
    assert summary["fast_p"]["eager"]["2"] == 0.25
    assert summary["geomean_speedup"]["max_autotune"] == pytest.approx(1.6)
    assert summary["slower_than_baseline"] == []
    assert summary["evaluations_per_gpu_minute"] == pytest.approx(120.0)

    document = json.loads(report.json_path.read_text())
    assert document["summary"] == summary
    assert [o["status"] for o in document["outcomes"]] == ["ok", "run_error", "crash", "load_error"]
    meta = document["meta"]
    assert meta["suite"] == str(suite.resolve()) and meta["device"] == "Fake GPU 141GB"
    assert meta["started"] and meta["finished"] and meta["versions"]["torch"]
    assert meta["time_limit_s"] == 30.0 and meta["target"] == TARGET

    with report.csv_path.open(newline="") as file:
        reader = csv.DictReader(file)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == CSV_COLUMNS
    assert [row["status"] for row in rows] == ["ok", "run_error", "crash", "load_error"]
    assert rows[0]["correct"] == "true" and float(rows[0]["speedup_vs_compile"]) == 2.0
    assert rows[1]["optimized_ms"] == "" and "fake failure" in rows[1]["reason"]
    # the seconds each worker ran, for planning a slot of GPU time; none where no worker ran (a file that does not load)
    assert all(float(row["worker_s"]) > 0 for row in rows[:3]) and rows[3]["worker_s"] == ""
    assert [o.worker_s for o in report.outcomes][3] is None
    table = report.markdown_path.read_text()
    assert "| of floor | evaluations | wall s |" in table
    assert f"| {report.outcomes[0].evaluations} | {report.outcomes[0].worker_s:.0f} |" in table


def test_several_gpus_run_problems_at_once_each_on_its_own(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite", {"01_a": "meet", "02_b": "meet", "03_fast": FAST})
    report = _bench(suite, tmp_path / "out", gpus=2)
    a, b, fast = report.outcomes
    assert [o.status for o in report.outcomes] == ["ok", "ok", "ok"], [o.reason for o in report.outcomes]
    assert {a.details["gpu"], b.details["gpu"]} == {0, 1}  # both at once, so on different GPUs
    assert {a.details["visible"], b.details["visible"]} == {"0", "1"}
    assert fast.details["gpu"] in (0, 1)
    assert json.loads(report.json_path.read_text())["meta"]["gpus"] == 2
    with pytest.raises(KerneloptError, match="--gpus must be at least 1"):
        _bench(suite, tmp_path / "other", gpus=0)


def test_timeout_and_invalid_outcome_are_recorded(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite", {"01_sleeps": "sleep", "02_invalid": {"optimized_ms": -1.0}})
    report = _bench(suite, tmp_path / "out", worker_timeout_s=2.0)
    sleeps, invalid = report.outcomes
    assert sleeps.status == "timeout" and "timed out" in sleeps.reason
    assert invalid.status == "run_error" and "invalid outcome" in invalid.reason, invalid.reason
    assert json.loads(report.json_path.read_text())["outcomes"][1]["optimized_ms"] is None


def test_resume_after_a_kill_runs_only_what_is_missing(tmp_path: Path) -> None:
    suite = _standard_suite(tmp_path / "suite")
    out = tmp_path / "out"

    def killed_after_first(event: BenchEvent) -> None:
        if event.kind == "done":
            raise KeyboardInterrupt  # stands in for kill -9 right after a problem's results were written

    with pytest.raises(KeyboardInterrupt):
        _bench(suite, out, on_event=killed_after_first)
    partial = json.loads((out / "results.json").read_text())
    assert [o["name"] for o in partial["outcomes"]] == ["level1/01_fast"]
    assert partial["meta"]["finished"] is None

    with pytest.raises(KerneloptError, match="exists; pass --resume to continue it or choose another --out"):
        _bench(suite, out)

    report = _bench(suite, out, resume=True)
    assert _calls(suite) == ["01_fast.py", "02_raises.py", "03_segfault.py"]  # 01 ran once only
    assert report.resumed == ["level1/01_fast"]
    assert len(report.outcomes) == 4 and report.summary["problems"] == 4
    document = json.loads(report.json_path.read_text())
    assert document["meta"]["finished"] and len(document["meta"]["resumed"]) == 1


def test_resume_a_partial_selection(tmp_path: Path) -> None:
    suite = _standard_suite(tmp_path / "suite")
    out = tmp_path / "out"
    first = _bench(suite, out, problems=["01_fast"])
    assert [o.name for o in first.outcomes] == ["level1/01_fast"]
    report = _bench(suite, out, resume=True)
    assert _calls(suite) == ["01_fast.py", "02_raises.py", "03_segfault.py"]
    assert [o.name for o in report.outcomes][:1] == ["level1/01_fast"]


def test_problems_run_in_the_order_given_and_the_scoreboard_keeps_suite_order(tmp_path: Path) -> None:
    """A bench cut by --stop-after or its time-out has run the problems named first; one name matching
    several runs them in suite order, and a problem named twice runs once. The rows stay in suite order,
    on resume too."""
    suite = _suite(tmp_path / "suite", {"01_a": FAST, "02_b": FAST, "03_c": FAST, "04_d": FAST})
    out = tmp_path / "out"
    events: list[tuple[str, str, int]] = []
    report = _bench(suite, out, problems=["04_d", "0", "04_d"], on_event=lambda e: events.append((e.kind, e.name, e.index)))
    assert _calls(suite) == ["04_d.py", "01_a.py", "02_b.py", "03_c.py"]
    assert [(n, i) for kind, n, i in events if kind == "start"][:2] == [("level1/04_d", 1), ("level1/01_a", 2)]
    assert [o.name for o in report.outcomes] == ["level1/01_a", "level1/02_b", "level1/03_c", "level1/04_d"]

    again = _suite(tmp_path / "again", {"01_a": FAST, "02_b": FAST, "03_c": FAST})
    first = _bench(again, tmp_path / "out2", problems=["03_c"])
    resumed = _bench(again, tmp_path / "out2", resume=True, problems=["02_b", "01_a"])
    assert _calls(again) == ["03_c.py", "02_b.py", "01_a.py"] and [o.name for o in first.outcomes] == ["level1/03_c"]
    assert [o.name for o in resumed.outcomes] == ["level1/01_a", "level1/02_b", "level1/03_c"]
    saved = json.loads((tmp_path / "out2" / "results.json").read_text())
    assert [o["name"] for o in saved["outcomes"]] == ["level1/01_a", "level1/02_b", "level1/03_c"]


def test_resume_can_retry_what_failed(tmp_path: Path) -> None:
    suite = _standard_suite(tmp_path / "suite")
    out = tmp_path / "out"
    _bench(suite, out)
    report = _bench(suite, out, resume=True, retry_failed=True)
    assert _calls(suite) == ["01_fast.py", "02_raises.py", "03_segfault.py", "02_raises.py", "03_segfault.py"]
    assert report.resumed == ["level1/01_fast"] and report.summary["problems"] == 4


def test_rerun_runs_a_finished_problem_again_and_keeps_what_its_row_was(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite", {"01_fast": FAST, "02_fast": FAST})
    out = tmp_path / "out"
    _bench(suite, out)
    faster = (suite / "level1" / "01_fast.py").read_text().replace("'optimized_ms': 0.5", "'optimized_ms': 0.25")
    (suite / "level1" / "01_fast.py").write_text(faster)

    with pytest.raises(KerneloptError, match="--rerun runs problems of earlier results again: add --resume"):
        _bench(suite, out, rerun=["01_fast"])
    with pytest.raises(KerneloptError, match="--rerun 09_gone: no problem of this bench's selection"):
        _bench(suite, out, resume=True, rerun=["09_gone"])
    with pytest.raises(KerneloptError, match="--rerun 02_fast: no problem"):  # outside --problems
        _bench(suite, out, resume=True, problems=["01_fast"], rerun=["02_fast"])

    def killed_at_start(event: BenchEvent) -> None:
        if event.kind == "start":
            raise KeyboardInterrupt  # killed before the rerun finished: the earlier row is not lost

    with pytest.raises(KeyboardInterrupt):
        _bench(suite, out, resume=True, rerun=["01_fast"], on_event=killed_at_start)
    kept = json.loads((out / "results.json").read_text())
    assert [o["optimized_ms"] for o in kept["outcomes"]] == [0.5, 0.5] and "replaced" not in kept["meta"]

    report = _bench(suite, out, resume=True, rerun=["01_fast"])
    assert _calls(suite) == ["01_fast.py", "02_fast.py", "01_fast.py"]
    assert report.resumed == ["level1/02_fast"]
    assert [o.optimized_ms for o in report.outcomes] == [0.25, 0.5]
    # the rerun's worker is told, so it takes no run of the problem finished earlier (bench_problem.finished_run)
    assert [o.details["options"].get("rerun") for o in report.outcomes] == [True, None]
    meta = json.loads(report.json_path.read_text())["meta"]
    assert meta["resumed"][-1]["rerun"] == ["level1/01_fast"]
    (replaced,) = meta["replaced"]
    assert replaced["name"] == "level1/01_fast" and replaced["optimized_ms"] == 0.5 and replaced["status"] == "ok"
    from kernelopt.report.scoreboard import problem_notes

    notes = problem_notes(report.outcomes[0])  # the row itself says it replaced an earlier measurement
    assert notes == [f"run again with --rerun at {replaced['replaced_at']}; the row it replaced: ok"]
    assert problem_notes(report.outcomes[1]) == []
    scored = {**replaced, "best_stock_speedup": 1.254, "replaced_at": "2026-12-05T01:00:00"}
    outcome = ProblemOutcome("level1/24_vocab", "24.py", "ok", "", True, details={"replaced": scored})
    assert problem_notes(outcome) == [
        "run again with --rerun at 2026-12-05T01:00:00; the row it replaced: ok, 1.254x of its best stock mode"
    ]
    assert "run again with --rerun" in (out / "results.md").read_text()


def test_resume_in_a_moved_checkout(tmp_path: Path) -> None:
    import shutil

    suite = _suite(tmp_path / "a" / "suite", {"01_fast": FAST, "02_fast": FAST})
    out = tmp_path / "out"
    _bench(suite, out, problems=["01_fast"])
    moved = tmp_path / "b" / "suite"
    shutil.copytree(suite, moved)
    report = _bench(moved, out, resume=True)
    assert report.resumed == ["level1/01_fast"] and len(report.outcomes) == 2
    assert json.loads(report.json_path.read_text())["meta"]["suite"] == str(moved.resolve())


def test_shards_split_the_suite_and_merge_into_one_scoreboard(tmp_path: Path) -> None:
    from kernelopt.pipeline.bench import merge_results

    suite = _standard_suite(tmp_path / "suite")
    first = _bench(suite, tmp_path / "s1", shard=(1, 2))
    second = _bench(suite, tmp_path / "s2", shard=(2, 2))
    assert [o.name for o in first.outcomes] == ["level1/01_fast", "level1/03_segfault"]
    assert [o.name for o in second.outcomes] == ["level1/02_raises", "level1/04_broken"]
    assert json.loads(first.json_path.read_text())["meta"]["shard"] == [1, 2]
    merged = merge_results([tmp_path / "s1", tmp_path / "s2"], tmp_path / "all")
    assert [o.name for o in merged.outcomes] == ["level1/01_fast", "level1/02_raises", "level1/03_segfault", "level1/04_broken"]
    assert merged.summary["problems"] == 4 and merged.summary["correct"] == 1
    assert merged.summary["fast_p"]["compile"]["1"] == 0.25
    document = json.loads((tmp_path / "all" / "results.json").read_text())
    assert len(document["meta"]["merged_from"]) == 2 and document["summary"] == merged.summary
    calls = len(_calls(suite))
    again = _bench(suite, tmp_path / "all", resume=True)  # a merged scoreboard resumes like any other
    assert len(_calls(suite)) == calls and again.summary == merged.summary
    # a problem that failed in one bench and ran in another keeps the run that worked
    retry = _suite(tmp_path / "again" / "suite", {"02_raises": FAST})
    _bench(retry, tmp_path / "s3")
    fixed = merge_results([tmp_path / "s2", tmp_path / "s3"], tmp_path / "fixed")
    assert {o.name: o.status for o in fixed.outcomes}["level1/02_raises"] == "ok"
    with pytest.raises(KerneloptError, match="must be between 1 and 2"):
        _bench(suite, tmp_path / "s4", shard=(3, 2))
    with pytest.raises(KerneloptError, match="does not exist"):
        merge_results([tmp_path / "nowhere"], tmp_path / "x")
    other = _suite(tmp_path / "other", {"01_fast": FAST})
    _bench(other, tmp_path / "o")
    with pytest.raises(KerneloptError, match="different suites"):
        merge_results([tmp_path / "s1", tmp_path / "o"], tmp_path / "y")


def test_user_errors(tmp_path: Path) -> None:
    suite = _standard_suite(tmp_path / "suite")
    with pytest.raises(KerneloptError, match="no problem matches nope"):
        _bench(suite, tmp_path / "out", problems=["nope"])
    with pytest.raises(KerneloptError, match="no such suite directory"):
        _bench(tmp_path / "missing", tmp_path / "out2")
    other = _suite(tmp_path / "other", {"01_fast": FAST})
    _bench(other, tmp_path / "out3")
    with pytest.raises(KerneloptError, match="holds results for the suite"):
        _bench(suite, tmp_path / "out3", resume=True)


def test_kernelbench_checkout_root_means_its_problem_folder(tmp_path: Path) -> None:
    checkout = tmp_path / "KernelBench-main"
    _suite(checkout / "KernelBench", {"19_ReLU": FAST})
    (checkout / "scripts").mkdir()
    (checkout / "scripts" / "run_and_check.py").write_text("raise SystemExit('not a problem')\n")
    assert suite_root(checkout) == checkout / "KernelBench"
    report = _bench(checkout, tmp_path / "out")
    assert [(o.name, o.status) for o in report.outcomes] == [("level1/19_ReLU", "ok")]


# -- command line ------------------------------------------------------------------------


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def test_cli_bench(tmp_path: Path) -> None:
    suite = _standard_suite(tmp_path / "suite")
    out = tmp_path / "out"
    args = ["bench", str(suite), "--out", str(out), "--worker-target", TARGET, "--worker-path", str(TESTS_DIR)]
    result = _runner().invoke(app, [*args, "--problems", "01_fast,02_raises", "--time-limit", "30"])
    assert result.exit_code == 0, result.output
    for text in ("level1/01_fast", "run_error", "fast_1.5", "geomean", "slower than torch.compile (beyond 1 %): 0"):
        assert text in result.stdout, text
    assert "[2/2]" in result.stderr

    again = _runner().invoke(app, args)
    assert again.exit_code == 2
    assert "exists; pass --resume" in again.stderr and "Traceback" not in again.output

    resumed = _runner().invoke(app, [*args, "--resume", "--json"])
    assert resumed.exit_code == 0, resumed.output
    document = json.loads(resumed.stdout)
    assert document["summary"]["problems"] == 4 and document["resumed"] == ["level1/01_fast", "level1/02_raises"]
    assert _calls(suite) == ["01_fast.py", "02_raises.py", "03_segfault.py"]

    rerun = _runner().invoke(app, [*args, "--resume", "--rerun", " 01_fast, ", "--json"])
    assert rerun.exit_code == 0, rerun.output
    assert json.loads(rerun.stdout)["meta"]["replaced"][0]["name"] == "level1/01_fast"
    assert _calls(suite) == ["01_fast.py", "02_raises.py", "03_segfault.py", "01_fast.py"]


def test_cli_bench_prints_each_problem_against_the_best_stock_mode_too(tmp_path: Path) -> None:
    """Issue 13: every speedup is printed against the best stock mode as well as against the default, the
    progress line too, with the seconds the problem's worker ran (what a slot of GPU time is planned with)."""
    best = {**FAST, "best_stock_mode": "max-autotune-no-cudagraphs", "best_stock_ms": 0.8, "best_stock_speedup": 1.6}
    suite = _suite(tmp_path / "suite", {"01_best": best, "02_plain": FAST})
    args = ["bench", str(suite), "--out", str(tmp_path / "out"), "--worker-target", TARGET, "--worker-path", str(TESTS_DIR)]
    result = _runner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert re.search(r"\[1/2\] level1/01_best -> ok in \d+ s, correct, 2\.00× vs torch\.compile, 1\.60× vs the best "
                     r"stock mode \(max-autotune-no-cudagraphs\)\n", result.stderr), result.stderr  # fmt: skip
    assert re.search(r"\[2/2\] level1/02_plain -> ok in \d+ s, correct, 2\.00× vs torch\.compile\n", result.stderr)
    resumed = _runner().invoke(app, [*args, "--resume"])  # a row read back ran in an earlier bench: no seconds now
    assert "[1/2] level1/01_best already done: ok, correct, 2.00× vs torch.compile, 1.60× vs the best stock mode " \
           "(max-autotune-no-cudagraphs)\n" in resumed.stderr  # fmt: skip


def test_cli_bench_passes_the_operators_to_each_problem(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite", {"01_fast": FAST})
    args = ["bench", str(suite), "--worker-target", TARGET, "--worker-path", str(TESTS_DIR)]
    result = _runner().invoke(app, [*args, "--out", str(tmp_path / "a"), "--json"])
    assert result.exit_code == 0, result.output
    (outcome,) = json.loads(result.stdout)["outcomes"]
    assert outcome["details"]["options"]["operators"] == ["launch-config", "eviction-policy"]  # optimize's default
    knobs = _runner().invoke(app, [*args, "--out", str(tmp_path / "b"), "--operators", "launch-config,compiler-knobs", "--json"])
    document = json.loads(knobs.stdout)
    assert document["outcomes"][0]["details"]["options"]["operators"] == ["launch-config", "compiler-knobs"]
    assert document["meta"]["extra_options"]["operators"] == ["launch-config", "compiler-knobs"]  # kept with the results
    bad = _runner().invoke(app, [*args, "--out", str(tmp_path / "c"), "--operators", "launch-config,llm"])
    assert bad.exit_code == 2 and "unknown operator llm; available:" in bad.stderr
    assert _calls(suite) == ["01_fast.py", "01_fast.py"]  # the bad selection ran nothing


def test_cli_shard_and_merge(tmp_path: Path) -> None:
    suite = _standard_suite(tmp_path / "suite")
    base = ["bench", str(suite), "--worker-target", TARGET, "--worker-path", str(TESTS_DIR)]
    for i in (1, 2):
        result = _runner().invoke(app, [*base, "--out", str(tmp_path / f"s{i}"), "--shard", f"{i}/2", "--budget", "4"])
        assert result.exit_code == 0, result.output
    first = json.loads((tmp_path / "s1" / "results.json").read_text())
    assert first["outcomes"][0]["details"]["options"]["budget"] == 4
    merged = _runner().invoke(app, ["bench-merge", str(tmp_path / "all"), str(tmp_path / "s1"), str(tmp_path / "s2")])
    assert merged.exit_code == 0, merged.output
    assert "level1/04_broken" in merged.stdout and "problems: 4" in merged.stdout
    bad = _runner().invoke(app, [*base, "--out", str(tmp_path / "s9"), "--shard", "two"])
    assert bad.exit_code == 2 and "--shard two: expected I/N" in bad.stderr


def test_an_interrupted_bench_on_several_gpus_ends_its_running_problems_at_once(tmp_path: Path) -> None:
    import time

    suite = _suite(tmp_path / "suite", {"01_sleeps": "sleep", "02_fast": FAST, "03_queued": FAST})
    out = tmp_path / "out"

    def interrupt_after_fast(event: BenchEvent) -> None:
        if event.kind == "done" and event.name == "level1/02_fast":
            raise KeyboardInterrupt  # Ctrl-C while 01 sleeps on the other GPU

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _bench(suite, out, gpus=2, on_event=interrupt_after_fast, worker_timeout_s=300.0)
    assert time.monotonic() - started < 60  # the sleeping problem's worker was ended, not waited for (600 s)
    written = [o["name"] for o in json.loads((out / "results.json").read_text())["outcomes"]]
    assert written == ["level1/02_fast"]  # the cut-short problem is not a result: a resume runs it again
    assert "03_fast.py" not in _calls(suite) and "03_queued.py" not in _calls(suite)  # the queued one never started
    report = _bench(suite, out, resume=True, worker_timeout_s=2.0)
    assert [o.name for o in report.outcomes] == ["level1/01_sleeps", "level1/02_fast", "level1/03_queued"]
    assert report.outcomes[0].status == "timeout"  # run again on resume (and it sleeps again)


def test_every_outcome_names_the_code_that_produced_it(tmp_path: Path) -> None:
    from kernelopt.measure.environment import source_digest

    pkg = tmp_path / "pkg"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    first = source_digest(pkg)
    (pkg / "sub" / "__pycache__" / "b.cpython-312.pyc").write_bytes(b"\0")
    assert source_digest(tmp_path / "pkg" / ".." / "pkg") == first  # caches and bytecode do not count
    (pkg / "sub" / "b.py").write_text("y = 3\n")
    source_digest.__globals__["_digest"].cache_clear()
    assert source_digest(pkg) != first  # one changed line is other code

    report = _bench(_suite(tmp_path / "suite", {"01_fast": FAST, "02_broken": None}), tmp_path / "out")
    assert {o.details["kernelopt_source"] for o in report.outcomes} == {source_digest()}  # the broken one too
    assert json.loads(report.json_path.read_text())["meta"]["versions"]["kernelopt_source"] == source_digest()


def test_the_results_folder_holds_a_markdown_scoreboard(tmp_path: Path) -> None:
    report = _bench(_standard_suite(tmp_path / "suite"), tmp_path / "out", time_limit_s=30.0)
    text = report.markdown_path.read_text()
    assert text.startswith(f"# kernelopt bench: {report.suite}")
    assert "Device: Fake GPU 141GB" in text and "kernelopt_source" in text
    assert "4 problems, 1 correct; slower than torch.compile (beyond 1 %): 0" in text
    assert "| torch.compile | 25 % | 25 % | 25 % | 0 % | 2.000× |" in text  # fast_0, 1, 1.5, 2 and the geomean
    assert "| level1/01_fast | ok | yes | 2 | 1 | 0.8 | 0.5 | 4.000× | 2.000× | 1.600× |  |  | default |  | 12 |" in text
    assert "- level1/03_segfault: crash:" in text and "- level1/04_broken: load_error:" in text
    assert json.loads(report.json_path.read_text())["summary"] == report.summary  # the same data as the JSON


def test_speedups_timed_interleaved_carry_their_spread(tmp_path: Path) -> None:
    cmp = {"speedup": 1.083, "speedup_q1": 1.0803, "speedup_q3": 1.0848}
    details = {"speedup_vs_compile_iqr": [1.326, 1.331],
               "max_autotune": {"vs_optimized": {"speedup": 1.083, "comparison": cmp, "optimized": "kernelopt"}}}
    outcome = ProblemOutcome("p", "p.py", "ok", "", True, 8.3, 9.33, 7.61, 7.03, 9, 64.0, details, max_autotune_speedup=1.083)
    assert outcome.speedup_spread("compile") == (1.326, 1.331)
    assert outcome.speedup_spread("max_autotune") == (1.0803, 1.0848)
    assert outcome.speedup_spread("eager") is None  # eager and the optimized model were not timed together
    # medians from two processes have no spread to show; a failed max-autotune process left a reason
    crossed = ProblemOutcome("p", "p.py", "ok", "", True, 8.3, 9.33, 7.61, 7.03, details={"max_autotune": {"vs_optimized": {}}})
    assert crossed.speedup_spread("max_autotune") is None and crossed.speedup_spread("compile") is None
    failed = ProblemOutcome("p", "p.py", "ok", "", True, details={"max_autotune": "timeout", "speedup_vs_compile_iqr": None})
    assert failed.speedup_spread("max_autotune") is None and failed.speedup_spread("compile") is None
    with pytest.raises(ValueError):
        outcome.speedup_spread("fastest")
    spread = {**FAST, "max_autotune_speedup": 1.55,
              "details": {"device": "Fake GPU 141GB", "speedup_vs_compile_iqr": [1.98, 2.02],
                          "max_autotune": {"vs_optimized": {"comparison": {"speedup_q1": 1.5, "speedup_q3": 1.61},
                                                            "optimized": "kernelopt"}}}}
    report = _bench(_suite(tmp_path / "suite", {"01_fast": spread}), tmp_path / "out")
    text = report.markdown_path.read_text()
    assert "| level1/01_fast | ok | yes | 2 | 1 | 0.8 | 0.5 | 4.000× | 2.000× (1.980–2.020) | 1.550× (1.500–1.610) |  |  | default |  | 12 |" in text


def test_a_merged_scoreboard_lists_every_parts_commands(tmp_path: Path) -> None:
    from kernelopt.pipeline.bench import merge_results

    suite = _standard_suite(tmp_path / "suite")
    _bench(suite, tmp_path / "a", problems=["01_fast"], command="kernelopt bench A")
    _bench(suite, tmp_path / "b", problems=["02_raises"], command="kernelopt bench B")
    merged = merge_results([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    text = merged.markdown_path.read_text()
    assert "from 2 results folders" in text
    assert "    kernelopt bench A\n" in text and "    kernelopt bench B\n" in text
    _bench(suite, tmp_path / "a", problems=["01_fast", "03_segfault"], resume=True, command="kernelopt bench A2")
    again = merge_results([tmp_path / "a", tmp_path / "b"], tmp_path / "m2").markdown_path.read_text()
    assert again.count("kernelopt bench A2") == 1  # a part's resume is listed once, not again as the merge's


def test_the_real_bench_says_it_needs_a_gpu_before_any_work(tmp_path, monkeypatch) -> None:
    import torch

    from kernelopt.errors import KerneloptError
    from kernelopt.pipeline.bench import run_bench

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "results"
    with pytest.raises(KerneloptError, match="bench needs an NVIDIA GPU with CUDA; torch sees none"):
        run_bench(Path(__file__).resolve().parents[1] / "examples/problems", results_dir=out)
    assert not out.exists()


def test_the_best_stock_mode_is_the_one_kernelopt_is_least_faster_than() -> None:
    from kernelopt.report.metrics import choose_best_stock

    interleaved = {"speedup_q1": 1.02, "speedup_q3": 1.05}
    stock = {
        "max-autotune-no-cudagraphs": {"compiled_ms": 0.9, "vs_optimized": {"speedup": 1.3, "comparison": {},
                                                                           "optimized": "kernelopt"}},
        "reduce-overhead": {"compiled_ms": 0.7, "vs_optimized": {"speedup": 1.04, "comparison": interleaved,
                                                                "optimized": "kernelopt"}},
        "max-autotune": "timeout: compile took too long",  # a mode that failed has no number
    }
    assert choose_best_stock(1.0, 2.0, 0.5, stock) == ("reduce-overhead", 0.7, 1.04)
    # the default wins where kernelopt is least faster than it; a mode without its in-process ratio
    # falls back to the ratio of medians (0.45 / 0.5: kernelopt slower than that mode)
    crossed = {"max-autotune": {"compiled_ms": 0.45, "vs_optimized_error": "RuntimeError: x"}}
    assert choose_best_stock(1.0, 2.0, 0.5, crossed) == ("max-autotune", 0.45, 0.9)
    assert choose_best_stock(1.0, 1.01, 0.99, stock) == ("default", 1.0, 1.01)
    assert choose_best_stock(None, None, None, {"reduce-overhead": "crash"}) is None
    outcome = ProblemOutcome(
        "p", "p.py", "ok", "", True, 2.0, 1.0, 0.9, 0.5,
        details={"stock": stock, "speedup_vs_compile_iqr": [1.9, 2.1]},
        best_stock_mode="reduce-overhead", best_stock_ms=0.7, best_stock_speedup=1.04,
    )
    assert outcome.speedup_vs_best_stock == 1.04 and outcome.speedup_spread("best_stock") == (1.02, 1.05)
    default = ProblemOutcome.from_dict({**outcome.to_dict(), "best_stock_mode": "default", "best_stock_ms": 1.0,
                                        "best_stock_speedup": 2.0})
    assert default.speedup_spread("best_stock") == (1.9, 2.1)  # the final verification's, as for compile
    assert summarize([outcome])["geomean_speedup"]["best_stock"] == pytest.approx(1.04)
    with pytest.raises(ValueError, match="best_stock_mode must be"):
        ProblemOutcome.from_dict({**outcome.to_dict(), "best_stock_mode": 3})


def test_cli_bench_passes_the_stock_modes_to_each_problem_and_refuses_a_bad_one(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite", {"01_fast": FAST})
    args = ["bench", str(suite), "--worker-target", TARGET, "--worker-path", str(TESTS_DIR)]
    result = _runner().invoke(app, [*args, "--out", str(tmp_path / "a"), "--stock-modes", "reduce-overhead", "--json"])
    assert result.exit_code == 0, result.output
    (outcome,) = json.loads(result.stdout)["outcomes"]
    assert outcome["details"]["options"]["settings"]["stock_modes"] == "reduce-overhead"
    bad = _runner().invoke(app, [*args, "--out", str(tmp_path / "b"), "--stock-modes", "reduce-overhead,eager"])
    assert bad.exit_code == 2 and "expected torch.compile modes separated by commas, each once" in bad.stderr
    assert _calls(suite) == ["01_fast.py"]  # the bad value ran nothing


def test_cli_bench_passes_cuda_graphs_to_each_problem_and_refuses_a_bad_value(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite", {"01_fast": FAST})
    args = ["bench", str(suite), "--worker-target", TARGET, "--worker-path", str(TESTS_DIR)]
    result = _runner().invoke(app, [*args, "--out", str(tmp_path / "a"), "--cuda-graphs", "off", "--json"])
    assert result.exit_code == 0, result.output
    (outcome,) = json.loads(result.stdout)["outcomes"]
    assert outcome["details"]["options"]["settings"]["cuda_graphs"] == "off"
    bad = _runner().invoke(app, [*args, "--out", str(tmp_path / "b"), "--cuda-graphs", "never"])
    assert bad.exit_code == 2 and "cuda_graphs" in bad.stderr and "one of auto, off" in bad.stderr
    assert _calls(suite) == ["01_fast.py"]


# -- --size ------------------------------------------------------------------------------


def _sized_suite(root: Path) -> Path:
    """Three problems: two define batch_size (one a tuple shape too), one only dim."""
    suite = _suite(root, {"01_a": FAST, "02_b": FAST, "03_c": FAST})
    for name, constants in (("01_a", "batch_size = 8\nshape = (2, 3)\n"), ("02_b", "batch_size = 16\n"), ("03_c", "dim = 3\n")):
        path = suite / "level1" / f"{name}.py"
        path.write_text(path.read_text() + constants)
    return suite


def test_a_size_applies_to_every_problem_that_defines_it_and_is_recorded(tmp_path: Path) -> None:
    suite = _sized_suite(tmp_path / "suite")
    report = _bench(suite, tmp_path / "out", sizes={"batch_size": 2, "shape": (4, 5)})
    a, b, c = report.outcomes
    assert a.details["options"]["sizes"] == {"batch_size": 2, "shape": (4, 5)} and a.details["sizes"]
    assert b.details["options"]["sizes"] == {"batch_size": 2}
    assert "sizes" not in c.details["options"] and "sizes" not in c.details  # it defines neither: its own sizes
    document = json.loads(report.json_path.read_text())
    assert document["meta"]["sizes"] == {"batch_size": 2, "shape": [4, 5]}
    assert document["outcomes"][1]["details"]["sizes"] == {"batch_size": 2}
    assert "Sizes: `--size batch_size=2 --size shape=(4, 5)`" in report.markdown_path.read_text()
    assert report.report_path and "<td>sizes</td><td>--size batch_size=2 --size shape=(4, 5)</td>" in report.report_path.read_text()


def test_a_size_no_selected_problem_defines_is_one_line_naming_theirs(tmp_path: Path) -> None:
    suite = _sized_suite(tmp_path / "suite")
    with pytest.raises(KerneloptError, match=r"--size nosuch: no selected problem of .* theirs: batch_size, dim, shape$"):
        _bench(suite, tmp_path / "out", sizes={"batch_size": 2, "nosuch": 1})
    with pytest.raises(KerneloptError, match="--size dim: .* theirs: batch_size, shape$"):
        _bench(suite, tmp_path / "out", sizes={"dim": 2}, problems=["01_a", "02_b"])  # the selection's, not the suite's
    assert not (tmp_path / "out").exists() and _calls(suite) == []
    # the real target too: said before the GPU check, in one line
    result = _runner().invoke(app, ["bench", str(suite), "--out", str(tmp_path / "cli"), "--size", "nosuch=1"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "theirs: batch_size, dim, shape" in lines[0] and "GPU" not in lines[0], lines


def test_a_resumed_bench_keeps_its_sizes_and_refuses_others(tmp_path: Path) -> None:
    suite = _sized_suite(tmp_path / "suite")
    out = tmp_path / "out"
    _bench(suite, out, sizes={"batch_size": 2, "shape": (4, 5)}, problems=["01_a"])
    with pytest.raises(KerneloptError, match=r"made with --size batch_size=2 --size shape=\(4, 5\): resume with the same sizes or leave --size out"):
        _bench(suite, out, resume=True, sizes={"batch_size": 4})
    with pytest.raises(KerneloptError, match="made with --size batch_size=2"):
        _bench(suite, out, resume=True, sizes={})  # explicitly none is other sizes too
    report = _bench(suite, out, resume=True)  # left out: the sizes it started with
    assert report.resumed == ["level1/01_a"] and report.outcomes[1].details["options"]["sizes"] == {"batch_size": 2}
    again = _bench(suite, out, resume=True, retry_failed=True, sizes={"batch_size": 2, "shape": (4, 5)})  # the same
    assert json.loads(again.json_path.read_text())["meta"]["sizes"] == {"batch_size": 2, "shape": [4, 5]}
    plain = tmp_path / "plain"
    _bench(suite, plain, problems=["01_a"])
    with pytest.raises(KerneloptError, match="made with no --size"):
        _bench(suite, plain, resume=True, sizes={"batch_size": 2})


def test_benches_at_other_sizes_do_not_merge(tmp_path: Path) -> None:
    from kernelopt.pipeline.bench import merge_results

    suite = _sized_suite(tmp_path / "suite")
    _bench(suite, tmp_path / "s1", shard=(1, 2), sizes={"batch_size": 2})
    _bench(suite, tmp_path / "s2", shard=(2, 2))
    with pytest.raises(KerneloptError, match=r"different sizes \(--size batch_size=2; no --size\); merge benches run with the same --size"):
        merge_results([tmp_path / "s1", tmp_path / "s2"], tmp_path / "all")
    _bench(suite, tmp_path / "s3", shard=(2, 2), sizes={"batch_size": 2})
    merged = merge_results([tmp_path / "s1", tmp_path / "s3"], tmp_path / "all")
    assert merged.meta["sizes"] == {"batch_size": 2} and len(merged.outcomes) == 3


def test_cli_bench_passes_the_sizes_to_each_problem(tmp_path: Path) -> None:
    suite = _sized_suite(tmp_path / "suite")
    args = ["bench", str(suite), "--worker-target", TARGET, "--worker-path", str(TESTS_DIR), "--out", str(tmp_path / "a")]
    result = _runner().invoke(app, [*args, "--size", "batch_size=4", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [o["details"]["options"].get("sizes") for o in document["outcomes"]] == [{"batch_size": 4}, {"batch_size": 4}, None]
    bad = _runner().invoke(app, [*args, "--resume", "--size", "batch_size=8"])
    assert bad.exit_code == 2 and "resume with the same sizes or leave --size out" in bad.stderr
    bad = _runner().invoke(app, [*args, "--size", "batch_size"])
    assert bad.exit_code == 2 and "expected NAME=VALUE" in bad.stderr


def test_a_bench_problem_exports_its_winner_under_the_results_by_its_name(tmp_path: Path) -> None:
    """The bench's winners stay with its results (they were written into each problem's private folder
    and lost with it); two levels' problems of one file name keep apart."""
    from kernelopt.pipeline.bench_problem import _export_path

    one = _export_path({"export_dir": str(tmp_path / "models")}, "level1/01_relu", "/s/level1/01_relu.py")
    two = _export_path({"export_dir": str(tmp_path / "models")}, "level2/01_relu", "/s/level2/01_relu.py")
    assert one == tmp_path / "models" / "level1" / "01_relu.kopt.json" and one.parent.is_dir()
    assert two is not None and two != one and two.parent.is_dir()
    assert _export_path({}, "level1/01_relu", "/s/level1/01_relu.py") is None


def test_a_run_that_kept_its_stock_base_is_not_scored_against_that_mode_s_ratio_over_the_default() -> None:
    """The H200's row-L2 at 4096 rows built on max-autotune-no-cudagraphs and kept it (nothing exported): each
    mode's process timed the mode against torch.compile's default, and the scoreboard read max-autotune's
    0.62x of the default as kernelopt being 0.62x of max-autotune, its own result."""
    from kernelopt.pipeline import bench_problem
    from kernelopt.pipeline.records import OptimizeReport
    from kernelopt.report.metrics import choose_best_stock, speedup_over_mode

    def timed(mode_ms: float, default_ms: float) -> dict[str, Any]:
        ratio = mode_ms / default_ms  # the mode's time over the default's, as the record holds it
        return {"compiled_ms": mode_ms, "vs_optimized": {"speedup": ratio, "mode_ms": mode_ms, "optimized": "torch.compile",
                                                          "comparison": {"speedup_q1": ratio * 0.99, "speedup_q3": ratio * 1.01}}}

    ma = "max-autotune-no-cudagraphs"
    stock = {"default": timed(1.1994, 1.1994), ma: timed(0.7408, 1.1964), "reduce-overhead": timed(1.793, 1.191),
             "max-autotune": timed(1.5887, 1.1924)}
    assert speedup_over_mode(stock[ma], ma, ma, 0.743) == 1.0  # kernelopt's result is that mode's compile
    assert speedup_over_mode(stock["reduce-overhead"], "reduce-overhead", ma, 0.743) == pytest.approx(1.793 / 0.743)
    assert speedup_over_mode(stock[ma], ma, "default", 1.1994) == pytest.approx(0.7408 / 1.1964)  # base default: its own
    best = choose_best_stock(0.743, 1.0, 0.743, stock, base=ma)
    assert best is not None and (best[0], best[2]) == (ma, 1.0)  # was (ma, 0.62): its ratio over the default
    report = OptimizeReport("p", 1, "fake", 1.05, 0.743, 1.0, base_mode=ma, speedup_vs_compile=1.0, optimized_ms=0.743)
    ms, gain, spread = bench_problem.default_baseline(report, stock)
    assert ms == pytest.approx(1.1994) and gain == pytest.approx(1.1964 / 0.7408)  # the base's own interleaved gain
    assert spread is not None and spread[0] < gain < spread[1]
    row = ProblemOutcome.from_dict({"name": "p", "path": "p.py", "status": "ok", "correct": True, "base_mode": ma,
                                    "best_stock_mode": ma, "best_stock_speedup": 1.0, "details": {"stock": stock}})
    assert row.speedup_spread("best_stock") is None  # that comparison was the mode against the default, not ours


def test_the_best_stock_spread_is_the_spread_of_the_timing_its_ratio_came_from() -> None:
    """The H200's vocabulary log-softmax (2026-12-05): built on max-autotune-no-cudagraphs, its final
    verification read 1.444x over that mode, the mode's own process 1.719x (1.708-1.730). The least of the
    two is the ratio shown, and the scoreboard put the other timing's spread beside it: 1.444x (1.708-1.730)."""
    from kernelopt.pipeline import bench_problem
    from kernelopt.pipeline.records import OptimizeReport
    from kernelopt.pipeline.stock_modes import best_stock_for

    ma = "max-autotune-no-cudagraphs"
    own = {"speedup": 1.719, "optimized": "kernelopt", "comparison": {"speedup_q1": 1.708, "speedup_q3": 1.730}}
    stock = {ma: {"compiled_ms": 0.448, "vs_optimized": own},
             "default": {"compiled_ms": 0.529, "vs_optimized": {**own, "speedup": 2.006,
                                                                "comparison": {"speedup_q1": 1.99, "speedup_q3": 2.02}}}}  # fmt: skip
    report = OptimizeReport("vocab", 1, "fake", 0.59, 0.416, 1.444, base_mode=ma, speedup_vs_compile=1.444,
                            speedup_vs_compile_iqr=(1.43, 1.46), optimized_ms=0.288)  # fmt: skip
    best = best_stock_for(report, stock)
    assert best is not None and (best[0], best[2]) == (ma, 1.444)  # the final verification's, the lesser
    assert bench_problem.best_stock_iqr(report, stock, best) == (1.43, 1.46)
    # where the mode's own process gave the lesser ratio, its spread is the one kept
    slower = {**stock, ma: {**stock[ma], "vs_optimized": {**own, "speedup": 1.30}}}
    other = best_stock_for(report, slower)
    assert other is not None and other[2] == 1.30
    assert bench_problem.best_stock_iqr(report, slower, other) == (1.708, 1.730)
    fields = {"name": "p", "path": "p.py", "status": "ok", "correct": True, "base_mode": ma, "best_stock_mode": ma,
              "best_stock_speedup": 1.444}  # fmt: skip
    kept = ProblemOutcome.from_dict({**fields, "details": {"stock": stock, "best_stock_iqr": [1.43, 1.46]}})
    assert kept.speedup_spread("best_stock") == (1.43, 1.46)
    # a row from before the spread was kept: the mode's process spread is not this ratio's, so none is shown
    older = ProblemOutcome.from_dict({**fields, "details": {"stock": stock}})
    assert older.speedup_spread("best_stock") is None
    same = ProblemOutcome.from_dict({**fields, "best_stock_speedup": 1.719, "details": {"stock": stock}})
    assert same.speedup_spread("best_stock") == (1.708, 1.730)


def test_a_delivered_stock_mode_is_scored_against_another_by_their_gains_over_the_default() -> None:
    """GPT-2 (bf16, launch-bound) on the H200: nothing beat the compiler, so max-autotune was delivered as it is
    (2.42x the default, interleaved in its process); reduce-overhead ran 2.31x the default in its own. The
    scoreboard said 0.77x of reduce-overhead: the two processes' medians of a 0.3 ms call (noise 14-17 %). Both
    modes were timed against the same default, so their gains over it are what compares them."""
    from kernelopt.pipeline.records import OptimizeReport
    from kernelopt.pipeline.stock_modes import best_stock_for
    from kernelopt.report.metrics import speedup_over_mode

    def timed(ratio: float, compiled_ms: float) -> dict[str, Any]:  # the mode's time over the default's
        return {"compiled_ms": compiled_ms, "vs_optimized": {"speedup": ratio, "optimized": "torch.compile"}}

    stock = {"default": timed(1.0057, 0.806), "max-autotune-no-cudagraphs": timed(0.8405, 0.600),
             "reduce-overhead": timed(0.4320, 0.339), "max-autotune": timed(0.4138, 0.441)}  # fmt: skip
    ro = stock["reduce-overhead"]
    assert speedup_over_mode(ro, "reduce-overhead", "max-autotune", 0.441, stock["max-autotune"]) == pytest.approx(
        0.4320 / 0.4138
    )
    assert speedup_over_mode(ro, "reduce-overhead", "max-autotune", 0.441) == pytest.approx(0.339 / 0.441)  # no base
    report = OptimizeReport("gpt2", 1, "fake", 0.8, 0.441, 1.0, base_mode="max-autotune", speedup_vs_compile=1.0,
                            optimized_ms=0.441)  # fmt: skip
    best = best_stock_for(report, stock)
    assert best is not None and best[0] == "max-autotune" and best[2] == 1.0  # was reduce-overhead at 0.77x


def test_the_summary_reads_the_suite_target_over_problems_a_kernel_search_can_move() -> None:
    """Issue 13's target: geomean over the best stock mode where Triton kernels take 5 % of the time or more,
    and no problem below 0.99x of its best stock mode; a row without a share (older results) is named apart."""
    from kernelopt.report.scoreboard import best_stock_target_line, markdown_report

    def row(name: str, best: float, share: float | None, status: str = "ok") -> ProblemOutcome:
        return ProblemOutcome.from_dict({"name": name, "path": f"{name}.py", "status": status, "correct": status == "ok",
                                         "optimized_ms": 1.0, "best_stock_speedup": best, "triton_share": share})  # fmt: skip

    rows = [row("gemm", 0.985, 0.02), row("softmax", 1.2, 0.9), row("norm", 1.0, 0.05), row("old", 1.5, None),
            row("broken", 2.0, 0.9, status="crash"), row("cublas_only", 1.0, 0.0)]  # fmt: skip
    target = summarize(rows)["against_best_stock"]
    assert target["searchable"] == ["softmax", "norm"]  # 2 % and 0 % of the time: no search moves them
    assert target["geomean_searchable"] == pytest.approx(math.sqrt(1.2 * 1.0))
    assert target["below"] == ["gemm"] and target["share_unknown"] == ["old"]
    line = best_stock_target_line(summarize(rows))
    assert line.startswith("Over the best stock mode, on the 2 correct problems whose Triton kernels take 5 %")
    assert "geomean 1.095×; below 0.99× of it: 1: gemm; Triton share not recorded (older results): 1." in line
    assert line in markdown_report({"started": "t"}, rows, summarize(rows))
    with pytest.raises(ValueError, match="triton_share must be a share between 0 and 1"):
        ProblemOutcome.from_dict({"name": "x", "path": "x.py", "status": "ok", "triton_share": 1.5})


def test_a_partial_bench_says_how_much_of_the_suite_it_covers(tmp_path: Path) -> None:
    """A geomean over the problems run so far speaks for those: the scoreboard says which are left."""
    from kernelopt.pipeline.bench import merge_results
    from kernelopt.report.bench_data import load_bench
    from kernelopt.report.scoreboard import coverage_line

    suite = _standard_suite(tmp_path / "suite")
    out = tmp_path / "out"
    partial = _bench(suite, out, problems=["01_fast"])
    left = ["level1/02_raises", "level1/03_segfault", "level1/04_broken"]
    assert partial.summary["not_run"] == left and load_bench(out).summary["not_run"] == left
    line = "Run so far: 1 of the suite's 4 problems; not yet run: level1/02_raises, level1/03_segfault, level1/04_broken."
    assert line in (out / "results.md").read_text()
    whole = _bench(suite, out, resume=True)
    assert whole.summary["not_run"] == [] and "Run so far" not in (out / "results.md").read_text()
    # one shard of two, merged alone, covers half the suite; both together cover all of it
    _bench(suite, tmp_path / "s1", shard=(1, 2))
    _bench(suite, tmp_path / "s2", shard=(2, 2))
    assert merge_results([tmp_path / "s1"], tmp_path / "m1").summary["not_run"] == ["level1/02_raises", "level1/04_broken"]
    assert merge_results([tmp_path / "s1", tmp_path / "s2"], tmp_path / "m2").summary["not_run"] == []
    # results written before the suite's list was recorded say nothing about coverage
    document = json.loads((out / "results.json").read_text())
    del document["meta"]["suite_problems"]
    (out / "results.json").write_text(json.dumps(document))
    assert load_bench(out).summary["not_run"] is None
    many = {"problems": 2, "not_run": [f"p{i}" for i in range(10)]}
    assert coverage_line(many) == "Run so far: 2 of the suite's 12 problems; not yet run: p0, p1, p2, p3, p4, p5, p6, p7 and 2 more."
    assert coverage_line({"problems": 2, "not_run": None}) == coverage_line({"problems": 2, "not_run": []}) == ""


def test_rows_timed_before_the_looped_host_reading_are_named(tmp_path: Path) -> None:
    """A row written before the judge read a forward's host time in a loop held one cold call's host time
    in its two-process readings, gate 4's among them (level2/13 on the H100: 0.21-0.67 ms against 0.10 in a
    loop): the scoreboard names such rows, and a row a bench writes now says how it was read."""
    from dataclasses import replace

    from kernelopt.measure.timer import HOST_READING
    from kernelopt.report.scoreboard import cold_host_line, markdown_report

    new = replace(_outcome("new", 1.2), details={"host_reading": HOST_READING})
    old, wrong = _outcome("old", 1.1), _outcome("wrong", 1.5, correct=False)
    summary = {**summarize([new, old, wrong]), "not_run": None}
    assert summary["cold_host_rows"] == ["old"]  # correct rows only: a wrong one's speed counts nowhere
    line = cold_host_line(summary)
    assert line.startswith("Timed before the judge read a forward's host time in a loop (fc965f3): 1 of the 2 correct rows (old).")
    assert line in markdown_report({}, [new, old, wrong], summary)
    assert cold_host_line({**summary, "cold_host_rows": []}) == "" and cold_host_line({"correct": 0}) == ""
    many = {"correct": 10, "cold_host_rows": [f"p{i}" for i in range(10)]}
    assert "10 of the 10 correct rows (p0, p1, p2, p3, p4, p5, p6, p7 and 2 more)" in cold_host_line(many)
    from kernelopt.pipeline.bench_results import write_results
    from kernelopt.report import write_bench_report

    write_results(tmp_path, {"started": "t"}, [new, old, wrong])
    page = html.unescape(write_bench_report(tmp_path / "results.json", tmp_path / "bench.html").read_text())
    assert "timed with the host read cold" in page and "in a loop: old<" in page


def test_rows_delivered_with_an_own_op_on_its_python_host_path_are_named(tmp_path: Path) -> None:
    """A row whose delivered model called kernelopt's group norm through Python paid its host path at every
    call (level2/13's forward on the H100: 177.5 us of host a call against stock's 107.7): the scoreboard
    and the bench page name such rows, from the op host paths each row keeps."""
    from dataclasses import replace

    from kernelopt.report.scoreboard import markdown_report, python_host_line

    why = "Python: the C++ host path did not build or load: nvcc not found"
    slow = replace(_outcome("slow", 1.01), details={"op_hosts": {"kernelopt.group_norm": why}})
    cpp = replace(_outcome("cpp", 1.2), details={"op_hosts": {"kernelopt.group_norm": "C++: 1 plan(s) kept"}})
    plain, wrong = _outcome("plain", 1.1), replace(_outcome("wrong", 1.5, correct=False), details=slow.details)
    summary = {**summarize([slow, cpp, plain, wrong]), "not_run": None}
    assert summary["python_host_rows"] == ["slow"]  # correct rows only, and only a Python path
    line = python_host_line(summary)
    assert line.startswith("Delivered with one of kernelopt's own ops on its Python host path in the judged process: 1 row(s) (slow).")
    assert line in markdown_report({}, [slow, cpp, plain, wrong], summary)
    assert python_host_line({**summary, "python_host_rows": []}) == "" and python_host_line({}) == ""
    from kernelopt.pipeline.bench_results import write_results
    from kernelopt.report import write_bench_report

    write_results(tmp_path, {"started": "t"}, [slow, cpp, plain, wrong])
    page = html.unescape(write_bench_report(tmp_path / "results.json", tmp_path / "bench.html").read_text())
    assert "own op through Python" in page and "Python host path: slow<" in page


def test_a_bench_given_a_slot_of_time_ends_between_problems(tmp_path: Path) -> None:
    """Past --stop-after no problem starts (one cut short by the slot's end would lose its GPU time);
    the ones left are not outcomes, so --resume runs them."""
    suite = _suite(tmp_path / "suite", {"01_fast": FAST, "02_fast": FAST, "03_fast": FAST})
    out = tmp_path / "out"
    now = [0.0]

    def clock() -> float:  # each problem takes 100 s of this clock
        now[0] += 50.0
        return now[0]

    events: list[tuple[str, str]] = []
    report = _bench(suite, out, stop_after_s=120.0, _clock=clock, on_event=lambda e: events.append((e.kind, e.name)))
    assert [o.name for o in report.outcomes] == ["level1/01_fast", "level1/02_fast"]
    assert events[-1] == ("not-started", "level1/03_fast") and report.summary["not_run"] == ["level1/03_fast"]
    resumed = _bench(suite, out, resume=True)
    assert resumed.resumed == ["level1/01_fast", "level1/02_fast"] and len(resumed.outcomes) == 3
    assert _calls(suite) == ["01_fast.py", "02_fast.py", "03_fast.py"]
    now[0] = 0.0  # the line says how long the bench had run, its start-up included (a slot planned to the second misses)
    late: list[BenchEvent] = []
    _bench(suite, tmp_path / "late", stop_after_s=120.0, _clock=clock, on_event=late.append)
    assert [(e.name, e.elapsed_s) for e in late if e.kind == "not-started"] == [("level1/03_fast", 150.0)]
    none = _bench(suite, tmp_path / "none", stop_after_s=0.0)
    assert none.outcomes == [] and none.summary["not_run"] == ["level1/01_fast", "level1/02_fast", "level1/03_fast"]
    with pytest.raises(KerneloptError, match="--stop-after must be zero or more seconds, got -1"):
        _bench(suite, tmp_path / "bad", stop_after_s=-1.0)
    cli = _runner().invoke(app, ["bench", str(suite), "--out", str(tmp_path / "cli"), "--worker-target", TARGET,
                                 "--worker-path", str(TESTS_DIR), "--stop-after", "0"])  # fmt: skip
    assert cli.exit_code == 0, cli.output
    assert re.search(r"\[1/3\] level1/01_fast not started: --stop-after has passed \(\d+ s since the bench began\)",
                     cli.stderr)  # fmt: skip
    assert "Run so far: 0 of the suite's 3 problems; not yet run: level1/01_fast, level1/02_fast, level1/03_fast." in cli.stdout


def test_a_bench_given_a_whole_slot_starts_only_the_problems_expected_to_end_within_it(tmp_path: Path) -> None:
    """--slot: a problem starts only where the seconds it is expected to take fit in what is left; the
    expectation is its earlier row on --rerun, else the longest row the results hold, else --timeout."""
    from kernelopt.pipeline.bench_slot import Expected, expected_seconds, slot_refusal

    suite = _suite(tmp_path / "suite", {"01_fast": FAST, "02_fast": FAST, "03_fast": FAST})
    now = [0.0]

    def clock() -> float:
        now[0] += 50.0
        return now[0]

    # nothing known: each is expected to take the whole --timeout, which does not fit
    events: list[BenchEvent] = []
    none = _bench(suite, tmp_path / "a", slot_s=100.0, worker_timeout_s=150.0, _clock=clock, on_event=events.append)
    assert none.outcomes == [] and [e.kind for e in events] == ["not-started"] * 3
    assert events[0].why == "it would not end within --slot: 150 s expected (the worker time-out), 50 s left"

    # a rerun is expected to take what its earlier row took: 01 (a second or two) starts, 02 (500 s) does not
    out = tmp_path / "b"
    _bench(suite, out)
    document = json.loads((out / "results.json").read_text())
    slow = next(o for o in document["outcomes"] if o["name"] == "level1/02_fast")
    slow["details"]["worker_s"] = 500.0
    (out / "results.json").write_text(json.dumps(document))
    events.clear()
    again = _bench(suite, out, resume=True, rerun=["01_fast", "02_fast"], slot_s=400.0, worker_timeout_s=1000.0,
                   on_event=events.append)  # fmt: skip
    (refused,) = [e for e in events if e.kind == "not-started"]
    assert refused.name == "level1/02_fast" and refused.why.startswith(
        "it would not end within --slot: 500 s expected (its earlier row), "
    )
    assert [r["name"] for r in again.meta["replaced"]] == ["level1/01_fast"]
    assert {o.name: o.worker_s for o in again.outcomes}["level1/02_fast"] == 500.0  # its earlier row stays

    # the rules alone
    def row(name: str, seconds: float) -> ProblemOutcome:
        return ProblemOutcome.from_dict({"name": name, "path": f"{name}.py", "status": "ok", "correct": True,
                                         "details": {"worker_s": seconds}})  # fmt: skip

    short, long = row("a", 120.0), row("b", 300.0)
    assert expected_seconds("a", {"a": short}, [short, long], 600.0) == Expected(120.0, "its earlier row")
    assert expected_seconds("c", {"a": short}, [short, long], 600.0) == Expected(300.0, "the longest row so far")
    assert expected_seconds("c", {}, [short, long], 200.0) == Expected(200.0, "the longest row so far")  # capped
    assert expected_seconds("c", {}, [], 200.0) == Expected(200.0, "the worker time-out")
    assert slot_refusal(50.0, None, Expected(1e9, "x")) is None and slot_refusal(50.0, 170.0, Expected(120.0, "x")) is None
    assert slot_refusal(60.0, 170.0, Expected(120.0, "its earlier row")) == (
        "it would not end within --slot: 120 s expected (its earlier row), 110 s left"
    )
    with pytest.raises(KerneloptError, match="--slot must be a positive number of seconds, got 0"):
        _bench(suite, tmp_path / "bad", slot_s=0.0)
    cli = _runner().invoke(app, ["bench", str(suite), "--out", str(tmp_path / "cli"), "--worker-target", TARGET,
                                 "--worker-path", str(TESTS_DIR), "--slot", "1", "--timeout", "60"])  # fmt: skip
    assert cli.exit_code == 0, cli.output  # 60 s expected of each: none fits one second
    assert re.search(r"\[1/3\] level1/01_fast not started: it would not end within --slot: 60 s expected \(the worker "
                     r"time-out\), [01] s left \(\d+ s since the bench began\)", cli.stderr), cli.stderr  # fmt: skip


def test_a_problem_still_running_when_the_slot_ends_is_stopped_and_resumed(tmp_path: Path) -> None:
    """--slot bounds the bench's whole time: a problem that outlasts its expectation (02 sleeps, expected to
    take 01's seconds) is stopped when the slot ends, said in one line, and is no outcome; the bench writes
    its results and ends within its slot, and --resume runs it again."""
    import io
    import threading
    import time

    from rich.console import Console

    from kernelopt.cli.bench_cmd import _print_event
    from kernelopt.pipeline.bench_slot import cut_reason, slot_deadline

    suite = _suite(tmp_path / "suite", {"01_fast": FAST, "02_sleeps": "sleep", "03_fast": FAST})
    out = tmp_path / "out"
    _bench(suite, out, problems=["01_fast"])  # a row to expect the others by: a second or two
    events: list[BenchEvent] = []
    started = time.monotonic()
    report = _bench(suite, out, resume=True, slot_s=15.0, worker_timeout_s=300.0, on_event=events.append)
    took = time.monotonic() - started
    assert 15.0 <= took < 45.0, took  # the sleeping worker (600 s, time-out 300 s) was ended at the slot's end
    kinds = [(e.kind, e.name) for e in events]
    assert kinds == [("skip", "level1/01_fast"), ("start", "level1/02_sleeps"), ("cut", "level1/02_sleeps"),
                     ("not-started", "level1/03_fast")], kinds  # fmt: skip
    cut = events[2]
    assert cut.why == cut_reason(15.0) == "stopped at the end of --slot (15 s); --resume goes on with its unfinished run"
    assert cut.elapsed_s is not None and cut.elapsed_s >= 15.0
    assert [o.name for o in report.outcomes] == ["level1/01_fast"]
    assert report.summary["not_run"] == ["level1/02_sleeps", "level1/03_fast"]
    written = json.loads((out / "results.json").read_text())
    assert written["meta"]["finished"] and [o["name"] for o in written["outcomes"]] == ["level1/01_fast"]
    assert written["meta"]["cut"] == ["level1/02_sleeps"]  # its next worker goes on with its run uncounted
    console = Console(file=io.StringIO(), width=200)
    _print_event(cut, console)
    assert console.file.getvalue().startswith(f"[2/3] level1/02_sleeps cut: {cut_reason(15.0)} (")

    (suite / "level1" / "02_sleeps.py").write_text(PROBLEM.format(fake=FAST))  # it ends this time
    resumed = _bench(suite, out, resume=True)
    assert [o.name for o in resumed.outcomes] == ["level1/01_fast", "level1/02_sleeps", "level1/03_fast"]
    assert _calls(suite) == ["01_fast.py", "02_sleeps.py", "02_sleeps.py", "03_fast.py"]
    by_name = {o.name: o for o in resumed.outcomes}
    assert by_name["level1/02_sleeps"].details["options"].get("after_cut") is True
    assert "after_cut" not in by_name["level1/03_fast"].details["options"]
    assert json.loads((out / "results.json").read_text())["meta"]["cut"] == []  # it ended: nothing pending

    # the timer alone: none without a slot, at once where the slot is spent, else when it ends
    rang = threading.Event()
    assert slot_deadline(None, 0.0, rang.set) is None
    spent = slot_deadline(10.0, 12.0, rang.set)
    assert spent is not None and rang.wait(5.0)
    rang.clear()
    later = slot_deadline(3600.0, 0.0, rang.set)
    assert later is not None and not rang.wait(0.2)
    later.cancel()


def test_a_slot_expects_each_problem_from_another_benchs_rows(tmp_path: Path) -> None:
    """--expect-from: each problem is expected to take its seconds in another bench's results (another GPU's
    scoreboard of the suite), scaled by how this bench's rows ran against the same problems there, so a
    short problem is not refused because nothing is known here yet, nor because the longest row was long."""
    from kernelopt.pipeline.bench_slot import Expected, Reference, expected_seconds

    suite = _suite(tmp_path / "suite", {"01_fast": FAST, "02_fast": FAST, "03_fast": FAST})
    other = tmp_path / "other"  # the other card's scoreboard: 01 and 02 short there, 03 long
    _bench(suite, other)
    document = json.loads((other / "results.json").read_text())
    for row, seconds in zip(document["outcomes"], (2.0, 3.0, 5000.0)):
        row["details"]["worker_s"] = seconds
    (other / "results.json").write_text(json.dumps(document))

    events: list[BenchEvent] = []
    report = _bench(suite, tmp_path / "here", slot_s=100.0, worker_timeout_s=1000.0, expect_from=other,
                    on_event=events.append)  # fmt: skip
    assert [o.name for o in report.outcomes] == ["level1/01_fast", "level1/02_fast"]  # without it: none (1000 s each)
    (refused,) = [e for e in events if e.kind == "not-started"]
    assert refused.name == "level1/03_fast"
    assert re.fullmatch(
        rf"it would not end within --slot: \d+ s expected \(its row in {re.escape(str(other))} × \d\.\d\d, the "
        r"median over 2 problem\(s\) both ran\), \d+ s left", refused.why), refused.why  # fmt: skip
    assert report.meta["expect_from"] == str(other)

    # the rule alone: its own earlier row first, then the reference scaled, capped at the time-out
    def row(name: str, seconds: float) -> ProblemOutcome:
        return ProblemOutcome.from_dict({"name": name, "path": f"{name}.py", "status": "ok", "correct": True,
                                         "details": {"worker_s": seconds}})  # fmt: skip

    ref = Reference("h200", {"a": 100.0, "b": 200.0, "c": 50.0})
    here = [row("a", 150.0), row("b", 400.0)]  # 1.5x and 2x as long here: the median 1.75
    assert ref.scale(here) == (1.75, 2)
    assert expected_seconds("c", {}, here, 600.0, ref) == Expected(87.5, "its row in h200 × 1.75, the median over 2 "
                                                                   "problem(s) both ran")  # fmt: skip
    assert expected_seconds("c", {}, [], 600.0, ref) == Expected(50.0, "its row in h200, as no problem ran in both")
    assert expected_seconds("c", {}, here, 60.0, ref).seconds == 60.0
    assert expected_seconds("a", {"a": row("a", 9.0)}, here, 600.0, ref) == Expected(9.0, "its earlier row")
    assert expected_seconds("d", {}, here, 600.0, ref) == Expected(400.0, "the longest row so far")

    with pytest.raises(KerneloptError, match="--expect-from needs --slot"):
        _bench(suite, tmp_path / "x1", expect_from=other)
    with pytest.raises(KerneloptError, match="no results.json there"):
        _bench(suite, tmp_path / "x2", slot_s=100.0, expect_from=tmp_path / "nowhere")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.json").write_text("{not json")
    with pytest.raises(KerneloptError, match=r"--expect-from .*broken: its results.json does not read as a bench of "
                                             r"model problems \(Expecting property name"):  # fmt: skip
        _bench(suite, tmp_path / "x4", slot_s=100.0, expect_from=broken)
    with pytest.raises(KerneloptError, match="none of this suite.s problems has a row"):
        _bench(_suite(tmp_path / "suite2", {"09_other": FAST}), tmp_path / "x3", slot_s=100.0, expect_from=other)


def _reference_bench(suite: Path, out: Path, speedups: dict[str, float]) -> Path:
    """A bench of ``speedups``' problems of ``suite`` into ``out`` whose rows read as another card's would: each
    its speedup over the best stock mode, half its time in Triton kernels, 5 s of worker time."""
    _bench(suite, out, problems=list(speedups))
    document = json.loads((out / "results.json").read_text())
    for outcome in document["outcomes"]:
        outcome.update(best_stock_speedup=speedups[outcome["name"].split("/")[-1]], triton_share=0.5)
        outcome["details"]["worker_s"] = 5.0
    (out / "results.json").write_text(json.dumps(document))
    return out


def test_a_plan_projects_the_suites_target_from_another_benchs_rows(tmp_path: Path) -> None:
    """bench --plan --expect-from: the suite's target (the geomean over the best stock mode of rows whose
    Triton kernels take 5 % or more) as the results hold it, and were the problems that would start to read
    as their rows there do: the arithmetic a slot is planned by, said to be an estimate."""
    from kernelopt.pipeline.bench_slot import Reference, projected_target, projection_line

    def row(name: str, speedup: float, share: float | None = 0.9, seconds: float = 10.0) -> ProblemOutcome:
        return ProblemOutcome.from_dict({"name": name, "path": f"{name}.py", "status": "ok", "correct": True,
                                         "best_stock_speedup": speedup, "triton_share": share,
                                         "details": {"worker_s": seconds}})  # fmt: skip

    here = {"a": row("a", 1.0), "b": row("b", 1.21), "vendor": row("vendor", 1.0, share=0.01)}
    there = Reference("h100", {"b": 10.0, "c": 10.0, "d": 10.0},
                      {"b": row("b", 1.0), "c": row("c", 1.44), "d": row("d", 2.0, share=0.02)})  # fmt: skip
    projection = projected_target(here, ["b", "c", "d", "e"], there)
    assert projection.now == pytest.approx(1.1) and projection.now_rows == 2  # a and b: vendor's share is 1 %
    assert projection.then == pytest.approx(1.44 ** (1 / 3)) and projection.then_rows == 3  # b as there, c new
    assert (projection.taken, projection.missing) == (["b", "c", "d"], ["e"])
    assert projection_line(projection, "h100") == (
        "if b, c, d read as in h100, the geomean over the best stock mode (rows whose Triton kernels take 5 % or "
        "more) would read 1.129x over 3 row(s), from 1.100x over 2 row(s) now; e not there, left as here: an "
        "estimate from another bench's rows, not a result")  # fmt: skip
    assert projection_line(projected_target(here, ["e"], there), "h100") == ""  # nothing to take from there

    # through a plan: 02 and 03 would start, their rows there read 1.5x and 1.2x
    suite = _suite(tmp_path / "suite", {"01_fast": FAST, "02_fast": FAST, "03_fast": FAST})
    other = _reference_bench(suite, tmp_path / "other", {"01_fast": 1.0, "02_fast": 1.5, "03_fast": 1.2})
    out = tmp_path / "out"
    _bench(suite, out, problems=["01_fast"])
    report = _bench(suite, out, resume=True, slot_s=100.0, expect_from=other, plan_only=True)
    assert report.meta["planned"]["start"] == ["level1/02_fast", "level1/03_fast"]
    line = report.meta["planned"]["projection"]
    assert line.startswith(f"if level1/02_fast, level1/03_fast read as in {other}, the geomean over the best stock "
                           "mode") and "would read 1.342x over 2 row(s), from no searchable row now" in line  # fmt: skip: 01 here has no share
    cli = _runner().invoke(app, ["bench", str(suite), "--out", str(tmp_path / "cli"), "--plan", "--slot", "100",
                                 "--timeout", "60", "--expect-from", str(other)])  # fmt: skip
    assert cli.exit_code == 0, cli.output
    assert "plan: 3 of the 3 problems left to run would start within --slot 100 s" in cli.stdout  # 5 s each there
    assert f"if level1/01_fast, level1/02_fast, level1/03_fast read as in {other}" in cli.stdout.replace("\n", " ")
    assert "would read 1.216x over 3 row(s), from no searchable row now" in cli.stdout.replace("\n", " ")


def test_an_order_by_payoff_starts_first_what_adds_most_to_the_target_a_second(tmp_path: Path) -> None:
    """bench --order payoff: the problems left to run ordered by what each alone would add to the suite's target
    for each second it is expected to take, were it to read as its row in --expect-from's bench (one without a
    row there as adding nothing); the order and its reasons said before anything starts and kept in the
    results."""
    from kernelopt.pipeline.bench_slot import Expected, Reference, by_payoff, order_line

    def row(name: str, speedup: float, seconds: float = 10.0) -> ProblemOutcome:
        return ProblemOutcome.from_dict({"name": name, "path": f"{name}.py", "status": "ok", "correct": True,
                                         "best_stock_speedup": speedup, "triton_share": 0.5,
                                         "details": {"worker_s": seconds}})  # fmt: skip

    here = {"a": row("a", 1.0), "b": row("b", 1.0)}
    there = Reference("h100", {"a": 100.0, "b": 10.0, "c": 10.0, "d": 10.0},
                      {"a": row("a", 1.5), "b": row("b", 1.1), "c": row("c", 0.9)})  # fmt: skip
    seconds = {"a": 100.0, "b": 10.0, "c": 10.0, "d": 5.0}
    ranked = by_payoff(["d", "a", "b", "c"], here, there, lambda name: Expected(seconds[name], "x"))
    # b: 1.1x in 10 s beats a: 1.5x in 100 s; d has no row there (counted as adding nothing); c (a new row
    # below 1) would lower the target
    assert [p.name for p in ranked] == ["b", "a", "d", "c"]
    assert ranked[0].ratio == pytest.approx(1.1 ** 0.5) and ranked[2].ratio is None and ranked[3].ratio < 1
    assert order_line(ranked, "h100") == (
        "order: by what each would add to the target a second, were it to read as in h100 (an estimate): "
        "b (+4.9 % in 10 s), a (+22.5 % in 100 s), d (no row there), c (-3.5 % in 10 s)")  # fmt: skip

    # through a bench: 01 finished here; 03 reads 1.5x there in 5 s, 02 1.2x in 5 s, 04 has no row there
    suite = _suite(tmp_path / "suite", {"01_fast": FAST, "02_fast": FAST, "03_fast": FAST, "04_fast": FAST})
    other = _reference_bench(suite, tmp_path / "other", {"01_fast": 1.0, "02_fast": 1.2, "03_fast": 1.5})
    out = tmp_path / "out"
    _bench(suite, out, problems=["01_fast"])
    events: list[BenchEvent] = []
    report = _bench(suite, out, resume=True, slot_s=100.0, expect_from=other, order="payoff", plan_only=True,
                    on_event=events.append)  # fmt: skip
    assert report.meta["planned"]["start"] == ["level1/03_fast", "level1/02_fast", "level1/04_fast"]
    assert events[0].kind == "ordered" and events[0].why == report.meta["order"]
    assert re.search(r"level1/03_fast \(\+50\.0 % in \d+ s\), level1/02_fast \(\+20\.0 % in \d+ s\), "
                     r"level1/04_fast \(no row there\)$", report.meta["order"]), report.meta["order"]  # fmt: skip
    ran = _bench(suite, out, resume=True, slot_s=100.0, expect_from=other, order="payoff")
    assert _calls(suite)[-3:] == ["03_fast.py", "02_fast.py", "04_fast.py"]
    assert [o.name for o in ran.outcomes] == [f"level1/0{i}_fast" for i in range(1, 5)]  # rows in suite order
    assert json.loads((out / "results.json").read_text())["meta"]["order"] == report.meta["order"]

    with pytest.raises(KerneloptError, match="--order payoff needs --expect-from"):
        _bench(suite, tmp_path / "x1", slot_s=100.0, order="payoff")
    with pytest.raises(KerneloptError, match="--order 'best': pass one of given, payoff"):
        _bench(suite, tmp_path / "x2", order="best")
    cli = _runner().invoke(app, ["bench", str(suite), "--out", str(tmp_path / "cli"), "--plan", "--slot", "100",
                                 "--timeout", "60", "--expect-from", str(other), "--order", "payoff"])  # fmt: skip
    assert cli.exit_code == 0, cli.output
    assert "order: by what each would add to the target a second" in cli.stderr.replace("\n", " ")
    assert "[1/4] level1/03_fast would start at 8 s" in cli.stderr


def test_a_plan_says_what_a_slot_would_run_and_runs_and_writes_nothing(tmp_path: Path) -> None:
    """bench --plan: each problem left to run, when it would start and how long it is expected to take, or
    why it would not start, under the slot's own rules; no worker runs, no file is written, no GPU is asked
    for (the default target on this CPU machine)."""
    from kernelopt.pipeline.bench_slot import Expected, plan_slot

    suite = _suite(tmp_path / "suite", {"01_fast": FAST, "02_fast": FAST, "03_fast": FAST})
    out = tmp_path / "out"
    _bench(suite, out, problems=["01_fast"])
    document = json.loads((out / "results.json").read_text())
    document["outcomes"][0]["details"]["worker_s"] = 100.0  # the longest row so far: what 02 and 03 expect
    (out / "results.json").write_text(json.dumps(document))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    events: list[BenchEvent] = []
    report = _bench(suite, out, resume=True, slot_s=250.0, worker_timeout_s=1000.0, plan_only=True,
                    on_event=events.append)  # fmt: skip
    assert [(e.kind, e.name, e.elapsed_s) for e in events] == [
        ("planned", "level1/02_fast", 8.0), ("planned", "level1/03_fast", 108.0)]  # fmt: skip: after the start-up
    assert events[-1].why == "100 s expected (the longest row so far)"
    assert report.meta["planned"] == {"start": ["level1/02_fast", "level1/03_fast"], "of": 2}
    assert _calls(suite) == ["01_fast.py"]  # only the first bench ran a worker
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    tight = _bench(suite, out, resume=True, slot_s=150.0, worker_timeout_s=1000.0, plan_only=True)
    assert tight.meta["planned"] == {"start": ["level1/02_fast"], "of": 2}

    # the default target, on this machine without a GPU: a plan still needs none
    cli = _runner().invoke(app, ["bench", str(suite), "--out", str(tmp_path / "cli"), "--plan", "--slot", "100",
                                 "--timeout", "60"])  # fmt: skip
    assert cli.exit_code == 0, cli.output
    assert "[1/3] level1/01_fast would start at 8 s: 60 s expected (the worker time-out)" in cli.stderr
    assert "[2/3] level1/02_fast not started: it would not end within --slot: 60 s expected (the worker time-out)" \
        ", 32 s left" in cli.stderr
    assert "plan: 1 of the 3 problems left to run would start within --slot 100 s; nothing was run or written" \
        in cli.stdout
    assert not (tmp_path / "cli").exists()

    # the rule alone: lanes, the slot and --stop-after
    seconds = {"a": 100.0, "b": 200.0, "c": 50.0}

    def expect(name: str) -> Expected:
        return Expected(seconds[name], "x")

    one = plan_slot(["a", "b", "c"], expect, 1, None, 250.0)
    assert [(p.name, p.start_s) for p in one] == [("a", 0.0), ("b", None), ("c", 100.0)]
    assert one[1].why == "it would not end within --slot: 200 s expected (x), 150 s left"
    two = plan_slot(["a", "b", "c"], expect, 2, None, 250.0)
    assert [(p.name, p.start_s) for p in two] == [("a", 0.0), ("b", 0.0), ("c", 100.0)]
    late = plan_slot(["a", "b", "c"], expect, 2, 50.0, None)
    assert [(p.name, p.start_s, p.why) for p in late][2] == ("c", None, "--stop-after has passed")
    # the bench's own start-up comes first: c no longer fits after a where it did
    started = plan_slot(["a", "b", "c"], expect, 1, None, 155.0, startup_s=8.0)
    assert [(p.name, p.start_s) for p in started] == [("a", 8.0), ("b", None), ("c", None)]
    assert plan_slot(["a", "c"], expect, 1, None, 155.0)[1].start_s == 100.0


def test_with_an_llm_every_problem_gets_the_relays_access_and_the_results_record_only_the_model(tmp_path: Path) -> None:
    """``bench --llm``: each problem's worker is handed the relay's address and token (never the key);
    the results' record of the bench names the provider and model, and neither address nor token."""
    from kernelopt.agents.relay import RelayAccess

    access = RelayAccess("openai", "gpt-4o", "http://127.0.0.1:9", "the-token", 4, 30.0, 2)
    suite = _suite(tmp_path / "suite", {"01_fast": FAST})
    report = _bench(suite, tmp_path / "out", extra_options={"flag": 7}, llm=access)
    (fast,) = report.outcomes
    assert fast.details["options"]["llm"] == access.to_dict()
    meta = json.loads((tmp_path / "out" / "results.json").read_text())["meta"]
    assert meta["llm"] == "openai:gpt-4o" and meta["extra_options"] == {"flag": 7}
    assert "the-token" not in json.dumps(meta) and "127.0.0.1:9" not in json.dumps(meta)


def test_a_row_measured_on_another_gpu_is_refused_and_benches_of_two_gpus_do_not_merge(tmp_path: Path) -> None:
    """One scoreboard, one GPU: a suite resumed on another kind of GPU stops at its first new row, which is
    not written (the earlier rows stay as they were); shards run on two kinds of GPU do not merge."""
    from kernelopt.pipeline.bench import merge_results

    other = {**FAST, "details": {"device": "Fake GPU 80GB"}}
    suite = _suite(tmp_path / "suite", {"01_a": FAST, "02_b": other, "03_c": FAST})
    first = _bench(suite, tmp_path / "out", problems=["01_a"])
    assert [o.details["device"] for o in first.outcomes] == ["Fake GPU 141GB"]
    with pytest.raises(KerneloptError, match=r"^level1/02_b ran on Fake GPU 80GB, but .*results.json holds rows "
                       r"measured on Fake GPU 141GB \(level1/01_a\); one scoreboard is one GPU's"):
        _bench(suite, tmp_path / "out", resume=True)
    kept = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [o["name"] for o in kept["outcomes"]] == ["level1/01_a"] and kept["meta"]["device"] == "Fake GPU 141GB"
    assert _calls(suite) == ["01_a.py", "02_b.py"]  # 03_c never started: the bench stopped at the refusal

    _bench(suite, tmp_path / "s1", problems=["01_a", "03_c"])
    _bench(suite, tmp_path / "s2", problems=["02_b"])
    with pytest.raises(KerneloptError, match=r"measured on different GPUs \(Fake GPU 141GB; Fake GPU 80GB\)"):
        merge_results([tmp_path / "s1", tmp_path / "s2"], tmp_path / "all")
    assert len(merge_results([tmp_path / "s1", tmp_path / "out"], tmp_path / "all").outcomes) == 2


def test_the_real_bench_checks_the_machines_gpu_against_the_resumed_rows_before_any_work(tmp_path, monkeypatch) -> None:
    """A resumed suite on another kind of GPU was refused only after its first new row had run (one problem's
    time, several minutes, lost): the real bench reads its GPUs' names first, in a child process, and stops
    in one line with nothing run or written. The same machine's GPU goes on."""
    import torch

    from kernelopt.pipeline import bench

    suite = _suite(tmp_path / "suite", {"01_a": FAST, "02_b": FAST})
    _bench(suite, tmp_path / "out", problems=["01_a"])
    before = (tmp_path / "out" / "results.json").read_bytes()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    asked: list[int] = []
    monkeypatch.setattr(bench, "gpu_labels", lambda count: asked.append(count) or ["Fake GPU 80GB"])
    with pytest.raises(KerneloptError, match=r"holds rows measured on Fake GPU 141GB, and this machine's GPU is "
                       r"Fake GPU 80GB; one scoreboard is one GPU's: resume it on that GPU, or choose another --out$"):
        run_bench(suite, results_dir=tmp_path / "out", resume=True)
    assert asked == [1] and (tmp_path / "out" / "results.json").read_bytes() == before
    assert _calls(suite) == ["01_a.py"]

    def unreadable(count: int) -> list[str]:
        raise RuntimeError("could not read the GPUs' names: CUDA driver version is insufficient")

    monkeypatch.setattr(bench, "gpu_labels", unreadable)
    with pytest.raises(KerneloptError, match="could not read this machine's GPUs to check them against its results"):
        run_bench(suite, results_dir=tmp_path / "out", resume=True)


def test_the_gpus_names_are_read_in_a_child_process_as_this_process_would_name_them() -> None:
    from kernelopt.measure.environment import device_label, gpu_labels

    assert gpu_labels(1) == [device_label()]  # here a CPU's label: the child sees what this process sees


def test_each_row_says_how_near_its_result_is_to_the_traffic_floor(tmp_path: Path) -> None:
    """The floor (analysis: inputs, weights and outputs moved once at the measured peak) over the optimized
    time, in the Markdown, the HTML page and the CSV; empty where it is unknown (vendor calls, older rows)
    or the row did not pass; a floor that is not a positive time is refused."""
    from kernelopt.pipeline.bench_results import write_results
    from kernelopt.report import write_bench_report
    from kernelopt.report.scoreboard import markdown_report

    def row(name: str, floor: float | None, status: str = "ok") -> ProblemOutcome:
        return ProblemOutcome.from_dict({"name": name, "path": f"{name}.py", "status": status, "correct": status == "ok",
                                         "optimized_ms": 0.661, "floor_ms": floor})  # fmt: skip

    rows = [row("softmax", 0.505), row("gemm", None), row("crashed", 0.5, status="crash")]
    assert rows[0].of_floor == pytest.approx(0.505 / 0.661) and rows[1].of_floor is None and rows[2].of_floor is None
    text = markdown_report({"started": "t"}, rows, summarize(rows))
    assert "| vs best stock | built on | of floor | evaluations |" in text
    assert "| default | 76 % | 0 |" in text and "| default |  | 0 |" in text
    assert "*Of floor*: the traffic floor's time" in text
    assert ProblemOutcome.from_dict(json.loads(json.dumps(rows[0].to_dict()))) == rows[0]
    write_results(tmp_path, {"started": "t"}, rows)
    with (tmp_path / "results.csv").open() as f:
        assert [r["floor_ms"] for r in csv.DictReader(f)] == ["0.505", "", "0.5"]
    page = write_bench_report(tmp_path / "results.json", tmp_path / "bench.html").read_text()
    table = page.split('id="problems"', 1)[1].split("</table>", 1)[0]
    assert "<th class=num>of floor</th>" in table and table.count("<td class=num>76 %</td>") == 1
    for bad in (0.0, -1.0, math.inf, "0.5"):
        with pytest.raises(ValueError, match="floor_ms"):
            ProblemOutcome.from_dict({"name": "x", "path": "x.py", "status": "ok", "floor_ms": bad})
