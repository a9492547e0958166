"""A live model and its example inputs, saved as a problem file every process can load.

kernelopt never hands the user's objects to its workers by reference: the
evaluation worker, the candidate's process and the reference process each load
the problem from a file. ``kernelopt.optimize(model, inputs)`` therefore saves
the model (``model.pt``) and the inputs (``inputs.pt``) in a folder beside a
KernelBench-format ``problem.py`` whose ``Model(...)`` returns the saved module
itself, so every process compiles the user's own module: same class, same
parameter names, the user's weights.

Classes are pickled by reference when they come from an installed package
(torch, timm, transformers) and by value, through cloudpickle, when they come
from the user's own code (a script's ``__main__``, a notebook, a module beside
it): a worker does not see the user's working directory. Before anything else
runs, a worker loads the saved problem and runs one forward
(:func:`check_bundle`); a model that cannot be moved there (open files, locks,
C++ objects held as attributes) is refused in one line. Limits: the folder
holds a copy of the weights; random seeds change nothing in a saved problem
(its weights and inputs are the saved ones), so the gates' seeds vary only what
kernelopt generates itself (its random cases and edge cases).
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import sys
import sysconfig
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any

import torch
from torch import nn

from kernelopt.errors import KerneloptError

PROBLEM_FILE = "problem.py"
TRAINING_MODE_WARNING = (
    "the model is in training mode; kernelopt captures, verifies and optimizes it in eval mode (dropout off, "
    "batch norm on its running statistics), as inference: call model.eval() first to say so, or pass train=True "
    "to optimize its training step"
)
MODEL_FILE = "model.pt"
INPUTS_FILE = "inputs.pt"
LOSS_FILE = "loss.pt"
LOSS_SOURCE = """

def get_loss(outputs):  # the loss the user passed (loss_fn), saved beside the model
    global _LOSS
    if "_LOSS" not in globals():
        _LOSS = importable(torch.load(_HERE / "{loss}", map_location="cpu", weights_only=False))
    return _LOSS(outputs)
"""
CHECK_TIMEOUT_S = 300.0

PROBLEM_SOURCE = '''"""A saved model and its example inputs (written by kernelopt.problem.saved; do not edit)."""

import pathlib

import torch

from kernelopt.problem.saved import importable

_HERE = pathlib.Path(__file__).resolve().parent


class Model(torch.nn.Module):
    def __new__(cls, *args, **kwargs):  # the saved module itself, not a wrapper around it
        return importable(torch.load(_HERE / "{model}", map_location="cpu", weights_only=False))


def get_inputs():
    return torch.load(_HERE / "{inputs}", map_location="cpu", weights_only=False)


def get_init_inputs():
    return []
'''


def _installed_roots() -> list[Path]:
    paths = sysconfig.get_paths()
    return [Path(paths[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]


def _user_modules(model: nn.Module) -> list[ModuleType]:
    """The modules (other than ``__main__``) defining classes of ``model`` that no installed package holds."""
    return _user_modules_of([type(sub) for sub in model.modules()])


def _user_modules_of(objects: Sequence[Any]) -> list[ModuleType]:
    """The modules (other than ``__main__``) defining ``objects`` that no installed package holds."""
    roots = _installed_roots()
    found: dict[str, ModuleType] = {}
    for obj in objects:
        name = getattr(obj, "__module__", None) or ""
        module = sys.modules.get(name)
        if name == "__main__" or module is None or name in found:
            continue
        file = getattr(module, "__file__", None)
        if file is None:
            continue
        where = Path(file).resolve()
        if not any(where.is_relative_to(root) for root in roots):
            found[name] = module
    return list(found.values())


def _model_bytes(model: nn.Module) -> bytes:
    return _pickled(
        model,
        _user_modules(model),
        "the model cannot be saved for kernelopt's worker processes",
        "move what cannot be pickled (open files, locks, C++ handles) out of the module's attributes",
    )


def _pickled(obj: Any, by_value: Sequence[ModuleType], what: str, fix: str) -> bytes:
    """``torch.save`` of ``obj`` through cloudpickle, the user's own modules (``by_value``) pickled by
    value: a worker does not see the user's working directory. A failure is one line: what, why, fix."""
    import cloudpickle

    for module in by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        buffer = io.BytesIO()
        torch.save(obj, buffer, pickle_module=cloudpickle)
        return buffer.getvalue()
    except Exception as exc:
        detail = str(exc).splitlines()[0] if str(exc) else ""
        raise KerneloptError(f"{what} ({type(exc).__name__}: {detail}); {fix}") from exc
    finally:
        for module in by_value:
            cloudpickle.unregister_pickle_by_value(module)


def _check_inputs(example_inputs: Sequence[Any]) -> list[Any]:
    if isinstance(example_inputs, torch.Tensor):
        return [example_inputs]
    if not isinstance(example_inputs, (list, tuple)):
        raise KerneloptError(
            f"example_inputs is a {type(example_inputs).__name__}; pass a list or tuple of the forward's arguments"
        )
    return [x.detach().cpu() if isinstance(x, torch.Tensor) else x for x in example_inputs]


def save_model_problem(
    model: nn.Module,
    example_inputs: Sequence[Any],
    directory: str | Path | None = None,
    *,
    train: bool = False,
    loss_fn: Any = None,
    cache: Path | None = None,
) -> Path:
    """Save ``model`` and ``example_inputs`` as a problem; returns the ``problem.py`` path.

    ``directory`` None: a folder named by the content's digest under ``cache`` (default:
    the ``cache`` setting), so saving the same model and inputs again reuses it. ``train``: the run
    optimizes the training step (no eval-mode warning); ``loss_fn(outputs)``, saved
    beside the model (by value where it is the user's own code), becomes the problem's
    ``get_loss``."""
    if not isinstance(model, nn.Module):
        raise KerneloptError(f"model is a {type(model).__name__}; pass a torch.nn.Module")
    if loss_fn is not None and not callable(loss_fn):
        raise KerneloptError(f"loss_fn is a {type(loss_fn).__name__}; pass a function of the model's outputs")
    if loss_fn is not None and not train:
        raise KerneloptError("loss_fn is for a training step: pass train=True with it")
    inputs = _check_inputs(example_inputs)
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    was_training = model.training
    if was_training and not train:  # said, not silently switched: dropout and batch norm behave differently there
        warnings.warn(TRAINING_MODE_WARNING, UserWarning, stacklevel=3)
    model_cpu = model if device.type == "cpu" else _cpu_copy(model)
    model_cpu.eval()
    try:
        blob = _model_bytes(model_cpu)
    finally:
        model.train(was_training)
    buffer = io.BytesIO()
    torch.save(inputs, buffer)
    inputs_blob = buffer.getvalue()
    loss_blob = _object_bytes(loss_fn, "loss_fn") if loss_fn is not None else b""
    from kernelopt.workers.identity import readable_root, require_reachable_folder, worker_identity

    if directory is None:  # a folder the workers' user can read, even where the cache is root's private one
        from kernelopt.config import load_settings

        digest = hashlib.sha256(blob + inputs_blob + loss_blob).hexdigest()[:16]
        directory = readable_root((cache or load_settings().cache) / "models", worker_identity()) / digest
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)  # workers may run as another user (kernelopt.workers)
    require_reachable_folder(folder, "the folder the model is saved in (workdir)")
    files = [(MODEL_FILE, blob), (INPUTS_FILE, inputs_blob)] + ([(LOSS_FILE, loss_blob)] if loss_blob else [])
    for name, data in files:
        _write(folder / name, data)
    source = PROBLEM_SOURCE.format(model=MODEL_FILE, inputs=INPUTS_FILE)
    if loss_blob:
        source += LOSS_SOURCE.format(loss=LOSS_FILE)
    _write(folder / PROBLEM_FILE, source.encode())
    return folder / PROBLEM_FILE


def _object_bytes(obj: Any, what: str) -> bytes:
    """``obj`` pickled by value where it is the user's own code (a script's function, a lambda)."""
    return _pickled(
        obj,
        _user_modules_of([obj]),
        f"{what} cannot be saved for kernelopt's worker processes",
        "pass a plain function of the outputs",
    )


def _cpu_copy(model: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(model).cpu()


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o644)
    tmp.replace(path)


def importable(obj: Any) -> Any:
    """``obj`` (a loaded model or loss), with every module its by-value code names made importable.

    Dynamo, inlining a function whose globals are not its caller's (a loss or a forward called
    from kernelopt's training step), reads those globals back through
    ``importlib.import_module(fn.__module__)`` for its guards. A function cloudpickle carried by
    value still names the user's module, which the worker does not have, so the compile failed
    with ModuleNotFoundError. Each such name gets a module holding those very globals, where no
    module of that name is loaded or findable; nothing of the user's is imported."""
    functions: list[FunctionType] = []
    if isinstance(obj, FunctionType):
        functions.append(obj)
    elif isinstance(obj, nn.Module):
        for cls in {type(m) for m in obj.modules()}:
            for klass in cls.__mro__:
                functions.extend(v for v in vars(klass).values() if isinstance(v, FunctionType))
    for fn in functions:
        name = fn.__module__
        if not name or fn.__globals__.get("__name__") != name or (name in sys.modules and name not in _MADE):
            continue
        if name not in sys.modules:
            try:
                if importlib.util.find_spec(name) is not None:
                    continue
            except (ImportError, ValueError):
                pass
            sys.modules[name] = _MADE[name] = ModuleType(name)
        sys.modules[name].__dict__.update(fn.__globals__)
    return obj


_MADE: dict[str, ModuleType] = {}  # the modules importable() registered, which it may fill further


def check_bundle(problem_path: str, train: bool = False) -> dict[str, Any]:
    """In a worker: load the saved model and inputs as every process will (no forward: a model may
    need the GPU to run, and its forward is the analysis's to judge)."""
    from kernelopt.problem import load_problem

    problem = load_problem(problem_path, train=train)
    model = problem.build_model(0, "cpu")
    inputs = problem.make_inputs(0, "cpu")
    return {"parameters": sum(p.numel() for p in model.parameters()), "inputs": len(inputs)}


def check_movable(problem_path: Path, timeout_s: float = CHECK_TIMEOUT_S, train: bool = False) -> dict[str, Any]:
    """Refuse, in one line, a saved model that a worker process cannot load and run."""
    from kernelopt.workers import run_isolated

    outcome = run_isolated("kernelopt.problem.saved:check_bundle", str(problem_path), train, timeout_s=timeout_s)
    if not outcome.ok:
        raise KerneloptError(
            f"the model cannot be moved to kernelopt's worker processes: {outcome.status}: {outcome.reason}; "
            "define its classes in an importable module or keep them picklable"
        )
    return dict(outcome.value)
