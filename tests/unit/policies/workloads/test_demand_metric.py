"""A serving workload's demand_metric block and the value of time: what a
file may say, and the one-line error naming the field when it may not."""

from __future__ import annotations

from typing import Any

import pytest

from markets.errors import InputError
from policies.workloads.spec import WorkloadClass, parse_workloads

PROM = {
    "source": "prometheus",
    "url": "http://prom:9090",
    "query": "sum(rate(x[2m]))",
    "value_per_replica": 40,
}


def _serving(**kw: Any) -> dict[str, Any]:
    w = {"name": "api", "class": "serving", "instance_types": ["g5.xlarge"]}
    return {"workloads": [w | kw]}


def test_a_serving_workload_may_take_its_demand_from_a_metric() -> None:
    (w,) = parse_workloads(_serving(demand_metric=PROM)).workloads
    assert w.demand is None and w.demand_metric is not None
    m = w.demand_metric
    assert (m.min_replicas, m.cooldown_minutes, m.margin) == (1, 15.0, 0.2)
    assert m.lookahead_for(w.restart_minutes) == w.restart_minutes + 1 == 4.0


@pytest.mark.parametrize(
    ("kw", "field", "says"),
    [
        pytest.param(
            {"demand_metric": PROM, "demand": {"base_units": 1, "peak_units": 2}},
            "workloads[0].demand_metric",
            "not both",
            id="both",
        ),
        pytest.param({}, "workloads[0].demand", "demand_metric", id="neither"),
        pytest.param(
            {"demand_metric": PROM | {"lookahead_minutes": 2}},
            "workloads[0].demand_metric.lookahead_minutes",
            "readiness",
            id="short",
        ),
        pytest.param(
            {"demand_metric": {k: v for k, v in PROM.items() if k != "url"}},
            "workloads[0].demand_metric.url",
            "URL",
            id="no-url",
        ),
        pytest.param(
            {"demand_metric": PROM | {"url": "http://u:pw@prom:9090"}},
            "workloads[0].demand_metric.url",
            "user:password",
            id="password",
        ),
        pytest.param(
            {"demand_metric": PROM | {"region": "us-east-1"}},
            "workloads[0].demand_metric.region",
            "cloudwatch only",
            id="region",
        ),
        pytest.param(
            {"demand_metric": PROM | {"min_replicas": 0}},
            "workloads[0].demand_metric.min_replicas",
            ">= 1",
            id="zero-min",
        ),
        pytest.param(
            {"demand_metric": PROM | {"value_per_replica": "nan"}},
            "workloads[0].demand_metric.value_per_replica",
            "finite",
            id="nan",
        ),
    ],
)
def test_a_bad_demand_metric_names_its_field(kw: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(InputError) as e:
        parse_workloads(_serving(**kw), source="w.yaml")
    assert e.value.source == "w.yaml" and e.value.field == field
    assert says in str(e.value)


def test_a_demand_metric_on_a_batch_job_is_refused() -> None:
    data = {
        "workloads": [
            {
                "name": "b",
                "class": "batch",
                "instance_types": ["g5.xlarge"],
                "unit_hours": 10,
                "demand_metric": PROM,
            }
        ]
    }
    with pytest.raises(InputError, match="serving only"):
        parse_workloads(data)


def test_cloudwatch_needs_a_region_and_no_url() -> None:
    cw = {"source": "cloudwatch", "query": "SUM(METRICS())", "value_per_replica": 1}
    with pytest.raises(InputError, match="AWS region"):
        parse_workloads(_serving(demand_metric=cw))
    (w,) = parse_workloads(_serving(demand_metric=cw | {"region": "eu-west-1"})).workloads
    assert w.demand_metric is not None and w.demand_metric.region == "eu-west-1"


def test_value_of_time_defaults_per_class_and_a_workload_overrides_it() -> None:
    data = {
        "class_defaults": {"batch": {"value_of_time_usd_per_hour": 5}},
        "workloads": [
            {
                "name": "api",
                "class": "serving",
                "instance_types": ["g5.xlarge"],
                "demand_metric": PROM,
            },
            {
                "name": "t",
                "class": "training",
                "instance_types": ["p4d.24xlarge"],
                "min_units": 8,
                "unit_hours": 80,
            },
            {"name": "r", "class": "research", "instance_types": ["g5.xlarge"], "unit_hours": 8},
            {
                "name": "t2",
                "class": "training",
                "instance_types": ["p4d.24xlarge"],
                "min_units": 8,
                "unit_hours": 80,
                "value_of_time_usd_per_hour": 0,
            },
        ],
    }
    ws = parse_workloads(data)
    vot = {w.name: w.value_of_time_usd_per_hour for w in ws.workloads}
    assert vot["api"] > vot["t"] > vot["t2"] == 0.0
    assert vot["r"] == 5.0
    plain = parse_workloads({"workloads": data["workloads"][2:3]})  # type: ignore[index]
    assert plain.of_class(WorkloadClass.BATCH)[0].value_of_time_usd_per_hour == 0.0
