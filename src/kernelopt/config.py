"""Every user-facing default of kernelopt, and where each effective value came from.

One frozen :class:`Settings` dataclass holds them all: each field carries its type,
its default, the ``KERNELOPT_*`` environment variable that sets it and a one-line
help text, so the table ``kernelopt config`` prints is read off the fields, never
written twice. :data:`PROFILES` is the one table of effort budgets (search
evaluations, patience, targets, the gates' seeds and trials, the margin, the
screen, worker time-outs) per named profile; the entry points read these values
from a :class:`Settings`, never from literals of their own, and the dataclasses of
the lower layers that carry one of them (``GateSettings``, ``PerformancePolicy``,
``EvaluationRequest``) take their field defaults from :func:`default_of`.

Sources, highest first: an explicit argument (CLI option, API keyword), the
environment, a TOML file (``KERNELOPT_CONFIG=path``, else ``./kernelopt.toml`` when
present; top-level keys named as the fields), the effort profile
(``KERNELOPT_EFFORT`` / ``effort``), the field's own default. A malformed value is
one :class:`~kernelopt.errors.KerneloptError` line naming where it came from and
what to write instead; nothing falls back silently.

Longer than most modules because it is two tables, every setting and every profile, kept in
one place on purpose: one file to read every default in.

This is the bottom layer: it imports nothing of kernelopt but ``errors``. The
settings are read where a run starts, in the parent process, and what a worker
needs crosses to it explicitly (as arguments, or ``KERNELOPT_COMPILE_WORKERS`` in
its environment): a worker does not read a configuration file of its own.

Not settings: ``KERNELOPT_PARENT_PID`` (a worker dies with the process that set it)
and ``KERNELOPT_ROLE`` (marks the candidate's runner process) are plumbing between
kernelopt's own processes, set by kernelopt and never by a user.

Long because it is the one place for every setting: fields, profiles and their
parsing stay together so a default is never written twice.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelopt.errors import KerneloptError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_ENV = "KERNELOPT_CONFIG"
CONFIG_FILE = "kernelopt.toml"
EFFORTS = ("quick", "default", "full")
STOCK_MODES = ("max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune")
"""The torch.compile modes besides the default a user could have picked (CUDA graphs in the last two)."""
HELION_EFFORTS = ("none", "quick", "full")  # Helion's own effort profiles
BASE_MODES = ("auto", "default", "max-autotune-no-cudagraphs")
"""What an optimize run may start from: the faster of the modes it can build on, timed first (auto), or one of them."""
GRAPH_STAGES = ("auto", "named")
"""When the graph stage runs: also where the analysis says structure can pay (auto), or only when named."""
CUDA_GRAPHS = ("auto", "off")
"""Whether a result may be delivered under a CUDA-graph mode (auto: where the stock timing shows it faster)."""

# The one table of effort budgets. Every profile sets every key (a test holds it so);
# ``default`` is what ``kernelopt optimize`` did before the table existed. ``quick`` buys
# fewer candidates (the search ``kernelopt bench`` ran), never weaker verdicts: its gates
# are the default's. ``full`` searches longer and verifies winners on more seeds and trials,
# with time-outs raised to match. The margin is a trust threshold, the same everywhere.
PROFILES: dict[str, dict[str, Any]] = {
    "quick": {
        "budget": 32,
        "patience": 2,
        "max_targets": 2,
        "knob_budget": 8,
        "search_kernel_seeds": (1,),
        "search_model_seeds": (0,),
        "kernel_seeds": (1, 2, 3),
        "model_seeds": (0, 1, 2),
        "trials": 50,
        "screen_trials": 10,
        "margin": 0.03,
        "analyze_trials": 30,
        "eval_timeout_s": 600.0,
        "verify_timeout_s": 900.0,
        "bench_timeout_s": 3600.0,
        "bench_timeout_margin_s": 900.0,
        "stock_modes": "max-autotune-no-cudagraphs",
        "base_mode": "auto",
        "graph_stage": "auto",
        "cuda_graphs": "auto",
        "graph_compile_s": 60.0,
        "helion_effort": "quick",
        "helion_budget_s": 60.0,
    },
    "default": {
        "budget": 48,
        "patience": 3,
        "max_targets": 3,
        "knob_budget": 8,
        "search_kernel_seeds": (1,),
        "search_model_seeds": (0,),
        "kernel_seeds": (1, 2, 3),
        "model_seeds": (0, 1, 2),
        "trials": 50,
        "screen_trials": 10,
        "margin": 0.03,
        "analyze_trials": 30,
        "eval_timeout_s": 600.0,
        "verify_timeout_s": 900.0,
        "bench_timeout_s": 3600.0,
        "bench_timeout_margin_s": 900.0,
        "stock_modes": "max-autotune-no-cudagraphs,reduce-overhead,max-autotune",
        "base_mode": "auto",
        "graph_stage": "auto",
        "cuda_graphs": "auto",
        "graph_compile_s": 180.0,
        "helion_effort": "quick",
        "helion_budget_s": 120.0,
    },
    "full": {
        "budget": 100,
        "patience": 5,
        "max_targets": 5,
        "knob_budget": 16,
        "search_kernel_seeds": (1, 2),
        "search_model_seeds": (0, 1),
        "kernel_seeds": (1, 2, 3, 4, 5),
        "model_seeds": (0, 1, 2, 3, 4),
        "trials": 100,
        "screen_trials": 20,
        "margin": 0.03,
        "analyze_trials": 50,
        "eval_timeout_s": 1200.0,
        "verify_timeout_s": 1800.0,
        "bench_timeout_s": 7200.0,
        "bench_timeout_margin_s": 1800.0,
        "stock_modes": "max-autotune-no-cudagraphs,reduce-overhead,max-autotune",
        "base_mode": "auto",
        "graph_stage": "auto",
        "cuda_graphs": "auto",
        "graph_compile_s": 600.0,
        "helion_effort": "full",
        "helion_budget_s": 600.0,
    },
}


def default_of(name: str) -> Any:
    """The ``default`` profile's value of ``name``: the field default of a lower layer's dataclass."""
    return PROFILES["default"][name]


def _home_cache() -> Path:
    return Path.home() / ".cache" / "kernelopt"


def _setting(
    help: str,
    *,
    env: str | None = None,
    default: Any = dataclasses.MISSING,
    factory: Any = dataclasses.MISSING,
    kind: type = int,
    minimum: float | None = None,
    expect: str | None = None,
) -> Any:
    """A settings field: ``kind`` parses it (int, float, str, Path, or tuple for whole numbers),
    ``minimum`` bounds it, ``expect`` says in words what a valid value is."""
    meta = {"help": help, "env": env, "kind": kind, "minimum": minimum, "expect": expect}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _profiled(name: str, help: str, **kw: Any) -> Any:
    return _setting(help, env=f"KERNELOPT_{name.upper()}", default=default_of(name), **kw)


@dataclass(frozen=True)
class Settings:
    """The effective settings of one run; ``sources[name]`` says where each value came from."""

    effort: str = _setting(
        "Effort profile: quick, default or full (sets every budget below).",
        env="KERNELOPT_EFFORT",
        default="default",
        kind=str,
        expect="an effort profile: quick, default or full",
    )
    store: Path = _setting(
        "The SQLite store of runs, candidates and measurements.",
        env="KERNELOPT_STORE",
        factory=lambda: _home_cache() / "kernelopt.db",
        kind=Path,
    )
    cache: Path = _setting(
        "Root of the caches kept across runs (Triton's compiled kernels under triton/).",
        env="KERNELOPT_CACHE",
        factory=_home_cache,
        kind=Path,
    )
    compile_workers: int = _setting(
        "Processes that compile a batch's candidates ahead while the GPU measures (0: none).",
        env="KERNELOPT_COMPILE_WORKERS",
        default=0,
        minimum=0,
        expect="a whole number of processes (0 for none)",
    )
    worker_user: str = _setting(
        "The user workers run as when kernelopt runs as root (Linux), so that no candidate can read "
        "the API keys of kernelopt or of the shell that started it; root keeps them root.",
        env="KERNELOPT_WORKER_USER",
        default="nobody",
        kind=str,
        expect="a user name (root: workers stay root)",
    )
    budget: int = _profiled(
        "budget", "Search budget: candidate evaluations per kernel (each one through the four gates).", minimum=1
    )
    patience: int = _profiled(
        "patience", "Stop a kernel's search after this many rounds without improvement.", minimum=0
    )
    max_targets: int = _profiled(
        "max_targets", "Kernels searched per problem, by what they can buy end to end.", minimum=1
    )
    knob_budget: int = _profiled(
        "knob_budget", "Most evaluations of the compiler-knob search (each is two full compiles).", minimum=1
    )
    search_kernel_seeds: tuple[int, ...] = _profiled(
        "search_kernel_seeds", "Seeds of gate 2 (sub-kernel correctness) during the search.", kind=tuple
    )
    search_model_seeds: tuple[int, ...] = _profiled(
        "search_model_seeds", "Seeds of gate 3 (model correctness) during the search.", kind=tuple
    )
    kernel_seeds: tuple[int, ...] = _profiled(
        "kernel_seeds", "Seeds of gate 2 for verify and for every winner's final re-check.", kind=tuple
    )
    model_seeds: tuple[int, ...] = _profiled(
        "model_seeds", "Seeds of gate 3 for verify and for every winner's final re-check.", kind=tuple
    )
    trials: int = _profiled("trials", "Interleaved timed trials of gate 4 (performance).", minimum=1)
    screen_trials: int = _profiled(
        "screen_trials", "Trials of the search's quick timing screen before the costly gates (0: no screen).", minimum=0
    )
    margin: float = _profiled(
        "margin",
        "Smallest speedup over the original that counts (0.03 = 3 %), noise permitting.",
        kind=float,
        minimum=0.0,
    )
    analyze_trials: int = _profiled(
        "analyze_trials", "Timed trials of eager and compiled models in analyze.", minimum=1
    )
    eval_timeout_s: float = _profiled(
        "eval_timeout_s",
        "Seconds an optimize worker call may take (analysis, tuning, final checks).",
        kind=float,
        minimum=1.0,
    )
    verify_timeout_s: float = _profiled(
        "verify_timeout_s", "Seconds before kernelopt verify's evaluation worker is killed.", kind=float, minimum=1.0
    )
    bench_timeout_s: float = _profiled(
        "bench_timeout_s", "Seconds a bench problem's worker may live without --time-limit.", kind=float, minimum=1.0
    )
    bench_timeout_margin_s: float = _profiled(
        "bench_timeout_margin_s",
        "Seconds a bench problem's worker may outlive its --time-limit (baselines).",
        kind=float,
        minimum=0.0,
    )
    stock_modes: str = _profiled(
        "stock_modes",
        "torch.compile modes bench times beside the default, each in its own process, for the best stock baseline.",
        kind=str,
        expect="torch.compile modes separated by commas, each once: " + ", ".join(STOCK_MODES),
    )
    base_mode: str = _profiled(
        "base_mode",
        "The stock mode optimize builds on: auto (times max-autotune-no-cudagraphs against the default first "
        "and starts from the faster), default, or max-autotune-no-cudagraphs.",
        kind=str,
        expect="one of " + ", ".join(BASE_MODES),
    )
    cuda_graphs: str = _profiled(
        "cuda_graphs",
        "Whether optimize --stock-modes and bench may deliver the result under a CUDA-graph mode (reduce-overhead, "
        "max-autotune) where it runs faster there, and whether the final verification judges a launch-bound result "
        "as CUDA-graph replays (where graphs pay for the compiled model): auto; off keeps a result that never "
        "replays CUDA graphs (for inputs whose shapes or addresses change between calls, or memory a graph pool "
        "cannot spare) and judges it without them.",
        kind=str,
        expect="one of " + ", ".join(CUDA_GRAPHS),
    )
    graph_stage: str = _profiled(
        "graph_stage",
        "When optimize regenerates whole graphs under other Inductor options (graph-variants): auto, also "
        "where analyze shows headroom only structure can buy (a graph far above its traffic floor, layout "
        "copies); named, only when --operators names graph-variants.",
        kind=str,
        expect="one of " + ", ".join(GRAPH_STAGES),
    )
    graph_compile_s: float = _profiled(
        "graph_compile_s",
        "At most this many seconds for compiling a model's graph variants in the graph stage (or the run's "
        "evaluation time-out or wall budget per target, if shorter).",
        kind=float,
        minimum=1.0,
    )
    helion_effort: str = _profiled(
        "helion_effort",
        "Helion's own autotuner effort for a Helion kernel file's helion-autotune stage: none, quick or full.",
        kind=str,
        expect="one of none, quick, full",
    )
    helion_budget_s: float = _profiled(
        "helion_budget_s",
        "At most this many seconds for Helion's autotuner (or the run's wall budget, if shorter).",
        kind=float,
        minimum=1.0,
    )
    helion_search: str = _setting(
        "Helion's own search algorithm for the helion-autotune stage, by its name in "
        "helion.autotuner.search_algorithms (PatternSearch, DifferentialEvolutionSearch, ...); empty: "
        "the one Helion picks itself.",
        env="KERNELOPT_HELION_SEARCH",
        default="",
        kind=str,
        expect="a name from helion.autotuner.search_algorithms, or empty",
    )
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False, metadata={"help": None})

    def values(self) -> dict[str, Any]:
        """Every setting as JSON-ready plain data (paths as strings, seeds as lists)."""
        return {f.name: _plain(getattr(self, f.name)) for f in setting_fields()}

    def with_overrides(self, overrides: Mapping[str, object] | None) -> Settings:
        """These settings with explicit arguments on top (None means: not given). A new
        ``effort`` re-applies that profile to every value that came from a profile."""
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        if not given:
            return self
        fields = _fields()
        _check_names(given, "argument")
        values, sources = {f: getattr(self, f) for f in fields}, dict(self.sources)
        if "effort" in given:
            effort = _parse(fields["effort"], given["effort"], "argument effort", "pass another value")
            for name in PROFILES[effort]:
                if sources.get(name, "").startswith("profile") or sources.get(name) == "default":
                    values[name], sources[name] = PROFILES[effort][name], f"profile {effort}"
        for name, raw in given.items():
            values[name], sources[name] = (
                _parse(fields[name], raw, f"argument {name}", "pass another value"),
                "argument",
            )
        return Settings(**values, sources=sources)

    @classmethod
    def from_values(cls, values: Mapping[str, object], sources: Mapping[str, str] | None = None) -> Settings:
        """Settings from :meth:`values` (as they cross to a worker process), checked again."""
        fields = _fields()
        _check_names(values, "settings")
        parsed = {
            name: _parse(fields[name], raw, f"settings {name}", "pass another value") for name, raw in values.items()
        }
        return cls(**parsed, sources=dict(sources or {}))

    def rows(self) -> list[dict[str, Any]]:
        """One row per setting: name, value, source, environment variable, help."""
        return [
            {
                "name": f.name,
                "value": _plain(getattr(self, f.name)),
                "source": self.sources.get(f.name, "default"),
                "env": f.metadata["env"],
                "help": f.metadata["help"],
            }
            for f in setting_fields()
        ]


def setting_fields() -> list[dataclasses.Field]:
    """The fields of :class:`Settings` that are settings (not ``sources``)."""
    return [f for f in dataclasses.fields(Settings) if f.metadata.get("help")]


def _fields() -> dict[str, dataclasses.Field]:
    return {f.name: f for f in setting_fields()}


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _check_names(given: Mapping[str, object], where: str) -> None:
    known = _fields()
    unknown = sorted(k for k in given if k not in known)
    if unknown:
        raise KerneloptError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(known)}")


def _parse(f: dataclasses.Field, raw: object, where: str, fix: str) -> Any:
    """``raw`` (a string from the environment, a TOML or Python value) as the field's type, checked;
    ``fix`` ends the error line (what to change)."""
    kind, meta = f.metadata["kind"], f.metadata
    expect = (
        meta["expect"]
        or {
            int: "a whole number",
            float: "a number",
            str: "text",
            Path: "a file path",
            tuple: "whole numbers separated by commas, such as 0,1,2",
        }[kind]
    )
    if meta["minimum"] is not None and meta["expect"] is None:
        expect += f" of at least {meta['minimum']:g}"
    bad = KerneloptError(f"{where}={raw!r}: expected {expect}; {fix}")
    value: Any
    try:
        if kind is tuple:
            items = raw.split(",") if isinstance(raw, str) else raw
            if isinstance(items, (int, bool)) or not hasattr(items, "__iter__"):
                raise bad
            value = tuple(_whole(item, bad) for item in items)
            if not value:
                raise bad
        elif kind is int:
            value = _whole(raw, bad)
        elif kind is float:
            if isinstance(raw, bool):
                raise bad
            value = float(raw)  # type: ignore[arg-type]
        elif kind is Path:
            if not isinstance(raw, (str, Path)) or not str(raw).strip():
                raise bad
            value = Path(raw).expanduser()
        else:
            if not isinstance(raw, str):
                raise bad
            value = raw.strip()
    except (TypeError, ValueError):
        raise bad from None
    if meta["minimum"] is not None and any(v < meta["minimum"] for v in (value if kind is tuple else (value,))):
        raise bad
    if f.name == "effort" and value not in PROFILES:
        raise bad
    if f.name == "base_mode" and value not in BASE_MODES:
        raise bad
    if f.name == "graph_stage" and value not in GRAPH_STAGES:
        raise bad
    if f.name == "cuda_graphs" and value not in CUDA_GRAPHS:
        raise bad
    if f.name == "helion_effort" and value not in HELION_EFFORTS:
        raise bad
    if f.name == "stock_modes":
        modes = [m.strip() for m in value.split(",")]
        if any(m not in STOCK_MODES for m in modes) or len(set(modes)) != len(modes):
            raise bad
        value = ",".join(modes)
    return value


def _whole(raw: object, bad: KerneloptError) -> int:
    if isinstance(raw, bool):
        raise bad
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        return int(raw.strip())
    raise bad


def config_file(env: Mapping[str, str]) -> Path | None:
    """``$KERNELOPT_CONFIG`` (which must exist), else ``./kernelopt.toml`` when present, else None."""
    named = env.get(CONFIG_ENV)
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise KerneloptError(f"{CONFIG_ENV}={named}: no such file; point it at a TOML settings file or unset it")
        return path
    local = Path(CONFIG_FILE)
    return local if local.is_file() else None


def read_file(path: Path) -> dict[str, Any]:
    """The settings a TOML file sets (top-level keys named as the fields), checked for unknown keys."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise KerneloptError(f"{path}: no such settings file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise KerneloptError(f"{path}: not a readable TOML settings file ({exc})") from None
    known = _fields()
    unknown = sorted(k for k in data if k not in known)
    if unknown:
        raise KerneloptError(
            f"{path}: unknown key(s) {', '.join(unknown)}; remove them or use one of: {', '.join(known)}"
        )
    return data


def load_settings(
    overrides: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None, file: Path | None = None
) -> Settings:
    """The effective settings: ``overrides`` (None values ignored) > ``env`` (default
    ``os.environ``) > ``file`` (default :func:`config_file`) > the effort profile > the
    field defaults."""
    environ = os.environ if env is None else env
    path = file if file is not None else config_file(environ)
    from_file = read_file(path) if path is not None else {}
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    _check_names(given, "argument")
    fields = _fields()

    def layered(name: str) -> tuple[Any, str] | None:
        f = fields[name]
        if name in given:
            return _parse(f, given[name], f"argument {name}", "pass another value"), "argument"
        variable = f.metadata["env"]
        if variable and environ.get(variable, "").strip():
            return _parse(
                f, environ[variable], variable, f"set {variable} to such a value or unset it"
            ), f"env {variable}"
        if name in from_file:
            return _parse(f, from_file[name], f"{path} key {name}", f"fix {name} in {path}"), f"file {path}"
        return None

    chosen = layered("effort")
    effort = chosen[0] if chosen else "default"
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, f in fields.items():
        found = chosen if name == "effort" else layered(name)
        if found is not None:
            values[name], sources[name] = found
        elif name in PROFILES[effort]:
            values[name], sources[name] = PROFILES[effort][name], f"profile {effort}"
        else:
            values[name] = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[operator]
            sources[name] = "default"
    return Settings(**values, sources=sources)


def resolve(settings: Settings | None, **arguments: object) -> Settings:
    """``settings`` (or :func:`load_settings`) with the explicit ``arguments`` on top: an
    API entry point's keyword left as None takes the effective setting."""
    if settings is None:
        return load_settings(arguments)
    return settings.with_overrides(arguments)
