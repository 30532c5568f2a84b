"""The published JSON Schemas (``schemas/``): current with the models, valid
draft 2020-12, accepting the shipped examples and rejecting what the models
reject."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

import broker.daemon.config
from broker import schemas
from broker.daemon.config import DaemonConfig
from markets.errors import InputError
from policies.workloads.spec import parse_workloads

REPO = Path(__file__).resolve().parents[3]
WORKLOADS_EXAMPLE = REPO / "policies" / "examples" / "workloads.yaml"


def as_json(data: object) -> object:
    """YAML data as a JSON document has it (timestamps are strings)."""

    def default(o: object) -> str:
        if isinstance(o, dt.datetime | dt.date):
            return o.isoformat()
        raise TypeError(type(o).__name__)

    return json.loads(json.dumps(data, default=default))


def validator(kind: str) -> jsonschema.Draft202012Validator:
    published = json.loads(schemas.schema_path(kind).read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(published)


def config_docstring_example() -> object:
    """The example in ``broker.daemon.config``'s docstring (indented, after ``::``)."""
    doc = broker.daemon.config.__doc__ or ""
    block = doc.split("::\n", 1)[1].split("\nMust not:", 1)[0]
    return yaml.safe_load(re.sub(r"(?m)^    ", "", block))


@pytest.mark.parametrize("kind", list(schemas.SCHEMAS))
def test_the_published_schema_is_what_the_model_generates(kind: str) -> None:
    assert schemas.schema_path(kind).read_text(encoding="utf-8") == schemas.render(kind), (
        "out of date: run python -m broker.schemas"
    )


def test_check_fails_on_a_stale_schema_and_writing_fixes_it(tmp_path: Path) -> None:
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 1  # missing
    assert schemas.main(["--dir", str(tmp_path)]) == 0
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 0
    stale = schemas.schema_path("workloads", tmp_path)
    stale.write_text(stale.read_text().replace('"minimum"', '"exclusiveMinimum"', 1))
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 1
    assert schemas.main(["--check"]) == 0  # the repository's own


@pytest.mark.parametrize("kind", list(schemas.SCHEMAS))
def test_the_published_schema_is_valid_draft_2020_12(kind: str) -> None:
    published = json.loads(schemas.schema_path(kind).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(published)
    assert published["$schema"] == schemas.DRAFT


def test_the_shipped_workloads_example_validates() -> None:
    data = as_json(yaml.safe_load(WORKLOADS_EXAMPLE.read_text(encoding="utf-8")))
    validator("workloads").validate(data)
    parse_workloads(data)  # and the model agrees


def test_the_daemon_config_example_validates() -> None:
    data = as_json(config_docstring_example())
    assert isinstance(data, dict) and "checkpoint_hooks" in data  # the whole example
    validator("daemon-config").validate(data)
    DaemonConfig.model_validate(data)


def _workloads(**changes: object) -> dict[str, object]:
    job = {"name": "train", "class": "training", "instance_types": ["p4d.24xlarge"]}
    job.update(changes)  # type: ignore[arg-type]
    return {"workloads": [job]}


@pytest.mark.parametrize(
    ("kind", "doc"),
    [
        pytest.param("daemon-config", {"account": "a"}, id="owner-missing"),
        pytest.param("daemon-config", {"owner": "o", "horizon_hours": 0}, id="horizon-range"),
        pytest.param("daemon-config", {"owner": "o", "planner": "simplex"}, id="planner-choice"),
        pytest.param("daemon-config", {"owner": "o", "colour": "red"}, id="unknown-key"),
        pytest.param(
            "daemon-config", {"owner": "o", "intervals": {"poll_notices_s": 61}}, id="nested-range"
        ),
        pytest.param(
            "daemon-config", {"owner": "o", "providers": ["azure"]}, id="provider-literal"
        ),
        pytest.param("workloads", {"workloads": []}, id="no-workloads"),
        pytest.param("workloads", _workloads(**{"class": "gaming"}), id="class-choice"),
        pytest.param("workloads", _workloads(max_spot_share=1.5), id="share-range"),
        pytest.param("workloads", _workloads(instance_types=[]), id="no-types"),
    ],
)
def test_the_schema_rejects_what_the_model_rejects(kind: str, doc: dict[str, object]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        validator(kind).validate(doc)
    with pytest.raises((InputError, ValueError)):
        if kind == "workloads":
            parse_workloads(doc)
        else:
            DaemonConfig.model_validate(doc)
