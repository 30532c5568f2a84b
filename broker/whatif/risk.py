"""The risk band: Spotfolio's cost and unmet demand over sampled spot and demand.

Owns: ``RiskBand`` (P10/P50/P90 of billed cost and unmet demand, with the
samples and how they were drawn) and ``risk_band``, which draws ``scenarios``
samples of the period, seeded, and bills Spotfolio's plan on each through the
what-if's own code: the lifecycle's reaction to the sample's lost spot
(``broker.whatif.reaction``) priced by ``broker.whatif.billing.bill_reacted``,
exactly as the what-if bills a plan. No cost model of its own.

A sample, drawn from ``numpy.random.default_rng(SeedSequence([seed, STREAM, i]))``
(sample ``i`` is the same whatever the number of samples):

- **spot**: each spot pool's hazard rate is drawn from its posterior,
  ``Gamma(shape = rate * H, rate = H)`` with ``H`` the posterior's hours:
  ``observed_hours / confidence`` when the pool was watched, else the prior's
  ``DEFAULT_PRIOR_HOURS / (1 - confidence)`` (``markets.hazard.posterior``:
  ``confidence = T / (T + b0)``); ``q = 1 - exp(-rate)`` is then the chance
  that one of its spot instances is revoked in an hour. Revocations bunch
  (docs/concepts/market.md: SkyServe saw 83-97 % of preemptions followed by
  another in the same zone within 5 minutes), so they are drawn per burst
  group: a failure domain of the snapshot (its zones together, its
  ``co_share``), else one zone (``BURST_SHARE``). In each hour the group has
  a burst with chance ``b = share x min q`` over its pools, and a burst
  revokes every spot instance the plan holds in the group that hour; outside
  a burst each instance is revoked on its own with chance ``(q - b) / (1 -
  b)``. So every instance keeps its pool's chance ``q``, and a revocation is
  part of a burst with chance ``share`` in the group's calmest pool (less in
  busier ones). The instances are the plan's whole spot instances in that
  pool-hour (summed over workloads, rounded up); the hour's held share is the
  recorded one times the share not revoked, so the lifecycle sees those
  revocations as it sees the recorded ones (and its launches into the pool
  get that share). Prices stay as recorded;
- **demand**: each serving workload's demand is its forecast (the one the
  plan was made on) plus an error that keeps the forecast's band: a standard
  normal AR(1) path ``z`` with hourly correlation ``DEMAND_CORRELATION``
  (an assumption: errors persist for hours, they are not hourly noise),
  scaled so that ``z`` at the band's edge quantile lands on ``high`` above
  the point and ``low`` below it. Jobs keep their stated work.

The plan is Spotfolio's replayed plan held fixed: the samples do not re-run
the planning loop (``broker.whatif.replay``: about a solve per step), so they
measure how that plan and the lifecycle fare, not how re-plans would adapt.
The lifecycle in a sample decides on the period's first snapshot, where
the replay handed it each step's (``Reactor.on_market``): the samples keep
no step's snapshot (a year's ~1,460 of ~300 pools each).

Must not: plan, price (``billing`` does) or print.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from broker.planning.plan import Plan
from broker.scale.pool import map_paced
from broker.whatif.billing import MarketActuals, bill_reacted
from broker.whatif.desired import DesiredByHour
from broker.whatif.run import WhatIfInputs, WhatIfResult
from markets.keys import PoolKey
from markets.model import DEFAULT_PRIOR_HOURS, Hazard, MarketSnapshot, Tier
from policies.workloads.spec import WorkloadClass

__all__ = [
    "BURST_SHARE",
    "DEFAULT_SCENARIOS",
    "DEMAND_CORRELATION",
    "STREAM",
    "Band",
    "RiskBand",
    "posterior_hours",
    "risk_band",
    "sample_demand",
    "sample_held",
]

FloatArray = npt.NDArray[np.float64]
# 20 samples: each bills the default 30-day plan through the lifecycle (its
# reaction dominates) in ~2.5 s on this machine when it is quiet, ~12 s under
# a load of 12 on its two cores; 30 samples took as long as the rest of the
# default what-if under that load (360 s beside 352 s); with 20 it ran 420 s,
# 145 s of them the band (1.54x; about 1.3x on a quiet machine: 50 s on 164 s).
DEFAULT_SCENARIOS = 20
DEMAND_CORRELATION = 0.9  # assumption: an hour's forecast error carries ~90 % into the next
STREAM = 16  # the risk band's random stream, apart from any other use of the seed
# The share of a zone's revocations that come together when the market names
# no failure domain for it: the low end of SkyServe's (EuroSys 2025) 83-97 %
# of preemptions followed by another in the same zone within 5 minutes.
BURST_SHARE = 0.83
PERCENTILES = (10, 50, 90)


@dataclass(frozen=True)
class Band:
    p10: float
    p50: float
    p90: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Band:
        """The percentiles of the finite ``values`` (NaN if none is: a bill
        that could not price something, ``RiskBand.unpriced``)."""
        ok = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
        if not len(ok):
            return cls(math.nan, math.nan, math.nan)
        p10, p50, p90 = (float(x) for x in np.percentile(ok, PERCENTILES))
        return cls(p10, p50, p90)

    def to_dict(self, digits: int) -> dict[str, float | None]:
        return {
            "p10": _r(self.p10, digits),
            "p50": _r(self.p50, digits),
            "p90": _r(self.p90, digits),
        }


def _r(x: float, digits: int) -> float | None:
    return round(x, digits) if math.isfinite(x) else None


@dataclass(frozen=True)
class RiskBand:
    """P10/P50/P90 over ``scenarios`` samples drawn with ``seed`` (module docstring)."""

    scenarios: int
    seed: int
    cost_usd: Band
    unmet_unit_hours: Band
    samples_cost_usd: tuple[float, ...]
    samples_unmet_unit_hours: tuple[float, ...]
    billed_usd: float  # the what-if's own bill (recorded demand and market)
    seconds: float
    workers: int = 1  # processes the samples ran on (``risk_band``)

    @property
    def unpriced(self) -> int:
        """Samples whose bill is not a finite number (left out of the band)."""
        return sum(not math.isfinite(c) for c in self.samples_cost_usd)

    @property
    def billed_rank(self) -> float:
        """Share of the samples that cost less than the recorded bill."""
        return sum(c < self.billed_usd for c in self.samples_cost_usd) / max(self.scenarios, 1)

    def to_dict(self) -> dict[str, object]:
        return {
            "scenarios": self.scenarios,
            "seed": self.seed,
            "cost_usd": self.cost_usd.to_dict(2),
            "unmet_unit_hours": self.unmet_unit_hours.to_dict(3),
            "billed_usd": _r(self.billed_usd, 2),
            "billed_rank": round(self.billed_rank, 4),
            "unpriced": self.unpriced,
            "samples_cost_usd": [_r(x, 2) for x in self.samples_cost_usd],
            "samples_unmet_unit_hours": [round(x, 3) for x in self.samples_unmet_unit_hours],
            "method": (
                "Spotfolio's replayed plan billed (lifecycle reaction, billing) on each sample: "
                "spot revocations from each pool's hazard posterior, in zone or failure-domain "
                f"bursts (share {BURST_SHARE} where no domain is known), serving demand from the "
                f"forecast's band (AR(1) errors, correlation {DEMAND_CORRELATION}); "
                "prices as recorded, the plan not re-made"
            ),
            "seconds": round(self.seconds, 3),
            "workers": self.workers,
        }


def posterior_hours(h: Hazard) -> float:
    """Hours of evidence behind a hazard's posterior (module docstring)."""
    observed = h.observed_gamma_hours
    if observed is not None:
        return observed
    return DEFAULT_PRIOR_HOURS / max(1.0 - h.confidence, 1e-6)


def _spot_instances(plan: Plan, hours: int) -> dict[str, FloatArray]:
    """Whole spot instances of the plan per pool and hour (summed over
    workloads, rounded up)."""
    a = plan.hourly_instances()
    a = a[(a["tier"] == Tier.SPOT.value) & (a["hour"] < hours)]
    out: dict[str, FloatArray] = {}
    for key, hour, n in zip(a["pool_key"], a["hour"], a["instances"], strict=True):
        arr = out.setdefault(str(key), np.zeros(hours))
        arr[int(hour)] += float(n)
    return {k: np.ceil(v - 1e-6).clip(min=0.0) for k, v in out.items()}


def burst_groups(snapshot: MarketSnapshot, keys: Sequence[str]) -> list[tuple[list[str], float]]:
    """The pools of ``keys`` by burst group, each with its share (module
    docstring): a failure domain's zones together, else each zone alone;
    sorted, so the draws are the same in every process."""
    domain_of: dict[str, tuple[str, float]] = {}
    for d in snapshot.failure_domains:
        for z in d.zones:
            domain_of.setdefault(z, (d.name, d.co_share))
    groups: dict[str, tuple[list[str], float]] = {}
    for key in sorted(keys):
        zone = PoolKey.parse(key).zone_key
        name, share = domain_of.get(zone, (zone, BURST_SHARE))
        groups.setdefault(name, ([], share))[0].append(key)
    return [groups[name] for name in sorted(groups)]


def sample_held(
    rng: np.random.Generator,
    snapshot: MarketSnapshot,
    actuals: MarketActuals,
    spot: Mapping[str, FloatArray],
    hours: int,
) -> MarketActuals:
    """The recorded market with revocations drawn, in bursts, from the hazard
    posteriors of the pools the plan holds spot in (module docstring)."""
    hazards = {p.pool.key: p.hazard for p in snapshot.pools}
    held = dict(actuals.spot_available)
    live = []
    for key in sorted(spot):
        h = hazards.get(key)
        if h is not None and h.rate_per_hour > 0 and spot[key].any():
            live.append(key)
    for keys, share in burst_groups(snapshot, live):
        q = {}
        for key in keys:
            h = hazards[key]
            b = posterior_hours(h)
            q[key] = 1.0 - math.exp(-rng.gamma(h.rate_per_hour * b, 1.0 / b))
        burst_p = share * min(q.values())
        burst = rng.random(hours) < burst_p
        for key in keys:
            n = spot[key].astype(np.int64)
            alone = (q[key] - burst_p) / (1.0 - burst_p) if burst_p < 1.0 else 0.0
            revoked = np.where(burst, n, rng.binomial(n, min(max(alone, 0.0), 1.0)))
            base = np.ones(hours)
            rec = actuals.spot_available.get(key)
            if rec is not None:
                m = min(len(rec), hours)
                base[:m] = np.where(np.isfinite(rec[:m]), rec[:m], 1.0)
            held[key] = base * (1.0 - revoked / np.maximum(n, 1))
    return MarketActuals(actuals.spot_usd_per_hour, held)


def sample_demand(
    rng: np.random.Generator, inputs: WhatIfInputs, start_hours: int
) -> dict[str, FloatArray]:
    """Serving demand drawn from the forecast's band (module docstring)."""
    hours = start_hours
    out: dict[str, FloatArray] = {}
    serving = [w.name for w in inputs.workloads.of_class(WorkloadClass.SERVING)]
    if not serving:
        return out
    start = inputs.period_plan.start
    forecasts = inputs.demand.forecast(start, hours)
    rho = DEMAND_CORRELATION
    for name in serving:
        point = np.asarray(inputs.forecast[name], dtype=float)[:hours]
        f = forecasts.get(name)
        z = np.empty(hours)
        z[0] = rng.standard_normal()
        eps = rng.standard_normal(hours)
        for t in range(1, hours):
            z[t] = rho * z[t - 1] + math.sqrt(1.0 - rho * rho) * eps[t]
        if f is None:
            out[name] = point.copy()
            continue
        edge = NormalDist().inv_cdf((1.0 + f.quantile) / 2.0)
        hi = np.nan_to_num(f.high.to_numpy(dtype=float)[:hours] - point, nan=0.0)
        lo = np.nan_to_num(point - f.low.to_numpy(dtype=float)[:hours], nan=0.0)
        spread = np.where(z > 0, np.maximum(hi, 0.0), np.maximum(lo, 0.0))
        out[name] = np.maximum(point + z / edge * spread, 0.0)
    return out


@dataclass(frozen=True)
class _Shared:
    """What every sample bills: the same plan on the same inputs."""

    plan: Plan
    inputs: WhatIfInputs
    spot: dict[str, FloatArray]
    desired: DesiredByHour
    seed: int


def _sample(shared: _Shared, i: int) -> tuple[float, float]:
    """Sample ``i``'s billed cost and unmet unit-hours (module docstring):
    its draws depend on the seed and ``i`` only, so a sample is the same
    here or in a worker process."""
    rng = np.random.default_rng(np.random.SeedSequence([shared.seed, STREAM, i]))
    inputs, plan, hours = shared.inputs, shared.plan, shared.plan.hours
    actuals = sample_held(rng, inputs.snapshot, inputs.actuals, shared.spot, hours)
    demand = sample_demand(rng, inputs, hours)
    bill = bill_reacted(plan, inputs.workloads, demand, inputs.snapshot, actuals,
                        costs=inputs.costs, lifecycle_costs=inputs.lifecycle_costs,
                        desired=shared.desired)  # fmt: skip
    return bill.total_usd, float(sum(bill.unmet_unit_hours.values()))


def risk_band(
    result: WhatIfResult,
    scenarios: int = DEFAULT_SCENARIOS,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    workers: int | None = None,
) -> RiskBand:
    """Bill Spotfolio's plan of ``result`` on ``scenarios`` samples (module
    docstring). ``workers``: processes for the samples (``None``: this
    machine's cores; 1: all here), through ``broker.scale.pool.map_paced``
    (the first sample here; the rest on workers only when they would take
    long enough to pay for starting them). The band is the same either way."""
    if result.inputs is None:
        raise ValueError("a what-if result without its inputs (run_whatif keeps them)")
    if scenarios < 1:
        raise ValueError(f"at least one scenario, got {scenarios}")
    t0 = time.perf_counter()
    inputs = result.inputs
    ours = result.scenario("spotfolio")
    plan = ours.plan
    shared = _Shared(
        plan,
        inputs,
        _spot_instances(plan, plan.hours),
        DesiredByHour(plan, inputs.workloads),  # the plan's hours, rounded once
        seed,
    )

    def say(done: int, _total: int) -> None:
        if progress is not None:
            progress(f"risk band: scenario {min(done + 1, scenarios)} of {scenarios}")

    say(0, scenarios)
    got, used = map_paced(_sample, shared, range(scenarios), workers=workers, on_done=say)
    costs = tuple(c for c, _u in got)
    unmet = tuple(u for _c, u in got)
    return RiskBand(scenarios, seed, Band.of(costs), Band.of(unmet), costs, unmet,
                    ours.bill.total_usd, time.perf_counter() - t0, used)  # fmt: skip
