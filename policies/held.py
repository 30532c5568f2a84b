"""What the share of time a pool holds spot costs a gang with a non-revocable minimum.

Owns ``expected_held_share`` (the share of some hours ahead a pool is
expected to hold spot, from what the market recorded and whether it holds
spot now), ``gang_held_share`` (the share a plan counts a gang's spot
instance-hour held) and ``gang_hour_usd`` (what an hour of such a gang at
full size is expected to cost per unit of work in a pool). One rule for the
three places that weigh it: the MILP (``broker.planning.optimizer.model``:
work and dollars of the gang's spot, the ranking of its candidate pools),
the fast path's placement (``broker.planning.optimizer.fast``) and the
pacing's value of work done ahead (``broker.planning.pacing``).

Measured on the 30-day portfolio bench, with the replay handing the
lifecycle each step's snapshot: every one of seeds 0-5 bills less with the
rule than without it ($5,795 less over the six; seed 4: 20 extends). Without
that per-step snapshot the same rule sent seeds 4 and 5 to 1.265 and 1.267 x
the hindsight (the lifecycle broke glass for the fine-tune and kept
extending it, 434 extends); which difference turns this round was not
measured apart.

Why it is a price: the gang's minimum runs on on-demand whether its spot is
held or not (spot lost shrinks the gang to it; nothing replaces a gang's
spot elsewhere), so in a pool holding spot a = 0.3 of the time an hour of
the gang does little more than the minimum's work, at the minimum's price.
Per unit of work, at full size (minimum m units on on-demand at o per
unit-hour of work, k more on spot at s)::

    (m o + k a s) / (m + k a)

For any other workload the held share is not a price: a spot instance is
paid only while held, and the hours it is lost are the lifecycle's to cover
(``policies.cost_table``).

Must not: read a clock or a market beyond the snapshot it is given, or
know about solvers.
"""

from __future__ import annotations

import math

from markets.model import PoolSnapshot, Tier
from policies.cost_table import NEVER_HELD_SHARE, CostEntry
from policies.workloads.spec import Workload

__all__ = [
    "MEAN_OUTAGE_HOURS",
    "expected_held_share",
    "gang_held_share",
    "gang_hour_usd",
    "gang_hour_usd_ahead",
]

# Mean length of a spell without spot (hours). Assumption: the middle of the
# default market's calibrated crunches (log-uniform 1-6 h, mean 2.8 h;
# ``markets.default.calibration``, loosely fitted to the V100/K80
# public availability traces: outages of minutes to hours).
MEAN_OUTAGE_HOURS = 3.0


def expected_held_share(
    snap: PoolSnapshot, h0: float = math.inf, h1: float = math.inf
) -> float | None:
    """The share of hours ``[h0, h1)`` after ``snap`` its pool is expected
    to hold spot (default: the long run, the recorded share); ``None`` when
    the market recorded no share.

    Held or not is taken as a two-state Markov process with the pool's
    recorded share ``a`` held (``available_share``) and outages of
    ``MEAN_OUTAGE_HOURS`` (D) on average, so held spells last ``D a / (1 -
    a)`` and both states are left at rate ``lambda = 1 / (D a)``. Known
    held at the snapshot (``spot_available``), the chance it is held ``h``
    hours later is ``a + (1 - a) exp(-lambda h)`` (not held: ``a (1 -
    exp(-lambda h))``), averaged here over the hours: a pool held now is
    counted nearly whole for the next hours, and at ``a`` further out (a =
    0.3: 0.72 in the first hour, 0.44 in the second)."""
    a = snap.available_share
    if a is None or not math.isfinite(a):
        return None
    if a >= 1.0:
        return 1.0
    a = max(NEVER_HELD_SHARE, a)
    if math.isinf(h0):
        return a
    lam = 1.0 / (MEAN_OUTAGE_HOURS * a)
    c = (1.0 - a) if snap.spot_available else -a
    span = max(h1 - h0, 1e-9)
    decay = (math.exp(-lam * h0) - math.exp(-lam * h1)) / (lam * span)
    return min(1.0, max(NEVER_HELD_SHARE, a + c * decay))


def gang_held_share(
    w: Workload, snap: PoolSnapshot, h0: float = math.inf, h1: float = math.inf
) -> float:
    """The share of hours ``[h0, h1)`` after ``snap`` a plan counts a spot
    instance of ``w`` held: ``expected_held_share`` for a gang whose minimum
    must be non-revocable, 1 for any other workload and where the market
    recorded no share (nothing is known against the pool)."""
    if w.non_revocable_min_units <= 0:
        return 1.0
    share = expected_held_share(snap, h0, h1)
    return 1.0 if share is None else share


def gang_hour_usd(w: Workload, e: CostEntry, share: float) -> float:
    """What an hour of ``w`` at full size in ``e``'s pool is expected to cost
    per unit of work, its spot held ``share`` of the time (module
    docstring): its non-revocable minimum at the pool's on-demand price,
    the rest on spot. A workload without such a minimum: the spot price.
    Infinite where the pool has no spot."""
    p_spot, p_od = e.usd_per_work_hour[Tier.SPOT], e.usd_per_work_hour[Tier.ON_DEMAND]
    if p_spot is None:
        return math.inf
    if w.non_revocable_min_units <= 0 or w.max_units is None or p_od is None:
        return p_spot
    m = float(w.non_revocable_min_units)
    k = min(float(w.max_units) - m, w.max_spot_share * float(w.max_units))
    if k <= 0:
        return p_od
    return (m * p_od + k * share * p_spot) / (m + k * share)


def gang_hour_usd_ahead(w: Workload, e: CostEntry, snap: PoolSnapshot, hours: float) -> float:
    """``gang_hour_usd`` over the next ``hours`` after ``snap`` (its pool's
    snapshot), spot held the share ``gang_held_share`` expects: how the MILP
    ranks a gang's spot candidates and the fast path its placements."""
    return gang_hour_usd(w, e, gang_held_share(w, snap, 0.0, hours))
