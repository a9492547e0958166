"""kernelopt: faster torch.compile'd models through verified Triton kernel search."""

from __future__ import annotations

from typing import Any

from kernelopt.errors import KerneloptError, ProblemError

__version__ = "0.1.0"


def load(path: Any, model: Any = None, device: Any = "cuda") -> Any:
    """Load an exported, verified model (see :func:`kernelopt.deliver.export.load`)."""
    from kernelopt.deliver.export import load as _load

    return _load(path, model=model, device=device)


def backend(path: Any = None) -> Any:
    """A ``torch.compile`` backend running the verified kernels of an exported file (see
    :func:`kernelopt.deliver.backend.backend`)."""
    from kernelopt.deliver.backend import backend as _backend

    return _backend(path)


def load_kernel(path: Any) -> Any:
    """Import a delivered kernel file once it matches its verification record (see
    :func:`kernelopt.deliver.kernel_file.load_kernel`)."""
    from kernelopt.deliver.kernel_file import load_kernel as _load_kernel

    return _load_kernel(path)


def optimize(model: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """Search faster kernels for a live model (see :func:`kernelopt.pipeline.live.optimize_model`)."""
    from kernelopt.pipeline.live import optimize_model

    return optimize_model(model, example_inputs, **kwargs)


def analyze(model: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """Where a live model's compiled forward spends its GPU time (see :func:`kernelopt.pipeline.live.analyze_model`)."""
    from kernelopt.pipeline.live import analyze_model

    return analyze_model(model, example_inputs, **kwargs)


__all__ = ["KerneloptError", "ProblemError", "__version__", "analyze", "backend", "load", "optimize"]
