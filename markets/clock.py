"""Injected time: the daemon, the simulator and tests share one code path.

Nothing in Spotfolio calls ``time.time()`` or ``datetime.now()`` directly; it
asks a ``Clock``. ``SystemClock`` is the real one; ``ManualClock`` is moved by
hand (tests, the simulator's accelerated time).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock", "ensure_utc"]


def ensure_utc(at: datetime) -> datetime:
    """Return ``at`` as an aware UTC datetime (naive values are taken as UTC)."""
    if at.tzinfo is None:
        return at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


@runtime_checkable
class Clock(Protocol):
    """Source of the current time and of monotonic seconds."""

    def now(self) -> datetime:
        """Current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards."""
        ...


class SystemClock:
    """The wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = ensure_utc(start or datetime(2026, 1, 1, tzinfo=UTC))
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, delta: timedelta | float) -> datetime:
        """Move forward by a timedelta or a number of seconds."""
        seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
        return self._now

    def set(self, at: datetime) -> None:
        """Jump to ``at`` (not earlier than now)."""
        at = ensure_utc(at)
        if at < self._now:
            raise ValueError("a clock does not go backwards")
        self._mono += (at - self._now).total_seconds()
        self._now = at
