"""Unpickle what a worker sends back without letting it run code in the parent.

A worker runs untrusted candidate code, and that code can write any bytes it likes
into the result file. A plain ``pickle.loads`` of those bytes would run whatever
callable the file names, in the parent, which holds the user's API keys. So the
parent unpickles results through an allow-list of globals: builtin containers and
numbers, numpy arrays, torch tensors (their storage loaded with
``torch.load(weights_only=True)``, never torch's own ``weights_only=False``
default for pickled storages), and kernelopt's own dataclasses and enums.
A result that names anything else is refused.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import pickle
from typing import Any

_ALLOWED_GLOBALS = frozenset(
    {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
        ("builtins", "complex"),
        ("builtins", "slice"),
        ("builtins", "range"),
        ("collections", "OrderedDict"),
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.multiarray", "scalar"),
        ("torch", "Size"),
        ("torch", "device"),
        ("torch._utils", "_rebuild_tensor_v2"),
        ("torch._utils", "_rebuild_parameter"),
    }
)


def _load_storage(data: bytes) -> Any:
    """Stands in for ``torch.storage._load_from_bytes``, which loads with weights_only=False."""
    import torch

    return torch.load(io.BytesIO(data), weights_only=True)


class _ResultUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch.storage", "_load_from_bytes"):
            return _load_storage
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        if module == "torch" and name.isidentifier():
            import torch

            dtype = getattr(torch, name, None)
            if isinstance(dtype, torch.dtype):
                return dtype
        if (module == "kernelopt" or module.startswith("kernelopt.")) and name.isidentifier():
            cls = super().find_class(module, name)
            if (
                isinstance(cls, type)
                and cls.__module__ == module
                and (dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum))
            ):
                return cls
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a worker result")


def safe_loads(data: bytes) -> Any:
    """Unpickle ``data`` allowing only the globals listed in this module."""
    return _ResultUnpickler(io.BytesIO(data)).load()
