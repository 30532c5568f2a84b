"""The lookback rule: what a commitment may be bought from, and how many.

Owns: ``LOOKBACK_DAYS``, ``MIN_LOOKBACK_DAYS``, ``Recommendation`` (one
commitment scope: the plan's buy, sized again on the hourly usage that can use
it net of what is owned, with its term figures), ``Refusal`` (a scope the rule
will not buy, and why) and ``size_on_usage`` / ``recommend``.

The anchor is AWS Cost Explorer's purchase recommendations (the Billing and
Cost Management API reference, ``GetReservationPurchaseRecommendation`` and
``GetSavingsPlansPurchaseRecommendation``): they are computed from the
On-Demand usage of a lookback period of 7, 30 or 60 days
(``LookbackPeriodInDays``: SEVEN_DAYS | THIRTY_DAYS | SIXTY_DAYS), grouped into
what a commitment can cover, every count simulated and the one of most
estimated savings kept. Here: a scope (an instance commitment's
provider/region/type; for a savings plan its kind) is bought only from at
least ``MIN_LOOKBACK_DAYS`` of usage that can use it, in the bill's regions
(``allowed_regions``); its count is the most-saving count over the longest
lookback the usage covers, net of the owned instances active each hour, and
never more than the plan's own buy nor the lookback's peak. A savings plan is
sized the same way on its usage in $/h steps (``broker.whatif.advice``: the
usage in its scope net of the instance commitments owned and recommended
there, at the plan's rates), never above the plan's buy.

Must not: plan, bill or print; it reads the what-if's values only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from markets.commitments import HOURS_PER_MONTH

__all__ = [
    "LOOKBACK_DAYS",
    "MIN_LOOKBACK_DAYS",
    "PARTIAL_UPFRONT_SHARE",
    "Recommendation",
    "Refusal",
    "ScopeGroup",
    "plan_steps",
    "recommend",
    "size_on_usage",
]

FloatArray = npt.NDArray[np.float64]
LOOKBACK_DAYS = (7, 30, 60)  # Cost Explorer's lookback periods
MIN_LOOKBACK_DAYS = 30  # a 1- or 3-year term is bought from no less
# Partial upfront pays about half the term upfront (an assumption: AWS's
# partial-upfront offerings price the upfront near half the all-upfront one).
PARTIAL_UPFRONT_SHARE = 0.5


def size_on_usage(usage: FloatArray, usd_per_hour: float, alternative_usd: float) -> int:
    """The count of most saving over ``usage`` (instances per hour, net of
    what is owned), each bought at ``usd_per_hour`` instead of
    ``alternative_usd`` an instance-hour: every count from 0 to the peak
    simulated (Cost Explorer's rule, module docstring); ties keep the fewer."""
    u = np.maximum(np.asarray(usage, dtype=float), 0.0)
    if u.size == 0 or alternative_usd <= usd_per_hour or usd_per_hour < 0:
        return 0
    peak = math.floor(float(u.max()) + 1e-9)
    # sum(min(u, n)) for every n at once: the hours below n in full, n for the rest
    ordered = np.sort(u)
    below = np.r_[0.0, np.cumsum(ordered)]
    n = np.arange(1, peak + 1, dtype=float)
    k = np.searchsorted(ordered, n, side="left")
    covered = below[k] + n * (u.size - k)
    savings = alternative_usd * covered - usd_per_hour * n * u.size
    best, best_saving = 0, 0.0
    for i, saving in enumerate(savings.tolist(), start=1):
        if saving > best_saving + 1e-9:
            best, best_saving = i, saving
    return best


@dataclass(frozen=True, eq=False)
class ScopeGroup:
    """One instance group in a savings plan's scope: its hourly instances
    used, the instances committed there each hour (owned and recommended),
    the plan's rate and on-demand, per instance-hour."""

    instances: FloatArray
    committed: FloatArray
    rate_usd: float
    on_demand_usd: float


def plan_steps(groups: Sequence[ScopeGroup], step_usd: float) -> tuple[FloatArray, float]:
    """A savings plan's hourly usage in its ``step_usd`` $/h steps (the usage
    its scope's instance commitments leave, at the plan's rates), from the
    first hour it is seen, and what a step of that usage costs on-demand."""
    hours = max((len(g.instances) for g in groups), default=0)
    usd = np.zeros(hours)
    usd_od = np.zeros(hours)
    for g in groups:
        net = np.maximum(np.asarray(g.instances, dtype=float) - g.committed, 0.0)
        usd += net * g.rate_usd
        usd_od += net * g.on_demand_usd
    total = float(usd.sum())
    ratio = float(usd_od.sum()) / total if total > 0 else 1.0
    seen = np.flatnonzero(usd > 1e-9)
    first = int(seen[0]) if len(seen) else hours
    steps = usd / step_usd if step_usd > 0 else np.zeros(hours)
    return steps[first:], step_usd * ratio


@dataclass(frozen=True)
class Refusal:
    """A scope the rule does not buy: ``reason`` in words, with the days of
    usage that can use it and the days more it needs (0: not a matter of days)."""

    group: str
    reason: str
    usage_days: int
    days_needed: int

    def to_dict(self) -> dict[str, object]:
        return {"group": self.group, "reason": self.reason, "usage_days": self.usage_days,
                "days_needed": self.days_needed}  # fmt: skip


@dataclass(frozen=True)
class Recommendation:
    """One scope sized by the rule (module docstring), with its term figures.
    ``count``: instances (a savings plan: the plan's $/h steps);
    ``by_lookback``: the most-saving count over each lookback the usage covers."""

    group: str
    count: int
    plan_count: int
    owned: float  # owned instances of the scope active at the lookback's end
    usage_days: int
    lookback_days: int
    by_lookback: Mapping[int, int]
    term_years: int
    payment: str
    usd_per_unit_hour: float  # the commitment's effective price
    alternative_usd: float  # on-demand, per unit-hour
    upfront_usd: float
    hourly_usd: float  # recurring, every hour of the term
    breakeven_utilisation: float | None
    utilisation: float | None  # over the lookback
    utilisation_p10_p50_p90: tuple[float, float, float] | None
    net_saving_term_usd: float
    payback_month: int | None  # None: never within the term

    def to_dict(self) -> dict[str, object]:
        band = self.utilisation_p10_p50_p90
        return {
            "group": self.group,
            "count": self.count,
            "plan_count": self.plan_count,
            "owned": round(self.owned, 3),
            "usage_days": self.usage_days,
            "lookback_days": self.lookback_days,
            "count_by_lookback_days": {str(k): v for k, v in self.by_lookback.items()},
            "upfront_usd": round(self.upfront_usd, 2),
            "hourly_usd": round(self.hourly_usd, 6),
            "breakeven_utilisation": _r(self.breakeven_utilisation),
            "lookback_utilisation": _r(self.utilisation),
            "expected_utilisation": None
            if band is None
            else {"p10": round(band[0], 6), "p50": round(band[1], 6), "p90": round(band[2], 6)},
            "net_saving_term_usd": round(self.net_saving_term_usd, 2),
            "payback_month": self.payback_month,
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def recommend(
    group: str,
    region: str,
    *,
    plan_count: int,
    savings_plan: bool,
    usage: FloatArray,
    owned: FloatArray,
    usd_per_unit_hour: float,
    alternative_usd: float,
    term_hours: int,
    term_years: int,
    payment: str,
    allowed_regions: frozenset[str] | None,
    samples: Sequence[tuple[FloatArray, FloatArray]] = (),
) -> Recommendation | Refusal:
    """The rule on one scope (module docstring). ``usage``: its hourly
    instances up to now, from the first hour it was seen; ``owned``: the owned
    instances active each of those hours; ``samples``: (usage, owned) per hour
    of sampled futures (``broker.whatif.risk.sample_demand``) for the expected
    utilisation."""
    days = int(len(usage) // 24)
    if allowed_regions is not None and region not in allowed_regions:
        return Refusal(group, f"region {region} is outside the regions allowed "
                       f"({', '.join(sorted(allowed_regions)) or 'none'})", days, 0)  # fmt: skip
    if days < MIN_LOOKBACK_DAYS:
        return Refusal(group, f"{days} day(s) of usage that can use it; a {term_years}-year "
                       f"term needs {MIN_LOOKBACK_DAYS}", days,
                       MIN_LOOKBACK_DAYS - days)  # fmt: skip
    net = np.maximum(np.asarray(usage, dtype=float) - np.asarray(owned, dtype=float), 0.0)
    by = {lb: size_on_usage(net[-lb * 24 :], usd_per_unit_hour, alternative_usd)
          for lb in LOOKBACK_DAYS if days >= lb}  # fmt: skip
    lookback = max(by)
    window = net[-lookback * 24 :]
    count = min(plan_count, by[lookback], math.floor(float(window.max(initial=0.0)) + 1e-9))
    total = usd_per_unit_hour * term_hours * count
    upfront = {"all_upfront": total, "partial_upfront": PARTIAL_UPFRONT_SHARE * total}.get(
        payment, 0.0
    )
    hourly = (total - upfront) / term_hours
    used = float(np.minimum(window, count).sum()) if count and not savings_plan else 0.0
    util = used / (count * len(window)) if count and not savings_plan else None
    avoided_h = alternative_usd * used / len(window) if len(window) else 0.0
    net_saving = (avoided_h - usd_per_unit_hour * count) * term_hours if util is not None else 0.0
    return Recommendation(
        group=group,
        count=count,
        plan_count=plan_count,
        owned=float(owned[-1]) if len(owned) else 0.0,
        usage_days=days,
        lookback_days=lookback,
        by_lookback=by,
        term_years=term_years,
        payment=payment,
        usd_per_unit_hour=usd_per_unit_hour,
        alternative_usd=alternative_usd,
        upfront_usd=upfront,
        hourly_usd=hourly,
        breakeven_utilisation=usd_per_unit_hour / alternative_usd if alternative_usd > 0 else None,
        utilisation=util,
        utilisation_p10_p50_p90=_band(samples, count) if not savings_plan else None,
        net_saving_term_usd=net_saving,
        payback_month=_payback(upfront, avoided_h - hourly, term_hours) if count else None,
    )


def _band(
    samples: Sequence[tuple[FloatArray, FloatArray]], n: int
) -> tuple[float, float, float] | None:
    """P10/P50/P90 over the samples of the busy share of ``n`` new instances."""
    if n <= 0 or not samples:
        return None
    shares = []
    for u, own in samples:
        net = np.maximum(np.asarray(u, dtype=float) - np.asarray(own, dtype=float), 0.0)
        shares.append(float(np.minimum(net, n).sum()) / (n * max(len(net), 1)))
    p10, p50, p90 = np.percentile(shares, (10, 50, 90))
    return float(p10), float(p50), float(p90)


def _payback(upfront: float, net_hourly: float, term_hours: int) -> int | None:
    """The month whose end the saving has paid the upfront back by (1 with
    none upfront and a saving); ``None`` if it never does within the term."""
    if net_hourly <= 0:
        return None
    month = max(1, math.ceil(upfront / (net_hourly * HOURS_PER_MONTH) - 1e-9))
    return month if month <= term_hours / HOURS_PER_MONTH + 1e-9 else None
