"""Phase timings of one run: CPU seconds, wall seconds and peak memory per phase.

``PhaseClock`` measures named phases of the caller's own process (``time``,
``resource.getrusage``) and hands back plain values (``Phase``, a dict for the
``machinery`` block). It owns measuring only: it must not decide, price or
print, and it never reads other processes.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Phase:
    """One measured phase: seconds of CPU and wall, peak RSS at its end (MiB)."""

    name: str
    cpu_s: float
    wall_s: float
    peak_rss_mib: float


def peak_rss_mib() -> float:
    """The process's peak resident set so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024.0 * 1024.0) if sys.platform == "darwin" else rss / 1024.0


class PhaseClock:
    """Phases in the order they ran; a phase run twice adds to its first entry."""

    def __init__(self) -> None:
        self._phases: dict[str, Phase] = {}
        self._cpu0 = time.process_time()
        self._wall0 = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            cpu = time.process_time() - cpu0
            wall = time.perf_counter() - wall0
            before = self._phases.get(name)
            if before is not None:
                cpu += before.cpu_s
                wall += before.wall_s
            self._phases[name] = Phase(name, max(cpu, 0.0), max(wall, 0.0), peak_rss_mib())

    @property
    def phases(self) -> tuple[Phase, ...]:
        return tuple(self._phases.values())

    def as_dict(self) -> dict[str, object]:
        """``{"phases": {name: {cpu_s, wall_s, peak_rss_mib}}, "total": {...}}``."""
        return {
            "phases": {
                p.name: {
                    "cpu_s": round(p.cpu_s, 4),
                    "wall_s": round(p.wall_s, 4),
                    "peak_rss_mib": round(p.peak_rss_mib, 1),
                }
                for p in self.phases
            },
            "total": {
                "cpu_s": round(max(time.process_time() - self._cpu0, 0.0), 4),
                "wall_s": round(max(time.perf_counter() - self._wall0, 0.0), 4),
                "peak_rss_mib": round(peak_rss_mib(), 1),
            },
        }
