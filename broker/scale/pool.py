"""Independent pieces of one run on this machine's other cores.

Owns: ``usable_cpus`` (the cores this process may run on), ``map_shared``
(``[fn(shared, x) for x in items]`` in worker processes, ``shared`` sent to
each worker once, the results in the order of ``items``) and ``map_paced``
(the first piece here, timed; the rest on workers only if they would take
long enough to pay for starting them, ``POOL_MIN_S``). For the pieces of
one command's own run, on this machine, sharing one input: the risk band's
samples (``broker.whatif.risk``), each a period of the lifecycle's reaction
to one sampled market, all on the same plan and inputs; the committed
sweep's levels (``broker.whatif.run``), each a whole-period plan of the same
problem with another commitment fixed; the portfolio bench's seeds
(``broker.bench.portfolio``). A grid of scenarios a user asks to spread,
here or on a cluster (``spotfolio sweep``, ``bench --workers``), goes
through ``executor`` (Dask) instead.

Workers are started with ``spawn``: a fresh interpreter, whatever threads
this process has (a progress display, a client's), so no lock copied in a
held state; each imports what ``fn`` needs and unpickles ``shared`` once.
They do not run this process's ``__main__`` (``spawn`` would, to find
functions defined there: a caller's script without a ``__main__`` guard
would start its whole run again in every worker): ``fn`` lives in a module.
That costs about a second or two a worker, so callers use it only for work
that pays for it. A machine where worker processes cannot start (no POSIX
semaphores in some sandboxes) runs the pieces here instead, and so does
one whose worker dies (killed, out of memory): what the pool did not
finish is run here, with the same results, as a piece's result may depend
only on ``shared`` and its item.

Must not: know what it runs, print (``on_done`` is the caller's progress;
a worker's death is logged, as a warning),
or leave a worker behind (the pool is shut down before returning, also on
an error).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

__all__ = ["POOL_MIN_S", "map_paced", "map_shared", "usable_cpus"]

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("spotfolio.scale")

# ``map_paced`` hands the pieces after the first to workers only when, at the
# first one's pace, they would take longer than this here: a worker takes
# ~1-2 s to start (a fresh interpreter importing numpy, pandas and the
# planner, the shared input unpickled), so shorter work is over before
# workers could help.
POOL_MIN_S = 4.0

_SHARED: Any = None  # a worker's copy of ``shared``, set once by ``_start``


def usable_cpus() -> int:
    """The cores this process may run on (its CPU affinity where the system
    says, else the machine's count), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity call (macOS)
        return max(1, os.cpu_count() or 1)


def _start(payload: bytes) -> None:
    global _SHARED
    _SHARED = pickle.loads(payload)


def _run(fn: Callable[[Any, T], R], item: T) -> R:
    return fn(_SHARED, item)


def map_shared(
    fn: Callable[[S, T], R],
    shared: S,
    items: Sequence[T],
    *,
    workers: int,
    on_done: Callable[[int, int], None] | None = None,
) -> list[R]:
    """``[fn(shared, x) for x in items]`` on up to ``workers`` processes
    (here, serially, for one, or one item); ``fn`` is a module's top-level
    function. ``on_done(done, total)`` after each result."""
    total = len(items)
    n = min(workers, total)
    if n <= 1:
        return _serial(fn, shared, items, on_done)
    payload = pickle.dumps(shared, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        pool = ProcessPoolExecutor(
            n,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start,
            initargs=(payload,),
        )
    except (OSError, NotImplementedError, ImportError):  # no semaphores here
        return _serial(fn, shared, items, on_done)
    out: list[Any] = [None] * total
    got: set[int] = set()  # the items the pool finished
    try:
        futures: dict[Future[R], int] = {}
        with _without_main():  # the workers start at the submits
            for i, x in enumerate(items):
                futures[pool.submit(_run, fn, x)] = i
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                break  # a worker died (killed, out of memory): the rest run here
            for f in done:
                out[futures[f]] = f.result()  # a piece's own error is raised here
                got.add(futures[f])
                if on_done is not None:
                    on_done(len(got), total)
    except BrokenProcessPool:  # a worker died while the pieces were handed out
        pass
    finally:  # on an error or an interrupt too: nothing queued starts, no worker is left
        pool.shutdown(wait=True, cancel_futures=True)
    if len(got) < total:
        log.warning(
            "a worker process died: %d of %d pieces run in this process", total - len(got), total
        )
    for i in range(total):
        if i not in got:
            out[i] = fn(shared, items[i])
            got.add(i)
            if on_done is not None:
                on_done(len(got), total)
    return out


def map_paced(
    fn: Callable[[S, T], R],
    shared: S,
    items: Sequence[T],
    *,
    workers: int | None = None,
    on_done: Callable[[int, int], None] | None = None,
) -> tuple[list[R], int]:
    """``map_shared`` with the first piece run here and timed: the rest go
    to ``workers`` processes (``None``: ``usable_cpus()``) only if, at its
    pace, they would take over ``POOL_MIN_S`` here. Returns the results and
    how many processes ran them."""
    if not items:
        return [], 1
    t0 = time.perf_counter()
    first = fn(shared, items[0])
    if on_done is not None:
        on_done(1, len(items))
    rest = items[1:]
    n = min(usable_cpus() if workers is None else workers, max(len(rest), 1))
    if len(rest) * (time.perf_counter() - t0) < POOL_MIN_S:
        n = 1
    done = (lambda d, t: on_done(d + 1, t + 1)) if on_done is not None else None
    return [first, *map_shared(fn, shared, rest, workers=n, on_done=done)], n


@contextlib.contextmanager
def _without_main() -> Iterator[None]:
    """``__main__`` is an empty module while workers start (module docstring)."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _serial(
    fn: Callable[[S, T], R],
    shared: S,
    items: Sequence[T],
    on_done: Callable[[int, int], None] | None,
) -> list[R]:
    out = []
    for i, x in enumerate(items):
        out.append(fn(shared, x))
        if on_done is not None:
            on_done(i + 1, len(items))
    return out
