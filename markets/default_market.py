"""The embedded default market: a seeded, calibrated spot model over the catalog.

Owns: ``open_default_market`` (registered as ``default``), ``DefaultMarket`` (a
``HistorySource``) and the stochastic spot model behind it: prices, zone
capacity regimes, revocation bursts, advisor-like interruption buckets. It lets
``spotfolio whatif`` run with no credentials and no downloads.

Must not: read files, call clouds, or decide anything (``policies``/``broker``).
Never uses the wall clock: the history starts at ``start`` (default
``DEFAULT_START``) and everything follows from ``(seed, days)``.

The model, per zone and pool (time in hours since the history's origin):

- *Capacity regime* (zone): a two-state Markov process, calm <-> crunch, with
  exponential spells. During a crunch each pool of the zone is, for the whole
  spell, either short of spot capacity or not (drawn per spell with the pool's
  participation ``q``): pools of a zone go short together, and a pool is "all or
  none". ``spot_available`` is the share of each hour spot could be had. The
  placement score follows it (last day's share and the instant), not the hazard.
- *Revocations* (zone): bursts arrive as a Poisson process, more often during a
  crunch; each burst is several events minutes apart, each event landing on a
  pool of the zone in proportion to its hazard. A pool's event rate is its
  hazard, drawn inside its advisor-like bucket. ``revocation_events`` gives the
  event times (sub-hour); ``hourly`` counts them per hour.
- *Spot price* (pool on AWS, region on GCP): on-demand x (1 - discount) x a
  mean-reverting log random walk; clipped to the 60-90 % discount band. GCP
  holds each price for 30 days.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from markets import catalog
from markets.clock import ensure_utc
from markets.errors import InputError
from markets.hazard_prior import monthly_share_to_rate
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_START",
    "DefaultMarket",
    "PoolModel",
    "ZoneModel",
    "bucket_hazard_band",
    "open_default_market",
]

FloatArray = np.ndarray[Any, np.dtype[np.float64]]

# --- Calibration: every figure with its source ------------------------------
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
WARMUP_HOURS = 168  # history generated before ``start`` so a snapshot at start has a past
TRAILING_SHARE_HOURS = 168.0  # ``available_share`` of a snapshot: the last 7 days
PLACEMENT_WINDOW_HOURS = 24.0  # placement score looks at the last day's fulfilment

# economics.md section 7 / shared/data/README.md: "Spot discounts 60-90 % off".
SPOT_DISCOUNT_MIN, SPOT_DISCOUNT_MAX = 0.60, 0.90
# A pool's mean discount is MIN + (MAX - MIN) * Beta(2, 3) (mean 72 %): skewed to
# the small end because GPU spot is scarce; the AWS Spot Instance Advisor
# snapshot of 2025-06-28 (shared/data) gives a median saving of 58 % for this
# catalog's AWS types in us-east-1/us-west-2/eu-west-1.
SPOT_DISCOUNT_BETA = (2.0, 3.0)
# "Since late 2017 AWS spot prices move slowly (a few % a week)" (economics.md
# section 7): sd of the weekly log change; mean reversion keeps months bounded.
PRICE_WEEKLY_SD = 0.025
PRICE_HALF_LIFE_HOURS = 720.0  # assumption: a month; gives a stationary sd of 4.6 %
# GCP Spot VM pricing docs: Spot prices "can change up to once every 30 days",
# and are set per region, not per zone.
GCP_PRICE_HOLD_HOURS = 720

# economics.md section 7: "the share of time spot could be held ranged from 0.17
# to 0.91 across nine zones" (45-day V100 trace). Zones draw their calm share
# stratified over this range, so every market spans it.
ZONE_SHARE_MIN, ZONE_SHARE_MAX = 0.17, 0.91
# Mean crunch spell, log-uniform (hours). Assumption loosely fitted to the
# 1-node V100/K80 availability traces in shared/data (2022-10, 2023-02): 2-30
# losses per available day, outages of minutes to hours.
CRUNCH_MEAN_HOURS_RANGE = (1.0, 6.0)
# Share of a zone's crunches that also starve a pool: 0.7 + 0.3 * Beta(3, 1)
# (mean 0.93): pools of a zone move together (>94 % "all or none" for 4- and
# 16-node clusters, economics.md section 7).
PARTICIPATION_FLOOR, PARTICIPATION_BETA = 0.7, (3.0, 1.0)

# AWS Spot Instance Advisor buckets (economics.md section 7; shared/data/aws-spot-
# advisor "ranges"): share of instances reclaimed over a month, <5 %, 5-10 %,
# 10-15 %, 15-20 %, >20 %, read as a constant hazard -ln(1 - share) / 730 h as
# markets.hazard_prior does. The top bucket is open: its hazard is drawn
# log-uniform up to one a day (assumption; the 1-node GPU traces in shared/data
# lose spot 2-9 times per available day, counting capacity loss, which this
# model keeps in ``spot_available``).
BUCKET_SHARE_EDGES = (0.0, 0.05, 0.10, 0.15, 0.20)
BUCKET_LABELS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")
TOP_BUCKET_MAX_PER_HOUR = 1.0 / 24.0
BUCKET0_FLOOR_SHARE = 0.005  # assumption: no pool is revocation-free
# Advisor snapshot 2025-06-28, this catalog's AWS types in us-east-1, us-west-2
# and eu-west-1: 3, 2, 7, 3 and 45 of 60 (type, region) pairs per bucket.
BUCKET_WEIGHTS = (0.05, 0.05, 0.10, 0.05, 0.75)
# "83-97 % [of preemptions] are followed by another in the same zone within 5
# minutes" (SkyServe, EuroSys 2025; economics.md section 7). A burst of
# Geometric(mean 10) events leaves 1 in 10 without a follower: ~90 %.
CLUSTER_WINDOW_S = 300.0
BURST_MEAN_EVENTS = 10.0
BURST_GAP_MEAN_S = 40.0  # exponential gaps: P(gap > 300 s) = e^-7.5, negligible
# Assumption: bursts are 4x as likely while the zone is short of capacity
# (revocations and unavailability come from the same shortage).
CRUNCH_REVOCATION_INTENSITY = 4.0
# The hazard is the model's own parameter, not an observation: a mid confidence.
MODEL_HAZARD_CONFIDENCE = 0.5


@dataclass(frozen=True)
class ZoneModel:
    """A zone's capacity regime parameters."""

    provider: Provider
    region: str
    zone: str
    calm_share: float  # long-run share of time not in a crunch
    crunch_mean_hours: float
    calm_mean_hours: float


@dataclass(frozen=True)
class PoolModel:
    """A pool's drawn parameters (the calibration a test checks against)."""

    pool: Pool
    bucket: int  # index into BUCKET_LABELS
    hazard_per_hour: float  # revocation events per hour held
    participation: float  # share of zone crunches that starve this pool
    spot_discount: float  # mean discount off on-demand


@dataclass(frozen=True)
class _ZonePath:
    crunch_starts: FloatArray
    crunch_ends: FloatArray
    down_knots: dict[str, tuple[FloatArray, FloatArray]]  # pool -> (t, cumulative down hours)
    affected: dict[str, np.ndarray[Any, np.dtype[np.bool_]]]
    events: dict[str, FloatArray]  # pool -> sorted revocation times


def bucket_hazard_band(bucket: int) -> tuple[float, float]:
    """Hazard per hour held at the edges of an advisor-like bucket (0-4)."""
    rates = [monthly_share_to_rate(s) for s in BUCKET_SHARE_EDGES] + [TOP_BUCKET_MAX_PER_HOUR]
    return rates[bucket], rates[bucket + 1]


def _rng(seed: int, stream: int, key: str) -> np.random.Generator:
    return np.random.default_rng([seed, stream, zlib.crc32(key.encode())])


def _ou_log_path(rng: np.random.Generator, n: int) -> FloatArray:
    """Hourly AR(1) log deviations with weekly change sd PRICE_WEEKLY_SD.

    x_t = phi x_{t-1} + e_t has the closed form x_t = phi^t (x_0 + sum_s e_s
    phi^-s), evaluated by cumsum in chunks short enough for phi^-s to stay small.
    """
    phi = 0.5 ** (1.0 / PRICE_HALF_LIFE_HOURS)
    # Var(x_{t+168} - x_t) = 2 Var(x) (1 - phi^168) = PRICE_WEEKLY_SD^2
    var_x = PRICE_WEEKLY_SD**2 / (2.0 * (1.0 - phi**168))
    sigma = np.sqrt(var_x * (1.0 - phi * phi))
    eps = rng.standard_normal(n) * sigma
    out = np.empty(n)
    x = rng.standard_normal() * np.sqrt(var_x)
    chunk = 1024  # phi^-1024 = 2.7 at a 720 h half-life
    for a in range(0, n, chunk):
        e = eps[a : a + chunk]
        pw = phi ** np.arange(1, len(e) + 1)
        out[a : a + len(e)] = pw * (x + np.cumsum(e / pw))
        x = float(out[a + len(e) - 1])
    return out


def _crunch_spells(
    rng: np.random.Generator, zm: ZoneModel, total_h: float
) -> tuple[FloatArray, FloatArray]:
    """Alternating exponential calm/crunch spells covering [0, total_h)."""
    in_crunch = rng.random() > zm.calm_share  # start from the stationary law
    n = int(total_h / (zm.calm_mean_hours + zm.crunch_mean_hours) * 1.5) + 16
    while True:
        calm = rng.exponential(zm.calm_mean_hours, n)
        crunch = rng.exponential(zm.crunch_mean_hours, n)
        seq = np.column_stack([crunch, calm] if in_crunch else [calm, crunch]).ravel()
        bounds = np.concatenate([[0.0], np.cumsum(seq)])
        if bounds[-1] >= total_h:
            break
        n *= 2
    starts, ends = (bounds[0:-1:2], bounds[1::2]) if in_crunch else (bounds[1:-1:2], bounds[2::2])
    keep = starts < total_h
    return starts[keep], np.minimum(ends[keep], total_h)


def _cumulative(
    starts: FloatArray, ends: FloatArray, weight: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Knots of t -> sum of weight_i * |[s_i, e_i) & [0, t)|, piecewise linear."""
    before = np.concatenate([[0.0], np.cumsum(weight * (ends - starts))])
    xs = np.column_stack([starts, ends]).ravel()
    ys = np.column_stack([before[:-1], before[1:]]).ravel()
    return np.concatenate([[0.0], xs]), np.concatenate([[0.0], ys])


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
        self._zone_pools: dict[str, list[Pool]] = {}
        for name in sorted(catalog.CATALOG):
            for provider, region, zone in catalog.zones_for(name):
                pool = Pool(provider=provider, region=region, zone=zone, instance_type=name)
                self._zone_pools.setdefault(f"{provider.value}/{zone}", []).append(pool)
        self._zones = self._draw_zones()
        self._models = {p.key: self._draw_pool(p) for ps in self._zone_pools.values() for p in ps}
        self._pools = sorted(
            (m.pool for m in self._models.values() if not wanted or m.pool.instance_type in wanted),
            key=lambda p: p.key,
        )
        self._zone_cache: dict[str, _ZonePath] = {}
        self._price_cache: dict[str, FloatArray] = {}

    # --- parameters ---------------------------------------------------------
    def _draw_zones(self) -> dict[str, ZoneModel]:
        keys = sorted(self._zone_pools)
        rng = _rng(self.seed, 0, "zones")
        # Stratified: one share per equal slice of [MIN, MAX], shuffled over zones.
        edges = np.linspace(ZONE_SHARE_MIN, ZONE_SHARE_MAX, len(keys) + 1)
        shares = rng.permutation(edges[:-1] + rng.random(len(keys)) * np.diff(edges))
        lo, hi = np.log(CRUNCH_MEAN_HOURS_RANGE)
        out = {}
        for key, share in zip(keys, shares, strict=True):
            pool = self._zone_pools[key][0]
            crunch_h = float(np.exp(rng.uniform(lo, hi)))
            out[key] = ZoneModel(
                provider=pool.provider,
                region=pool.region,
                zone=pool.zone,
                calm_share=float(share),
                crunch_mean_hours=crunch_h,
                calm_mean_hours=crunch_h * float(share) / (1.0 - float(share)),
            )
        return out

    def _draw_pool(self, pool: Pool) -> PoolModel:
        rng = _rng(self.seed, 2, pool.key)
        bucket = int(rng.choice(len(BUCKET_WEIGHTS), p=BUCKET_WEIGHTS))
        lo, hi = bucket_hazard_band(bucket)
        if bucket == len(BUCKET_WEIGHTS) - 1:  # open top bucket: log-uniform
            hazard = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        else:
            share = rng.uniform(
                max(BUCKET_SHARE_EDGES[bucket], BUCKET0_FLOOR_SHARE), BUCKET_SHARE_EDGES[bucket + 1]
            )
            hazard = monthly_share_to_rate(float(share))
        q = PARTICIPATION_FLOOR + (1.0 - PARTICIPATION_FLOOR) * float(rng.beta(*PARTICIPATION_BETA))
        disc_rng = _rng(self.seed, 3, self._price_key(pool))
        disc = SPOT_DISCOUNT_MIN + (SPOT_DISCOUNT_MAX - SPOT_DISCOUNT_MIN) * float(
            disc_rng.beta(*SPOT_DISCOUNT_BETA)
        )
        return PoolModel(pool, bucket, hazard, q, disc)

    @staticmethod
    def _price_key(pool: Pool) -> str:
        if pool.provider is Provider.GCP:  # one spot price per region on GCP
            return f"gcp/{pool.region}/{pool.instance_type}"
        return pool.key

    def pool_model(self, pool_key: str) -> PoolModel:
        """The drawn parameters of a pool."""
        try:
            return self._models[pool_key]
        except KeyError:
            expected = "a pool key of the default market"
            raise InputError("pool", None, expected, got=pool_key) from None

    def zone_model(self, provider: Provider | str, zone: str) -> ZoneModel:
        return self._zones[f"{Provider(provider).value}/{zone}"]

    def expected_available_share(self, pool_key: str) -> float:
        """Long-run share of time spot can be had in the pool: 1 - crunch share x q."""
        m = self.pool_model(pool_key)
        zm = self.zone_model(m.pool.provider, m.pool.zone)
        return 1.0 - (1.0 - zm.calm_share) * m.participation

    # --- generated paths (lazy, cached) -------------------------------------
    def _zone_path(self, zone_key: str) -> _ZonePath:
        cached = self._zone_cache.get(zone_key)
        if cached is not None:
            return cached
        zm, pools = self._zones[zone_key], self._zone_pools[zone_key]
        rng = _rng(self.seed, 1, zone_key)
        starts, ends = _crunch_spells(rng, zm, self._total_h)
        knots, affected = {}, {}
        for p in pools:
            hit = rng.random(len(starts)) < self._models[p.key].participation
            affected[p.key] = hit
            knots[p.key] = _cumulative(starts, ends, hit.astype(np.float64))
        # Revocation bursts: Poisson in "intensity time" tau(t) = t + (K-1) * crunch
        # time before t, mapped back to t through the inverse of tau.
        k = CRUNCH_REVOCATION_INTENSITY
        t_knots, c_knots = _cumulative(starts, ends, np.ones(len(starts)))
        t_knots = np.append(t_knots, self._total_h)
        c_knots = np.append(c_knots, c_knots[-1])  # no crunch after the last one ends
        tau_knots = t_knots + (k - 1.0) * c_knots
        hazards = np.array([self._models[p.key].hazard_per_hour for p in pools])
        crunch_share = 1.0 - zm.calm_share
        base = hazards.sum() / (BURST_MEAN_EVENTS * (1.0 + (k - 1.0) * crunch_share))
        n_bursts = int(rng.poisson(base * tau_knots[-1]))
        burst_t = np.interp(np.sort(rng.uniform(0.0, tau_knots[-1], n_bursts)), tau_knots, t_knots)
        sizes = rng.geometric(1.0 / BURST_MEAN_EVENTS, n_bursts)
        gaps = rng.exponential(BURST_GAP_MEAN_S / 3600.0, int(sizes.sum()))
        first = np.cumsum(sizes) - sizes  # index of each burst's first event
        gaps[first] = 0.0
        run = np.cumsum(gaps)
        times = np.repeat(burst_t, sizes) + run - np.repeat(run[first], sizes)
        owner = rng.choice(len(pools), size=len(times), p=hazards / hazards.sum())
        order = np.argsort(times, kind="stable")
        times, owner = times[order], owner[order]
        inside = times < self._total_h
        events = {p.key: times[inside & (owner == i)] for i, p in enumerate(pools)}
        path = _ZonePath(starts, ends, knots, affected, events)
        self._zone_cache[zone_key] = path
        return path

    def _pool_path(self, pool_key: str) -> tuple[_ZonePath, PoolModel]:
        m = self.pool_model(pool_key)
        return self._zone_path(f"{m.pool.provider.value}/{m.pool.zone}"), m

    def _spot_prices(self, pool_key: str) -> FloatArray:
        """Hourly spot USD/hour over the generated range [origin, end)."""
        cached = self._price_cache.get(pool_key)
        if cached is not None:
            return cached
        m = self.pool_model(pool_key)
        n = int(self._total_h)
        x = _ou_log_path(_rng(self.seed, 4, self._price_key(m.pool)), n)
        if m.pool.provider is Provider.GCP:
            x = x[(np.arange(n) // GCP_PRICE_HOLD_HOURS) * GCP_PRICE_HOLD_HOURS]
        od = self._on_demand(m.pool)
        price = np.clip(
            od * (1.0 - m.spot_discount) * np.exp(x),
            od * (1.0 - SPOT_DISCOUNT_MAX),
            od * (1.0 - SPOT_DISCOUNT_MIN),
        )
        self._price_cache[pool_key] = price
        return price

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
        path, _ = self._pool_path(pool_key)
        xs, ys = path.down_knots[pool_key]
        t0, t1 = self._hours_since_origin(start), self._hours_since_origin(end)
        if t1 <= t0:
            raise InputError("end", None, "a time after start", got=ensure_utc(end).isoformat())
        down = np.interp([t0, t1], xs, ys)
        return float(1.0 - (down[1] - down[0]) / (t1 - t0))

    def revocation_events(self, pool_key: str, start: datetime, end: datetime) -> pd.DatetimeIndex:
        """Times (UTC, sub-second resolution) of revocation events in [start, end)."""
        import pandas as pd

        path, _ = self._pool_path(pool_key)
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
        for pool in self._pools:
            path, m = self._pool_path(pool.key)
            xs, ys = path.down_knots[pool.key]
            d = np.interp([t - TRAILING_SHARE_HOURS, t - PLACEMENT_WINDOW_HOURS, t], xs, ys)
            share_7d = 1.0 - (d[2] - d[0]) / TRAILING_SHARE_HOURS
            share_1d = 1.0 - (d[2] - d[1]) / PLACEMENT_WINDOW_HOURS
            i = int(np.searchsorted(path.crunch_starts, t, side="right")) - 1
            short = i >= 0 and t < path.crunch_ends[i] and bool(path.affected[pool.key][i])
            score = 1 + round(9.0 * (0.5 * share_1d + 0.5 * (0.0 if short else 1.0)))
            hazard = Hazard(
                rate_per_hour=m.hazard_per_hour,
                source=HazardSource.MODEL,
                confidence=MODEL_HAZARD_CONFIDENCE,
            )
            snap = PoolSnapshot(
                pool=pool,
                instance=catalog.instance_type(pool.instance_type),
                on_demand_usd_per_hour=self._on_demand(pool),
                spot_usd_per_hour=float(self._spot_prices(pool.key)[hour]),
                committed_1y_usd_per_hour=self._committed(pool, 1),
                committed_3y_usd_per_hour=self._committed(pool, 3),
                placement_score=min(10, max(1, score)),
                hazard=hazard,
                available_share=min(1.0, max(0.0, float(share_7d))),
                spot_available=not short,
                observed_at=at,
            )
            rows.append(snap)
        return MarketSnapshot(at=at, pools=tuple(rows), source=f"default(seed={self.seed})")

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
            path, _ = self._pool_path(pool.key)
            xs, ys = path.down_knots[pool.key]
            avail[:, j] = 1.0 - np.diff(np.interp(grid, xs, ys))
            revs[:, j] = np.diff(np.searchsorted(path.events[pool.key], grid))
            spot[:, j] = self._spot_prices(pool.key)[h0 : h0 + hours]
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
    **_: object,
) -> DefaultMarket:
    """The embedded default market (registered as ``default``). Other options a
    composition root passes to every market (``path``, ...) are ignored."""
    types = tuple(instance_types) if instance_types else None
    return DefaultMarket(seed=seed, start=start, days=days, instance_types=types)
