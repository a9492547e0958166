"""Which host path each of kernelopt's own ops took in this process: the judge's evidence beside a forward's
host time, since an op whose calls go through Python costs the host more at every call than its C++ path.

An op with more than one host path registers a reader here when its module is imported
(:func:`register`); a process that never imported it reads nothing for it. The states are words for a
verdict or a row (``C++: ...`` or ``Python: why``), and this module is the one place that says which of
them is Python's path (:func:`through_python`), for the judge's refusals and the scoreboard's rows alike.
"""

from __future__ import annotations

from collections.abc import Callable

PYTHON = "Python"
"""The first word of a state whose op's calls went through its Python host path."""

_READERS: dict[str, Callable[[], str | None]] = {}


def register(op: str, reader: Callable[[], str | None]) -> None:
    """Read ``op``'s host path with ``reader`` from now on: its state in words, or None where this process
    has not called it on a GPU (an op only imported, as every compile with kernelopt's passes imports them,
    is left out). Registering again replaces the reader (a module reloaded)."""
    _READERS[op] = reader


def python_path(why: str) -> str:
    """The state of an op whose calls go through its Python host path, and why (:func:`through_python`)."""
    return f"{PYTHON}: {why}"


def through_python(state: object) -> bool:
    """Whether a state (:func:`read`'s, or a row's ``details.op_hosts`` value) is Python's host path."""
    return str(state).startswith(f"{PYTHON}:")


def read() -> dict[str, str]:
    """The host path of each registered op this process has called on a GPU, by op."""
    return {op: state for op, reader in sorted(_READERS.items()) if (state := reader()) is not None}
