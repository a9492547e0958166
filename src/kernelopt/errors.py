"""User-facing errors.

Every error a user can cause (a bad problem file, a missing tool, an unsupported
torch) is a :class:`KerneloptError` whose message is one line naming the problem
and the fix. The CLI prints it without a traceback; anything else is a bug.
"""

from __future__ import annotations


class KerneloptError(Exception):
    """An error with a one-line, user-actionable message."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class ProblemError(KerneloptError):
    """A problem file that cannot be loaded, instantiated or run."""


class UnsupportedEnvironment(KerneloptError):
    """A torch / Triton / driver combination or a tool we cannot work with."""


class StoreError(KerneloptError):
    """The store file is unreadable or from an incompatible schema."""
