"""The ``workers`` layer: isolated evaluation processes, timeouts, memory limits, GPU pinning.

It runs a function somewhere safe and says how that ended; what the function
checks, and what its result means, belongs to the layers above.
"""

from __future__ import annotations

from kernelopt.workers.environment import looks_secret, reject_secret_names, worker_env
from kernelopt.workers.isolated import WorkerResult, WorkerStatus, run_isolated

__all__ = [
    "WorkerResult",
    "WorkerStatus",
    "looks_secret",
    "reject_secret_names",
    "run_isolated",
    "worker_env",
]
