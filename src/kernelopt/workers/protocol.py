"""File names and payload keys shared by the parent and the worker process.

The two sides talk only through files in the worker's directory, so a worker
that dies mid-write or floods its output cannot wedge the parent on a pipe.
"""

from __future__ import annotations

CALL_FILE = "call.pkl"  # parent -> worker: {"target", "args", "kwargs"}
RESULT_FILE = "result.pkl"  # worker -> parent: {"status", "value"} or the error fields
OUTPUT_FILE = "worker.log"  # the worker's stderr, with stdout merged in

ENTRY_MODULE = "kernelopt.workers.entry"
