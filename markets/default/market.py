"""The embedded default market: catalog prices plus a seeded spot model, hourly.

Owns: ``open_default_market`` (registered as ``default``) and ``DefaultMarket``
(a ``HistorySource``): the span in time, snapshots (prices of the hour, 7-day
available share, a placement score from fulfilment, the model hazard), the
hourly frame and revocation event times. It lets ``spotfolio whatif`` run with
no credentials and no downloads. The stochastic model behind it is
``markets.default.spot_model``; its figures are ``markets.default.calibration``.

Must not: read files, call clouds, or decide anything (``policies``/``broker``).
Never uses the wall clock: the history starts at ``start`` (default
``DEFAULT_START``) and everything follows from ``(seed, days)``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from markets import catalog
from markets.clock import ensure_utc
from markets.default.calibration import MODEL_HAZARD_CONFIDENCE
from markets.default.spot_model import PoolModel, SpotModel, ZoneModel, ZonePath
from markets.errors import InputError
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
)
from markets.options import parse_names

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_START",
    "DefaultMarket",
    "open_default_market",
]

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
WARMUP_HOURS = 168  # history generated before ``start`` so a snapshot at start has a past
TRAILING_SHARE_HOURS = 168.0  # ``available_share`` of a snapshot: the last 7 days
PLACEMENT_WINDOW_HOURS = 24.0  # placement score looks at the last day's fulfilment
# What every snapshot of a pool shares: instance type, on-demand, 1- and
# 3-year committed prices, model hazard (``DefaultMarket._snapshot_parts``).
_Static = tuple[InstanceType, float, float | None, float | None, Hazard]


class DefaultMarket:
    """The embedded market: catalog prices plus a seeded spot model (hourly).

    ``span()`` is ``[start, start + days)``; ``snapshot(None)`` is the market at
    ``start`` (what is known before the simulated future begins).
    """

    name = "default"

    def __init__(
        self,
        *,
        seed: int = 7,
        start: datetime | None = None,
        days: int = 90,
        instance_types: tuple[str, ...] | None = None,
        regions: tuple[str, ...] | None = None,
        zones: tuple[str, ...] | None = None,
    ) -> None:
        if days < 1:
            raise InputError("--days", None, "a whole number of days >= 1", got=days)
        self.seed = seed
        # Whole hours from the origin keep the hourly grid aligned with the model.
        self.start = ensure_utc(start or DEFAULT_START).replace(minute=0, second=0, microsecond=0)
        self.days = days
        self._origin = self.start - timedelta(hours=WARMUP_HOURS)
        self._total_h = float(WARMUP_HOURS + 24 * days)
        wanted = set(instance_types) if instance_types else None
        if wanted:
            for name in wanted:
                catalog.instance_type(name)  # unknown -> InputError naming close matches
        # The model always covers the whole catalog (so a filter shows the same
        # pools' histories as the full market); ``pools()`` shows the filter.
        self._model = SpotModel(seed, self._total_h)
        self._parts: list[tuple[Pool, str, ZonePath, _Static]] | None = None
        self._pools = sorted(
            (
                m.pool
                for m in self._model.models.values()
                if not wanted or m.pool.instance_type in wanted
            ),
            key=lambda p: p.key,
        )
        # ``--market-option regions=`` / ``zones=``: only the pools there, as
        # the live and recorded markets do; a name the catalog's market does
        # not hold is the user's typo (exit 2 listing the names it does).
        for option, names, attr in (("regions", regions, "region"), ("zones", zones, "zone")):
            if names is None:
                continue
            have = {str(getattr(p, attr)) for p in self._pools}
            missing = sorted(set(names) - have)
            if missing:
                raise InputError(
                    f"--market-option {option}",
                    None,
                    f"{option} of the default market: {', '.join(sorted(have))}",
                    got=", ".join(missing),
                )
            self._pools = [p for p in self._pools if getattr(p, attr) in names]
        if not self._pools:
            raise InputError(
                "--market-option zones",
                None,
                "at least one pool of the given instance types in the given regions and zones",
            )

    # --- parameters ---------------------------------------------------------
    def pool_model(self, pool_key: str) -> PoolModel:
        """The drawn parameters of a pool."""
        return self._model.pool_model(pool_key)

    def zone_model(self, provider: Provider | str, zone: str) -> ZoneModel:
        return self._model.zone_model(provider, zone)

    def expected_available_share(self, pool_key: str) -> float:
        """Long-run share of time spot can be had in the pool: 1 - crunch share x q."""
        m = self.pool_model(pool_key)
        zm = self.zone_model(m.pool.provider, m.pool.zone)
        return 1.0 - (1.0 - zm.calm_share) * m.participation

    @staticmethod
    def _on_demand(pool: Pool) -> float:
        return catalog.list_price(pool.provider, pool.region, pool.instance_type)

    @staticmethod
    def _committed(pool: Pool, term_years: int) -> float | None:
        return catalog.committed_price(pool.provider, pool.region, pool.instance_type, term_years)

    def _hours_since_origin(self, at: datetime) -> float:
        return (ensure_utc(at) - self._origin).total_seconds() / 3600.0

    def _check_in_span(self, at: datetime, field: str) -> float:
        t = self._hours_since_origin(at)
        if not WARMUP_HOURS <= t <= self._total_h:
            lo, hi = self.span()
            raise InputError(
                field,
                None,
                f"a time within the default market's span {lo:%Y-%m-%d %H:%M} "
                f"to {hi:%Y-%m-%d %H:%M} UTC",
                got=ensure_utc(at).isoformat(),
            )
        return t

    # --- HistorySource ------------------------------------------------------
    def span(self) -> tuple[datetime, datetime]:
        return self.start, self.start + timedelta(days=self.days)

    def pools(self) -> list[Pool]:
        return list(self._pools)

    def instance_types(self) -> list[InstanceType]:
        names = sorted({p.instance_type for p in self._pools})
        return [catalog.instance_type(n) for n in names]

    def available_share(self, pool_key: str, start: datetime, end: datetime) -> float:
        """Share of [start, end) in which spot could be had in the pool."""
        path, _ = self._model.pool_path(pool_key)
        xs, ys = path.down_knots[pool_key]
        t0, t1 = self._hours_since_origin(start), self._hours_since_origin(end)
        if t1 <= t0:
            raise InputError("end", None, "a time after start", got=ensure_utc(end).isoformat())
        down = np.interp([t0, t1], xs, ys)
        return float(1.0 - (down[1] - down[0]) / (t1 - t0))

    def revocation_events(self, pool_key: str, start: datetime, end: datetime) -> pd.DatetimeIndex:
        """Times (UTC, sub-second resolution) of revocation events in [start, end)."""
        import pandas as pd

        path, _ = self._model.pool_path(pool_key)
        ev = path.events[pool_key]
        t0, t1 = self._hours_since_origin(start), self._hours_since_origin(end)
        sel = ev[(ev >= t0) & (ev < t1)]
        return pd.DatetimeIndex(pd.Timestamp(self._origin) + pd.to_timedelta(sel, unit="h"))

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        """The market in force at ``at`` (default: ``start``): prices of the hour,
        7-day available share, placement score from the last day's fulfilment
        and the instant's availability (not from the hazard), model hazard."""
        at = ensure_utc(at or self.start)
        t = self._check_in_span(at, "--at")
        hour = min(int(t), int(self._total_h) - 1)
        rows = []
        for pool, key, path, static in self._snapshot_parts():
            xs, ys = path.down_knots[key]
            d = np.interp([t - TRAILING_SHARE_HOURS, t - PLACEMENT_WINDOW_HOURS, t], xs, ys)
            share_7d = 1.0 - (d[2] - d[0]) / TRAILING_SHARE_HOURS
            share_1d = 1.0 - (d[2] - d[1]) / PLACEMENT_WINDOW_HOURS
            i = int(np.searchsorted(path.crunch_starts, t, side="right")) - 1
            short = i >= 0 and t < path.crunch_ends[i] and bool(path.affected[key][i])
            score = 1 + round(9.0 * (0.5 * share_1d + 0.5 * (0.0 if short else 1.0)))
            instance, on_demand, c1y, c3y, hazard = static
            snap = PoolSnapshot(
                pool=pool,
                instance=instance,
                on_demand_usd_per_hour=on_demand,
                spot_usd_per_hour=float(self._model.spot_prices(key)[hour]),
                committed_1y_usd_per_hour=c1y,
                committed_3y_usd_per_hour=c3y,
                placement_score=min(10, max(1, score)),
                hazard=hazard,
                available_share=min(1.0, max(0.0, float(share_7d))),
                spot_available=not short,
                observed_at=at,
            )
            rows.append(snap)
        return MarketSnapshot(at=at, pools=tuple(rows), source=f"default(seed={self.seed})")

    def _snapshot_parts(self) -> list[tuple[Pool, str, ZonePath, _Static]]:
        """Per pool, what every snapshot of it shares (its key, generated
        history and parameters, catalog prices, model hazard), found once:
        a year's what-if takes a snapshot every 6 hours, ~1,500 of ~300
        pools, and the catalog's price look-ups were half of each."""
        if self._parts is None:
            parts = []
            for pool in self._pools:
                key = pool.key
                path, m = self._model.pool_path(key)
                static: _Static = (
                    catalog.instance_type(pool.instance_type),
                    self._on_demand(pool),
                    self._committed(pool, 1),
                    self._committed(pool, 3),
                    Hazard(
                        rate_per_hour=m.hazard_per_hour,
                        source=HazardSource.MODEL,
                        confidence=MODEL_HAZARD_CONFIDENCE,
                    ),
                )
                parts.append((pool, key, path, static))
            self._parts = parts
        return self._parts

    def hourly(self, start: datetime, hours: int) -> pd.DataFrame:
        """One row per (hour, pool), hour-major; ``start`` is floored to the hour.

        ``spot_available``: share of the hour in which spot could be had (a
        request would be fulfilled); a shortage stops new spot, it does not by
        itself take back what is held. ``revocations``: revocation events of the
        pool in the hour, what one instance held there (and replaced at once in
        the same pool) would see; the hazard is their rate per hour held.
        """
        import pandas as pd

        start = ensure_utc(start).replace(minute=0, second=0, microsecond=0)
        t0 = self._check_in_span(start, "start")
        if hours < 0 or t0 + hours > self._total_h:
            raise InputError(
                "hours",
                None,
                f"0 to {int(self._total_h - t0)} hours from {start:%Y-%m-%d %H:%M}",
                got=hours,
            )
        h0 = round(t0)
        grid = np.arange(h0, h0 + hours + 1, dtype=np.float64)
        n = len(self._pools)
        avail = np.empty((hours, n))
        revs = np.empty((hours, n), dtype=np.int64)
        spot = np.empty((hours, n))
        od = np.empty(n)
        for j, pool in enumerate(self._pools):  # a loop over pools, not rows
            path, _ = self._model.pool_path(pool.key)
            xs, ys = path.down_knots[pool.key]
            avail[:, j] = 1.0 - np.diff(np.interp(grid, xs, ys))
            revs[:, j] = np.diff(np.searchsorted(path.events[pool.key], grid))
            spot[:, j] = self._model.spot_prices(pool.key)[h0 : h0 + hours]
            od[j] = self._on_demand(pool)
        stamps = pd.date_range(start, periods=hours, freq="h", tz="UTC")
        keys = np.array([p.key for p in self._pools], dtype=object)
        return pd.DataFrame(
            {
                "hour": np.repeat(stamps, n),
                "pool_key": np.tile(keys, hours),
                "spot_usd_per_hour": spot.ravel(),
                "on_demand_usd_per_hour": np.tile(od, hours),
                "spot_available": np.clip(avail.ravel(), 0.0, 1.0),
                "revocations": revs.ravel(),
            }
        )


def open_default_market(
    *,
    seed: int = 7,
    start: datetime | None = None,
    days: int = 90,
    instance_types: tuple[str, ...] | list[str] | None = None,
    regions: object = None,
    zones: object = None,
    **_: object,
) -> DefaultMarket:
    """The embedded default market (registered as ``default``). ``regions`` /
    ``zones`` (sequences or comma-separated strings) keep only the pools
    there. Other options a composition root passes to every market (``path``,
    ...) are ignored."""
    types = tuple(instance_types) if instance_types else None
    return DefaultMarket(
        seed=seed,
        start=start,
        days=days,
        instance_types=types,
        regions=_names(regions, "regions", _REGION, "region names like us-east-1"),
        zones=_names(zones, "zones", _ZONE, "zone names like us-east-1a"),
    )


# Both clouds' names (AWS us-east-1 / us-east-1a, GCP us-central1 / us-central1-a).
_REGION = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")
_ZONE = _REGION


def _names(
    value: object, option: str, pattern: re.Pattern[str], what: str
) -> tuple[str, ...] | None:
    if value is None:
        return None
    return parse_names(value, f"--market-option {option}", pattern, what)
