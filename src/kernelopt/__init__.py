"""kernelopt: faster torch.compile'd models through verified Triton kernel search."""

from __future__ import annotations

from typing import Any

from kernelopt.errors import KerneloptError, ProblemError

__version__ = "0.1.0"


def load(path: Any, model: Any = None, device: Any = "cuda") -> Any:
    """Load an exported, verified model (see :func:`kernelopt.deliver.export.load`)."""
    from kernelopt.deliver.export import load as _load

    return _load(path, model=model, device=device)


__all__ = ["KerneloptError", "ProblemError", "__version__", "load"]
