"""A simulated account that outlives the daemon process: ``SimCloud`` kept in a file.

Owns: ``OffsetClock`` (the wall clock shifted into the market's span:
simulated time passes at the real rate, from a start the file remembers),
``PersistentSimCloud`` (a ``SimCloud`` whose state is written to a file after
every provider call, atomically) and ``load_state`` (open an account's file to
inspect it).

Why: a real cloud keeps running when the daemon dies. With the account in a
file, ``spotfolio daemon --provider sim`` can be killed with SIGKILL at any
point and started again on the same store and the same account: what a call
completed is there (the file is replaced only after the call), and a call cut
short never happened, as with a request lost in flight. That is what the
cross-process crash tests check (no double launch, no orphan). Used when the
daemon config sets ``sim.state_file``.

The file is JSON with a format name and version (``markets.sim.codec``); an
older file (a pickle) or a foreign one is refused with an ``InputError``
naming it, never read as something else.

Must not: decide anything, or be read by anything but the simulation.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from markets.clock import Clock, SystemClock, ensure_utc
from markets.cloud_fleet import ActionResult, Instance, LaunchRequest, Notice, TerminateRequest
from markets.errors import InputError
from markets.protocols import HistorySource, PriceSource
from markets.sim.cloud import SimCloud, SimOptions
from markets.sim.codec import AccountFile, encode, read_account, restore

__all__ = ["OffsetClock", "PersistentSimCloud", "load_state"]

R = TypeVar("R")


class OffsetClock:
    """``base`` shifted by ``offset_s`` seconds (monotonic time unchanged)."""

    def __init__(self, offset_s: float, base: Clock | None = None) -> None:
        self.offset_s = offset_s
        self._base = base or SystemClock()

    @classmethod
    def starting_at(cls, start: datetime, base: Clock | None = None) -> OffsetClock:
        """A clock whose ``now()`` is ``start`` at this moment."""
        b = base or SystemClock()
        return cls((ensure_utc(start) - b.now()).total_seconds(), b)

    def now(self) -> datetime:
        return self._base.now() + timedelta(seconds=self.offset_s)

    def monotonic(self) -> float:
        return self._base.monotonic()


def load_state(
    market: PriceSource, path: str | Path, clock: Clock | None = None
) -> tuple[SimCloud, OffsetClock]:
    """The account in ``path`` (which must exist) over ``market``; ``clock``
    is the base the account's offset clock shifts (default: the system clock)."""
    p = Path(path)
    doc = read_account(p.read_bytes(), str(p))
    clk = OffsetClock(doc.offset_s, clock)
    cloud = SimCloud(market, clk, doc.state.options)
    try:
        restore(cloud, doc.state)
    except ValueError as e:
        raise InputError(str(p), "state", "a consistent simulated account", got=str(e)) from e
    return cloud, clk


class PersistentSimCloud:
    """A ``Provider``: ``SimCloud`` calls, each followed by saving the account.

    Calls are serialized (the daemon's jobs run on several threads).
    ``latency_s``: each mutating call takes this long, in wall-clock time, half
    before the cloud acts and half for the answer to come back (a real
    ``CreateFleet`` takes ~0.1-1 s): a process killed in the second half
    leaves instances its store has not heard of, the case recovery is for."""

    name = "sim"

    def __init__(
        self,
        cloud: SimCloud,
        path: Path,
        offset_s: float,
        latency_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cloud = cloud
        self.path = path
        self.offset_s = offset_s
        self.latency_s = latency_s
        self._sleep = sleep
        self._lock = threading.Lock()

    @property
    def clock(self) -> Clock:
        """The account's clock (the daemon runs on it too)."""
        return self.cloud.clock

    @classmethod
    def open(
        cls,
        market: HistorySource,
        path: str | Path,
        options: SimOptions,
        start: datetime | None = None,
        base: Clock | None = None,
        latency_s: float = 0.0,
    ) -> tuple[PersistentSimCloud, OffsetClock]:
        """The account in ``path``, or a new one whose simulated time starts at
        ``start`` (default: the market's first hour). Returns it and its clock,
        which the daemon must use too."""
        p = Path(path)
        if p.exists():
            cloud, clock = load_state(market, p, base)
        else:
            clock = OffsetClock.starting_at(start or market.span()[0], base)
            cloud = SimCloud(market, clock, options)
        out = cls(cloud, p, clock.offset_s, latency_s)
        with out._lock:
            out._save()
        return out, clock

    def _save(self) -> None:
        doc = AccountFile(offset_s=self.offset_s, state=encode(self.cloud))
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        tmp.write_text(doc.model_dump_json())
        os.replace(tmp, self.path)  # atomic: a kill leaves the old file or the new one

    def _call(self, fn: Callable[[], R], *, mutating: bool = False) -> R:
        half = self.latency_s / 2 if mutating else 0.0
        with self._lock:
            if half:
                self._sleep(half)  # the request on its way
            try:
                return fn()
            finally:
                self._save()  # faults and refusals change the account too
                if half:
                    self._sleep(half)  # the answer on its way back

    def launch(self, request: LaunchRequest) -> ActionResult:
        return self._call(lambda: self.cloud.launch(request), mutating=True)

    def terminate(self, request: TerminateRequest) -> ActionResult:
        return self._call(lambda: self.cloud.terminate(request), mutating=True)

    def list_fleet(self, owner: str) -> Sequence[Instance]:
        return self._call(lambda: self.cloud.list_fleet(owner))

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        return self._call(lambda: self.cloud.poll_notices(max_notices))

    def ack_notice(self, notice: Notice) -> None:
        self._call(lambda: self.cloud.ack_notice(notice))
