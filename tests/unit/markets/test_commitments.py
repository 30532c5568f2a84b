"""Owned commitments from a file: YAML and CSV read alike; bad input names
the file, the row and the field."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from markets.commitments import (
    CommitmentKind,
    PaymentOption,
    load_owned,
    term_hours,
)
from markets.errors import InputError
from markets.model import Provider

YAML = """\
commitments:
  - id: ri-1
    provider: aws
    kind: reserved
    region: us-east-1
    instance_type: p4d.24xlarge
    count: 2
    start: 2026-01-01T00:00:00Z
    end: 2027-01-01T00:00:00Z
    payment: all_upfront
  - id: sp-1
    provider: aws
    kind: savings_plan_compute
    usd_per_hour: 40
    start: 2026-03-01T00:00:00Z
    end: 2029-03-01T00:00:00Z
"""

CSV = """\
id,provider,kind,region,instance_type,count,start,end,payment
ri-1,aws,reserved,us-east-1,p4d.24xlarge,2,2026-01-01T00:00:00Z,2027-01-01T00:00:00Z,all_upfront
cud-1,gcp,cud,us-east1,g2-standard-4,30,2026-02-01T00:00:00Z,2029-02-01T00:00:00Z,
"""


def test_yaml_and_csv_give_the_same_values(tmp_path: Path) -> None:
    y = tmp_path / "owned.yaml"
    y.write_text(YAML)
    c = tmp_path / "owned.csv"
    c.write_text(CSV)
    ri, sp = load_owned(y)
    ri_csv, cud = load_owned(c)
    assert ri == ri_csv
    assert ri.group == "aws/us-east-1/p4d.24xlarge" and ri.payment is PaymentOption.ALL_UPFRONT
    assert sp.kind is CommitmentKind.SAVINGS_PLAN_COMPUTE and sp.group is None
    assert sp.usd_per_hour == 40.0
    assert cud.provider is Provider.GCP and cud.payment is PaymentOption.NO_UPFRONT
    at = datetime(2026, 12, 31, tzinfo=UTC)
    assert ri.active_at(at) and ri.hours_left(at) == pytest.approx(24.0)


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        pytest.param(
            "x,aws,reserved,us-east-1,p4d.24xlarge,2,2026-01-01,2025-01-01,",
            "row 1: end: expected a time after start",
            id="ends-before-start",
        ),
        pytest.param(
            "x,aws,reserved,us-east-1,p4d.24xlarge,two,2026-01-01,2027-01-01,",
            "row 1: count: expected a whole number",
            id="count-not-a-number",
        ),
        pytest.param(
            "x,aws,reserved,us-east-1,p4d.24xlarge,2,2026-01-01,2027-01-01,monthly",
            "row 1: payment: expected one of no_upfront",
            id="bad-payment",
        ),
        pytest.param(
            "x,aws,cud,us-east-1,p4d.24xlarge,2,2026-01-01,2027-01-01,",
            "row 1: kind: expected cud for gcp",
            id="cud-on-aws",
        ),
        pytest.param(
            "x,aws,reserved,us-east-1,,2,2026-01-01,2027-01-01,",
            "row 1: instance_type",
            id="no-type",
        ),
        pytest.param(
            "x,aws,reserved,us-east-1,p4d.24xlarge,2,soon,2027-01-01,",
            "row 1: start: expected an ISO 8601 time",
            id="bad-time",
        ),
    ],
)
def test_a_bad_row_names_file_row_and_field(tmp_path: Path, row: str, needle: str) -> None:
    p = tmp_path / "owned.csv"
    p.write_text(CSV.splitlines()[0] + "\n" + row + "\n")
    with pytest.raises(InputError) as e:
        load_owned(p)
    assert str(e.value).startswith(str(p)) and needle in str(e.value)


def test_duplicate_ids_and_unknown_fields_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "owned.yaml"
    p.write_text(YAML.replace("id: sp-1", "id: ri-1"))
    with pytest.raises(InputError, match="row 2: id"):
        load_owned(p)
    p.write_text(YAML.replace("payment: all_upfront", "colour: blue"))
    with pytest.raises(InputError, match="row 1: colour"):
        load_owned(p)


def test_terms_bill_every_hour_of_365_days() -> None:
    assert term_hours(1) == 8760 and term_hours(3) == 3 * 8760
    with pytest.raises(InputError):
        term_hours(2)
