"""a forward's host time in-process, stock compile against the judge's captured model"""
import statistics, sys, time, os
from dataclasses import asdict
from pathlib import Path
import torch
from kernelopt.evaluate.session import ProblemSpec
from kernelopt.evaluate.runner_model import RunnerModel
from kernelopt.measure.split_timer import read_call

problem = sys.argv[1]
spec = asdict(ProblemSpec(str(Path("examples/problems").resolve() / problem), {}))
rm = RunnerModel(spec, torch.device("cuda"))
loaded = rm.problem
def host(fn, n=200):
    with torch.no_grad():
        fn(); torch.cuda.synchronize(); t = []
        for i in range(n):
            a = time.perf_counter(); fn(); t.append((time.perf_counter() - a) * 1e6)
            if i % 10 == 0: torch.cuda.synchronize()
    return round(statistics.median(t), 1)
print("artifact forward host us", host(rm.forward))
print("artifact.compiled host us", host(lambda: rm.artifact.compiled(*rm.inputs)))
r = [read_call(rm.forward, device="cuda", flush_l2=True, include_host=True).ms for _ in range(30)]
print("read_call include_host ms", round(statistics.median(r), 4))
import cProfile, pstats
with torch.no_grad():
    with cProfile.Profile() as prof:
        for _ in range(100): rm.forward()
    torch.cuda.synchronize()
pstats.Stats(prof).sort_stats("tottime").print_stats(18)
