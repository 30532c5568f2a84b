"""The lookback rule (``broker.whatif.lookback``): enough days, the bill's
regions, sized on usage net of what is owned, never above the plan's buy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.whatif.lookback import (
    Recommendation,
    Refusal,
    ScopeGroup,
    plan_steps,
    recommend,
    size_on_usage,
)


def _rule(usage: np.ndarray, owned: np.ndarray, **kw: object) -> Recommendation | Refusal:
    args: dict[str, object] = dict(
        plan_count=8, savings_plan=False, usage=usage, owned=owned, usd_per_unit_hour=2.0,
        alternative_usd=3.0, term_hours=8760, term_years=1, payment="all_upfront",
        allowed_regions=frozenset({"us-east-1"}),
    )  # fmt: skip
    args.update(kw)
    return recommend("aws/us-east-1/g5.xlarge", "us-east-1", **args)  # type: ignore[arg-type]


def test_flat_usage_net_of_what_is_owned_with_its_term_figures_by_hand() -> None:
    hours = 30 * 24
    r = _rule(np.full(hours, 10.0), np.full(hours, 4.0))
    assert isinstance(r, Recommendation)
    assert r.count == 6  # 10 used, 4 owned: 6 net, below the plan's 8
    assert r.by_lookback == {7: 6, 30: 6} and r.lookback_days == 30
    assert r.utilisation == pytest.approx(1.0)
    assert r.breakeven_utilisation == pytest.approx(2 / 3)
    assert r.upfront_usd == pytest.approx(2.0 * 8760 * 6) and r.hourly_usd == 0.0
    assert r.net_saving_term_usd == pytest.approx((3 - 2) * 6 * 8760)
    # $18 an hour avoided pays $105,120 back in 105,120 / (18 x 730) = 8 months
    assert r.payback_month == 8
    no_upfront = _rule(np.full(hours, 10.0), np.full(hours, 4.0), payment="no_upfront")
    assert isinstance(no_upfront, Recommendation)
    assert no_upfront.upfront_usd == 0.0
    assert no_upfront.hourly_usd == pytest.approx(12.0)
    assert no_upfront.payback_month == 1


def test_fewer_than_30_days_buy_nothing_and_say_how_many_more() -> None:
    r = _rule(np.full(14 * 24, 10.0), np.zeros(14 * 24))
    assert isinstance(r, Refusal)
    assert (r.usage_days, r.days_needed) == (14, 16)
    assert "14 day(s)" in r.reason and "needs 30" in r.reason


def test_a_region_outside_the_allowed_is_refused_whatever_the_days() -> None:
    r = _rule(np.full(60 * 24, 10.0), np.zeros(60 * 24),
              allowed_regions=frozenset({"eu-west-1"}))  # fmt: skip
    assert isinstance(r, Refusal) and "us-east-1 is outside" in r.reason
    anywhere = _rule(np.full(60 * 24, 10.0), np.zeros(60 * 24), allowed_regions=None)
    assert isinstance(anywhere, Recommendation) and anywhere.lookback_days == 60


def test_a_share_below_break_even_is_not_bought() -> None:
    # 10 instances half the hours, 2 the other half: above 2 units only 50 %
    # of hours are busy, below the 2/3 break-even
    u = np.tile([10.0, 2.0], 30 * 12)
    r = _rule(u, np.zeros(len(u)), plan_count=10)
    assert isinstance(r, Recommendation) and r.count == 2


# a day's profile repeated over the 30 days the rule needs
profile_st = st.lists(st.floats(0, 40, allow_nan=False), min_size=24, max_size=24)


@settings(max_examples=80, deadline=None)
@given(profile=profile_st, owned=st.integers(0, 20), extra=st.integers(1, 20),
       until=st.integers(1, 30 * 24), plan=st.integers(0, 40),
       price=st.floats(0.1, 2.9))  # fmt: skip
def test_owning_more_never_raises_the_recommended_purchase(
    profile: list[float], owned: int, extra: int, until: int, plan: int, price: float
) -> None:
    """One more owned commitment of the scope (``extra`` instances, active
    for its first ``until`` hours: it may expire inside the lookback)."""
    u = np.tile(np.asarray(profile), 30)
    have = np.full(len(u), float(owned))
    more = have + np.where(np.arange(len(u)) < until, float(extra), 0.0)
    before = _rule(u, have, plan_count=plan, usd_per_unit_hour=price)
    after = _rule(u, more, plan_count=plan, usd_per_unit_hour=price)
    assert isinstance(before, Recommendation) and isinstance(after, Recommendation)
    assert after.count <= before.count
    # and nothing is bought beyond the usage net of what is owned
    assert after.count <= max(0.0, float(np.max(u - more))) + 1e-9


@settings(max_examples=60, deadline=None)
@given(usage=st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=200),
       cut=st.floats(0, 30, allow_nan=False), price=st.floats(0.1, 2.9))  # fmt: skip
def test_less_usage_never_sizes_more(usage: list[float], cut: float, price: float) -> None:
    u = np.asarray(usage)
    assert size_on_usage(np.maximum(u - cut, 0), price, 3.0) <= size_on_usage(u, price, 3.0)


RI_USD, SP_USD, OD_USD, STEP_USD = 0.63, 0.70, 1.006, 0.001


def _scope(u: np.ndarray, owned: np.ndarray, ri_plan: int, sp_plan: int) -> tuple[int, int]:
    """An instance commitment and a savings plan over the same usage, as the
    advice rules them: the instances first, the plan on what they and the
    owned ones leave (``plan_steps``). (instances, plan $/h steps)."""
    ri = _rule(u, owned, plan_count=ri_plan, usd_per_unit_hour=RI_USD, alternative_usd=OD_USD)
    assert isinstance(ri, Recommendation)
    group = ScopeGroup(u, owned + ri.count, SP_USD, OD_USD)
    steps, alternative = plan_steps([group], STEP_USD)
    if len(steps) < 30 * 24:  # the instances and the owned leave it no 30 days of usage
        return ri.count, 0
    sp = _rule(steps, np.zeros(len(steps)), plan_count=sp_plan, savings_plan=True,
               usd_per_unit_hour=STEP_USD, alternative_usd=alternative)  # fmt: skip
    assert isinstance(sp, Recommendation)
    return ri.count, sp.count


@settings(max_examples=60, deadline=None)
@given(profile=profile_st, owned=st.integers(0, 20), extra=st.integers(1, 20),
       until=st.integers(1, 30 * 24), ri_plan=st.integers(0, 40),
       sp_plan=st.integers(0, 40_000))  # fmt: skip
def test_an_owned_commitment_never_raises_its_scopes_purchase_savings_plan_included(
    profile: list[float], owned: int, extra: int, until: int, ri_plan: int, sp_plan: int
) -> None:
    """One more owned instance commitment in a savings plan's scope: the
    scope's purchase (instances and the plan's $/h, at their rates) does not
    rise, and the plan is never sized beyond the usage the commitments leave."""
    u = np.tile(np.asarray(profile), 30)
    have = np.full(len(u), float(owned))
    more = have + np.where(np.arange(len(u)) < until, float(extra), 0.0)
    ri0, sp0 = _scope(u, have, ri_plan, sp_plan)
    ri1, sp1 = _scope(u, more, ri_plan, sp_plan)
    assert ri1 <= ri0
    assert ri1 * RI_USD + sp1 * STEP_USD <= ri0 * RI_USD + sp0 * STEP_USD + 1e-9
    # the plan's $/h buys no more instances than the usage net of every commitment
    assert sp1 * STEP_USD / SP_USD <= max(0.0, float(np.max(u - more - ri1))) + 1e-6


def test_a_savings_plan_is_sized_net_of_the_instances_owned_and_recommended() -> None:
    hours = 30 * 24
    u = np.full(hours, 12.0)
    group = ScopeGroup(u, np.full(hours, 8.0 + 3.0), SP_USD, OD_USD)  # 8 owned, 3 recommended
    steps, alternative = plan_steps([group], STEP_USD)
    assert steps == pytest.approx(np.full(hours, 1.0 * SP_USD / STEP_USD))
    assert alternative == pytest.approx(STEP_USD * OD_USD / SP_USD)
    sp = _rule(steps, np.zeros(hours), plan_count=5000, savings_plan=True,
               usd_per_unit_hour=STEP_USD, alternative_usd=alternative)  # fmt: skip
    assert isinstance(sp, Recommendation)
    assert sp.count == 700  # one instance left at $0.70/h, not the plan's $5/h
    none_left = plan_steps([ScopeGroup(u, np.full(hours, 12.0), SP_USD, OD_USD)], STEP_USD)
    assert len(none_left[0]) == 0  # nothing left to cover: no usage days, no plan
