"""Check a suite's problem files in a worker, never in the tool's own process.

A problem file is code we did not write, and loading it runs it: it can loop at
import, call ``sys.exit`` or ``os._exit``, raise ``KeyboardInterrupt`` or print
megabytes. ``bench`` used to load every file in its own process first; now one
isolated worker loads them in turn, announcing each before it runs it, under a
per-file time limit. A file that hangs or ends the worker is charged with a
one-line load error (the last file announced is the one that did it) and a
new worker loads the others again; whatever a file prints goes to the
worker's log, not the console. The worker that benchmarks a problem loads it
again itself, so nothing but names and errors crosses back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kernelopt.problem.loader import SuiteEntry, suite_files
from kernelopt.workers import run_isolated

LOADING_MARK = "kernelopt-loading:"
SECONDS_PER_FILE = 60.0
STARTUP_S = 60.0


class _LoadTimeout(BaseException):
    """Raised by the per-file alarm (a BaseException, so a file's own ``except Exception`` cannot eat it)."""


def check_files(paths: Sequence[str], seconds_per_file: float = SECONDS_PER_FILE) -> list[str | None]:
    """Worker side: load each file in turn; its error line, or None. Announces each before it runs it,
    and stops one that runs past ``seconds_per_file`` (the parent's overall time-out backs this up)."""
    import signal

    from kernelopt.problem.loader import load_problem

    def expire(signum: int, frame: object) -> None:
        raise _LoadTimeout()

    signal.signal(signal.SIGALRM, expire)
    errors: list[str | None] = []
    for path in paths:
        print(f"{LOADING_MARK} {path}", flush=True)
        signal.setitimer(signal.ITIMER_REAL, seconds_per_file)
        try:
            load_problem(path)
            errors.append(None)
        except _LoadTimeout:
            errors.append(
                f"{path}: did not finish loading within {seconds_per_file:g} s (an endless loop at "
                "import?); a problem file must only define Model, get_inputs and get_init_inputs"
            )
        except BaseException as exc:
            text = str(exc).splitlines()[0] if str(exc).strip() else ""
            errors.append(
                text
                if type(exc).__name__ == "ProblemError"
                else f"{path}: {type(exc).__name__} at import{': ' + text if text else ''}; "
                "a problem file must only define Model, get_inputs and get_init_inputs"
            )
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return errors


def _last_announced(stderr_tail: str) -> str | None:
    marks = [line.split(LOADING_MARK, 1)[1].strip() for line in stderr_tail.splitlines() if LOADING_MARK in line]
    return marks[-1] if marks else None


def check_suite(
    root: Path,
    only: Sequence[str] | None = None,
    seconds_per_file: float = SECONDS_PER_FILE,
    extra_path: Sequence[str | Path] = (),
) -> list[SuiteEntry]:
    """The suite's (selected) files as entries whose ``error`` says why a file does not load."""
    chosen = suite_files(root, only)
    errors: dict[Path, str | None] = {}
    todo = [path for _, path in chosen]
    while todo:
        outcome = run_isolated(
            "kernelopt.pipeline.suite_check:check_files",
            [str(p) for p in todo],
            seconds_per_file,
            timeout_s=STARTUP_S + seconds_per_file * len(todo),
            extra_path=extra_path,
        )
        if outcome.ok:
            errors.update(zip(todo, outcome.value))
            break
        culprit = _last_announced(outcome.stderr_tail)
        index = next((i for i, p in enumerate(todo) if str(p) == culprit), None)
        if index is None:  # died before any file ran: no file to blame, say so for all
            errors.update(
                (p, f"{p}: the loading worker ended before it ran the file: {outcome.status}: {outcome.reason}")
                for p in todo
            )
            break
        why = (
            f"did not finish loading within {seconds_per_file:g} s (an endless loop at import?)"
            if outcome.status == "timeout"
            else f"ended the loading process at import ({outcome.status}: {outcome.reason})"
        )
        errors[todo[index]] = (
            f"{todo[index]}: {why}; a problem file must only define Model, get_inputs and get_init_inputs"
        )
        todo = todo[:index] + todo[index + 1 :]  # the dead worker's other answers are lost: ask again without it
    return [SuiteEntry(name, path, None, errors.get(path)) for name, path in chosen]
