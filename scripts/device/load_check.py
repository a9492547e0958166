"""Smoke check on a GPU: optimize row-L2 at 2048 rows (budget 3), then load its export in this very process
(an export once failed to load where it was written: see benchmarks/h200-2026-12-03-kernel-identity)."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from kernelopt.config import load_settings
from kernelopt.deliver.export import load
from kernelopt.pipeline.optimize import optimize
from kernelopt.search.termination import Budget
from kernelopt.store import Store

tmp = Path(tempfile.mkdtemp())
report = optimize(Path("examples/problems/level1/10_row_l2_normalize.py"), Store(tmp / "k.db"),
                  budget=Budget(max_evaluations=3, patience=2), max_targets=1, sizes={"batch_size": 2048},
                  export_path=tmp / "r.kopt.json", config=load_settings({"base_mode": "default"}), write_report=False)
print("final:", report.final_reason, [(k.name, k.speedup) for k in report.kernels])
if report.exported:
    loaded = load(report.exported)
    print("loaded in the same process:", len(loaded.swaps), "swap(s)")
sys.exit(0 if report.exported else 1)
