"""The run kinds, each a module of stages in order: ``optimize`` (analyze, select, search, re-check,
deliver), ``bench`` (a suite of problems, one ``optimize`` each in a worker) and their helpers.

Imports nothing itself: ``kernelopt.pipeline.bench_problem`` is a worker's target, and a worker
should load only what it runs.
"""
