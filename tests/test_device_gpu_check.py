"""scripts/device/gpu_check.sh's bench step on the CPU, with stand-ins for nvidia-smi and python3: which
card runs what (BENCH_CARD), so a call that gets another GPU than the scoreboard's spends no device time
on a row that could not be kept."""

from __future__ import annotations

import os
import shlex
import subprocess
import tarfile
from pathlib import Path

from conftest import ROOT

GPU_CHECK = ROOT / "scripts" / "device" / "gpu_check.sh"
FAKE_SMI = '#!/usr/bin/env bash\necho "{card}"\n'
# python3 -m kernelopt bench ...: each call's arguments, one line each; the env line's torch import prints a stand-in
FAKE_PYTHON = """#!/usr/bin/env bash
if [[ $1 == -m && $2 == kernelopt ]]; then printf '%s\\n' "$*" >> "$CALLS"; echo "bench ran"; else echo "torch x triton y"; fi
"""


def bench_step(tmp_path: Path, card: str, **env: str) -> tuple[subprocess.CompletedProcess, list[list[str]], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI.format(card=card))
    (bin_dir / "python3").write_text(FAKE_PYTHON)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    work = tmp_path / "tree"  # no .whl here: nothing to install
    work.mkdir()
    out, calls = tmp_path / "out", tmp_path / "calls.txt"
    variables = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out), "CALLS": str(calls), **env}
    named = ("BENCH_CARD", "BENCH_ELSE_PROBLEMS", "BENCH_ELSE_RESUME", "BENCH_RESUME", "BENCH_NAME", "PROBLEMS", "RERUN",
             "BENCH_SLOT", "BENCH_STOP_AFTER", "BENCH_TIMEOUT", "PROBLEM_TIMEOUT", "BENCH_EXPECT_FROM",
             "BENCH_ELSE_EXPECT_FROM", "BENCH_ELSE_RERUN")
    for name in named:
        if name not in env:
            variables.pop(name, None)
    result = subprocess.run(
        ["bash", str(GPU_CHECK), "bench"], cwd=work, env=variables, capture_output=True, text=True, timeout=60
    )
    lines = calls.read_text().splitlines() if calls.exists() else []
    return result, [shlex.split(line) for line in lines], out


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def earlier_results(tmp_path: Path, card: str = "H200") -> Path:
    folder = tmp_path / f"scoreboard_{card}"
    folder.mkdir()
    (folder / "results.json").write_text(f'{{"rows": "of the {card}"}}')
    return folder


def archived(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return {member.name for member in tar.getmembers()}


H200 = "NVIDIA H200"
H100 = "NVIDIA H100 80GB HBM3"
# the scoreboard's card, what to run there, and what to run on another
NAMED = {"BENCH_CARD": "H200", "BENCH_ELSE_PROBLEMS": "c", "BENCH_NAME": "suite", "PROBLEMS": "a,b", "RERUN": "b"}


def test_on_the_scoreboards_card_the_resumed_bench_runs_what_was_named(tmp_path: Path) -> None:
    board = earlier_results(tmp_path)
    result, calls, out = bench_step(tmp_path, H200, BENCH_RESUME=str(board), **NAMED)
    assert result.returncode == 0, result.stderr
    (args,) = calls
    assert args[:3] == ["-m", "kernelopt", "bench"]
    assert flag(args, "--problems") == "a,b" and flag(args, "--rerun") == "b" and "--resume" in args
    assert flag(args, "--out") == str(out / "suite")
    assert "suite/results.json" in archived(out / "suite.tgz")  # the resumed rows, in the one archive that travels


def test_on_another_card_the_scoreboard_is_left_alone_and_the_else_problems_run_in_a_folder_of_their_own(
    tmp_path: Path,
) -> None:
    board = earlier_results(tmp_path)
    result, calls, out = bench_step(tmp_path, H100, BENCH_RESUME=str(board), **NAMED)
    assert result.returncode == 0, result.stderr
    assert f"this GPU is {H100}, not an H200: running c in a folder of its own" in result.stdout
    (args,) = calls
    assert flag(args, "--problems") == "c" and "--rerun" not in args
    assert flag(args, "--out") == str(out / "suite_NVIDIA_H100_80GB_HBM3")
    assert "suite_NVIDIA_H100_80GB_HBM3/results.json" not in archived(out / "suite_NVIDIA_H100_80GB_HBM3.tgz")
    assert (board / "results.json").read_text() == '{"rows": "of the H200"}'


def test_on_another_card_with_nothing_else_named_nothing_runs(tmp_path: Path) -> None:
    result, calls, _ = bench_step(tmp_path, H100, BENCH_CARD="H200", PROBLEMS="a")
    assert result.returncode == 3
    assert f"this GPU is {H100}, not an H200: nothing run" in result.stdout and calls == []


def test_on_another_card_its_own_scoreboard_is_resumed_where_one_is_named(tmp_path: Path) -> None:
    """One command for either card: on the H100 the H100's scoreboard goes on, the H200's is left alone."""
    board, other = earlier_results(tmp_path), earlier_results(tmp_path, "H100")
    result, calls, out = bench_step(tmp_path, H100, BENCH_RESUME=str(board), BENCH_ELSE_RESUME=str(other), **NAMED)
    assert result.returncode == 0, result.stderr
    assert f"running c in a folder of its own, resuming {other}" in result.stdout
    (args,) = calls
    assert flag(args, "--problems") == "c" and "--rerun" not in args and "--resume" in args
    folder = "suite_NVIDIA_H100_80GB_HBM3"
    assert flag(args, "--out") == str(out / folder) and f"{folder}/results.json" in archived(out / f"{folder}.tgz")
    assert (board / "results.json").read_text() == '{"rows": "of the H200"}'
    with tarfile.open(out / f"{folder}.tgz") as tar:  # the H100's rows went on, not the H200's
        assert tar.extractfile(f"{folder}/results.json").read() == b'{"rows": "of the H100"}'  # type: ignore[union-attr]


def test_a_slot_replaces_the_fixed_stop_after_unless_one_is_given(tmp_path: Path) -> None:
    """BENCH_SLOT: the bench plans each problem against what is left (bench --slot); without it the
    stop-after is BENCH_TIMEOUT - PROBLEM_TIMEOUT, as before."""
    plain, slot, both = tmp_path / "plain", tmp_path / "slot", tmp_path / "both"
    for folder in (plain, slot, both):
        folder.mkdir()
    _, (args,), _ = bench_step(plain, H200, BENCH_TIMEOUT="560", PROBLEM_TIMEOUT="300")
    assert flag(args, "--stop-after") == "260" and "--slot" not in args
    _, (args,), _ = bench_step(slot, H200, BENCH_TIMEOUT="560", PROBLEM_TIMEOUT="300", BENCH_SLOT="540")
    assert flag(args, "--slot") == "540" and "--stop-after" not in args and flag(args, "--timeout") == "300"
    _, (args,), _ = bench_step(both, H200, BENCH_SLOT="540", BENCH_STOP_AFTER="400")
    assert flag(args, "--slot") == "540" and flag(args, "--stop-after") == "400" and "--expect-from" not in args


def test_a_slot_expects_each_problem_from_the_other_cards_scoreboard(tmp_path: Path) -> None:
    """BENCH_EXPECT_FROM (bench --expect-from, with the slot); on the other card's branch
    BENCH_ELSE_EXPECT_FROM, so one command names each card's reference."""
    same, other, plain = tmp_path / "same", tmp_path / "other", tmp_path / "plain"
    for folder in (same, other, plain):
        folder.mkdir()
    pair = {"BENCH_SLOT": "540", "BENCH_EXPECT_FROM": "benchmarks/h100", "BENCH_ELSE_EXPECT_FROM": "benchmarks/h200"}
    _, (args,), _ = bench_step(same, H200, **NAMED, **pair)
    assert flag(args, "--expect-from") == "benchmarks/h100"
    _, (args,), _ = bench_step(other, H100, **NAMED, **pair)
    assert flag(args, "--expect-from") == "benchmarks/h200" and flag(args, "--problems") == "c"
    _, (args,), _ = bench_step(plain, H100, **NAMED, BENCH_SLOT="540", BENCH_EXPECT_FROM="benchmarks/h100")
    assert "--expect-from" not in args  # the H200's reference is not the H100's


def test_bench_order_orders_either_cards_bench_by_payoff(tmp_path: Path) -> None:
    """BENCH_ORDER=payoff (bench --order payoff) reaches the bench on the named card's branch and on the
    other card's; without it no --order is passed (the bench's own, the order given)."""
    same, other, plain = tmp_path / "same", tmp_path / "other", tmp_path / "plain"
    for folder in (same, other, plain):
        folder.mkdir()
    pair = {"BENCH_SLOT": "540", "BENCH_EXPECT_FROM": "benchmarks/h100", "BENCH_ELSE_EXPECT_FROM": "benchmarks/h200"}
    _, (args,), _ = bench_step(same, H200, **NAMED, **pair, BENCH_ORDER="payoff")
    assert flag(args, "--order") == "payoff" and flag(args, "--expect-from") == "benchmarks/h100"
    _, (args,), _ = bench_step(other, H100, **NAMED, **pair, BENCH_ORDER="payoff")
    assert flag(args, "--order") == "payoff" and flag(args, "--expect-from") == "benchmarks/h200"
    _, (args,), _ = bench_step(plain, H200, **NAMED, **pair)
    assert "--order" not in args


def test_the_other_cards_branch_reruns_what_bench_else_rerun_names_not_rerun(tmp_path: Path) -> None:
    """RERUN names the H200's rows to measure again; BENCH_ELSE_RERUN the other card's."""
    plain, named = tmp_path / "plain", tmp_path / "named"
    for folder in (plain, named):
        folder.mkdir()
    _, (args,), _ = bench_step(plain, H100, **NAMED)  # RERUN=b
    assert "--rerun" not in args
    _, (args,), _ = bench_step(named, H100, **NAMED, BENCH_ELSE_RERUN="c")
    assert flag(args, "--rerun") == "c" and flag(args, "--problems") == "c"
