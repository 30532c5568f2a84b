"""Regions and providers: per-workload allow-lists, a
region share cap beside zone and pool, in the MILP and the fast path."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.plan import Plan
from markets.default.market import open_default_market
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
from policies.workloads.spec import parse_workloads
from tests.paths import REPO

EXAMPLE = REPO / "policies" / "examples" / "workloads.yaml"
T0 = datetime(2026, 3, 2, tzinfo=UTC)

# Two providers, three regions, two zones each; spot cheapest in us-east-1.
_PLACES = [
    (Provider.AWS, "us-east-1", "us-east-1a", 0.20),
    (Provider.AWS, "us-east-1", "us-east-1b", 0.21),
    (Provider.AWS, "us-west-2", "us-west-2a", 0.30),
    (Provider.AWS, "us-west-2", "us-west-2b", 0.31),
    (Provider.GCP, "us-central1", "us-central1-a", 0.25),
    (Provider.GCP, "us-central1", "us-central1-b", 0.26),
]


def _pool(provider: Provider, region: str, zone: str, spot: float, od: float = 1.0) -> PoolSnapshot:
    inst = InstanceType(
        provider=provider, name="g1", family="g", units=1, gpus=1, vcpus=4, memory_gib=16.0
    )
    return PoolSnapshot(
        pool=Pool(provider=provider, region=region, zone=zone, instance_type="g1"),
        instance=inst,
        on_demand_usd_per_hour=od + 0.01 * len(zone),  # regions differ on on-demand too
        spot_usd_per_hour=spot,
        placement_score=10,
        hazard=Hazard(rate_per_hour=0.0, source=HazardSource.ASSUMED),
        observed_at=T0,
    )


def _snap() -> MarketSnapshot:
    return MarketSnapshot(at=T0, pools=tuple(_pool(*p) for p in _PLACES), source="test")


def _serving(name: str, **contract: Any) -> dict[str, Any]:
    return {
        "name": name,
        "class": "serving",
        "instance_types": ["g1"],
        "max_spot_share": 1.0,
        "max_zone_share": 1.0,
        "max_pool_share": 1.0,
        **contract,
    }


def _plan(
    workloads: list[dict[str, Any]],
    demand: dict[str, float],
    planner: str,
    hours: int = 2,
    fleet: dict[str, Any] | None = None,
) -> Plan:
    ws = parse_workloads({**(fleet or {}), "workloads": workloads}, demand_supplied=True)
    opts = PlanOptions(integral=True, churn_usd_per_unit=0.0, time_limit_s=120.0)
    problem = build_problem(
        _snap(), ws, {k: np.full(hours, v) for k, v in demand.items()}, hours=hours, options=opts
    )
    return solve(problem) if planner == "milp" else fast_plan(problem)


def _region_units(plan: Plan, workload: str | None = None) -> pd.DataFrame:
    """Spot units per (period start, region)."""
    a = plan.allocations
    a = a[a.tier == "spot"]
    if workload is not None:
        a = a[a.workload == workload]
    region = a.pool_key.str.split("/").str[1]
    return a.groupby([a.hour_start, region]).units.sum().unstack(fill_value=0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("planner", ["milp", "fast"])
def test_region_share_cap_half_with_60_spot_units_puts_at_most_30_in_one_region(
    planner: str,
) -> None:
    plan = _plan([_serving("api", max_region_share=0.5)], {"api": 60.0}, planner)
    by_region = _region_units(plan)
    assert by_region.to_numpy().sum(axis=1) == pytest.approx([60.0, 60.0])  # all on spot
    assert by_region.to_numpy().max() <= 30.0 + 1e-6
    # without the cap every unit goes to the cheapest region (what was measured)
    uncapped = _region_units(_plan([_serving("api")], {"api": 60.0}, planner))
    assert uncapped.to_numpy().max() == pytest.approx(60.0)


def test_the_binding_region_cap_is_in_the_explanation() -> None:
    plan = _plan([_serving("api", max_region_share=0.5)], {"api": 60.0}, "milp")
    lines = "\n".join(plan.explanations["api"].lines())
    assert "at most 50% of spot in region aws/us-east-1" in lines


@pytest.mark.parametrize("planner", ["milp", "fast"])
def test_a_fleet_wide_region_cap_holds_for_the_fleet(planner: str) -> None:
    plan = _plan(
        [_serving("a"), _serving("b")],
        {"a": 30.0, "b": 30.0},
        planner,
        fleet={"max_region_share": 0.5},
    )
    by_region = _region_units(plan)
    assert by_region.to_numpy().sum(axis=1) == pytest.approx([60.0, 60.0])
    assert by_region.to_numpy().max() <= 30.0 + 1e-6


@pytest.mark.parametrize("planner", ["milp", "fast"])
def test_allow_lists_keep_every_tier_in_the_listed_regions_and_providers(planner: str) -> None:
    workloads = [
        _serving("east", regions=["us-west-2"], max_spot_share=0.3),
        _serving("gcp-only", providers=["gcp"], max_spot_share=0.3),
    ]
    plan = _plan(workloads, {"east": 20.0, "gcp-only": 20.0}, planner)
    a = plan.allocations[plan.allocations.units > 0]
    east = a[a.workload == "east"]
    assert set(east.pool_key.str.split("/").str[1]) == {"us-west-2"}
    assert set(east.tier) == {"spot", "on_demand"}
    assert set(a[a.workload == "gcp-only"].pool_key.str.split("/").str[0]) == {"gcp"}
    assert plan.unmet_unit_hours.get("east", 0.0) == pytest.approx(0.0, abs=1e-6)
    if planner == "milp":
        lines = "\n".join(plan.explanations["east"].lines())
        assert "bound: east: regions us-west-2 only (allow-list)" in lines


def test_the_default_fleets_serving_api_with_regions_us_east_1_lands_only_there() -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["workloads"] = [w for w in data["workloads"] if w["name"] == "chat-api"]
    data["workloads"][0]["regions"] = ["us-east-1"]
    ws = parse_workloads(data, demand_supplied=True)
    market = open_default_market()
    snap = market.snapshot()
    demand = {"chat-api": np.array([32.0] * 9 + [64.0] * 12 + [32.0] * 3)}
    opts = PlanOptions(time_limit_s=120.0)
    problem = build_problem(snap, ws, demand, hours=24, options=opts)
    for plan in (solve(problem), fast_plan(problem)):
        a = plan.allocations[plan.allocations.units > 0]
        assert len(a) > 0
        assert set(a.pool_key.str.split("/").str[:2].str.join("/")) == {"aws/us-east-1"}
        assert sum(plan.unmet_unit_hours.values()) == pytest.approx(0.0, abs=1e-6)
    # the same fleet without the list was split across regions and providers
    free = parse_workloads(
        {**data, "workloads": [{k: v for k, v in data["workloads"][0].items() if k != "regions"}]},
        demand_supplied=True,
    )
    a = solve(build_problem(snap, free, demand, hours=24, options=opts)).allocations
    assert set(a[a.units > 0].pool_key.str.split("/").str[1]) != {"us-east-1"}


def test_an_allow_list_the_market_cannot_serve_is_exit_2_naming_the_field() -> None:
    ws = parse_workloads(
        {"workloads": [_serving("api"), _serving("far", regions=["eu-north-1"])]},
        demand_supplied=True,
    )
    demand = {"api": np.full(2, 4.0), "far": np.full(2, 4.0)}
    with pytest.raises(InputError) as e:
        build_problem(_snap(), ws, demand, hours=2)
    text = str(e.value)
    assert "workloads[1].regions" in text and "aws/us-east-1" in text and "eu-north-1" in text


@pytest.mark.parametrize(
    ("field", "value", "expect"),
    [
        ("regions", ["US East"], "region names like us-east-1"),
        ("regions", ["us-east-1", "us-east-1"], "each region listed once"),
        ("providers", ["azure"], "workloads[0].providers"),
        ("regions", [], "workloads[0].regions"),
        ("max_region_share", 0.0, "workloads[0].max_region_share"),
    ],
)
def test_bad_allow_lists_and_shares_name_the_field(field: str, value: object, expect: str) -> None:
    with pytest.raises(InputError) as e:
        parse_workloads({"workloads": [_serving("api", **{field: value})]}, demand_supplied=True)
    assert expect in str(e.value)


# --- property: no plan violates the allow-lists or the caps --------------------

_REGIONS = sorted({(p.value, r) for p, r, _z, _s in _PLACES})


@st.composite
def _contracts(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, float], float | None]:
    workloads: list[dict[str, Any]] = []
    demand: dict[str, float] = {}
    for i in range(draw(st.integers(1, 3))):
        contract: dict[str, Any] = {
            "max_spot_share": draw(st.sampled_from([0.3, 1.0])),
            "max_zone_share": draw(st.sampled_from([0.5, 1.0])),
            "max_region_share": draw(st.sampled_from([0.34, 0.5, 0.7, 1.0])),
        }
        places = draw(st.lists(st.sampled_from(_REGIONS), min_size=1, max_size=3, unique=True))
        lists = draw(st.sampled_from(["none", "regions", "providers", "both"]))
        if lists in ("regions", "both"):
            contract["regions"] = sorted({r for _p, r in places})
        if lists in ("providers", "both"):
            contract["providers"] = sorted({p for p, _r in places})
        kind = draw(st.sampled_from(["serving", "batch", "training"]))
        amount = float(draw(st.integers(1, 40)))
        if kind == "serving":
            workloads.append(_serving(f"w{i}", **contract))
            demand[f"w{i}"] = amount
        elif kind == "batch":
            workloads.append(
                {
                    **_serving(f"w{i}", **contract),
                    "class": "batch",
                    "unit_hours": amount,
                    "deadline_hours": 2,
                    "max_units": 40,
                }
            )
        else:
            workloads.append(
                {
                    **_serving(f"w{i}", **contract),
                    "class": "training",
                    "min_units": 4,
                    "max_units": 4,
                    "unit_hours": 8,
                    "deadline_hours": 2,
                }
            )
    fleet = draw(st.sampled_from([None, 0.5, 0.8]))
    return workloads, demand, fleet


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(_contracts(), st.sampled_from(["milp", "fast"]))
def test_no_plan_violates_the_allow_lists_or_the_region_caps(
    case: tuple[list[dict[str, Any]], dict[str, float], float | None], planner: str
) -> None:
    workloads, demand, fleet_share = case
    fleet = {} if fleet_share is None else {"max_region_share": fleet_share}
    plan = _plan(workloads, demand, planner, fleet=fleet)
    a = plan.allocations[plan.allocations.units > 1e-9]
    for w in workloads:
        mine = a[a.workload == w["name"]]
        keys = mine.pool_key.str.split("/")
        if "regions" in w:
            assert set(keys.str[1]) <= set(w["regions"])
        if "providers" in w:
            assert set(keys.str[0]) <= set(w["providers"])
        share = min(w["max_region_share"], fleet_share or 1.0)
        by_region = _region_units(plan, w["name"]).to_numpy()
        if by_region.size:
            totals = by_region.sum(axis=1, keepdims=True)
            assert np.all(by_region <= share * totals + 1e-6)
    if fleet_share is not None:
        fleet_units = _region_units(plan).to_numpy()
        if fleet_units.size:
            assert np.all(
                fleet_units <= fleet_share * fleet_units.sum(axis=1, keepdims=True) + 1e-6
            )
