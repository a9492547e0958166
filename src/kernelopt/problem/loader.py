"""Load KernelBench-format problem files.

A problem file defines ``class Model(nn.Module)``, ``get_inputs()``,
``get_init_inputs()`` and module-level size constants. Loading executes the file
in a fresh module; every way a file can be broken becomes one
:class:`~kernelopt.errors.ProblemError` line that names the file and the fault.

Sizes can be overridden (``Problem.with_sizes``): the file is re-executed with the
top-level constant assignments rewritten, so constants derived from them follow.
Our own example problems carry an optional ``SMALL_SIZES`` dict used to run them
on a CPU in tests.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import torch
from torch import nn

from kernelopt.errors import ProblemError
from kernelopt.problem.file_kind import MODEL, file_kind, read_source

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
FORMAT_HINT = "a KernelBench problem defines class Model(nn.Module), get_inputs() and get_init_inputs()"
SizeValue = int | float | bool | tuple


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:197] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _size_constants(tree: ast.Module) -> dict[str, SizeValue]:
    """Top-level ``name = <number or tuple of numbers>`` assignments."""
    sizes: dict[str, SizeValue] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = _literal(stmt.value)
            if isinstance(value, (int, float, tuple)) and not isinstance(value, bool):
                if isinstance(value, tuple) and not all(isinstance(v, (int, float)) for v in value):
                    continue
                sizes[stmt.targets[0].id] = value
    return sizes


def _rewrite_sizes(tree: ast.Module, overrides: dict[str, Any], path: Path) -> ast.Module:
    seen: set[str] = set()
    numbers: list[str] = []  # the names a user would mean: top-level numbers
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, (int, float)):
                numbers.append(name)
            if name in overrides:
                stmt.value = ast.copy_location(ast.parse(repr(overrides[name]), mode="eval").body, stmt.value)
                seen.add(name)
    missing = sorted(set(overrides) - seen)
    if missing:
        raise ProblemError(
            f"{path}: cannot override {', '.join(missing)}: no top-level assignment of that name in the file; "
            f"its size constants: {', '.join(numbers) or 'none'}"
        )
    return ast.fix_missing_locations(tree)


def check_size_names(path: str | Path, overrides: dict[str, Any] | None) -> None:
    """Refuse, in one line and without running the file, overrides naming no size constant of it."""
    if overrides:
        path = Path(path)
        _rewrite_sizes(_parse_file(path), dict(overrides), path)


def size_names(path: str | Path) -> list[str]:
    """The size constants of the file at ``path``, in file order, read without running it (none for a
    file that does not parse: loading it says why)."""
    try:
        return list(_size_constants(_parse_file(Path(path))))
    except ProblemError:
        return []


def recorded_sizes(recorded: dict[str, Any] | None) -> dict[str, Any]:
    """Size overrides read back from JSON (a run's args, a bench's results), as they were given: a tuple
    constant comes back a list, and a list is never a size constant, so it is made a tuple again."""
    return {name: tuple(value) if isinstance(value, list) else value for name, value in (recorded or {}).items()}


def size_flags(sizes: dict[str, Any] | None) -> str:
    """``sizes`` (as given, or read back from JSON) as the ``--size`` options that ask for them ("no --size"
    for none)."""
    return " ".join(f"--size {name}={value!r}" for name, value in recorded_sizes(sizes).items()) or "no --size"


_F = TypeVar("_F", bound="InputFile")


@dataclass
class InputFile:
    """A loaded file whose ``get_inputs()`` builds the inputs: a problem or a kernel file.

    What both kinds share: the executed module, its size constants, and seeded inputs
    built where they will be used."""

    name: str
    path: Path
    module: ModuleType
    sizes: dict[str, SizeValue]
    overrides: dict[str, Any] = field(default_factory=dict)

    def with_sizes(self: _F, **overrides: Any) -> _F:
        """The same file re-executed with some size constants replaced."""
        raise NotImplementedError

    def small(self: _F) -> _F:
        """The file at the reduced sizes its ``SMALL_SIZES`` dict names (for CPU tests)."""
        small = getattr(self.module, "SMALL_SIZES", None)
        if small is None:
            raise ProblemError(f"{self.path}: defines no SMALL_SIZES dict; add one to run it at a reduced size")
        if not isinstance(small, dict):
            raise ProblemError(f"{self.path}: SMALL_SIZES must be a dict of constant name -> value")
        return self.with_sizes(**small)

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except ProblemError:
            raise
        except Exception as exc:  # the file's own code failed: report it as the file's fault
            raise ProblemError(f"{self.path}: {what} raised {_short(exc)}") from exc

    def raw_inputs(self, seed: int = 0, device: str | torch.device = "cpu") -> list[Any]:
        """``get_inputs()`` under ``seed``, with the file's tensor factories defaulting to ``device``.

        Built where they will be used: a 2 G-element ``torch.randn`` takes about 30 s
        on a CPU core and milliseconds on a GPU, and a full-size problem builds its
        inputs once per process and seed. A seed therefore gives other values on a
        GPU than on the CPU; every gate and baseline of a run builds them on the same
        device, so all of them see the same values.
        """
        target = torch.device(device)
        forked = [_normalise(target).index] if target.type == "cuda" else []
        with torch.random.fork_rng(devices=forked), torch.device(target):
            torch.manual_seed(seed)
            values = self._call("get_inputs()", self.module.get_inputs)
        if not isinstance(values, (list, tuple)):
            raise ProblemError(f"{self.path}: get_inputs() returned {type(values).__name__}; it must return a list")
        return list(values)

    def make_inputs(self, seed: int = 0, device: str | torch.device = "cpu", distribution: str = "given") -> list[Any]:
        """Seeded inputs on ``device`` with a distribution from :data:`DISTRIBUTIONS` applied."""
        from kernelopt.problem.inputs import apply_distribution

        target = torch.device(device)
        inputs = self.raw_inputs(seed, target)
        moved = []
        for i, value in enumerate(inputs):
            if isinstance(value, torch.Tensor):
                if value.device.type != "cpu" and value.device != _normalise(target):
                    raise ProblemError(
                        f"{self.path}: get_inputs() returned input {i} on {value.device}; "
                        f"build inputs without a device argument, kernelopt builds them on {target}"
                    )
                value = value.to(target)
            moved.append(value)
        return apply_distribution(moved, distribution)


@dataclass
class Problem(InputFile):
    """One loaded problem: the executed module plus what we learned about it."""

    train: bool = False  # build_model gives the training step (outputs and gradients): problem.training

    # -- construction -------------------------------------------------------------

    @property
    def model_class(self) -> type[nn.Module]:
        return self.module.Model

    def with_sizes(self, **overrides: Any) -> Problem:
        """The same file re-executed with some size constants replaced."""
        return load_problem(self.path, overrides={**self.overrides, **overrides}, name=self.name, train=self.train)

    def init_inputs(self, seed: int = 0) -> list[Any]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            values = self._call("get_init_inputs()", self.module.get_init_inputs)
        if not isinstance(values, (list, tuple)):
            raise ProblemError(
                f"{self.path}: get_init_inputs() returned {type(values).__name__}; it must return a list"
            )
        return list(values)

    def build_model(self, seed: int = 0, device: str | torch.device = "cpu") -> nn.Module:
        """Instantiate ``Model`` with seeded weights, in eval mode, on ``device``; with ``train``, the
        model in train mode inside its :class:`~kernelopt.problem.training.TrainingStep`."""
        init = self.init_inputs(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = self._call("Model(*get_init_inputs())", lambda: self.model_class(*init))
        if not self.train:
            return self._call(f"moving Model to {device}", lambda: model.to(device).eval())
        from kernelopt.problem.training import TrainingStep

        loss = getattr(self.module, "get_loss", None)
        if loss is not None and not callable(loss):
            raise ProblemError(f"{self.path}: get_loss is not a function; define get_loss(outputs) -> a scalar tensor")
        moved = self._call(f"moving Model to {device}", lambda: model.to(device))
        return TrainingStep(moved, loss, str(self.path))

    # -- checks --------------------------------------------------------------------

    def check(self, device: str | torch.device = "cpu", seed: int = 0) -> list[torch.Tensor]:
        """Construct the model and run one forward; return its outputs as a list of tensors.

        Raises a one-line :class:`ProblemError` for a constructor or forward that
        raises, and for outputs that are not tensors.
        """
        model = self.build_model(seed, device)
        inputs = self.make_inputs(seed, device)
        with torch.no_grad():
            out = self._call("Model.forward", lambda: model(*inputs))
        return outputs_as_list(out, self.path)


def _normalise(device: torch.device) -> torch.device:
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def outputs_as_list(out: Any, path: Path | str = "<problem>") -> list[torch.Tensor]:
    """Flatten a forward's result into tensors, refusing anything else."""
    items = list(out) if isinstance(out, (list, tuple)) else [out]
    if not items:
        raise ProblemError(f"{path}: forward returned an empty {type(out).__name__}; it must return tensors")
    for i, item in enumerate(items):
        if type(item) is not torch.Tensor and not isinstance(item, torch.nn.Parameter):
            where = "forward returned" if len(items) == 1 and not isinstance(out, (list, tuple)) else f"output {i} is"
            raise ProblemError(f"{path}: {where} {type(item).__name__}; outputs must be a tensor or a tuple of tensors")
    return items


def _problem_name(path: Path) -> str:
    return path.stem


def _parse_file(path: Path) -> ast.Module:
    """The file's syntax tree; a missing, unreadable or unparsable file is one line naming it."""
    text = read_source(path)
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else str(path)  # no line for e.g. null bytes
        raise ProblemError(f"{where}: syntax error: {exc.msg}") from exc


def execute_file(path: Path, overrides: dict[str, Any] | None, prefix: str) -> tuple[ModuleType, dict[str, SizeValue]]:
    """Execute a user's file in a fresh module, with size constants overridden; returns the module and
    the file's size constants. Every fault is one :class:`ProblemError` line naming the file."""
    tree = _parse_file(path)
    sizes = _size_constants(tree)
    if overrides:
        tree = _rewrite_sizes(tree, overrides, path)
        sizes.update(overrides)
    digest = hashlib.sha256((str(path.resolve()) + repr(sorted((overrides or {}).items()))).encode()).hexdigest()[:12]
    mod_name = f"{prefix}_{path.stem.replace('-', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # Triton's @jit and dataclasses look their module up here
    try:
        exec(compile(tree, str(path), "exec"), module.__dict__)
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise ProblemError(f"{path}: executing the file raised {_short(exc)}") from exc
    return module, sizes


def _kernel_file_kind(path: Path) -> str | None:
    """ "Triton" or "Helion" where ``path`` is a standalone kernel file (read, never run), else None."""
    try:
        kind = file_kind(path)
    except ProblemError:
        return None
    return None if kind == MODEL else kind.capitalize()


def load_problem(
    path: str | Path, overrides: dict[str, Any] | None = None, name: str | None = None, train: bool = False
) -> Problem:
    """Execute a problem file in a fresh module and check it has the required names; ``train``:
    the problem's training step is what it builds (:mod:`kernelopt.problem.training`)."""
    path = Path(path)
    if not path.is_file():
        raise ProblemError(f"{path}: no such problem file")
    module, sizes = execute_file(path, overrides, "kernelopt_problem")
    missing = [n for n in REQUIRED if not hasattr(module, n)]
    if missing:
        sys.modules.pop(module.__name__, None)
        kind = _kernel_file_kind(path)
        if kind is not None:  # the user pointed a model-only command at a kernel file
            raise ProblemError(
                f"{path}: a {kind} kernel file, not a model problem; kernelopt analyze, optimize and verify "
                f"take it as one (kernelopt optimize {path}); kernelopt bench takes a folder of kernel files, "
                "apart from model problems"
            )
        raise ProblemError(f"{path}: defines no {', '.join(missing)}; {FORMAT_HINT}")
    if not (isinstance(module.Model, type) and issubclass(module.Model, nn.Module)):
        raise ProblemError(f"{path}: Model is not a torch.nn.Module subclass; {FORMAT_HINT}")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, fn)):
            raise ProblemError(f"{path}: {fn} is not a function; {FORMAT_HINT}")
    return Problem(
        name=name or _problem_name(path),
        path=path,
        module=module,
        sizes=sizes,
        overrides=dict(overrides or {}),
        train=train,
    )


def problem_files(suite_dir: str | Path) -> list[Path]:
    """Every problem file under ``suite_dir``, in a stable order."""
    root = Path(suite_dir)
    if not root.is_dir():
        raise ProblemError(f"{root}: no such suite directory")
    files = sorted(p for p in root.rglob("*.py") if not p.name.startswith("_") and "__pycache__" not in p.parts)
    if not files:
        raise ProblemError(f"{root}: no problem files (*.py) in this directory")
    return files


@dataclass
class SuiteEntry:
    """A suite member: the loaded problem, or the one-line reason it failed to load."""

    name: str
    path: Path
    problem: Problem | None
    error: str | None


def matches(selection: str, name: str, path: Path) -> bool:
    """The loader's rule: a selection names a problem by its name, its file's stem or part of its name."""
    return selection == name or selection == path.stem or selection in name


def suite_files(suite_dir: str | Path, only: Sequence[str] | None = None) -> list[tuple[str, Path]]:
    """(name, path) of every problem file of a directory that ``only`` selects (by name, file stem or
    part of the name; None: all), in a stable order."""
    root = Path(suite_dir)
    chosen = []
    for path in problem_files(root):
        name = str(path.relative_to(root).with_suffix(""))
        if not only or any(matches(sel, name, path) for sel in only):
            chosen.append((name, path))
    return chosen


def load_suite(suite_dir: str | Path, only: Sequence[str] | None = None) -> Iterator[SuiteEntry]:
    """Load every problem of a directory; a broken file is yielded with its error, never raised."""
    for name, path in suite_files(suite_dir, only):
        try:
            yield SuiteEntry(name, path, load_problem(path, name=name), None)
        except ProblemError as exc:
            yield SuiteEntry(name, path, None, str(exc))
