"""The file names of a bench results folder, and the mark of a folder that holds kernel-file rows.

Named here, below the writers (:mod:`kernelopt.pipeline.bench_results`,
:mod:`kernelopt.pipeline.bench_file_results`), so the report's readers and the writers share
them while the pipeline only ever imports the report, never the other way round.
"""

from __future__ import annotations

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
RESULTS_MD = "results.md"
FILE_SUITE = "kernel-files"  # meta["input"] of a bench of kernel files (pipeline.bench_file_results)
