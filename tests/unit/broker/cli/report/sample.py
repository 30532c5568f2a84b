"""A ``spotfolio.whatif/1`` document written by hand, with every block the
report reads (advice and risk in a shape their producer might grow: the
report reads them generically), for the renderers' tests."""

from __future__ import annotations

import copy
from typing import Any


def _scenario(name: str, committed: float, od: float, spot: float, saving: float) -> dict[str, Any]:
    return {
        "name": name, "total_cost_usd": round(committed + od + spot, 2),
        "cost_by_tier_usd": {"committed": committed, "on_demand": od, "spot": spot},
        "unmet_unit_hours": 0.0, "savings_vs_on_demand": saving,
        "expected_revocations": 49.72 if spot else 0.0, "break_glass_usd": 4011.0 if spot else 0.0,
        "forecast_error_usd": 399.61, "catch_up_usd": 0.0, "planned_cost_usd": 33779.8,
    }  # fmt: skip


_DOC: dict[str, Any] = {
    "schema": "spotfolio.whatif/1", "market": "default", "stale": False,
    "start": "2026-01-01T00:00:00+00:00", "hours": 72,
    "scenarios": [
        _scenario("on_demand", 0.0, 81904.86, 0.0, 0.0),
        _scenario("committed_quantile", 13145.38, 61305.2, 0.0, 0.091011),
        _scenario("static_mix", 0.0, 58392.33, 4181.63, 0.236017),
        _scenario("spotfolio", 9297.95, 16372.75, 10929.15, 0.553142),
    ],
    "budget_unmet": [],
    "stress": {"label": "x5 interruptions, x1 availability", "scenarios": [
        {"name": "spotfolio", "x1_total_cost_usd": 36599.85, "stressed_total_cost_usd": 41000.0,
         "x1_unmet_unit_hours": 0.0, "stressed_unmet_unit_hours": 3.5,
         "x1_expected_revocations": 49.7, "stressed_expected_revocations": 240.1}]},
    "committed_sweep": [
        {"share_of_peak": 0.4, "group": "gcp/us-east1/g2-standard-4", "instances": 34,
         "obligation_usd": 132629.39, "total_cost_usd": 45764.75, "delta_usd": None,
         "verdict": None, "marginal_occupancy": None},
        {"share_of_peak": 0.6, "group": "gcp/us-east1/g2-standard-4", "instances": 50,
         "obligation_usd": 195043.22, "total_cost_usd": 45175.61, "delta_usd": -589.14,
         "verdict": "pays", "marginal_occupancy": 0.712}],
    "breakeven_occupancy": 0.825, "breakeven_occupancy_on_demand": 0.63,
    "advice": {
        "buy": [{"provider": "gcp", "group": "gcp/us-east1/g2-standard-4", "term_years": 1,
                 "payment": "no_upfront", "count": 29, "obligation_usd": 113125.0,
                 "monthly_saving_usd": 5302.0, "breakeven_utilisation": 0.64}],
        "summary": ["Commit 29 x g2-standard-4 in us-east1 for a year: saves $5,302/month."],
    },
    "risk": {"samples": 200, "seed": 0,
             "cost_usd": {"p10": 34100.0, "p50": 36600.0, "p90": 41200.0},
             "unmet_unit_hours": {"p10": 0.0, "p50": 1.5, "p90": 12.0}},
    "timeline": {"basis": "planned", "step_hours": 24, "scenarios": {
        "spotfolio": {"committed": [309.9, 309.9, 309.9], "on_demand": [521.1, 465.7, 480.0],
                      "spot": [483.4, 517.8, 500.0]}}},
    "spot_by_zone": [
        {"scenario": "spotfolio", "zone": "gcp/us-east1-d", "instance_hours": 211.0,
         "planned_usd": 31.55, "share": 0.6},
        {"scenario": "spotfolio", "zone": "aws/eu-west-1b", "instance_hours": 140.7,
         "planned_usd": 39.81, "share": 0.4}],
    "explanation": ["plan feasible (proven gap 6.28%) by cbc in 2.68 s, objective $2,607.82",
                    "  obligation $113,125 over the term; saves $5,302/month against the "
                    "spot/on-demand mix; busy 100% of hours, pays above 64%"],
}  # fmt: skip


def sample_doc() -> dict[str, Any]:
    """A fresh copy (tests may take blocks out)."""
    return copy.deepcopy(_DOC)
