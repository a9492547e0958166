"""Compile a batch's candidates on the CPU cores while the GPU measures earlier ones.

Triton compiles a kernel into its on-disk cache; loading it afterwards costs
milliseconds. A pool of spawned processes compiles the batch's candidates into
that cache ahead of time (Inductor's own ``precompile(warm_cache_only=True)``,
what its parallel compile workers do), while the evaluation session, in its one
thread, builds each candidate (a cache hit) and runs the gates one candidate at
a time on the GPU. The pool only warms a cache: the authoritative compile, and
any error a candidate earns, still happen in the session, so a candidate that
crashes a compile process costs the pool its warm-up, never a verdict.

Only statically validated candidates reach the pool; its processes inherit the
evaluation worker's environment (allow-listed, no secrets).
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial

WarmFn = Callable[[str, str], float]


def default_workers() -> int:
    """The ``compile_workers`` setting (``KERNELOPT_COMPILE_WORKERS``), 0 by default: no pool.

    Off by default because it did not pay on the H200 (scripts/throughput.py, softmax at
    1024 rows, 16 launch-config candidates each): 191 evaluations per GPU-minute without
    the pool, 137 with 8 processes; the session's compile stage was 0.25 s either way, so
    the pool's warm-ups saved nothing while 8 more processes each imported torch. Where
    compiles are slower (large candidates), try one process per spare core."""
    from kernelopt.config import load_settings

    return load_settings().compile_workers


def warm_triton_cache(source: str, name: str) -> float:
    """Runs in a pool process: compile ``name`` of ``source`` into Triton's cache; seconds taken.
    A CUDA C++ candidate is left to the session (its build is cached by source hash there)."""
    from kernelopt.capture import compat
    from kernelopt.capture.cuda_kernel import is_cuda_source

    if is_cuda_source(source):
        return 0.0
    started = time.monotonic()
    kernel = getattr(compat.load_source_module(source), name)
    compat.warm_compile(kernel)
    return time.monotonic() - started


def _ready() -> None:
    """A pool process's start-up: die with the session's process, import the compiler stack once."""
    from kernelopt.workers.hardening import die_with_parent

    die_with_parent()
    try:
        from kernelopt.capture import compat

        compat.heuristics_module()
    except ImportError:
        pass  # a pool for a test's own function needs no Triton


def _noop() -> None:
    return None


class WarmJob:
    """One candidate's warm-up: queued here until a pool process is free, then a future."""

    def __init__(self, job: tuple[str, str]) -> None:
        self.job = job
        self.future: Future | None = None  # None while queued here


class CompilePool:
    """Processes that compile candidates ahead of the session; 0 workers means no pool.

    At most ``workers`` jobs are in the pool at a time (each on a free process); the
    rest wait in this object's queue, so :meth:`wait` knows a job no process has
    started, and hands it back to the session instead of waiting for the queue."""

    def __init__(self, workers: int, warm: WarmFn = warm_triton_cache) -> None:
        self.workers = workers
        self._warm = warm
        self._executor: ProcessPoolExecutor | None = None
        self._queue: deque[WarmJob] = deque()
        self._in_flight = 0
        self._lock = threading.Lock()
        self.broken = 0  # times a compile process died and the pool was replaced
        self._completed = 0  # jobs (start-up no-ops included) this pool's processes have finished
        self._generation = 0  # bumped when the pool is replaced: a dead pool's late callbacks count for nothing

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_ready
            )
        return self._executor

    def start(self) -> None:
        """Spawn the processes now (they import the compiler stack) instead of at the first batch.
        Idempotent: a started pool is left as it is."""
        if self.workers > 0 and self._executor is None:
            pool = self._pool()
            generation = self._generation
            for _ in range(self.workers):
                pool.submit(_noop).add_done_callback(partial(self._count, generation))

    @property
    def warmed_up(self) -> bool:
        """Whether a process has finished starting (importing the compiler stack takes
        seconds): until then a candidate is compiled sooner by the session than by the pool."""
        return self._completed > 0

    def _count(self, generation: int, _: Future | None = None) -> None:
        with self._lock:
            if generation == self._generation:
                self._completed += 1

    def submit(self, jobs: list[tuple[str, str] | None]) -> list[WarmJob | None]:
        """Queue each ``(source, kernel name)`` for compiling; ``None`` entries are skipped."""
        if self.workers <= 0:
            return [None for _ in jobs]
        handles = [WarmJob(job) if job is not None else None for job in jobs]
        with self._lock:
            self._queue.extend(h for h in handles if h is not None)
        self._feed()
        return handles

    def _feed(self) -> None:
        """Send queued jobs to the pool while it has free processes."""
        while True:
            with self._lock:
                if self._in_flight >= self.workers or not self._queue:
                    return
                handle = self._queue.popleft()
                self._in_flight += 1
            try:
                future = self._pool().submit(self._warm, *handle.job)
            except BrokenProcessPool:
                with self._lock:
                    self._in_flight -= 1
                    self._queue.appendleft(handle)  # to the fresh pool, first
                self._replace()
                continue
            with self._lock:
                handle.future = future
                generation = self._generation
            future.add_done_callback(partial(self._finished, generation))

    def _finished(self, generation: int, _: Future | None = None) -> None:
        with self._lock:
            self._in_flight -= 1
            if generation == self._generation:
                self._completed += 1
        self._feed()

    def wait(self, handle: WarmJob | None, timeout_s: float) -> tuple[float, str | None]:
        """Block until ``handle``'s warm-up ends: (seconds waited, why it did not warm, or None).

        A job still in the queue is taken back: the session compiles it itself sooner
        than it would wait for a process to come free."""
        if handle is None:
            return 0.0, "not submitted"
        started = time.monotonic()
        while True:
            with self._lock:
                if handle.future is not None:
                    break
                if handle in self._queue:
                    self._queue.remove(handle)
                    return 0.0, "not started: compiled in the session"
            time.sleep(0.001)  # being handed to a process this instant
        try:
            handle.future.result(timeout=timeout_s)
            problem = None
        except BrokenProcessPool:
            self._replace()
            problem = "compile process died"
        except TimeoutError:
            problem = f"not compiled within {timeout_s:g} s"
        except Exception as exc:  # the candidate's own compile error: the session reports it
            problem = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return time.monotonic() - started, problem

    def _replace(self) -> None:
        self.broken += 1
        with self._lock:
            executor, self._executor = self._executor, None
            self._generation += 1
            self._completed = 0  # the next pool's processes start from scratch
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            self._queue.clear()
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
