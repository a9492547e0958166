"""a forward's host time in two workers read in turn, as the judge does (run 11 of this folder's README)"""
import statistics, sys, time
from pathlib import Path
from kernelopt.workers.persistent import PersistentWorker
from kernelopt.evaluate.remote import ROLE_ENV
path = str(Path("examples/problems").resolve() / sys.argv[1])
here = [str(Path("src").resolve()), str(Path(__file__).resolve().parent)]
with PersistentWorker(env=ROLE_ENV, extra_path=here) as w1, PersistentWorker(env=ROLE_ENV, extra_path=here) as w2:
    w1.call("worker_target:one", path, True, timeout_s=300); w2.call("worker_target:one", path, True, timeout_s=300)
    for warm in (False, True, False, True):
        open("/tmp/kopt_readings_on", "w").close()
        for _ in range(30):
            w1.call("worker_target:one", path, warm, timeout_s=300); w2.call("worker_target:one", path, warm, timeout_s=300)
        rows = [l.split() for l in open("/tmp/kopt_readings_on")]
        host = [float(r[1]) for r in rows]; dev = [float(r[2]) for r in rows]
        print("two workers", "warm" if warm else "cold", "host ms", round(statistics.median(host), 4), "device ms", round(statistics.median(dev), 4), flush=True)
