"""Helion kernel files: a config baked into the decorator, gate 1's narrow rule, the two operators, and
the judge and optimize on CPU tensors (Helion's Triton through Triton's interpreter)."""

from __future__ import annotations

import random
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT

from kernelopt.evaluate.file_session import FileSession, FileSpec
from kernelopt.evaluate.gate_settings import GateSettings
from kernelopt.pipeline.optimize_file import optimize_file
from kernelopt.search.candidate import Candidate
from kernelopt.search.helion_configs import HelionAutotuneOperator, HelionConfigOperator, bake_config, neighbours
from kernelopt.search.nodes import Node, NodeStore
from kernelopt.search.operators import SearchContext
from kernelopt.search.termination import Budget
from kernelopt.store import Store
from kernelopt.verify.static_helion import check_static_helion

pytest.importorskip("helion")
PATH = ROOT / "examples" / "kernels" / "helion_rms_scale.py"
SOURCE = PATH.read_text()
SMALL = {"ROWS": 8, "COLS": 64}
SETTINGS = GateSettings(kernel_seeds=(0,), model_seeds=(0,), trials=4, kernel_distributions=("neg",), kernel_edges=())
CONFIG = {"block_sizes": [4], "num_warps": 2, "num_stages": 1}


def _node(id_: int, config=None, operator="root") -> Node:
    candidate = Candidate("k", operator, source=SOURCE, config=config)
    return Node(id_, 1, "k", None, operator, candidate.key(), candidate, 0, "evaluated", None, None, None, None)


@pytest.mark.parametrize(
    ("decorator", "kept"),
    [
        ("@helion.kernel", ""),
        ("@helion.kernel()", ""),
        ("@helion.kernel(static_shapes=True, configs=[])", "static_shapes=True, "),
    ],
)
def test_a_config_is_baked_into_the_decorator_and_nothing_else_changes(decorator: str, kept: str) -> None:
    source = SOURCE.replace("@helion.kernel()", decorator)
    baked = bake_config(source, "rms_scale", CONFIG)
    assert f"@helion.kernel({kept}config=helion.Config(block_sizes=[4], num_stages=1, num_warps=2))" in baked
    assert baked.replace(baked.splitlines()[source.splitlines().index(decorator)], decorator) == source


def test_an_import_of_helion_is_added_where_the_file_does_not_bind_the_name() -> None:
    source = "from helion import kernel\nimport torch\n@kernel\ndef k(x):\n    return x\n"
    baked = bake_config(source, "k", CONFIG)
    assert baked.startswith("import helion\nfrom helion import kernel\n")
    assert check_static_helion(baked, original_source=source).passed


def test_gate_1_passes_a_baked_literal_config_and_refuses_everything_else() -> None:
    baked = bake_config(SOURCE, "rms_scale", CONFIG)
    assert check_static_helion(baked, original_source=SOURCE).passed
    cases = {
        "unchanged": baked.replace("1e-6", "1e-3"),
        "config": baked.replace("num_warps=2", "num_warps=int('2')"),
    }
    for rule, source in cases.items():
        verdict = check_static_helion(source, original_source=SOURCE)
        assert not verdict.passed and verdict.details["rule"] == rule, (rule, verdict.reason)
    listed = SOURCE.replace("@helion.kernel()", "@helion.kernel(configs=[helion.Config(num_warps=4)])")
    assert check_static_helion(listed, original_source=SOURCE).details["rule"] == "config"
    assert check_static_helion("def (", original_source=SOURCE).details["rule"] == "syntax"


def test_neighbours_step_one_block_size_the_warps_or_the_stages() -> None:
    near = neighbours({"block_sizes": [4, 32], "num_warps": 1, "num_stages": 1, "pid_type": "flat"})
    assert {"block_sizes": [2, 32], "num_warps": 1, "num_stages": 1, "pid_type": "flat"} in near
    assert {"block_sizes": [4, 64], "num_warps": 1, "num_stages": 1, "pid_type": "flat"} in near
    assert {"block_sizes": [4, 32], "num_warps": 2, "num_stages": 1, "pid_type": "flat"} in near
    assert {"block_sizes": [4, 32], "num_warps": 1, "num_stages": 2, "pid_type": "flat"} in near
    assert len(near) == 6  # two per block size, one each for warps and stages (no 0 warps, no stage 0)


def test_the_autotuner_s_choice_is_proposed_once_then_the_walk_starts_from_the_parent() -> None:
    entry = {"kernel": "rms_scale", "default": CONFIG, "tuned": {**CONFIG, "num_warps": 8}}
    facts = {"kernel_file": {"helion": {"kernels": [entry], "effort": "quick", "seconds": 12.0}}}
    root = _node(1)
    ctx = SearchContext(target="k", root_source=SOURCE, nodes=[root], rng=random.Random(0), facts=facts)
    (tuned,) = HelionAutotuneOperator().propose(root, ctx, 4)
    assert tuned.config == {"rms_scale": {**CONFIG, "num_warps": 8}} and tuned.note == "Helion's autotuner (quick effort, 12 s)"
    assert tuned.source == bake_config(SOURCE, "rms_scale", {**CONFIG, "num_warps": 8})
    ctx.nodes = [root, _node(2, tuned.config, "helion-autotune")]
    assert HelionAutotuneOperator().propose(root, ctx, 4) == []
    walked = HelionConfigOperator().propose(ctx.nodes[1], ctx, 3)
    assert len(walked) == 3 and all(c.config != tuned.config and c.config != {"rms_scale": CONFIG} for c in walked)
    assert walked[0].note == "block_sizes [4]->[2]"  # one kernel: no kernel name in the note
    assert all(check_static_helion(c.source or "", original_source=SOURCE).passed for c in walked)


@pytest.fixture(scope="module")
def session() -> Iterator[FileSession]:
    s = FileSession(FileSpec(str(PATH), SMALL, 0, "cpu"))
    yield s
    s.close()


def test_the_judge_reads_the_default_config_and_passes_a_baked_neighbour_through_gates_1_to_3(
    session: FileSession,
) -> None:
    (configs,) = session.helion_configs()["kernels"]
    assert configs["kernel"] == "rms_scale" and configs["tuned"] is None and "block_sizes" in configs["default"]
    candidate = bake_config(SOURCE, "rms_scale", neighbours(configs["default"])[0])
    result = session.evaluate(candidate, SETTINGS)
    assert [(v["gate"], v["passed"]) for v in result["verdicts"][:3]] == [
        ("static", True),
        ("correctness", True),
        ("model", True),
    ]
    refused = session.evaluate(candidate.replace("1e-6", "1e-2"), SETTINGS)
    assert refused["verdicts"][0]["gate"] == "static" and not refused["verdicts"][0]["passed"]


def test_optimize_walks_helion_configs_on_cpu_and_records_the_default(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    report = optimize_file(PATH, store, operators=["helion-config"], budget=Budget(max_evaluations=2), settings=SETTINGS,
                           sizes=SMALL, export_path=tmp_path / "h.kopt.py", device="cpu")  # fmt: skip
    assert store.run(report.run_id).status == "done" and report.kind == "helion"
    assert report.helion is not None
    (entry,) = report.helion["kernels"]
    assert entry["tuned"] is None and entry["default"] and "effort" not in report.helion
    nodes = NodeStore(store, report.run_id).nodes("helion_rms_scale")
    assert [n.operator for n in nodes].count("helion-config") == 2
    assert store.measurements(report.run_id, "helion")["helion"]["kernels"][0]["kernel"] == "rms_scale"


def test_a_run_recorded_with_one_helion_config_for_the_whole_file_is_not_resumed(tmp_path: Path) -> None:
    """Runs from before every Helion kernel was tuned hold one flat config per node; resuming one under
    the per-kernel search would read those configs as kernel names: refused in one line instead."""
    from kernelopt.errors import KerneloptError

    store = Store(tmp_path / "k.db")
    run_id = store.start_run("optimize", "helion_rms_scale", "cpu", {}, {"input": "helion", "sizes": SMALL})
    store.add_measurement(run_id, "helion", {"helion": {"kernel": "rms_scale", "default": CONFIG, "tuned": None}})
    with pytest.raises(KerneloptError, match=f"run {run_id} recorded one Helion config .* start a new run"):
        optimize_file(PATH, store, operators=["helion-config"], budget=Budget(max_evaluations=1), settings=SETTINGS,
                      resume_run=run_id, export_path=tmp_path / "h.kopt.py", device="cpu")  # fmt: skip


def test_helion_s_autotuner_is_not_run_for_an_original_already_at_its_roofline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelopt.pipeline import optimize_file as module

    measured = module.file_facts

    def at_roofline(*args, **kwargs):  # as on the H200: 134 us against a floor of 126 us
        facts = measured(*args, **kwargs)
        facts["min_time_us"] = facts["original"]["median_us"] * 0.94
        return facts

    monkeypatch.setattr(module, "file_facts", at_roofline)
    store = Store(tmp_path / "k.db")
    report = optimize_file(PATH, store, operators=["helion-autotune", "helion-config"], budget=Budget(max_evaluations=2),
                           settings=SETTINGS, sizes=SMALL, export_path=tmp_path / "h.kopt.py", device="cpu")  # fmt: skip
    assert report.helion is not None and report.helion["kernels"][0]["tuned"] is None  # never asked to autotune
    assert report.helion["skipped"] == "the original runs at 94% of its roofline (>= 90%), so no search follows"
    assert report.stop_reason.startswith("best kernel at 94% of the roofline") and report.evaluations == 0


def test_helion_s_search_algorithm_is_a_setting_checked_before_any_worker(tmp_path: Path) -> None:
    from kernelopt.config import load_settings
    from kernelopt.errors import KerneloptError
    from kernelopt.evaluate.file_helion import check_search, search_names

    names = search_names()
    assert names is not None and "PatternSearch" in names
    check_search("")  # Helion's own pick
    check_search("PatternSearch")
    with pytest.raises(KerneloptError, match="helion_search='Nope': this Helion has no such search; pass one of "):
        optimize_file(PATH, Store(tmp_path / "k.db"), config=load_settings({"helion_search": "Nope"}), sizes=SMALL,
                      device="cpu")  # fmt: skip
    assert not (tmp_path / "k.db").exists() or Store(tmp_path / "k.db").runs() == []  # refused before any run


def test_the_chosen_search_reaches_helion_only_while_its_autotuner_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import types

    from kernelopt.evaluate import file_helion

    seen: list[str | None] = []

    class Bound:
        config_spec = types.SimpleNamespace(default_config=lambda: {"block_sizes": [8]})

        def autotune(self, args, force):
            seen.append(os.environ.get("HELION_AUTOTUNER"))
            return {"block_sizes": [16]}

        def set_config(self, config):
            seen.append(f"reset to {config}")

    kernel = types.SimpleNamespace(
        bind=lambda args: Bound(),
        settings=types.SimpleNamespace(autotune_effort="none", autotune_budget_seconds=None, autotune_progress_bar=True),
    )
    monkeypatch.setattr(file_helion, "helion_kernels", lambda file: [kernel])
    monkeypatch.delenv("HELION_AUTOTUNER", raising=False)
    file = types.SimpleNamespace(kernels=["k"], entry_name="k")  # the file's entry is its one kernel
    out = file_helion.helion_configs(file, [], "quick", 30, "PatternSearch")
    assert seen == ["PatternSearch", "reset to {'block_sizes': [8]}"] and "HELION_AUTOTUNER" not in os.environ
    assert out["kernels"][0]["tuned"] == {"block_sizes": [16]} and out["kernels"][0]["budget_s"] == 30
    assert out["search"] == "PatternSearch" and out["effort"] == "quick"
    assert kernel.settings.autotune_effort == "none"  # the judge's own kernel runs its default config again
    seen.clear()
    monkeypatch.setenv("HELION_AUTOTUNER", "RandomSearch")  # the user's own, outside the stage
    assert file_helion.helion_configs(file, [], "quick", 30)["search"] is None
    assert seen[0] == "RandomSearch" and os.environ["HELION_AUTOTUNER"] == "RandomSearch"


# -- a file of several Helion kernels ---------------------------------------------------------------

TWO = ROOT / "tests" / "fixtures" / "kernel_files" / "helion_two_kernels.py"
TWO_SOURCE = TWO.read_text()
BIAS = {"block_sizes": [8, 32], "num_warps": 4, "num_stages": 1}


def test_each_kernel_is_configured_on_the_arguments_launch_passes_it() -> None:
    import torch

    from kernelopt.evaluate.file_helion import helion_configs, kernel_arguments, quiet
    from kernelopt.problem.kernel_file import load_kernel_file

    two = load_kernel_file(TWO)
    quiet(two)
    x, weight, bias = two.make_inputs(0)
    arguments = kernel_arguments(two, [x, weight, bias])
    assert arguments["rms_scale"][0] is not x and torch.equal(arguments["rms_scale"][0], x)  # copied before the call
    scaled = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
    torch.testing.assert_close(arguments["add_bias"][0], scaled)  # what the first kernel wrote: no input of the file
    assert arguments["add_bias"][1] is not bias and torch.equal(arguments["add_bias"][1], bias)
    configs = helion_configs(two, [x, weight, bias])
    assert [k["kernel"] for k in configs["kernels"]] == ["rms_scale", "add_bias"]
    assert [len(k["default"]["block_sizes"]) for k in configs["kernels"]] == [1, 2]  # each bound to its own
    one = load_kernel_file(PATH, SMALL)
    inputs = one.make_inputs(0)
    assert kernel_arguments(one, inputs)["rms_scale"] == tuple(inputs)  # the entry is the kernel: its inputs, as before


class FakeBound:
    """A bound Helion kernel whose autotuner takes ``cost`` seconds of a fake clock, or fails."""

    def __init__(self, kernel: FakeKernel) -> None:
        self.kernel = kernel
        self.config_spec = types.SimpleNamespace(default_config=lambda: {"block_sizes": [8]})

    def autotune(self, args, force):
        self.kernel.budgets.append(self.kernel.settings.autotune_budget_seconds)
        CLOCK[0] += self.kernel.cost
        if self.kernel.fails:
            raise RuntimeError("no config compiled\nmore detail")
        return {"block_sizes": [16]}

    def set_config(self, config):
        pass


class FakeKernel:
    def __init__(self, cost: float, fails: bool = False) -> None:
        self.cost, self.fails, self.budgets = cost, fails, []
        self.settings = types.SimpleNamespace(autotune_effort="none", autotune_budget_seconds=None, autotune_progress_bar=True)

    def bind(self, args):
        return FakeBound(self)

    def normalize_args(self, *args, **keywords):
        return (*args, *keywords.values())


CLOCK = [0.0]


def test_the_kernels_share_the_autotuner_s_budget_in_turn_and_each_one_s_outcome_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernelopt.evaluate import file_helion
    from kernelopt.problem.kernel_file import KernelCall

    kernels = {"a": FakeKernel(cost=20.0, fails=True), "b": FakeKernel(cost=0.0), "c": FakeKernel(cost=5.0)}
    called = {"a": [KernelCall((1,), {})], "b": [], "c": [KernelCall((2,), {"k": 3})]}  # launch never calls b
    file = types.SimpleNamespace(kernels=list(kernels), entry_name="launch", kernel_calls=lambda inputs, names, copy: called)
    monkeypatch.setattr(file_helion, "helion_kernels", lambda f: list(kernels.values()))
    monkeypatch.setattr(file_helion.time, "monotonic", lambda: CLOCK[0])
    CLOCK[0] = 0.0
    out = file_helion.helion_configs(file, [], "quick", 90)
    a, b, c = out["kernels"]
    assert kernels["a"].budgets == [45] and kernels["c"].budgets == [70]  # half of 90; then all that a left
    assert a["error"] == "RuntimeError: no config compiled" and a["tuned"] is None and a["default"] == {"block_sizes": [8]}
    assert b == {"kernel": "b", "default": None, "tuned": None, "skipped": file_helion.NOT_CALLED}
    assert c["tuned"] == {"block_sizes": [16]} and (c["budget_s"], c["seconds"]) == (70, 5.0)
    assert out["seconds"] == 25.0 and all(k.settings.autotune_effort == "none" for k in kernels.values())


def _two_facts(tuned: dict | None = None) -> dict:
    rms = {"kernel": "rms_scale", "default": CONFIG, "tuned": tuned}
    bias = {"kernel": "add_bias", "default": BIAS, "tuned": None, "error": "RuntimeError: boom"}
    return {"kernel_file": {"helion": {"kernels": [rms, bias], "effort": "quick", "seconds": 30.0}}}


def test_the_autotuner_s_choices_are_proposed_baked_together_and_the_walk_takes_the_kernels_in_turn() -> None:
    tuned = {**CONFIG, "num_warps": 8}
    root = Node(1, 1, "k", None, "root", "r", Candidate("k", "root", source=TWO_SOURCE), 0, "evaluated", None, None, None, None)
    ctx = SearchContext(target="k", root_source=TWO_SOURCE, nodes=[root], rng=random.Random(0), facts=_two_facts(tuned))
    (joint,) = HelionAutotuneOperator().propose(root, ctx, 4)
    assert joint.config == {"rms_scale": tuned, "add_bias": BIAS}  # the default where the tuner failed
    assert joint.note == "Helion's autotuner (quick effort, 30 s): rms_scale tuned, add_bias default"
    assert joint.source == bake_config(bake_config(TWO_SOURCE, "rms_scale", tuned), "add_bias", BIAS)
    walked = HelionConfigOperator().propose(root, ctx, 4)
    assert [c.note.split(":")[0] for c in walked] == ["rms_scale", "add_bias", "rms_scale", "add_bias"]
    assert walked[0].config == {"rms_scale": {**CONFIG, "block_sizes": [2]}, "add_bias": BIAS}
    assert walked[1].config == {"rms_scale": CONFIG, "add_bias": {**BIAS, "block_sizes": [4, 32]}}
    for candidate in [joint, *walked]:  # every kernel baked: the delivered file autotunes nothing on its first call
        assert (candidate.source or "").count("config=helion.Config(") == 2
        assert check_static_helion(candidate.source or "", original_source=TWO_SOURCE).passed


def test_the_report_says_what_happened_to_each_kernel_and_what_each_delivered_kernel_bakes() -> None:
    from kernelopt.cli.kernel_file_cmd import helion_lines

    helion = _two_facts({**CONFIG, "num_warps": 8})["kernel_file"]["helion"]
    helion["kernels"][0].update(seconds=12.0, budget_s=60)
    delivered = {"rms_scale": {**CONFIG, "num_warps": 8}, "add_bias": BIAS}
    assert helion_lines(helion, delivered) == [
        "rms_scale: Helion's autotuner (quick effort) chose its config in 12 s of its 60 s",
        "rms_scale: delivered with helion.Config(block_sizes=[4], num_stages=1, num_warps=8) baked in",
        "add_bias: Helion's autotuner failed: RuntimeError: boom",
        "add_bias: delivered with helion.Config(block_sizes=[8, 32], num_stages=1, num_warps=4) baked in",
        "the autotuner's configs, baked together (the default where it failed), were tried first",
    ]
    one = {"kernels": [{"kernel": "rms_scale", "default": CONFIG, "tuned": CONFIG}], "effort": "quick", "seconds": 9.0}
    assert helion_lines(one, {"rms_scale": CONFIG}) == [
        "Helion's autotuner (quick effort) chose its config in 9 s (tried first)"  # one kernel: the line it always was
    ]


def test_optimize_walks_the_configs_of_every_kernel_of_a_file_and_judges_them_on_cpu(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    report = optimize_file(TWO, store, operators=["helion-config"], budget=Budget(max_evaluations=2), settings=SETTINGS,
                           export_path=tmp_path / "h_kopt.py", device="cpu")  # fmt: skip
    assert report.helion is not None and [k["kernel"] for k in report.helion["kernels"]] == ["rms_scale", "add_bias"]
    nodes = [n for n in NodeStore(store, report.run_id).nodes("helion_two_kernels") if n.operator == "helion-config"]
    assert [sorted(n.candidate.config or {}) for n in nodes] == [["add_bias", "rms_scale"]] * 2
    assert [n.candidate.note.split(":")[0] for n in nodes] == ["rms_scale", "add_bias"]
    for node in nodes:
        assert node.result is not None
        assert [(v["gate"], v["passed"]) for v in node.result.verdicts[:3]] == [
            ("static", True), ("correctness", True), ("model", True),
        ], node.result.reason  # fmt: skip
    from kernelopt.report import write_run_report

    report.helion["kernels"][1]["error"] = "RuntimeError: boom"  # as a tuner that failed on one kernel
    store.add_measurement(report.run_id, "file_report", report.to_dict())
    page = write_run_report(store, report.run_id, tmp_path / "run.html").read_text()
    assert "failed: RuntimeError: boom" in page
