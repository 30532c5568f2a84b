"""The lifecycle's replacement keeps a workload's region share of spot
(``max_region_share``) beside its zone and pool shares."""

from __future__ import annotations

from broker.lifecycle.choices import shares_ok
from broker.lifecycle.view import Candidate, Tally
from markets.keys import PoolKey
from policies.workloads.spec import Workload, parse_workloads


def _cand(key: str) -> Candidate:
    return Candidate(
        pool_key=key,
        zone_key=PoolKey.parse(key).zone_key,
        instance_type="g5.xlarge",
        units=1,
        work_per_instance=1.0,
        spot_usd_per_hour=0.4,
        on_demand_usd_per_hour=1.0,
        spot_usd_per_work_hour=0.4,
        on_demand_usd_per_work_hour=1.0,
        hazard_per_hour=0.01,
        preference_rank=0,
    )


def _sweeps(**extra: object) -> Workload:
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["g5.xlarge"],
                    "unit_hours": 100,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                    **extra,
                }
            ]
        }
    ).workloads[0]


EAST_A = "aws/us-east-1/us-east-1a/g5.xlarge"
EAST_B = "aws/us-east-1/us-east-1b/g5.xlarge"
WEST = "aws/us-west-2/us-west-2a/g5.xlarge"


def test_a_replacement_into_a_full_region_is_refused_even_in_another_zone_of_it() -> None:
    tally = Tally(
        units=10.0,
        spot_units=10.0,
        spot_by_zone={"aws/us-east-1a": 5.0, "aws/us-west-2a": 5.0},
        spot_by_pool={EAST_A: 5.0, WEST: 5.0},
    )
    assert shares_ok(_sweeps(), tally, _cand(EAST_B), 2.0)  # no region cap: allowed
    capped = _sweeps(max_region_share=0.5)
    assert not shares_ok(capped, tally, _cand(EAST_B), 2.0)  # 7 of 12 in us-east-1
    assert not shares_ok(capped, tally, _cand(WEST), 2.0)
    # a region holding none of its spot yet is always allowed
    assert shares_ok(capped, Tally(spot_units=10.0, spot_by_pool={WEST: 10.0}), _cand(EAST_B), 2.0)
