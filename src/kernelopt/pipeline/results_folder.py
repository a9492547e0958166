"""The file names of a bench results folder, and the mark of a folder that holds kernel-file rows.

Kept apart from the writers (:mod:`kernelopt.pipeline.bench_results`,
:mod:`kernelopt.pipeline.bench_file_results`) so the report's readers can name them without
importing the writers, which themselves write the report.
"""

from __future__ import annotations

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
RESULTS_MD = "results.md"
FILE_SUITE = "kernel-files"  # meta["input"] of a bench of kernel files (pipeline.bench_file_results)
