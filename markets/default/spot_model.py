"""The default market's seeded spot model: drawn parameters and generated paths.

Owns: ``SpotModel`` (every catalog pool's drawn parameters and, lazily, its
zone's capacity spells, revocation events and its hourly spot prices),
``ZoneModel``, ``PoolModel`` and ``ZonePath``. Everything follows from
``seed`` and the number of hours generated; each draw has its own random
stream (seed, stream, key), so what one pool or zone gets does not depend on
which others were asked for first. Figures come from
``markets.default.calibration``.

The model, per zone and pool (time in hours since the history's origin):

- *Capacity regime* (zone): a two-state Markov process, calm <-> crunch, with
  exponential spells. During a crunch each pool of the zone is, for the whole
  spell, either short of spot capacity or not (drawn per spell with the pool's
  participation ``q``): pools of a zone go short together, and a pool is "all or
  none".
- *Revocations* (zone): bursts arrive as a Poisson process, more often during a
  crunch; each burst is several events minutes apart, each event landing on a
  pool of the zone in proportion to its hazard. A pool's event rate is its
  hazard, drawn inside its advisor-like bucket.
- *Spot price* (pool on AWS, region on GCP): on-demand x (1 - discount) x a
  mean-reverting log random walk; clipped to the 60-90 % discount band. GCP
  holds each price for 30 days.

Must not: know dates or the wall clock (``markets.default.market`` maps hours
to times), build snapshots or frames, read files or call clouds.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from markets import catalog
from markets.default.calibration import (
    BUCKET0_FLOOR_SHARE,
    BUCKET_SHARE_EDGES,
    BUCKET_WEIGHTS,
    BURST_GAP_MEAN_S,
    BURST_MEAN_EVENTS,
    CRUNCH_MEAN_HOURS_RANGE,
    CRUNCH_REVOCATION_INTENSITY,
    GCP_PRICE_HOLD_HOURS,
    PARTICIPATION_BETA,
    PARTICIPATION_FLOOR,
    PRICE_HALF_LIFE_HOURS,
    PRICE_WEEKLY_SD,
    SPOT_DISCOUNT_BETA,
    SPOT_DISCOUNT_MAX,
    SPOT_DISCOUNT_MIN,
    ZONE_SHARE_MAX,
    ZONE_SHARE_MIN,
    bucket_hazard_band,
)
from markets.errors import InputError
from markets.hazard.prior import monthly_share_to_rate
from markets.model import Pool, Provider

__all__ = ["FloatArray", "PoolModel", "SpotModel", "ZoneModel", "ZonePath"]

FloatArray = NDArray[np.float64]


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
    bucket: int  # index into default_calibration.BUCKET_LABELS
    hazard_per_hour: float  # revocation events per hour held
    participation: float  # share of zone crunches that starve this pool
    spot_discount: float  # mean discount off on-demand


@dataclass(frozen=True)
class ZonePath:
    """A zone's generated history: crunch spells, per pool the cumulative
    hours short of spot and which crunches starved it, and revocation times."""

    crunch_starts: FloatArray
    crunch_ends: FloatArray
    down_knots: dict[str, tuple[FloatArray, FloatArray]]  # pool -> (t, cumulative down hours)
    affected: dict[str, NDArray[np.bool_]]
    events: dict[str, FloatArray]  # pool -> sorted revocation times


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


class SpotModel:
    """Drawn parameters of every catalog pool, and their paths over
    ``[0, total_h)`` hours (generated on first use, then cached).

    The model always covers the whole catalog, so that a market filtered to
    some types shows the same pools' histories as the full one. ``zones`` and
    ``models`` are read-only by convention.
    """

    def __init__(self, seed: int, total_h: float) -> None:
        self.seed = seed
        self.total_h = total_h
        self._zone_pools: dict[str, list[Pool]] = {}
        for name in sorted(catalog.CATALOG):
            for provider, region, zone in catalog.zones_for(name):
                pool = Pool(provider=provider, region=region, zone=zone, instance_type=name)
                self._zone_pools.setdefault(f"{provider.value}/{zone}", []).append(pool)
        self.zones = self._draw_zones()
        self.models = {p.key: self._draw_pool(p) for ps in self._zone_pools.values() for p in ps}
        self._zone_cache: dict[str, ZonePath] = {}
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
            return self.models[pool_key]
        except KeyError:
            expected = "a pool key of the default market"
            raise InputError("pool", None, expected, got=pool_key) from None

    def zone_model(self, provider: Provider | str, zone: str) -> ZoneModel:
        return self.zones[f"{Provider(provider).value}/{zone}"]

    # --- generated paths (lazy, cached) -------------------------------------
    def _zone_path(self, zone_key: str) -> ZonePath:
        cached = self._zone_cache.get(zone_key)
        if cached is not None:
            return cached
        zm, pools = self.zones[zone_key], self._zone_pools[zone_key]
        rng = _rng(self.seed, 1, zone_key)
        starts, ends = _crunch_spells(rng, zm, self.total_h)
        knots, affected = {}, {}
        for p in pools:
            hit = rng.random(len(starts)) < self.models[p.key].participation
            affected[p.key] = hit
            knots[p.key] = _cumulative(starts, ends, hit.astype(np.float64))
        # Revocation bursts: Poisson in "intensity time" tau(t) = t + (K-1) * crunch
        # time before t, mapped back to t through the inverse of tau.
        k = CRUNCH_REVOCATION_INTENSITY
        t_knots, c_knots = _cumulative(starts, ends, np.ones(len(starts)))
        t_knots = np.append(t_knots, self.total_h)
        c_knots = np.append(c_knots, c_knots[-1])  # no crunch after the last one ends
        tau_knots = t_knots + (k - 1.0) * c_knots
        hazards = np.array([self.models[p.key].hazard_per_hour for p in pools])
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
        inside = times < self.total_h
        events = {p.key: times[inside & (owner == i)] for i, p in enumerate(pools)}
        path = ZonePath(starts, ends, knots, affected, events)
        self._zone_cache[zone_key] = path
        return path

    def pool_path(self, pool_key: str) -> tuple[ZonePath, PoolModel]:
        """The generated history of the pool's zone, and the pool's parameters."""
        m = self.pool_model(pool_key)
        return self._zone_path(f"{m.pool.provider.value}/{m.pool.zone}"), m

    def spot_prices(self, pool_key: str) -> FloatArray:
        """Hourly spot USD/hour over the generated hours ``[0, total_h)``."""
        cached = self._price_cache.get(pool_key)
        if cached is not None:
            return cached
        m = self.pool_model(pool_key)
        n = int(self.total_h)
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
