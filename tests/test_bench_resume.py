"""What a resumed bench keeps, runs again and removes (kernelopt.pipeline.bench_resume), for both benches."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.errors import KerneloptError
from kernelopt.pipeline.bench_resume import (
    carried_rows,
    check_one_device,
    check_resumed_gpus,
    ordered,
    replace_row,
    rerun_names,
)
from kernelopt.report.file_scoreboard import FileOutcome
from kernelopt.report.metrics import ProblemOutcome


def _row(name: str, status: str = "ok") -> ProblemOutcome:
    return ProblemOutcome(name, f"{name}.py", status, "", status == "ok")


def test_rows_are_kept_retried_or_run_again_and_the_ones_run_again_stand_until_replaced() -> None:
    previous = {"meta": {}, "outcomes": [_row("a"), _row("b", "timeout"), _row("c"), _row("d", "crash")]}
    plain = carried_rows(previous, retry_failed=False, again=[])
    assert sorted(plain.done) == ["a", "b", "c", "d"] and plain.earlier == {}
    retried = carried_rows(previous, retry_failed=True, again=["c", "d"])
    assert sorted(retried.done) == ["a"]  # b is failed and retried: nothing of it kept
    assert sorted(retried.earlier) == ["c", "d"]  # run again, their rows stand until the new ones are in
    assert carried_rows(None, True, []).done == {}
    with pytest.raises(KerneloptError, match=r"--rerun a: /x/results.json does not exist, so there is no earlier row"):
        carried_rows(None, False, ["a"], Path("/x"))  # --resume with a mistyped --out


def test_a_rerun_name_follows_the_loaders_rule_and_a_typo_is_one_line(tmp_path: Path) -> None:
    entries = [("level1/01_relu", Path("level1/01_relu.py")), ("level1/24_log_softmax_vocab", Path("level1/24.py"))]
    assert rerun_names(tmp_path, entries, ["vocab"]) == ["level1/24_log_softmax_vocab"]
    assert rerun_names(tmp_path, entries, ["01_relu", "24"]) == [name for name, _ in entries]
    assert rerun_names(tmp_path, entries, None) == []
    with pytest.raises(KerneloptError, match="--rerun gelu: no kernel of this bench's selection"):
        rerun_names(tmp_path, entries, ["relu", "gelu"], noun="kernel")


def test_a_replaced_rows_delivery_goes_unless_the_new_row_delivers_the_same_file(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    again, stale, missing = folder / "again.kopt.json", folder / "stale.json", folder / "never.json"
    elsewhere = tmp_path / "another_bench" / "kept.json"  # results copied from elsewhere name other folders
    elsewhere.parent.mkdir()
    for path in (again, stale, elsewhere):
        path.write_text("{}")
    meta: dict = {"replaced": [{"name": "older"}]}
    new, old = FileOutcome("a", "a.py", "triton", "ok", ""), FileOutcome("a", "a.py", "triton", "ok", "", True, 1.3)
    earlier = [str(again), str(stale), str(missing), str(elsewhere), str(folder / ".." / "another_bench" / "kept.json"), None]
    replace_row(meta, new, old, "2026-12-05T00:00:00", {"speedup": 1.3}, (earlier, [str(again)]), folder)
    assert again.is_file() and not stale.exists()  # the new run wrote again.kopt.json over the earlier one
    assert elsewhere.is_file()  # outside the results folder: never touched, however the path is written
    record = meta["replaced"][-1]
    assert record == {"name": "a", "replaced_at": "2026-12-05T00:00:00", "status": "ok", "reason": "", "speedup": 1.3,
                      "removed": [str(stale)]}
    assert meta["replaced"][0] == {"name": "older"} and new.details["replaced"] == record


def test_rows_keep_the_suite_order_and_those_of_other_selections_come_last() -> None:
    rows = {n: _row(n) for n in ("z_other", "b", "a")}
    assert [r.name for r in ordered(rows, ["a", "b"])] == ["a", "b", "z_other"]


def test_a_row_of_another_device_is_refused_and_rows_without_one_take_no_side() -> None:
    def on(name: str, device: str | None, status: str = "ok") -> ProblemOutcome:
        row = _row(name, status)
        if device is not None:
            row.details["device"] = device
        return row

    kept = [on("a", None, "load_error"), on("b", "H200"), on("c", None, "timeout")]
    check_one_device(kept, on("d", "H200"), Path("/r/results.json"))
    check_one_device(kept, on("e", None, "crash"), Path("/r/results.json"))  # a worker that died first
    check_one_device([on("a", None, "load_error")], on("f", "H100"), Path("/r/results.json"))
    with pytest.raises(KerneloptError, match=r"^g ran on H100, but /r/results.json holds rows measured on H200 \(b\)"):
        check_one_device(kept, on("g", "H100"), Path("/r/results.json"))
    file_row = FileOutcome("k", "k.py", "triton", "ok", "", details={"device": "H200"})
    with pytest.raises(KerneloptError, match="one scoreboard is one GPU's"):
        check_one_device([file_row], on("h", "H100"), Path("/r/results.json"))


def test_a_resumed_folders_gpu_is_checked_against_the_machines_before_any_row() -> None:
    results = Path("/r/results.json")
    row = _row("a")
    row.details["device"] = "H200"
    previous = {"meta": {"device": "H200"}, "outcomes": [row]}
    check_resumed_gpus(previous, ["H200"], results)
    check_resumed_gpus(None, ["H100"], results)  # nothing resumed
    check_resumed_gpus({"meta": {}, "outcomes": [_row("b", "crash")]}, ["H100"], results)  # no row has a device
    with pytest.raises(KerneloptError, match=r"^/r/results.json holds rows measured on H200, and this machine's GPU "
                       r"is H100"):
        check_resumed_gpus(previous, ["H200", "H100"], results)  # every GPU a lane may run on
    older = {"meta": {}, "outcomes": [_row("c", "timeout"), row]}  # a folder whose meta has no device: its rows do
    with pytest.raises(KerneloptError, match="measured on H200, and this machine's GPU is H100"):
        check_resumed_gpus(older, ["H100"], results)
