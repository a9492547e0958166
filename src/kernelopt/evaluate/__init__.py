"""Evaluation across two processes: the judge's side (:mod:`.remote`) and the candidate's (:mod:`.runner`).

Deliberately imports nothing: the candidate's process imports :mod:`.runner` alone,
and must not pull the gates in with its package.
"""
