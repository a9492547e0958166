"""A long-lived worker: ``python -m kernelopt.workers.serve <request_fd> <response_fd>``.

Serves calls one at a time over two pipes (8-byte length + pickle frames) and
keeps module state between them, so an evaluation worker captures a model once
and then evaluates many candidates. Its own stdout and stderr go to a log file,
never into the response pipe. Like ``entry``, it imports nothing heavy itself.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import struct
import sys
from typing import Any

from kernelopt.workers.entry import _error_payload, _load_target
from kernelopt.workers.hardening import adopt_orphans, die_with_parent_from_env, no_new_privileges
from kernelopt.workers.reaper import kill_tree

HEADER = struct.Struct("<Q")


def read_frame(fd: int) -> bytes | None:
    """One frame, or None at end of file."""
    header = _read_exact(fd, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    body = _read_exact(fd, size)
    if body is None:
        raise EOFError("pipe closed inside a frame")
    return body


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None if left == size else b"".join(chunks)
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_frame(fd: int, data: bytes) -> None:
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _serve_one(call: dict[str, Any]) -> dict[str, Any]:
    target = call["target"]
    try:
        function = _load_target(target)
    except BaseException as exc:
        return _error_payload(exc, prefix=f"cannot load target {target!r}: ")
    try:
        return {"status": "ok", "value": function(*call["args"], **call["kwargs"])}
    except BaseException as exc:
        return _error_payload(exc)


def main(argv: list[str]) -> None:
    faulthandler.enable()
    no_new_privileges()
    die_with_parent_from_env()
    adopt_orphans()  # so the parent finds every process the calls start, daemons included
    request_fd, response_fd = int(argv[1]), int(argv[2])
    while True:
        frame = read_frame(request_fd)
        if frame is None:  # the parent closed the pipe: done
            break
        payload = _serve_one(pickle.loads(frame))
        try:
            data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:
            data = pickle.dumps(_error_payload(exc, prefix="result cannot be pickled: "))
        sys.stdout.flush()
        sys.stderr.flush()
        write_frame(response_fd, data)
    kill_tree(os.getpid(), include_root=False)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
