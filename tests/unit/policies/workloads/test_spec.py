"""The workloads file: the shipped example loads, and every bad field is named."""

from __future__ import annotations

import copy
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.cli import EXIT_INPUT
from markets.errors import InputError
from policies.workloads.spec import (
    ClassDefaults,
    DemandShape,
    Workload,
    WorkloadClass,
    WorkloadSet,
    default_workloads,
    load_workloads,
    parse_workloads,
)

EXAMPLE = resources.files("policies").joinpath("examples/workloads.yaml")

# A parsed workloads file, navigated and mutated by the tests (Any: what
# yaml.safe_load gives; the nesting is the file's, not a type of ours).
Doc = dict[str, Any]


def _example() -> Doc:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- the shipped example ----------------------------------------------------------


def test_example_has_one_workload_of_each_class() -> None:
    ws = default_workloads()
    assert [w.workload_class for w in ws.workloads] == [
        WorkloadClass.SERVING,
        WorkloadClass.TRAINING,
        WorkloadClass.BATCH,
    ]
    assert ws.names() == ["chat-api", "llm-finetune", "research-sweeps"]


def test_example_takes_serving_defaults_it_does_not_state() -> None:
    serving = default_workloads().by_name("chat-api")
    assert "max_spot_share" not in _example()["workloads"][0]
    assert serving.max_spot_share == pytest.approx(0.3)
    assert serving.max_zone_share == pytest.approx(0.5)
    assert serving.max_pool_share == pytest.approx(0.5)
    batch = default_workloads().by_name("research-sweeps")
    # An unmet serving unit costs 5-10x a batch unit-hour (docs/concepts/tiers.md).
    ratio = serving.unmet_penalty_usd_per_unit_hour / batch.unmet_penalty_usd_per_unit_hour
    assert 5 <= ratio <= 10


def test_example_training_gang_and_deadline() -> None:
    job = default_workloads().by_name("llm-finetune")
    assert job.gang_sizes() == [16, 24, 32, 40, 48, 56, 64]
    assert job.non_revocable_min_units == 16
    assert job.min_dwell_minutes > 0
    assert job.throughput_of("p4d.24xlarge") == 1.0
    assert job.throughput_of("p5.48xlarge") == 3.0
    assert job.preference_rank("p5.48xlarge") == 0


def test_a_training_gang_lives_in_one_zone_on_one_type_unless_it_says_otherwise() -> None:
    gang = default_workloads().by_name("llm-finetune")
    assert (gang.placement, gang.mixed_types) == ("zone", False)
    key = gang.gang_placement_key(provider="aws", region="us-east-1", zone="us-east-1a",
                                  instance_type="p4d.24xlarge")  # fmt: skip
    assert key == "aws/us-east-1/us-east-1a/p4d.24xlarge"
    loose = gang.model_copy(update={"placement": "any", "mixed_types": True})
    assert loose.gang_placement_key(provider="gcp", region="europe-west4",
                                    zone="europe-west4-b", instance_type="a2-highgpu-8g") == (
        "gcp/*/*/*"
    )  # fmt: skip
    assert (
        default_workloads()
        .by_name("chat-api")
        .gang_placement_key(
            provider="aws", region="us-east-1", zone="us-east-1a", instance_type="g5.xlarge"
        )
        is None
    )


def test_example_states_every_throughput_factor() -> None:
    # The example's references differ per workload (A10G, A100, V100), so no
    # listed type may fall back to the caller's default.
    for w in default_workloads().workloads:
        assert set(w.throughput) == set(w.instance_types), w.name


def test_unstated_throughput_takes_the_callers_default() -> None:
    w = Workload(
        name="b",
        workload_class=WorkloadClass.BATCH,
        instance_types=["p3.2xlarge", "p5.48xlarge"],
        throughput={"p3.2xlarge": 1.0},
        unit_hours=10,
    )
    assert w.throughput_of("p5.48xlarge") == 1.0
    assert w.throughput_of("p5.48xlarge", default=6.6) == 6.6
    assert w.throughput_of("p3.2xlarge", default=6.6) == 1.0
    with pytest.raises(KeyError, match="not acceptable"):
        w.throughput_of("g5.xlarge")


def test_research_is_an_alias_of_batch() -> None:
    assert _example()["workloads"][2]["class"] == "research"
    assert default_workloads().by_name("research-sweeps").workload_class is WorkloadClass.BATCH
    assert WorkloadClass("research") is WorkloadClass.BATCH
    assert WorkloadClass("batch") is WorkloadClass.BATCH


def test_load_from_file_equals_default(tmp_path: Path) -> None:
    assert load_workloads(_write(tmp_path, _example())) == default_workloads()


def test_lookups() -> None:
    ws = default_workloads()
    assert [w.name for w in ws.of_class("training")] == ["llm-finetune"]
    assert ws.of_class(WorkloadClass.BATCH)[0].name == "research-sweeps"
    assert "p3.2xlarge" in ws.instance_types()
    assert len(ws.instance_types()) == len(set(ws.instance_types()))
    with pytest.raises(KeyError, match="known: chat-api"):
        ws.by_name("nope")


def test_class_defaults_partial_override_keeps_the_rest(tmp_path: Path) -> None:
    data = _example()
    data["class_defaults"] = {"serving": {"max_spot_share": 0.1}}
    ws = load_workloads(_write(tmp_path, data))
    serving = ws.by_name("chat-api")
    assert serving.max_spot_share == pytest.approx(0.1)
    builtin = ClassDefaults().serving
    assert serving.unmet_penalty_usd_per_unit_hour == builtin.unmet_penalty_usd_per_unit_hour
    assert ws.class_defaults.serving.restart_minutes == builtin.restart_minutes
    # A value stated on the workload wins over the class default.
    data["workloads"][0]["max_spot_share"] = 0.25
    assert load_workloads(_write(tmp_path, data)).workloads[0].max_spot_share == 0.25


def test_demand_file_makes_inline_shape_optional(tmp_path: Path) -> None:
    data = _example()
    del data["workloads"][0]["demand"]
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as info:
        load_workloads(path)
    assert info.value.field == "workloads[0].demand"
    assert load_workloads(path, demand_supplied=True).workloads[0].demand is None


def test_non_elastic_job_defaults_max_to_min() -> None:
    job = Workload.model_validate(
        {
            "name": "rigid",
            "class": "training",
            "instance_types": ["p4d.24xlarge"],
            "min_units": 8,
            "unit_hours": 100,
        }
    )
    assert job.max_units == 8
    assert job.gang_sizes() == [8]


def test_demand_shape_peak_window_and_weekend() -> None:
    shape = DemandShape(
        base_units=10, peak_units=30, peak_start_hour=9, peak_end_hour=21, weekend_factor=0.5
    )
    assert [shape.units_at(h) for h in (8, 9, 20, 21)] == [10, 30, 30, 10]
    assert shape.units_at(12, weekend=True) == 20
    night = DemandShape(base_units=1, peak_units=2, peak_start_hour=22, peak_end_hour=2)
    assert [night.in_peak(h) for h in (21, 22, 23, 0, 1, 2)] == [0, 1, 1, 1, 1, 0]


def test_python_construction_by_field_name() -> None:
    ws = WorkloadSet(
        workloads=[
            Workload(
                name="b",
                workload_class=WorkloadClass.BATCH,
                instance_types=["g5.xlarge"],
                unit_hours=10,
            )
        ]
    )
    assert ws.workloads[0].max_spot_share == 1.0
    assert ws.workloads[0].throughput == {}


# --- every error names the file, the field path and the expectation -----------------

Mutation = Callable[[Doc], None]


def _set(path: str, value: object) -> Mutation:
    """Mutation setting ``workloads/1/max_units``-style paths (``/``: type names hold dots)."""

    def apply(data: Doc) -> None:
        *parents, last = path.split("/")
        node: Any = data  # a mapping or a list, as the path goes (see Doc)
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(last) if last.isdigit() else last] = value

    return apply


def _drop(path: str) -> Mutation:
    def apply(data: Doc) -> None:
        *parents, last = path.split("/")
        node: Any = data  # a mapping or a list, as the path goes (see Doc)
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        del node[last]

    return apply


BAD_FIELDS = [
    pytest.param(
        _set("workloads/2/max_spot_share", 1.5),
        "workloads[2].max_spot_share",
        "<= 1",
        id="spot-share-above-1",
    ),
    pytest.param(
        _set("workloads/2/max_spot_share", "lots"),
        "workloads[2].max_spot_share",
        "number",
        id="spot-share-not-a-number",
    ),
    pytest.param(
        _set("workloads/0/max_zone_share", 0),
        "workloads[0].max_zone_share",
        "> 0",
        id="zone-share-zero",
    ),
    pytest.param(
        _set("workloads/0/class", "servng"),
        "workloads[0].class",
        "'serving', 'training' or 'batch'",
        id="unknown-class",
    ),
    pytest.param(
        _set("workloads/0/max_spot_shares", 0.2),
        "workloads[0].max_spot_shares",
        "known field",
        id="misspelt-field",
    ),
    pytest.param(
        _set("budget_usd_per_hr", 10),
        "budget_usd_per_hr",
        "known field",
        id="misspelt-top-level-field",
    ),
    pytest.param(
        _drop("workloads/1/instance_types"),
        "workloads[1].instance_types",
        "required",
        id="missing-instance-types",
    ),
    pytest.param(
        _set("workloads/1/instance_types", []),
        "workloads[1].instance_types",
        "at least 1",
        id="empty-instance-types",
    ),
    pytest.param(
        _set("workloads/1/instance_types", ["p5.48xlarge", "p5.48xlarge"]),
        "workloads[1].instance_types",
        "listed once",
        id="repeated-instance-type",
    ),
    pytest.param(
        _set("workloads/1/max_units", 8),
        "workloads[1].max_units",
        "max_units >= min_units",
        id="max-below-min",
    ),
    pytest.param(
        _set("workloads/1/max_units", 60),
        "workloads[1].step_units",
        "divides max_units - min_units",
        id="range-not-multiple-of-step",
    ),
    pytest.param(
        _set("workloads/1/deadline_hours", 10),
        "workloads[1].deadline_hours",
        "at least",
        id="deadline-infeasible",
    ),
    pytest.param(
        _set("workloads/1/elastic", False),
        "workloads[1].max_units",
        "elastic: false",
        id="rigid-job-with-range",
    ),
    pytest.param(
        _drop("workloads/1/max_units"),
        "workloads[1].max_units",
        "maximum size for an elastic job",
        id="elastic-without-max",
    ),
    pytest.param(
        _drop("workloads/1/min_units"),
        "workloads[1].min_units",
        "at least 1",
        id="training-without-min",
    ),
    pytest.param(
        _set("workloads/1/throughput/g5.xlarge", 2.0),
        "workloads[1].throughput.g5.xlarge",
        "listed in instance_types",
        id="throughput-for-unlisted-type",
    ),
    pytest.param(
        _set("workloads/1/throughput/p5.48xlarge", 0),
        "workloads[1].throughput.p5.48xlarge",
        "> 0",
        id="throughput-zero",
    ),
    pytest.param(
        _set("workloads/0/min_units", 4),
        "workloads[0].min_units",
        "training only",
        id="training-field-on-serving",
    ),
    pytest.param(
        _set("workloads/2/demand", {"base_units": 1, "peak_units": 2}),
        "workloads[2].demand",
        "serving only",
        id="serving-field-on-batch",
    ),
    pytest.param(
        _drop("workloads/2/unit_hours"),
        "workloads[2].unit_hours",
        "total work",
        id="batch-without-work",
    ),
    pytest.param(
        _drop("workloads/0/demand"),
        "workloads[0].demand",
        "demand shape",
        id="serving-without-demand",
    ),
    pytest.param(
        _set("workloads/0/demand/peak_units", 3),
        "workloads[0].demand.peak_units",
        "peak_units >= base_units",
        id="peak-below-base",
    ),
    pytest.param(
        _set("workloads/0/demand/peak_end_hour", 25),
        "workloads[0].demand.peak_end_hour",
        "<= 24",
        id="peak-hour-out-of-day",
    ),
    pytest.param(
        _set("workloads/2/name", "chat-api"),
        "workloads[2].name",
        "not used before",
        id="duplicate-name",
    ),
    pytest.param(
        _set("workloads/2/name", "Research Sweeps"),
        "workloads[2].name",
        "lowercase letters",
        id="name-with-capitals",
    ),
    pytest.param(
        _set("workloads/2/unmet_penalty_usd_per_unit_hour", -1),
        "workloads[2].unmet_penalty_usd_per_unit_hour",
        "> 0",
        id="negative-penalty",
    ),
    pytest.param(
        _set("class_defaults", {"serving": {"max_spot_share": 2}}),
        "class_defaults.serving.max_spot_share",
        "<= 1",
        id="bad-class-default",
    ),
    pytest.param(
        _set("workloads", []),
        "workloads",
        "at least 1",
        id="no-workloads",
    ),
    pytest.param(
        _set("workloads/1/placement", "rack"),
        "workloads[1].placement",
        "'zone', 'region' or 'any'",
        id="bad-gang-placement",
    ),
    pytest.param(
        _set("workloads/1/mixed_types", "maybe"),
        "workloads[1].mixed_types",
        "boolean",
        id="bad-mixed-types",
    ),
    pytest.param(
        _set("workloads/2/placement", "zone"),
        "workloads[2].placement",
        "training only",
        id="placement-on-a-batch-workload",
    ),
]


@pytest.mark.parametrize(("mutate", "field", "expected"), BAD_FIELDS)
def test_bad_field_is_named(tmp_path: Path, mutate: Mutation, field: str, expected: str) -> None:
    data = copy.deepcopy(_example())
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as info:
        load_workloads(path)
    err = info.value
    assert err.source == str(path)
    assert err.field == field
    assert expected in err.expected
    # The one line the CLI prints names all three.
    assert str(path) in str(err) and field in str(err) and expected in str(err)


def test_bad_value_is_echoed(tmp_path: Path) -> None:
    data = _example()
    data["workloads"][2]["max_spot_share"] = 1.5
    with pytest.raises(InputError) as info:
        load_workloads(_write(tmp_path, data))
    assert info.value.got == 1.5


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param("workloads:\n  - name: [a\n", 3, id="unclosed-bracket"),
        pytest.param("workloads:\n  - name: a\n    name: b\n", 3, id="duplicate-key"),
        pytest.param("a: 1\n\tb: 2\n", 2, id="tab-indent"),
    ],
)
def test_yaml_syntax_error_names_the_line(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_workloads(path)
    assert info.value.source == str(path)
    assert info.value.field is not None and info.value.field.startswith(f"line {line}")
    assert "YAML" in info.value.expected


@pytest.mark.parametrize(
    "text",
    [pytest.param("", id="empty"), pytest.param("- a\n- b\n", id="list"), "42\n"],
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match="mapping with a 'workloads' list"):
        load_workloads(path)


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_workloads(tmp_path / "absent.yaml")
    assert info.value.source.endswith("absent.yaml")


def test_parse_workloads_without_a_file() -> None:
    with pytest.raises(InputError) as info:
        parse_workloads({"workloads": "x"}, source="--policies")
    assert info.value.source == "--policies"
    assert info.value.field == "workloads"


def test_cli_exit_codes_are_not_this_module_s_concern() -> None:
    """The lead tests ``whatif --policies`` exit 2; here only the contract it relies on:
    the error is an InputError, which broker.cli.main maps to exit 2."""
    assert EXIT_INPUT == 2
    assert issubclass(InputError, Exception)
