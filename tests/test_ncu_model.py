"""Nsight Compute for a model run's kernel, without a GPU: ncu is started inside the evaluation worker, so the
user's model it profiles never runs with kernelopt's environment (API keys), and a run reads the counters once."""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES
from test_ncu_kernel_file import HEADER, _path_without_ncu

from kernelopt.evaluate.session import ProblemSpec
from kernelopt.measure import ncu
from kernelopt.pipeline.kernel_facts import ncu_counters
from kernelopt.store import Store
from kernelopt.workers.persistent import PersistentWorker

KERNEL = "triton_red_fused_mean_mul_pow_rsqrt_0"
SPEC = ProblemSpec(str(EXAMPLES / "level1/15_rmsnorm.py"), {"batch_size": 2, "seq_len": 8, "hidden": 64})

# A stand-in ncu: it logs what it was asked and the environment it runs in, and answers with counters
# (the probe it is handed needs a GPU, so it is not run).
FAKE_NCU = """#!{python}
import json, os, sys
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "worker_dir": os.environ.get("KERNELOPT_WORKER_DIR"),
                          "secret": os.environ.get("OPENAI_API_KEY")}}) + "\\n")
row = '"0","1","python3","h","{kernel}","1","7","(128, 1, 1)","(6, 1, 1)","0","9.0","Command line profiler metrics",'
print({header!r})
print(row + '"dram__throughput.avg.pct_of_peak_sustained_elapsed","%","61.5"')
"""


def _fake(folder: Path) -> Path:
    bin_ = folder / "bin"
    bin_.mkdir()
    bin_.chmod(0o755)
    log = folder / "ncu.log"
    script = bin_ / "ncu"
    script.write_text(FAKE_NCU.format(python=sys.executable, log=str(log), kernel=KERNEL, header=HEADER))
    script.chmod(0o755)
    return log


def test_a_model_kernels_counters_are_read_in_the_worker_without_our_secrets_and_once_per_run(
    tmp_path, worker_tmp, monkeypatch
) -> None:
    log = _fake(worker_tmp)
    monkeypatch.setenv("PATH", str(worker_tmp / "bin") + os.pathsep + _path_without_ncu())  # the worker inherits PATH
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ours-never-theirs")
    store = Store(tmp_path / "k.db")
    run_id = store.start_run("optimize", "rmsnorm", "cpu", {})
    events: list[tuple[str, dict]] = []
    with PersistentWorker() as worker:
        first = ncu_counters(store, run_id, worker, SPEC, KERNEL, lambda kind, data: events.append((kind, data)))
        again = ncu_counters(store, run_id, worker, SPEC, KERNEL, lambda kind, data: events.append((kind, data)))
    assert first == again and first["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 61.5
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]  # profiled once: the run reads it back
    assert record["secret"] is None and record["worker_dir"]  # in the worker's environment, not ours
    assert f"regex:^{KERNEL}$" in record["argv"] and "none" in record["argv"]  # this kernel, clocks left alone
    probe = record["argv"][record["argv"].index("kernelopt.evaluate.ncu_probe") + 1]
    assert json.loads(probe)["problem_path"] == SPEC.problem_path
    assert not [d for kind, d in events if kind == "warning"]


def test_without_ncu_a_model_run_says_so_in_one_line_and_again_when_resumed(tmp_path, monkeypatch) -> None:
    if any(glob.glob(pattern) for pattern in ncu.NCU_CANDIDATES):
        pytest.skip("Nsight Compute is installed where find_ncu looks beside PATH")
    monkeypatch.setenv("PATH", _path_without_ncu())
    store = Store(tmp_path / "k.db")
    run_id = store.start_run("optimize", "rmsnorm", "cpu", {})
    events: list[tuple[str, dict]] = []
    with PersistentWorker() as worker:
        assert ncu_counters(store, run_id, worker, SPEC, KERNEL, lambda kind, data: events.append((kind, data))) is None
        assert ncu_counters(store, run_id, worker, SPEC, KERNEL, lambda kind, data: events.append((kind, data))) is None
    warnings = [d["message"] for kind, d in events if kind == "warning"]
    assert len(warnings) == 2 and all(w.startswith(f"no hardware counters for {KERNEL}") for w in warnings)
    assert "ncu" in warnings[0] and "(recorded when the run started)" in warnings[1]
