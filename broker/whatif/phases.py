"""Phase timings of one run: CPU seconds, wall seconds and peak memory per phase.

``PhaseClock`` measures named phases of the caller's own process (``time``,
``resource.getrusage``: its CPU and that of the children it waited for, the
solver's processes) and hands back plain values (``Phase``, a dict for the
``machinery`` block, ``lines`` for a table). A phase entered inside another
counts to itself only: the outer one's figures exclude it. It owns measuring
only: it must not decide, price or print.
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


def cpu_s() -> float:
    """CPU seconds of this process and of the children it waited for (user + system)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


class PhaseClock:
    """Phases in the order they first ran; a phase run twice adds to its first entry."""

    def __init__(self) -> None:
        self._phases: dict[str, Phase] = {}
        self._order: dict[str, None] = {}  # names in the order their phases began
        self._cpu0 = cpu_s()
        self._wall0 = time.perf_counter()
        # per open phase: CPU and wall seconds spent in phases nested inside it
        self._inner: list[list[float]] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._order.setdefault(name, None)
        cpu0, wall0 = cpu_s(), time.perf_counter()
        self._inner.append([0.0, 0.0])
        try:
            yield
        finally:
            cpu_all = cpu_s() - cpu0
            wall_all = time.perf_counter() - wall0
            inner_cpu, inner_wall = self._inner.pop()
            if self._inner:
                self._inner[-1][0] += cpu_all
                self._inner[-1][1] += wall_all
            cpu, wall = cpu_all - inner_cpu, wall_all - inner_wall
            before = self._phases.get(name)
            if before is not None:
                cpu += before.cpu_s
                wall += before.wall_s
            self._phases[name] = Phase(name, max(cpu, 0.0), max(wall, 0.0), peak_rss_mib())

    @property
    def phases(self) -> tuple[Phase, ...]:
        return tuple(self._phases[n] for n in self._order if n in self._phases)

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
                "cpu_s": round(max(cpu_s() - self._cpu0, 0.0), 4),
                "wall_s": round(max(time.perf_counter() - self._wall0, 0.0), 4),
                "peak_rss_mib": round(peak_rss_mib(), 1),
            },
        }

    def lines(self) -> list[str]:
        """The phases as a fixed-width table, the total last."""
        doc = self.as_dict()
        rows = [(p.name, p.cpu_s, p.wall_s, p.peak_rss_mib) for p in self.phases]
        total = doc["total"]
        assert isinstance(total, dict)
        rows.append(("total", total["cpu_s"], total["wall_s"], total["peak_rss_mib"]))
        width = max(len(r[0]) for r in rows)
        head = f"{'phase':<{width}}  {'CPU s':>8}  {'wall s':>8}  {'peak MiB':>9}"
        return [head] + [f"{n:<{width}}  {c:>8.2f}  {w:>8.2f}  {m:>9.1f}" for n, c, w, m in rows]
