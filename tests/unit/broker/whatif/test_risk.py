"""The risk band: seeded samples billed by the what-if's own bill.

On the tiny hand-made market (hazard 0.01 per hour held, nothing observed:
the posterior rests on one day of prior hours), two days of two serving
workloads and a batch job.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import broker.scale.pool as pool
import broker.whatif.risk as risk
from broker.whatif.billing import MarketActuals
from broker.whatif.risk import posterior_hours, risk_band, sample_demand, sample_held
from broker.whatif.run import WhatIfResult, run_whatif
from markets.hazard.prior import DEFAULT_PRIOR_HOURS
from markets.model import Hazard, HazardSource
from tests.fakes.tiny_market import TinyMarket, pool_key
from tests.unit.broker.whatif.test_advice import workloads


@pytest.fixture(scope="module")
def result() -> WhatIfResult:
    return run_whatif(TinyMarket(share={pool_key("a"): 0.5}), workloads(), days=2)


def test_the_band_is_ordered_and_the_seed_repeats_it(result: WhatIfResult) -> None:
    a = risk_band(result, 12, seed=3)
    b = risk_band(result, 12, seed=3)
    assert a.cost_usd.p10 <= a.cost_usd.p50 <= a.cost_usd.p90
    assert a.unmet_unit_hours.p10 <= a.unmet_unit_hours.p50 <= a.unmet_unit_hours.p90
    assert a.cost_usd.p10 < a.cost_usd.p90  # the samples differ
    assert a.samples_cost_usd == b.samples_cost_usd and a.cost_usd == b.cost_usd
    assert a.to_dict()["seed"] == 3 and a.to_dict()["scenarios"] == 12


def test_samples_on_worker_processes_are_the_samples_drawn_here(
    result: WhatIfResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two worker processes (``broker.scale.pool``) draw and bill the same
    samples as this process; the band says how many ran them."""
    here = risk_band(result, 6, seed=3, workers=1)
    monkeypatch.setattr(pool, "POOL_MIN_S", 0.0)  # a two-day band is too short to pay for them
    said: list[str] = []
    apart = risk_band(result, 6, seed=3, workers=2, progress=said.append)
    assert (here.workers, apart.workers) == (1, 2)
    assert apart.samples_cost_usd == here.samples_cost_usd
    assert apart.samples_unmet_unit_hours == here.samples_unmet_unit_hours
    assert apart.to_dict()["workers"] == 2
    assert said[0] == "risk band: scenario 1 of 6" and said[-1] == "risk band: scenario 6 of 6"


def test_another_seed_gives_another_band_close_to_it(result: WhatIfResult) -> None:
    a = risk_band(result, 12, seed=3)
    c = risk_band(result, 12, seed=4)
    assert c.samples_cost_usd != a.samples_cost_usd
    assert c.cost_usd != a.cost_usd
    assert abs(c.cost_usd.p50 - a.cost_usd.p50) <= 0.1 * a.cost_usd.p50
    # each band's median lies inside the other's P10-P90 (widened by 5 %)
    assert 0.95 * a.cost_usd.p10 <= c.cost_usd.p50 <= 1.05 * a.cost_usd.p90


def test_sample_i_does_not_depend_on_how_many_are_drawn(result: WhatIfResult) -> None:
    few = risk_band(result, 3, seed=5)
    more = risk_band(result, 6, seed=5)
    assert more.samples_cost_usd[:3] == few.samples_cost_usd


def test_every_sample_is_billed_by_bill_reacted(
    result: WhatIfResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = risk.bill_reacted  # type: ignore[attr-defined]

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(kwargs["costs"])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(risk, "bill_reacted", spy)
    band = risk_band(result, 4, seed=0)
    assert len(calls) == 4
    assert result.inputs is not None and all(c is result.inputs.costs for c in calls)
    assert band.billed_usd == result.scenario("spotfolio").bill.total_usd


def test_without_spread_or_hazard_a_sample_is_the_forecast_on_the_recorded_market(
    result: WhatIfResult,
) -> None:
    """The sampler adds nothing of its own: with a zero hazard and a band
    of zero width, the bill is that of the plan on its own forecast."""
    from broker.whatif.billing import bill_reacted

    inputs = result.inputs
    assert inputs is not None
    snap = inputs.snapshot
    calm = snap.model_copy(update={"pools": tuple(
        p.model_copy(update={"hazard": Hazard(rate_per_hour=0.0)}) for p in snap.pools
    )})  # fmt: skip
    rng = np.random.default_rng(0)
    spot = risk._spot_instances(result.scenario("spotfolio").plan, 48)
    held = sample_held(rng, calm, inputs.actuals, spot, 48)
    assert {k: list(v) for k, v in held.spot_available.items()} == {
        k: list(v) for k, v in inputs.actuals.spot_available.items()
    }

    class Flat:
        def forecast(self, start: object, hours: int) -> dict[str, object]:
            return {}

    demand = sample_demand(rng, dataclasses.replace(inputs, demand=Flat()), 48)  # type: ignore[arg-type]
    for name, arr in demand.items():
        assert np.array_equal(arr, np.asarray(inputs.forecast[name])[:48])
    plan = result.scenario("spotfolio").plan
    bill = bill_reacted(plan, inputs.workloads, demand, snap, held, costs=inputs.costs,
                        lifecycle_costs=inputs.lifecycle_costs)  # fmt: skip
    assert bill.total_usd > 0


def test_a_likely_revocation_lowers_the_held_share_of_pools_the_plan_holds() -> None:
    snap = TinyMarket().snapshot()
    hot = snap.model_copy(update={"pools": tuple(
        p.model_copy(update={"hazard": Hazard(rate_per_hour=5.0, confidence=0.99,
                                              observed_hours=1000.0,
                                              source=HazardSource.OBSERVED)})
        for p in snap.pools
    )})  # fmt: skip
    a, b = pool_key("a"), pool_key("b")
    rec = MarketActuals({}, {a: np.full(10, 0.5)})
    spot = {a: np.full(10, 4.0), b: np.full(10, 2.0)}
    out = sample_held(np.random.default_rng(1), hot, rec, spot, 10)
    # 1 - exp(-5) = 99.3 % of instances revoked: nearly nothing held
    assert out.spot_available[a].max() <= 0.5 and out.spot_available[a].mean() < 0.05
    assert out.spot_available[b].mean() < 0.1
    assert pool_key("c") not in out.spot_available  # no spot planned there: as recorded


def test_posterior_hours_read_the_hazard_s_evidence() -> None:
    assert posterior_hours(Hazard(rate_per_hour=0.1)) == DEFAULT_PRIOR_HOURS
    assert posterior_hours(Hazard(rate_per_hour=0.1, confidence=0.5)) == 2 * DEFAULT_PRIOR_HOURS
    watched = Hazard(rate_per_hour=0.1, confidence=0.8, observed_hours=96.0)
    assert posterior_hours(watched) == pytest.approx(120.0)  # T / Z = T + b0


def test_a_bill_that_could_not_price_is_left_out_of_the_band_and_counted() -> None:
    band = risk.Band.of([1.0, float("nan"), 3.0, 2.0])
    assert (band.p10, band.p50, band.p90) == pytest.approx((1.2, 2.0, 2.8))
    none = risk.Band.of([float("nan")])
    assert none.to_dict(2) == {"p10": None, "p50": None, "p90": None}
    r = risk.RiskBand(2, 0, band, band, (1.0, float("nan")), (0.0, 0.0), 1.0, 0.0)
    assert r.unpriced == 1 and r.to_dict()["samples_cost_usd"] == [1.0, None]


def _watched(rate: float) -> Hazard:
    return Hazard(rate_per_hour=rate, confidence=0.99, observed_hours=100_000.0,
                  source=HazardSource.OBSERVED)  # fmt: skip


def test_revocations_come_in_zone_bursts_and_keep_each_pools_rate() -> None:
    """Two pools of one zone lose spot in the same hours, a pool of another
    zone in its own; each pool's revoked share keeps its hazard's chance."""
    a, a2, c = pool_key("a"), pool_key("a", "p3.8xlarge"), pool_key("c")
    snap = TinyMarket([a, a2, c]).snapshot()
    snap = snap.model_copy(update={"pools": tuple(
        p.model_copy(update={"hazard": _watched(0.05)}) for p in snap.pools
    )})  # fmt: skip
    hours = 20_000
    spot = {k: np.full(hours, 4.0) for k in (a, a2, c)}
    out = sample_held(np.random.default_rng(7), snap, MarketActuals({}, {}), spot, hours)
    lost = {k: 1.0 - out.spot_available[k] for k in spot}
    q = 1.0 - np.exp(-0.05)
    for k in spot:  # the marginal: every instance keeps its pool's chance
        assert lost[k].mean() == pytest.approx(q, rel=0.08)
    whole = {k: lost[k] >= 1.0 for k in spot}
    # one zone: whole-pool losses together (the burst), share 0.83 of revocations
    both = (whole[a] & whole[a2]).mean()
    assert both == pytest.approx(risk.BURST_SHARE * q, rel=0.1)
    # another zone: its bursts are its own (as if independent)
    assert (whole[a] & whole[c]).mean() < 0.1 * both


def test_a_failure_domain_bursts_across_its_zones_at_its_share() -> None:
    from markets.model import FailureDomain

    a, b = pool_key("a"), pool_key("b")
    snap = TinyMarket([a, b]).snapshot()
    dom = FailureDomain(name="east", zones=("aws/us-east-1a", "aws/us-east-1b"),
                        co_share=0.4, baseline=0.05, events=20, window_s=300.0)  # fmt: skip
    snap = snap.model_copy(update={"failure_domains": (dom,), "pools": tuple(
        p.model_copy(update={"hazard": _watched(0.05)}) for p in snap.pools
    )})  # fmt: skip
    groups = risk.burst_groups(snap, [b, a])
    assert groups == [([a, b], 0.4)]
    hours = 20_000
    spot = {k: np.full(hours, 1.0) for k in (a, b)}  # one instance: whole loss either way
    out = sample_held(np.random.default_rng(3), snap, MarketActuals({}, {}), spot, hours)
    lost = {k: out.spot_available[k] < 1.0 for k in spot}
    q = 1.0 - np.exp(-0.05)
    # P(both) = b + (1 - b) x alone^2, b = 0.4 q
    bp = 0.4 * q
    alone = (q - bp) / (1 - bp)
    assert (lost[a] & lost[b]).mean() == pytest.approx(bp + (1 - bp) * alone**2, rel=0.15)
