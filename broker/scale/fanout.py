"""Run one function over many inputs, here or on a Dask cluster.

Owns: ``ExecutorSpec`` (how many local worker processes, or the address of an
existing Dask scheduler) and ``Executor``, the one executor behind
``spotfolio sweep`` and ``bench --workers``: serial in this process for one
worker, else ``dask.distributed`` (a ``LocalCluster`` of processes, one
thread each, or a ``Client`` on ``--scheduler ADDRESS``). ``map`` returns the
results in the order of the inputs, whatever order the workers finish in, so a
parallel run's output is the serial run's.

Must not: know what it runs (the callers pass a picklable top-level function
and its inputs), print (``on_done`` is the caller's progress), or keep a
cluster past the ``with`` block it was opened in.

A task's function should return, not raise, the errors a user can act on:
the project's errors carry keyword arguments that do not survive pickling
back from a worker.

``distributed`` is imported when a cluster is opened, never at import time:
the serial path (and ``spotfolio --help``) does not pay for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from markets.errors import InputError

if TYPE_CHECKING:
    from distributed import Client, LocalCluster

__all__ = ["CONNECT_TIMEOUT_S", "Executor", "ExecutorSpec"]

T = TypeVar("T")
R = TypeVar("R")

# How long a client waits for an existing scheduler before giving up.
CONNECT_TIMEOUT_S = 10
# A local cluster's workers (no dashboard to show them): no profiler, a
# slower system monitor (distributed.yaml: ``worker.profile``,
# ``admin.system-monitor``).
_LOCAL_WORKER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
}


@dataclass(frozen=True)
class ExecutorSpec:
    """``workers``: local processes (1: serially, in this process);
    ``scheduler``: an existing Dask scheduler's address (``tcp://host:8786``),
    which then decides how many workers there are."""

    workers: int = 1
    scheduler: str | None = None

    @property
    def serial(self) -> bool:
        return self.scheduler is None and self.workers <= 1


class Executor:
    """``with Executor(spec) as ex: ex.map(fn, items)``."""

    def __init__(self, spec: ExecutorSpec) -> None:
        self.spec = spec
        self._cluster: LocalCluster | None = None
        self._client: Client | None = None

    def __enter__(self) -> Executor:
        if self.spec.serial:
            return self
        from distributed import Client, LocalCluster

        if self.spec.scheduler is not None:
            try:
                self._client = Client(self.spec.scheduler, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, ValueError) as e:
                raise InputError(
                    "--scheduler",
                    None,
                    "the address of a running Dask scheduler, like tcp://10.0.0.5:8786",
                    got=self.spec.scheduler,
                ) from e
            return self
        import dask

        # processes, one thread each: the solver and pandas hold the GIL, and
        # a task may redirect its stdout (broker.cli.sweep). Without a
        # dashboard nothing reads the workers' statistical profiler (a stack
        # sample of the task's thread every 10 ms, under the GIL) or a
        # twice-a-second system monitor: measured idle, two workers' CPU
        # 0.62 -> 0.35 s per 20 s each, this process's 0.91 -> 0.69 s.
        with dask.config.set(_LOCAL_WORKER_CONFIG):
            self._cluster = LocalCluster(
                n_workers=self.spec.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
        self._client = Client(self._cluster)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    @property
    def workers(self) -> int:
        """Worker processes the tasks run on (1 when serial)."""
        if self._client is None:
            return 1
        return max(1, len(self._client.scheduler_info().get("workers", {})))

    def run_on_workers(self, fn: Callable[[], R]) -> list[R]:
        """Call ``fn`` once on every worker (here when serial) and return what
        each returned: a warm-up that imports what the tasks need before
        anything is timed, or a reading of each worker (its CPU time)."""
        if self._client is None:
            return [fn()]
        got: dict[str, R] = self._client.run(fn)
        return [got[k] for k in sorted(got)]

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        on_done: Callable[[int, int], None] | None = None,
    ) -> list[R]:
        """``[fn(x) for x in items]``, on the workers; ``on_done(done, total)``
        after each result."""
        total = len(items)
        if self._client is None:
            out = []
            for i, x in enumerate(items):
                out.append(fn(x))
                if on_done is not None:
                    on_done(i + 1, total)
            return out
        from distributed import as_completed

        # pure=False: two equal inputs are two tasks (no result cache keyed on them)
        futures = self._client.map(fn, list(items), pure=False)
        for i, _ in enumerate(as_completed(futures)):
            if on_done is not None:
                on_done(i + 1, total)
        results: list[Any] = self._client.gather(futures)
        return results
