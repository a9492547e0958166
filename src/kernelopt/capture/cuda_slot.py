"""A CUDA C++ candidate in one ``@triton.jit`` kernel's place inside a standalone kernel file.

A kernel file's ``launch`` calls its kernels as ``kernel[grid](*args, **keywords)``. To run a CUDA
C++ candidate (:mod:`kernelopt.capture.cuda_kernel`) there without touching ``launch``, the kernel's
name in the loaded module is rebound to a :class:`CudaSlot`: indexing it with the grid gives a call
that binds the arguments by the Triton function's own signature (its defaults applied), keeps the
runtime parameters in order and hands them to the built ``launch`` (tensors stay tensors, sizes stay
scalars). The grid, the ``tl.constexpr`` values and the launch options (``num_warps``,
``num_stages``...) are Triton's business and are dropped: the CUDA source computes its own grid.
So the C++ contract is the captured-kernel one: the Triton kernel's runtime parameters, in order.
The same binding, applied to the calls the original ``launch`` makes, gives the dtypes of the tensors
the slot receives (:func:`slot_dtypes`), which gate 1 holds the C++ element types to.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from kernelopt.problem.kernel_file import KernelFile


class CudaSlot:
    """What a kernel file's ``launch`` finds under the replaced kernel's name."""

    def __init__(self, name: str, launcher: Any, runtime: Sequence[str], signature: inspect.Signature) -> None:
        self.__name__ = name
        self.launcher = launcher  # a CudaLauncher: run(*runtime args)
        self.runtime = tuple(runtime)
        self._signature = signature
        names = list(signature.parameters)
        # where each runtime argument sits among the positional ones: the common call needs no binding
        # (inspect's costs microseconds a call, which gate 4 would count against the candidate)
        self._at = tuple(names.index(name) for name in self.runtime)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return self._call

    def _call(self, *args: Any, **keywords: Any) -> None:
        if self._at and max(self._at) < len(args) and not any(name in keywords for name in self.runtime):
            self.launcher.run(*(args[i] for i in self._at))
            return
        self.launcher.run(*runtime_arguments(self.__name__, self._signature, self.runtime, args, keywords))


def runtime_arguments(
    name: str, signature: inspect.Signature, runtime: Sequence[str], args: Sequence[Any], keywords: dict[str, Any]
) -> list[Any]:
    """The values of the ``runtime`` parameters in a call ``name[grid](*args, **keywords)`` of the kernel
    whose function has ``signature`` (its defaults applied; keywords it does not take are launch options)."""
    known = {k: v for k, v in keywords.items() if k in signature.parameters}
    try:
        bound = signature.bind_partial(*args, **known)
    except TypeError as exc:
        raise TypeError(f"{name}[grid](...): {exc}") from None
    bound.apply_defaults()
    missing = [parameter for parameter in runtime if parameter not in bound.arguments]
    if missing:
        raise TypeError(f"{name}[grid](...) passes no value for runtime parameter {missing[0]}")
    return [bound.arguments[parameter] for parameter in runtime]


def python_function(kernel: Any) -> Callable[..., Any]:
    """The plain function under Triton's wrappers (``@triton.autotune``, ``@triton.heuristics``, ``@triton.jit``
    and the interpreter's stand-in each keep the one they wrap as ``.fn``)."""
    seen = 0
    while not inspect.isfunction(kernel):
        kernel = getattr(kernel, "fn", None)
        seen += 1
        if kernel is None or seen > 8:
            raise TypeError("not a Triton kernel: no plain function under its decorators")
    return kernel


def bind_cuda_slot(module: ModuleType, name: str, launcher: Any, runtime: Sequence[str]) -> CudaSlot:
    """Rebind kernel ``name`` of the loaded kernel file ``module`` to the built CUDA ``launcher``;
    ``runtime`` are the kernel's runtime parameters (read by the caller from the trusted original)."""
    signature = inspect.signature(python_function(getattr(module, name)))
    slot = CudaSlot(name, launcher, runtime, signature)
    setattr(module, name, slot)
    return slot


def slot_dtypes(file: KernelFile, name: str, runtime: Sequence[str], inputs: list[Any]) -> dict[str, str]:
    """The dtype (torch's name: ``bfloat16``) of each tensor the file's ``launch`` passes kernel ``name``'s
    runtime parameters on ``inputs``, which a CUDA C++ candidate must read as its element type
    (:mod:`kernelopt.verify.cuda_element_types`); a parameter whose calls pass different dtypes, or no
    tensor, is left out."""
    signature = inspect.signature(python_function(getattr(file.module, name)))
    seen: dict[str, set[str]] = {}
    for call in file.kernel_calls(inputs, [name])[name]:
        values = runtime_arguments(name, signature, runtime, call.args, call.keywords)
        for parameter, value in zip(runtime, values):
            dtype = str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor) else ""
            seen.setdefault(parameter, set()).add(dtype)
    return {parameter: dtypes.pop() for parameter, dtypes in seen.items() if len(dtypes) == 1 and "" not in dtypes}
