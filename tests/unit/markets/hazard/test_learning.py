"""The account's own evidence updates a snapshot's hazard (Gamma-Poisson)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from markets.hazard.learning import LearnedMarket, learned_hazard, snapshot_prior, with_experience
from markets.hazard.posterior import Exposure, estimate_hazard
from markets.hazard.prior import ASSUMED_PRIOR, DEFAULT_PRIOR_HOURS
from markets.model import Hazard, HazardSource
from tests.fakes.tiny_market import TinyMarket, pool_key

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def test_a_snapshot_hazard_with_nothing_observed_weighs_as_one_day() -> None:
    prior = snapshot_prior(Hazard(rate_per_hour=0.02))
    assert prior.pseudo_hours == DEFAULT_PRIOR_HOURS
    assert prior.rate_per_hour == 0.02


def test_learning_on_the_assumed_prior_is_the_posterior_of_the_evidence() -> None:
    est = estimate_hazard(Exposure(6, 30.0), prior=ASSUMED_PRIOR)
    h = learned_hazard(
        Hazard(rate_per_hour=ASSUMED_PRIOR.rate_per_hour, source=HazardSource.ASSUMED),
        Exposure(6, 30.0),
    )
    assert h.rate_per_hour == pytest.approx(est.rate_per_hour)
    assert h.confidence == pytest.approx(est.confidence)
    assert h.source is HazardSource.OBSERVED and h.observed_hours == 30.0


def test_evidence_adds_to_what_the_market_observed() -> None:
    # the market watched 72 h (confidence 0.75 -> 96 h behind its 0.1/h)
    market = Hazard(
        rate_per_hour=0.1, source=HazardSource.OBSERVED, confidence=0.75, observed_hours=72
    )
    h = learned_hazard(market, Exposure(10, 24.0))
    assert h.rate_per_hour == pytest.approx((0.1 * 96 + 10) / 120)
    assert h.observed_hours == 96.0 and h.confidence == pytest.approx(96 / 120)


def test_no_hours_held_leaves_the_hazard_as_it_was() -> None:
    h = Hazard(rate_per_hour=0.3)
    assert learned_hazard(h, Exposure(0, 0.0)) is h


def test_a_learned_market_prices_only_the_pools_with_experience() -> None:
    b = pool_key("b")
    base = TinyMarket()
    seen: list[int] = []

    def experience() -> dict[str, Exposure]:
        seen.append(1)
        return {b: Exposure(8, 10.0)}

    snap = LearnedMarket(base, experience).snapshot(T0)
    assert len(seen) == 1
    assert snap.get(b).hazard.rate_per_hour == pytest.approx((0.01 * 24 + 8) / 34)
    assert snap.get(pool_key("a")).hazard == base.snapshot(T0).get(pool_key("a")).hazard
    plain = base.snapshot(T0)
    assert with_experience(plain, {}) is plain


def test_the_accounts_domains_replace_the_markets_for_the_zones_they_cover() -> None:
    from markets.model import FailureDomain

    def dom(*zones: str, source: str) -> FailureDomain:
        return FailureDomain(
            name=zones[0],
            zones=zones,
            co_share=0.4,
            baseline=0.05,
            events=9,
            window_s=300.0,
            source=source,
        )

    traced = (
        dom("aws/us-east-1a", "aws/us-east-1b", source="traces"),
        dom("aws/us-west-2a", "aws/us-west-2b", source="traces"),
    )
    base = TinyMarket()

    class WithDomains(TinyMarket):
        def snapshot(self, at: datetime | None = None):
            return base.snapshot(at).model_copy(update={"failure_domains": traced})

    own = (dom("aws/us-east-1b", "aws/us-east-1c", source="account"),)
    snap = LearnedMarket(WithDomains(), dict, lambda: own).snapshot(T0)
    assert [(d.zones, d.source) for d in snap.failure_domains] == [
        (("aws/us-east-1b", "aws/us-east-1c"), "account"),
        (("aws/us-west-2a", "aws/us-west-2b"), "traces"),
    ]
