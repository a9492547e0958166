"""A runner backend for the CPU tests: a "kernel" is Python source defining ``NAME(args)``.

Its source runs when it is built, in the candidate's process, exactly as a Triton
candidate's module code would: so a stand-in can patch whatever it likes there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class PythonBackend:
    @staticmethod
    def build(source: str, name: str) -> Any:
        namespace: dict[str, Any] = {}
        exec(compile(source, f"<candidate {name}>", "exec"), namespace)
        return namespace[name]

    @staticmethod
    def launch(kernel: Any, args: Sequence[Any]) -> None:
        kernel(args)


BACKEND = PythonBackend()


def loaded_modules() -> list[str]:
    """Run in the candidate's process: which modules it has imported."""
    import sys

    return sorted(sys.modules)
