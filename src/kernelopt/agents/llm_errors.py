"""The errors an LLM provider can raise, each with a one-line message saying what to do.

Two kinds, because the caller reacts differently:

* :class:`LLMSetupError` -- the run cannot use this LLM at all (a bad ``--llm`` text,
  a malformed config, a missing or rejected key, an unknown model, the SDK not
  installed). The run stops at once.
* :class:`LLMCallError` -- one request failed after the SDK's own retries (rate
  limits, server errors, timeouts, an unreadable answer). The caller may give up
  on that candidate and carry on, or stop.
"""

from __future__ import annotations

from kernelopt.errors import KerneloptError


class LLMError(KerneloptError):
    """Any LLM failure, with a one-line message."""

    fatal: bool = False

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMSetupError(LLMError):
    """The LLM cannot be used as configured: stop the run."""

    fatal = True


class LLMCallError(LLMError):
    """One request failed after the retries; ``status`` is the last HTTP status, if any."""
