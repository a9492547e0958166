"""Settings and effort profiles: the order of sources, complete profiles, one-line errors, and
the command line reading its defaults from them (no GPU: the bench runs a scripted target, the
optimize command stops at a stand-in for the run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kernelopt.cli.main import app
from kernelopt.config import (
    PROFILES,
    Settings,
    config_file,
    default_of,
    load_settings,
    resolve,
    setting_fields,
)
from kernelopt.errors import KerneloptError
from kernelopt.workers.identity import worker_identity

TESTS_DIR = Path(__file__).resolve().parent
TARGET = "bench_targets:scripted"
PROCESS_SETTINGS = {"effort", "store", "cache", "compile_workers", "worker_user", "helion_search"}  # not budgets: no profile sets them


@pytest.fixture
def tmp_path(worker_tmp: Path) -> Path:
    """Here a test's files (suites, tools) are read by workers, which may run as another user:
    ``worker_tmp`` (conftest) is a folder they can enter, where pytest's own is closed to them."""
    return worker_tmp


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No KERNELOPT_* of the machine running the tests, and no kernelopt.toml in the working directory."""
    import os

    for name in list(os.environ):
        if name.startswith("KERNELOPT_") and name not in ("KERNELOPT_PARENT_PID", "KERNELOPT_ROLE"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_precedence_argument_env_file_profile_default(tmp_path: Path) -> None:
    file = tmp_path / "settings.toml"
    file.write_text('effort = "quick"\nbudget = 5\npatience = 4\nmax_targets = 1\nkernel_seeds = [7, 8]\n')
    env = {"KERNELOPT_BUDGET": "6", "KERNELOPT_PATIENCE": "9"}
    s = load_settings({"budget": 7, "trials": None}, env=env, file=file)
    assert (s.budget, s.sources["budget"]) == (7, "argument")  # argument over env and file
    assert (s.patience, s.sources["patience"]) == (9, "env KERNELOPT_PATIENCE")  # env over file
    assert (s.max_targets, s.sources["max_targets"]) == (1, f"file {file}")  # file over profile
    assert s.kernel_seeds == (7, 8)
    assert (s.effort, s.sources["effort"]) == ("quick", f"file {file}")
    assert (s.trials, s.sources["trials"]) == (PROFILES["quick"]["trials"], "profile quick")  # None is not an argument
    assert (s.compile_workers, s.sources["compile_workers"]) == (0, "default")
    assert s.store == Path.home() / ".cache" / "kernelopt" / "kernelopt.db"

    # the effort profile of the environment beats the file's, and sets what nothing else does
    full = load_settings(env={"KERNELOPT_EFFORT": "full"}, file=file)
    assert (full.effort, full.sources["trials"], full.trials) == ("full", "profile full", PROFILES["full"]["trials"])
    assert full.budget == 5  # the file still beats the profile


def test_a_new_effort_as_argument_reapplies_the_profile_but_keeps_what_was_set() -> None:
    base = load_settings(env={"KERNELOPT_BUDGET": "11"})
    quick = base.with_overrides({"effort": "quick", "margin": 0.05})
    assert (quick.effort, quick.sources["effort"]) == ("quick", "argument")
    assert (quick.budget, quick.sources["budget"]) == (11, "env KERNELOPT_BUDGET")
    assert (quick.patience, quick.sources["patience"]) == (PROFILES["quick"]["patience"], "profile quick")
    assert (quick.margin, quick.sources["margin"]) == (0.05, "argument")
    assert base.with_overrides({"budget": None}) is base
    assert resolve(quick, trials=None) is quick and resolve(None, trials=9).trials == 9


def test_every_profile_sets_the_same_known_budgets_and_default_is_what_optimize_did() -> None:
    names = {f.name for f in setting_fields()}
    for effort, table in PROFILES.items():
        assert set(table) == names - PROCESS_SETTINGS, effort  # complete, and nothing unknown
        load_settings({"effort": effort}, env={})  # every value passes its own checks
    assert set(PROFILES) == {"quick", "default", "full"}
    today = {"budget": 48, "patience": 3, "max_targets": 3, "knob_budget": 8, "search_kernel_seeds": (1,),
             "search_model_seeds": (0,), "kernel_seeds": (1, 2, 3), "model_seeds": (0, 1, 2), "trials": 50,
             "screen_trials": 10, "margin": 0.03, "analyze_trials": 30, "eval_timeout_s": 600.0,
             "verify_timeout_s": 900.0, "bench_timeout_s": 3600.0, "bench_timeout_margin_s": 900.0,
             # since 2026-12-01 bench also times the CUDA-graph modes: the baseline is the best stock mode
             "stock_modes": "max-autotune-no-cudagraphs,reduce-overhead,max-autotune",
             # and optimize builds on max-autotune-no-cudagraphs where it beats the default
             "base_mode": "auto",
             # since 2026-12-02 the graph stage also runs where the analysis says structure can pay
             "graph_stage": "auto", "graph_compile_s": 180.0,
             # since 2026-12-03 a result runs under the CUDA-graph mode that runs it faster, unless off
             "cuda_graphs": "auto",
             # since 2026-12-01 a Helion kernel file's autotuner stage: Helion's quick effort, at most 120 s
             "helion_effort": "quick", "helion_budget_s": 120.0}
    assert PROFILES["default"] == today
    for f in setting_fields():  # each field documented and bound to its variable
        assert f.metadata["help"] and f.metadata["env"] == f"KERNELOPT_{f.name.upper()}"


def test_lower_layers_take_their_defaults_from_the_default_profile() -> None:
    from kernelopt.evaluate.one_candidate import EvaluationRequest
    from kernelopt.evaluate.session import GateSettings, final_settings, search_settings
    from kernelopt.verify.performance import PerformancePolicy

    gates = GateSettings()
    assert (gates.kernel_seeds, gates.model_seeds, gates.trials, gates.margin) == (
        default_of("kernel_seeds"), default_of("model_seeds"), default_of("trials"), default_of("margin"))
    assert PerformancePolicy().margin == default_of("margin") == EvaluationRequest("p", "k", "s").margin
    search = search_settings()
    assert (search.kernel_seeds, search.model_seeds, search.screen_trials, search.screen_min_speedup) == ((1,), (0,), 10, 1.015)
    full = load_settings({"effort": "full"}, env={})
    wide = search_settings(full)
    assert (wide.kernel_seeds, wide.trials, wide.screen_trials) == (full.search_kernel_seeds, full.trials, full.screen_trials)
    assert final_settings(wide, full).model_seeds == full.model_seeds


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"KERNELOPT_COMPILE_WORKERS": "abc"}, "KERNELOPT_COMPILE_WORKERS='abc': expected a whole number of processes"),
        ({"KERNELOPT_BUDGET": "0"}, "KERNELOPT_BUDGET='0': expected a whole number of at least 1; set KERNELOPT_BUDGET"),
        ({"KERNELOPT_MARGIN": "three"}, "KERNELOPT_MARGIN='three': expected a number"),
        ({"KERNELOPT_KERNEL_SEEDS": "1,x"}, "KERNELOPT_KERNEL_SEEDS='1,x': expected whole numbers separated by commas"),
        ({"KERNELOPT_EFFORT": "fast"}, "KERNELOPT_EFFORT='fast': expected an effort profile: quick, default or full"),
        ({"KERNELOPT_CONFIG": "/nonexistent/k.toml"}, "KERNELOPT_CONFIG=/nonexistent/k.toml: no such file"),
    ],
)
def test_a_malformed_environment_value_is_one_line_naming_it(env: dict[str, str], expected: str) -> None:
    with pytest.raises(KerneloptError) as caught:
        load_settings(env=env)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_the_settings_file_refuses_unknown_keys_and_bad_values(tmp_path: Path) -> None:
    file = tmp_path / "settings.toml"
    file.write_text("budget = 5\nbugdet = 6\n")
    with pytest.raises(KerneloptError, match=r"settings.toml: unknown key\(s\) bugdet; remove them or use one of: effort,") as caught:
        load_settings(env={}, file=file)
    assert "\n" not in str(caught.value)
    file.write_text('trials = "many"\n')
    with pytest.raises(KerneloptError, match="key trials='many': expected a whole number of at least 1; fix trials in"):
        load_settings(env={}, file=file)
    file.write_text("budget = \n")
    with pytest.raises(KerneloptError, match="not a readable TOML settings file"):
        load_settings(env={}, file=file)
    with pytest.raises(KerneloptError, match=r"argument: unknown setting\(s\) bugdet"):
        load_settings({"bugdet": 3}, env={})


def test_the_file_comes_from_kernelopt_config_or_the_working_directory(tmp_path: Path) -> None:
    assert config_file({}) is None
    (tmp_path / "kernelopt.toml").write_text("budget = 12\n")  # the working directory (the fixture's tmp_path)
    s = load_settings(env={})
    assert (s.budget, s.sources["budget"]) == (12, "file kernelopt.toml")
    named = tmp_path / "elsewhere.toml"
    named.write_text('effort = "full"\nstore = "runs.db"\n')
    s = load_settings(env={"KERNELOPT_CONFIG": str(named)})
    assert (s.effort, s.budget, s.store) == ("full", PROFILES["full"]["budget"], Path("runs.db"))


def test_settings_cross_to_a_worker_as_plain_data() -> None:
    s = load_settings({"effort": "quick", "budget": 9}, env={"KERNELOPT_CACHE": "/tmp/kcache"})
    values = json.loads(json.dumps(s.values()))
    again = Settings.from_values(values)
    assert again == s and again.cache == Path("/tmp/kcache") and again.kernel_seeds == (1, 2, 3)


def test_store_cache_and_compile_workers_are_read_from_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt.evaluate.compile_pool import default_workers
    from kernelopt.pipeline.optimize import compile_cache_env
    from kernelopt.store import default_store_path

    (tmp_path / "kernelopt.toml").write_text(f'store = "{tmp_path / "from-file.db"}"\ncompile_workers = 2\n')
    assert default_store_path() == tmp_path / "from-file.db" and default_workers() == 2
    monkeypatch.setenv("KERNELOPT_STORE", str(tmp_path / "from-env.db"))
    monkeypatch.setenv("KERNELOPT_CACHE", str(tmp_path / "cache"))
    assert default_store_path() == tmp_path / "from-env.db"
    env = compile_cache_env()
    workers = worker_identity()  # a worker of another user keeps a cache folder of its own beside ours
    own = "" if workers is None else f"-{workers.user}"
    triton, cuda = tmp_path / "cache" / f"triton{own}", tmp_path / "cache" / f"cuda{own}"
    assert env == {"TRITON_CACHE_DIR": str(triton), "KERNELOPT_CUDA_BUILD_DIR": str(cuda), "KERNELOPT_COMPILE_WORKERS": "2"}
    assert cuda.is_dir()  # made, and the workers' user's own where that is another user


# -- command line ------------------------------------------------------------------------


def test_kernelopt_config_json_shows_each_value_and_its_source() -> None:
    result = _runner().invoke(app, ["config", "--json", "--effort", "full"], env={"KERNELOPT_BUDGET": "7"})
    assert result.exit_code == 0, result.output
    settings = json.loads(result.stdout)
    assert settings["budget"] == {"value": 7, "source": "env KERNELOPT_BUDGET", "env": "KERNELOPT_BUDGET",
                                  "help": settings["budget"]["help"]}
    assert settings["effort"]["value"] == "full" and settings["effort"]["source"] == "argument"
    assert (settings["trials"]["value"], settings["trials"]["source"]) == (100, "profile full")
    assert settings["compile_workers"]["source"] == "default"
    table = _runner().invoke(app, ["config"])
    assert table.exit_code == 0 and "profile default" in table.stdout and "KERNELOPT_MARGIN" in table.stdout
    bad = _runner().invoke(app, ["config"], env={"KERNELOPT_COMPILE_WORKERS": "abc"})
    assert bad.exit_code == 2 and "KERNELOPT_COMPILE_WORKERS='abc'" in bad.stderr and "Traceback" not in bad.output


def test_bench_options_come_from_the_settings(tmp_path: Path) -> None:
    from test_bench import FAST, _suite

    suite = _suite(tmp_path / "suite", {"01_fast": FAST})
    args = ["bench", str(suite), "--worker-target", TARGET, "--worker-path", str(TESTS_DIR), "--json"]
    result = _runner().invoke(app, [*args, "--out", str(tmp_path / "a")], env={"KERNELOPT_BUDGET": "7"})
    assert result.exit_code == 0, result.output
    options = json.loads(result.stdout)["outcomes"][0]["details"]["options"]
    assert (options["budget"], options["max_targets"], options["patience"]) == (7, 3, 3)
    assert options["settings"]["budget"] == 7  # the problem's worker gets every setting, read in this process
    quick = _runner().invoke(app, [*args, "--out", str(tmp_path / "b"), "--effort", "quick", "--budget", "4"])
    options = json.loads(quick.stdout)["outcomes"][0]["details"]["options"]
    assert (options["budget"], options["max_targets"], options["patience"]) == (4, 2, 2)
    assert json.loads(quick.stdout)["meta"]["worker_timeout_s"] == PROFILES["quick"]["bench_timeout_s"]
    bad = _runner().invoke(app, [*args, "--out", str(tmp_path / "c"), "--effort", "fastest"])
    assert bad.exit_code == 2 and "argument effort='fastest': expected an effort profile" in bad.stderr


def test_optimize_defaults_come_from_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt.pipeline import optimize as opt

    seen: dict[str, Any] = {}

    def stand_in(problem: Any, store: Any, **kw: Any) -> Any:
        seen.update(kw)
        raise KerneloptError("stand-in: the run stops here")

    monkeypatch.setattr(opt, "require_gpu", lambda: None)
    monkeypatch.setattr(opt, "optimize", stand_in)
    problem = tmp_path / "p.py"
    problem.write_text("class Model:\n    pass\n")  # read as a problem file by kind; never loaded (the stand-in stops first)
    env = {"KERNELOPT_PATIENCE": "5", "KERNELOPT_EFFORT": "full"}
    result = _runner().invoke(app, ["optimize", str(problem), "--budget", "9", "--store", str(tmp_path / "k.db")], env=env)
    assert result.exit_code == 2 and "stand-in" in result.stderr
    budget, config = seen["budget"], seen["config"]
    assert (budget.max_evaluations, budget.patience, seen["max_targets"]) == (9, 5, PROFILES["full"]["max_targets"])
    assert config.sources["budget"] == "argument" and config.sources["patience"] == "env KERNELOPT_PATIENCE"
    assert config.store == tmp_path / "k.db"
    seen.clear()
    plain = _runner().invoke(app, ["optimize", str(problem), "--store", str(tmp_path / "k.db")])
    assert plain.exit_code == 2
    assert (seen["budget"].max_evaluations, seen["budget"].patience, seen["max_targets"]) == (48, 3, 3)  # as before the table


def test_help_names_the_setting_and_its_effective_default() -> None:
    from kernelopt.cli.common import _SHOWN  # read when the command line was imported

    result = _runner().invoke(app, ["optimize", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "KERNELOPT_BUDGET" in result.stdout and f"{_SHOWN.budget} from {_SHOWN.sources['budget']}" in result.stdout
    assert "--effort" in result.stdout



def test_stock_modes_are_torch_compile_modes_each_named_once() -> None:
    from kernelopt.pipeline.bench import EXTRA_STOCK_MODE_S, default_worker_timeout

    assert load_settings({"stock_modes": " reduce-overhead , max-autotune"}, env={}).stock_modes == (
        "reduce-overhead,max-autotune"
    )
    for bad in ("max-autotune,max-autotune", "default", "reduce_overhead", ""):
        with pytest.raises(KerneloptError, match="torch.compile modes separated by commas, each once"):
            load_settings({"stock_modes": bad}, env={})
    quick = load_settings({"effort": "quick"}, env={})
    assert quick.stock_modes == "max-autotune-no-cudagraphs"
    three = load_settings(env={})
    # each mode beyond the first is one more compile and two timed comparisons in the problem's worker
    assert default_worker_timeout(20.0, three) - default_worker_timeout(20.0, quick) == 2 * EXTRA_STOCK_MODE_S


def test_base_mode_is_a_mode_a_search_can_build_on() -> None:
    assert load_settings({"base_mode": "max-autotune-no-cudagraphs"}, env={}).base_mode == "max-autotune-no-cudagraphs"
    assert load_settings(env={"KERNELOPT_BASE_MODE": "default"}).base_mode == "default"
    for bad in ("reduce-overhead", "max-autotune", "fast"):  # CUDA-graph modes are baselines only, for now
        with pytest.raises(KerneloptError, match="base_mode.*auto, default, max-autotune-no-cudagraphs"):
            load_settings({"base_mode": bad}, env={})
