"""A ``spotfolio.whatif/1`` document written by hand, with every block the
report reads (``advice`` and ``risk`` in the shapes ``broker.whatif.advice``
and ``broker.whatif.risk`` write), for the renderers' tests; and
``real_doc``: that document with the ``advice`` and ``risk`` of a real tiny
what-if (``tests.fakes.tiny_market``, seven days: a full first week)."""

from __future__ import annotations

import copy
import functools
from typing import Any


def _scenario(name: str, committed: float, od: float, spot: float, saving: float) -> dict[str, Any]:
    return {
        "name": name,
        "total_cost_usd": round(committed + od + spot, 2),
        "cost_by_tier_usd": {"committed": committed, "on_demand": od, "spot": spot},
        "unmet_unit_hours": 0.0,
        "savings_vs_on_demand": saving,
        "expected_revocations": 49.72 if spot else 0.0,
        "break_glass_usd": 4011.0 if spot else 0.0,
        "forecast_error_usd": 399.61,
        "catch_up_usd": 0.0,
        "planned_cost_usd": 33779.8,
    }


_DOC: dict[str, Any] = {
    "schema": "spotfolio.whatif/1",
    "market": "default",
    "stale": False,
    "start": "2026-01-01T00:00:00+00:00",
    "hours": 72,
    "scenarios": [
        _scenario("on_demand", 0.0, 81904.86, 0.0, 0.0),
        _scenario("committed_quantile", 13145.38, 61305.2, 0.0, 0.091011),
        _scenario("static_mix", 0.0, 58392.33, 4181.63, 0.236017),
        _scenario("spotfolio", 9297.95, 16372.75, 10929.15, 0.553142),
    ],
    "budget_unmet": [],
    "stress": {
        "label": "x5 interruptions, x1 availability",
        "scenarios": [
            {
                "name": "spotfolio",
                "x1_total_cost_usd": 36599.85,
                "stressed_total_cost_usd": 41000.0,
                "x1_unmet_unit_hours": 0.0,
                "stressed_unmet_unit_hours": 3.5,
                "x1_expected_revocations": 49.7,
                "stressed_expected_revocations": 240.1,
            }
        ],
    },
    "committed_sweep": [
        {
            "share_of_peak": 0.4,
            "group": "gcp/us-east1/g2-standard-4",
            "instances": 34,
            "obligation_usd": 132629.39,
            "total_cost_usd": 45764.75,
            "delta_usd": None,
            "verdict": None,
            "marginal_occupancy": None,
        },
        {
            "share_of_peak": 0.6,
            "group": "gcp/us-east1/g2-standard-4",
            "instances": 50,
            "obligation_usd": 195043.22,
            "total_cost_usd": 45175.61,
            "delta_usd": -589.14,
            "verdict": "pays",
            "marginal_occupancy": 0.712,
        },
    ],
    "breakeven_occupancy": 0.825,
    "breakeven_occupancy_on_demand": 0.63,
    "advice": {
        "commitments": [
            {
                "provider": "gcp",
                "region": "us-east1",
                "instance_type": "g2-standard-4",
                "family": "g2",
                "group": "gcp/us-east1/g2-standard-4",
                "term_years": 1,
                "payment": "no_upfront",
                "count": 29,
                "kind": "instances",
                "size": "29",
                "usd_per_instance_hour": 0.445304,
                "obligation_usd": 113125.07,
                "monthly_saving_usd": 5302.0,
                "utilisation": 1.0,
                "breakeven_utilisation": 0.64,
            }
        ],
        "commitments_from": "period plan",
        "first_week": {
            "hours": 72,
            "rounding": "whole instances",
            "pools": [
                {
                    "pool_key": "gcp/us-east1/g2-standard-4",
                    "tier": "committed",
                    "instance_type": "g2-standard-4",
                    "max_instances": 29,
                    "mean_instances": 29.0,
                    "instance_hours": 2088,
                    "instances_by_hour": [29] * 72,
                },
                {
                    "pool_key": "gcp/us-east1/us-east1-d/g2-standard-4",
                    "tier": "spot",
                    "instance_type": "g2-standard-4",
                    "max_instances": 9,
                    "mean_instances": 2.931,
                    "instance_hours": 211,
                    "instances_by_hour": [3] * 70 + [0, 1],
                },
            ],
        },
        "cost_by_workload": [
            {
                "name": "chat-api",
                "team": "chat",
                "total_usd": 30000.0,
                "unused_commitment_usd": 0.0,
                "unmet_unit_hours": 0.0,
            },
            {
                "name": "train",
                "team": None,
                "total_usd": 6599.85,
                "unused_commitment_usd": 0.0,
                "unmet_unit_hours": 0.0,
            },
        ],
        "cost_by_team": [
            {
                "name": "(no team)",
                "team": "(no team)",
                "total_usd": 6599.85,
                "unused_commitment_usd": 0.0,
                "unmet_unit_hours": 0.0,
            },
            {
                "name": "chat",
                "team": "chat",
                "total_usd": 30000.0,
                "unused_commitment_usd": 0.0,
                "unmet_unit_hours": 0.0,
            },
        ],
        "reconciliation": {
            "objective_usd": 2607.82,
            "period_planned_usd": 2500.0,
            "planned_usd": 33779.8,
            "billed_usd": 36599.85,
            "objective_less_planned": [
                {"what": "churn, restart and other penalties", "usd": 107.82}
            ],
            "billed_less_planned": [
                {"what": "break-glass on-demand (lifecycle)", "usd": 4011.0},
                {"what": "actual spot prices", "usd": -1190.95},
            ],
            "definitions": {
                "objective_usd": "the plan's objective",
                "period_planned_usd": "the plan's dollars",
                "planned_usd": "the replayed plan's dollars",
                "billed_usd": "that plan billed",
            },
        },
    },
    "risk": {
        "scenarios": 200,
        "seed": 0,
        "cost_usd": {"p10": 34100.0, "p50": 36600.0, "p90": 41200.0},
        "unmet_unit_hours": {"p10": 0.0, "p50": 1.5, "p90": 12.0},
        "billed_usd": 36599.85,
        "billed_rank": 0.45,
    },
    "timeline": {
        "basis": "planned",
        "step_hours": 24,
        "scenarios": {
            "spotfolio": {
                "committed": [309.9, 309.9, 309.9],
                "on_demand": [521.1, 465.7, 480.0],
                "spot": [483.4, 517.8, 500.0],
            }
        },
    },
    "spot_by_zone": [
        {
            "scenario": "spotfolio",
            "zone": "gcp/us-east1-d",
            "instance_hours": 211.0,
            "planned_usd": 31.55,
            "share": 0.6,
        },
        {
            "scenario": "spotfolio",
            "zone": "aws/eu-west-1b",
            "instance_hours": 140.7,
            "planned_usd": 39.81,
            "share": 0.4,
        },
    ],
    "explanation": [
        "plan feasible (proven gap 6.28%) by cbc in 2.68 s, objective $2,607.82",
        "  obligation $113,125 over the term; saves $5,302/month against the "
        "spot/on-demand mix; busy 100% of hours, pays above 64%",
    ],
}


def sample_doc() -> dict[str, Any]:
    """A fresh copy (tests may take blocks out)."""
    return copy.deepcopy(_DOC)


@functools.cache
def _tiny() -> tuple[dict[str, Any], dict[str, Any]]:
    from broker.whatif.advice import advise
    from broker.whatif.risk import risk_band
    from broker.whatif.run import run_whatif
    from tests.fakes.tiny_market import TinyMarket, pool_key
    from tests.unit.broker.whatif.test_advice import workloads

    result = run_whatif(TinyMarket(share={pool_key("a"): 0.5}), workloads(), days=7)
    return advise(result).to_dict(), risk_band(result, 4, seed=0).to_dict()


def real_doc() -> dict[str, Any]:
    """``sample_doc`` with a real ``advice`` and ``risk`` (module docstring;
    the what-if runs once per test session)."""
    advice, risk = _tiny()
    doc = sample_doc()
    doc["advice"], doc["risk"] = copy.deepcopy(advice), copy.deepcopy(risk)
    return doc
