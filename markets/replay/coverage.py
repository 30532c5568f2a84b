"""Where recorded prices and availability overlap, and what to replay by default.

Owns: ``coverage(pools, span_ns) -> Coverage``: per pool, the times its own
spot price is known (change points with a value, each until the next one or
the end of its recording) intersected with the times a trace observed it;
their union over pools; the window a replay should use by default; and the
sentences that say so.

The default window, in order:

1. the longest stretch where some pool has both a recorded spot price and a
   trace (what a what-if can bill on real prices *and* real availability);
2. else, when the prices and traces on hand never overlap (AWS's 2021 price
   history beside the 2022-23 traces), the longest stretch the traces cover:
   availability is the main uncertainty (spot prices have moved slowly since
   2017), and spot prices there come from the replay's
   fallback chain (the same type's discount elsewhere, else the advisor's
   savings; ``markets.replay`` join rules);
3. else (no traces) the whole span of recorded prices.

Must not: build pools or snapshots (``build``, ``market``), or read files.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from markets.replay.build import PoolData
from markets.replay.series import NEVER, StepSeries

__all__ = ["Coverage", "SourceSpan", "coverage"]

Interval = tuple[int, int]


def _merge(intervals: Sequence[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _intersect(xs: Sequence[Interval], ys: Sequence[Interval]) -> list[Interval]:
    out = []
    for a, b in xs:
        for c, d in ys:
            lo, hi = max(a, c), min(b, d)
            if hi > lo:
                out.append((lo, hi))
    return _merge(out)


def _known(series: StepSeries, end_ns: int) -> dict[str, list[Interval]]:
    """Per label, the intervals the series has a value (NaN: not known)."""
    if not len(series):
        return {}
    nxt = np.r_[series.t_ns[1:], end_ns]
    until = np.where(series.until_ns == NEVER, end_ns, series.until_ns)
    ends = np.minimum(nxt, until)
    out: dict[str, list[Interval]] = defaultdict(list)
    for i in np.flatnonzero(np.isfinite(series.values)):
        out[series.labels[int(series.codes[i])]].append((int(series.t_ns[i]), int(ends[i])))
    return {k: _merge(v) for k, v in out.items()}


def _dt(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _day(ns: int) -> str:
    return f"{_dt(ns):%Y-%m-%d}"


@dataclass(frozen=True)
class SourceSpan:
    """One source of prices (a spot series label) or of availability (a
    provider's traces), its extent and the pools it reaches."""

    source: str
    provider: str
    start: datetime
    end: datetime
    pools: int


@dataclass(frozen=True)
class Coverage:
    """What the recorded data covers and the window a replay uses by default.

    ``how`` is ``overlap``, ``availability`` (no overlap: the traces' span)
    or ``prices`` (no traces); ``window_sources`` names the price and trace
    sources inside the window."""

    prices: tuple[SourceSpan, ...]
    availability: tuple[SourceSpan, ...]
    window: tuple[datetime, datetime]
    how: str
    window_pools: int
    window_sources: tuple[str, ...]
    disjoint: tuple[str, ...]  # one sentence per price source no trace overlaps

    @property
    def hours(self) -> int:
        return int((self.window[1] - self.window[0]).total_seconds() // 3600)

    def replay(self, days: int) -> tuple[datetime, int, list[str]]:
        """The default start (the window's first whole hour) and days (``days``,
        at most the window's whole days, at least 1), with the lines saying
        which span and sources, and what was shortened."""
        a, b = self.window
        start = a.replace(minute=0, second=0, microsecond=0)
        if start < a:
            start += timedelta(hours=1)
        whole = max(1, int((b - start).total_seconds() // 86400))
        used = min(days, whole)
        lines = self.lines()
        if used < days:
            lines.append(f"--days {days}: the window holds {used} whole day(s); replaying {used}")
        if (b - start).total_seconds() < used * 86400:
            lines.append("hours past the window are billed at the planned prices, spot held")
        return start, used, lines

    def lines(self) -> list[str]:
        a, b = self.window
        span = f"{a:%Y-%m-%d %H:%M} .. {b:%Y-%m-%d %H:%M} UTC ({self.hours / 24:.1f} days)"
        used = ", ".join(self.window_sources)
        if self.how == "overlap":
            head = (
                f"replaying {span}: recorded spot prices and availability overlap there "
                f"for {self.window_pools} pool(s) ({used})"
            )
        elif self.how == "availability":
            head = (
                f"prices and availability on hand do not overlap: replaying the traces' "
                f"{span} ({used}); spot prices there come from the fallback chain "
                "(the same type's discount elsewhere, else the spot advisor's savings)"
            )
        else:
            head = f"no availability traces: replaying the recorded prices' {span} ({used})"
        return [head, *self.disjoint]


def coverage(pools: Sequence[PoolData], span_ns: tuple[int, int]) -> Coverage:
    """See the module docstring."""
    end = span_ns[1]
    price_of: dict[str, list[Interval]] = defaultdict(list)
    price_pools: dict[str, set[str]] = defaultdict(set)
    price_provider: dict[str, str] = {}
    trace_of: dict[str, list[Interval]] = defaultdict(list)
    trace_pools: dict[str, set[str]] = defaultdict(set)
    both: list[Interval] = []
    per_pool: list[tuple[PoolData, list[Interval], list[Interval]]] = []
    for p in pools:
        prov = p.pool.provider.value
        spot = _known(p.spot, end)
        traced = _merge([(tr.start_ns, tr.end_ns) for tr in p.traces])
        for label, ivs in spot.items():
            price_of[label] += ivs
            price_pools[label].add(p.key)
            price_provider[label] = prov
        if traced:
            trace_of[prov] += traced
            trace_pools[prov].add(p.key)
        mine = _merge([iv for ivs in spot.values() for iv in ivs])
        common = _intersect(mine, traced)
        both += common
        per_pool.append((p, common, traced))
    merged_prices = {k: _merge(v) for k, v in price_of.items()}
    merged_traces = {k: _merge(v) for k, v in trace_of.items()}
    prices = tuple(
        SourceSpan(k, price_provider[k], _dt(v[0][0]), _dt(v[-1][1]), len(price_pools[k]))
        for k, v in sorted(merged_prices.items())
    )
    availability = tuple(
        SourceSpan(f"{k} traces", k, _dt(v[0][0]), _dt(v[-1][1]), len(trace_pools[k]))
        for k, v in sorted(merged_traces.items())
    )
    disjoint = tuple(
        f"{k} spot prices ({_day(v[0][0])} .. {_day(v[-1][1])}) and the "
        f"{price_provider[k]} availability traces ({_day(t[0][0])} .. {_day(t[-1][1])}) "
        "do not overlap"
        for k, v in sorted(merged_prices.items())
        if (t := merged_traces.get(price_provider[k])) and not _intersect(v, t)
    )
    overlap = _merge(both)
    all_traces = _merge([iv for v in merged_traces.values() for iv in v])
    all_prices = _merge([iv for v in merged_prices.values() for iv in v])
    if overlap:
        how, window = "overlap", _longest(overlap)
    elif all_traces:
        how, window = "availability", _longest(all_traces)
    elif all_prices:
        how, window = "prices", (all_prices[0][0], all_prices[-1][1])
    else:
        how, window = "prices", span_ns
    sources: set[str] = set()
    inside = 0
    for p, common, traced in per_pool:
        hit = common if how == "overlap" else traced if how == "availability" else []
        if how == "prices":
            hit = _intersect(
                _merge([iv for v in _known(p.spot, end).values() for iv in v]), [window]
            )
        if not _intersect(hit, [window]):
            continue
        inside += 1
        if how != "availability":
            sources |= {k for k, v in _known(p.spot, end).items() if _intersect(v, [window])}
        if p.traces and how != "prices":
            sources.add(f"{p.pool.provider.value} traces")
    return Coverage(
        prices=prices,
        availability=availability,
        window=(_dt(window[0]), _dt(window[1])),
        how=how,
        window_pools=inside,
        window_sources=tuple(sorted(sources)),
        disjoint=disjoint,
    )


def _longest(intervals: list[Interval]) -> Interval:
    return max(intervals, key=lambda iv: (iv[1] - iv[0], -iv[0]))
