"""a forward's host time in workers as the judge starts them, one reading a call (run 10 of this folder's README)"""
import statistics, sys, time
from pathlib import Path
from kernelopt.workers.persistent import PersistentWorker
from kernelopt.evaluate.remote import ROLE_ENV
path = str(Path("examples/problems").resolve() / sys.argv[1])
here = [str(Path("src").resolve()), str(Path(__file__).resolve().parent)]
with PersistentWorker(env=ROLE_ENV, extra_path=here) as w1:
    for warm in (False, True, False, True):
        open("/tmp/kopt_readings_on", "w").close()
        ms = [w1.call("worker_target:one", path, warm, timeout_s=300).value for _ in range(30)]
        rows = [l.split() for l in open("/tmp/kopt_readings_on")]
        host = [float(r[1]) for r in rows[-30:]]; dev = [float(r[2]) for r in rows[-30:]]
        print("warm" if warm else "cold", "reading ms", round(statistics.median(ms), 4), "host ms", round(statistics.median(host), 4), "device ms", round(statistics.median(dev), 4), flush=True)
