"""``kernelopt.analyze(model, inputs)`` and ``kernelopt.optimize(model, inputs)``: the run kinds on live objects.

The model and inputs are saved as a problem (:mod:`kernelopt.problem.saved`)
that a worker then loads, to prove before any work that every process of the
run can; the run itself is the file-based one, unchanged. The result keeps the
user's own module: ``result.load()`` runs the verified replacements on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from kernelopt.config import Settings, resolve
from kernelopt.errors import KerneloptError
from kernelopt.evaluate.analysis import AnalysisReport
from kernelopt.pipeline.records import OptimizeReport
from kernelopt.problem.saved import INPUTS_FILE, check_movable, save_model_problem
from kernelopt.store import Store

BASELINE_FILE = "baseline.kopt.json"  # what save() writes where nothing beat the compiler


@dataclass
class Optimized:
    """What ``kernelopt.optimize`` gives back: the run's report, the problem it saved, the exported file."""

    report: OptimizeReport
    problem_path: Path
    model: nn.Module
    train: bool = False

    @property
    def exported(self) -> Path | None:
        """The verified ``.kopt.json`` (None: nothing beat the compiler, keep ``torch.compile(model)``)."""
        return Path(self.report.exported) if self.report.exported else None

    @property
    def module(self) -> nn.Module:
        """The user's own module, compiled in place (``nn.Module.compile``) with the verified kernels
        where they match: ``state_dict``, ``.eval()`` and devices are the module's own; a new shape
        recompiles with Inductor's kernels. With nothing exported, plain ``torch.compile``."""
        from kernelopt.deliver.backend import backend

        if self.exported is None:
            self.model.compile(dynamic=False)
        else:
            self.model.compile(backend=backend(self.exported), dynamic=False)
        return self.model

    def save(self, path: str | Path) -> Path:
        """Keep the verified result: a copy of the ``.kopt.json`` (digest and verification record
        inside), for ``kernelopt.backend(path)`` or ``kernelopt.load(path, model=...)`` in any process.
        With nothing exported the file holds no replacement and says why (``baseline_kept``), so the
        same script runs either way: its backend is Inductor's compile exactly."""
        target = Path(path)
        if not target.name.endswith(".json"):
            raise ValueError(f"{target}: name the file *.kopt.json, the format kernelopt.load and backend read")
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.exported is None:
            from kernelopt.deliver.export import export_model
            from kernelopt.problem import load_problem

            problem = load_problem(self.problem_path, train=self.train)
            return export_model(target, problem, [], {"baseline_kept": self.report.final_reason})
        import shutil

        shutil.copyfile(self.exported, target)
        return target

    def load(self, device: str = "cuda") -> Any:
        """The user's model captured on its example inputs with the verified replacements swapped in, each
        proven to run (``kernelopt.load``); :attr:`module` is the everyday form. With nothing exported,
        the same from the file :meth:`save` writes then: Inductor's compile, nothing swapped."""
        import torch

        from kernelopt.deliver.export import load

        exported = self.exported or self.save(self.problem_path.parent / BASELINE_FILE)
        inputs = torch.load(self.problem_path.parent / INPUTS_FILE, map_location="cpu", weights_only=False)
        return load(exported, model=self.model, device=device, example_inputs=inputs)


def _settings(config: Settings | None, store: Store | str | Path | None, **arguments: object) -> Settings:
    """``config`` (default: the settings in effect) with the keywords given on top, a ``store`` path among
    them; each is checked here, before anything is saved, and a wrong one is one line."""
    if config is not None and not isinstance(config, Settings):
        raise KerneloptError(
            f"config is a {type(config).__name__}; pass a kernelopt.config.Settings, "
            "e.g. kernelopt.config.load_settings({'effort': 'quick'})"
        )
    return resolve(config, store=None if isinstance(store, Store) else store, **arguments)


def _store(store: Store | str | Path | None, config: Settings) -> Store:
    """The store given, else the one at the run's ``store`` setting (which a path given as ``store`` sets)."""
    return store if isinstance(store, Store) else Store(config.store)


def optimize_model(
    model: nn.Module,
    example_inputs: Sequence[Any],
    *,
    effort: str | None = None,
    operators: Sequence[str] | None = None,
    llm: str | None = None,
    store: Store | str | Path | None = None,
    workdir: str | Path | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    train: bool = False,
    loss_fn: Callable[[Any], Any] | None = None,
    budget: int | None = None,
    max_targets: int | None = None,
    config: Settings | None = None,
) -> Optimized:
    """Search faster kernels for ``model`` on ``example_inputs``; verified, or the compiler's baseline kept.

    The saved problem goes to ``workdir`` (default: a folder under the ``cache`` setting);
    the exported file is written beside it. ``train``: the training step (forward and
    backward kernels, every gradient judged against float64; loss ``loss_fn(outputs)``,
    else the sum of the outputs). ``budget`` (candidate evaluations) and ``max_targets``
    (kernels searched) left as None come from ``config`` (default: the settings in effect,
    ``kernelopt config``) with ``effort`` applied; ``store`` None: the ``store`` setting's."""
    from kernelopt.pipeline.optimize import optimize, require_gpu
    from kernelopt.search.operators import DEFAULT_OPERATORS

    config = _settings(config, store, effort=effort, budget=budget, max_targets=max_targets)  # bad values stop here
    require_gpu("kernelopt.optimize")
    path = save_model_problem(model, example_inputs, workdir, train=train, loss_fn=loss_fn, cache=config.cache)
    check_movable(path, train=train)
    report = optimize(
        path,
        _store(store, config),
        operators=list(operators) if operators is not None else DEFAULT_OPERATORS,
        llm=llm,
        config=config,
        export_path=path.parent / "model.kopt.json",
        on_event=on_event,
        train=train,
    )
    return Optimized(report, path, model, train)


def analyze_model(
    model: nn.Module,
    example_inputs: Sequence[Any],
    *,
    effort: str | None = None,
    trials: int | None = None,
    stock_modes: bool | str = False,
    store: Store | str | Path | None = None,
    workdir: str | Path | None = None,
    train: bool = False,
    loss_fn: Callable[[Any], Any] | None = None,
    config: Settings | None = None,
) -> AnalysisReport:
    """Where the compiled ``model`` spends its GPU time on ``example_inputs``, launch by launch
    (``train``: of its training step, forward and backward; loss ``loss_fn(outputs)``).

    The analysis ``kernelopt analyze`` makes of a file, in a worker, with the same settings:
    ``trials`` (timed eager and compiled runs) left as None comes from ``config`` (default: the
    settings in effect) with ``effort`` applied, and ``store`` None is the ``store`` setting's.
    ``stock_modes``: True times each mode of the ``stock_modes`` setting against the default, each
    in a process of its own; a string (``"reduce-overhead,max-autotune"``) names the modes."""
    from kernelopt.pipeline.analyze import analyze_file
    from kernelopt.pipeline.optimize import require_gpu

    if not isinstance(stock_modes, (bool, str)):
        raise KerneloptError(
            f"stock_modes is a {type(stock_modes).__name__}; pass True (the stock_modes setting's modes) "
            "or the modes, e.g. 'reduce-overhead,max-autotune'"
        )
    modes = stock_modes if isinstance(stock_modes, str) else None
    config = _settings(config, store, effort=effort, analyze_trials=trials, stock_modes=modes)  # bad values stop here
    require_gpu("kernelopt.analyze")
    path = save_model_problem(model, example_inputs, workdir, train=train, loss_fn=loss_fn, cache=config.cache)
    check_movable(path, train=train)
    return analyze_file(path, _store(store, config), config=config, stock_modes=bool(stock_modes), train=train)
