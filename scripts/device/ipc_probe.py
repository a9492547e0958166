"""Which CUDA IPC handles a worker of another user can open (a device diagnostic, not a test).

    python3 scripts/device/ipc_probe.py

A root judge lends its buffers to workers that run as ``nobody`` (kernelopt.workers.identity);
this opens tensors of several sizes and histories in children as ``nobody`` and as root, one
child after another, and prints one line per (child, tensor): ok or the error.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import torch

from kernelopt.evaluate.shared_tensors import share
from kernelopt.workers.identity import worker_identity

CHILD = r"""
import pickle, sys, torch
torch.cuda.init()
items = pickle.load(sys.stdin.buffer)
for label, st in items:
    try:
        t = st.open()
        t.add_(0)
        torch.cuda.synchronize()
        print(f"  {label:28s} ok", flush=True)
    except Exception as e:
        print(f"  {label:28s} FAIL {type(e).__name__}: {str(e)[:90]}", flush=True)
"""


def child(items: list, user: str) -> None:
    ident = worker_identity()
    kwargs = ident.popen_kwargs() if user == "nobody" and ident is not None else {}
    env = {**os.environ}
    print(f"child as {user}:", flush=True)
    proc = subprocess.run([sys.executable, "-c", CHILD], input=pickle.dumps(items), env=env, **kwargs)
    if proc.returncode:
        print(f"  child exited {proc.returncode}")


def main() -> int:
    print("uid", os.getuid(), "worker identity", worker_identity(), "alloc conf", os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))
    keep = {}
    keep["small_1MB"] = torch.ones(256 * 1024, device="cuda")
    keep["mid_16MB"] = torch.ones(4 * 1024 * 1024, device="cuda")
    keep["big_268MB"] = torch.ones(1024, 65535, device="cuda")
    tmp = torch.ones(8 * 1024 * 1024, device="cuda")
    del tmp
    keep["reused_after_free"] = torch.ones(4 * 1024 * 1024, device="cuda")
    view = torch.ones(64, 1024, 1024, device="cuda")
    keep["view_offset"] = view[3:5]
    g = torch.cuda.CUDAGraph()
    x = torch.ones(1024, device="cuda")
    with torch.cuda.graph(g):
        y = x * 2
    keep["graph_pool_out"] = y
    items = [(k, share(v)) for k, v in keep.items()]
    for user in ("nobody", "nobody", "root"):
        child(items, user)
    # again after the children are gone: new shares of the same storages
    items = [(k, share(v)) for k, v in keep.items()]
    child(items, "nobody")
    return 0


if __name__ == "__main__":
    sys.exit(main())
