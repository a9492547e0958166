"""the dispatcher's way into a Python kernel, in-process and in a worker"""
import statistics, sys, time
from pathlib import Path
from kernelopt.workers.persistent import PersistentWorker
from kernelopt.evaluate.remote import ROLE_ENV
here = [str(Path("src").resolve()), str(Path(__file__).resolve().parent)]
import worker_target
print("in-process", worker_target.dispatch(), flush=True)
print("in-process", worker_target.dispatch(), flush=True)
with PersistentWorker(env=ROLE_ENV, extra_path=here) as w1:
    for _ in range(3):
        r = w1.call("worker_target:dispatch", timeout_s=300)
        print("worker", r.status, r.reason[:200], r.value, flush=True)
    r = w1.call("worker_target:op_steps", 0, timeout_s=300)
    print("worker op_steps", r.value, flush=True)
    r = w1.call("worker_target:dispatch", timeout_s=300)
    print("worker after op", r.value, flush=True)
