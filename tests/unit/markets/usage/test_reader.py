"""``markets.usage.read_usage`` on exports generated from the specs' columns."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pytest

from markets.errors import InputError
from markets.usage import UNMAPPED, MappingRules, load_rules, read_usage
from tests.fakes.billing_exports import START, Fleet, write_cur, write_focus

FLEET = [
    Fleet("p3.2xlarge", 3, workload="chat-api", team="chat"),
    Fleet("p3.8xlarge", 2, tier="spot", team="research"),
    Fleet("g5.12xlarge", 1, tier="committed", workload="train", account="444455556666"),
]
HOURS = 48

Writer = Callable[[Path], Path]
WRITERS = [
    pytest.param(lambda p: write_focus(p / "f.csv", FLEET, HOURS), id="focus-1.2-csv"),
    pytest.param(lambda p: write_focus(p / "f.parquet", FLEET, HOURS), id="focus-1.2-parquet"),
    pytest.param(
        lambda p: write_focus(p / "f.csv.gz", FLEET, HOURS, version="1.0"), id="focus-1.0-csv.gz"
    ),
    pytest.param(lambda p: write_cur(p / "c.csv", FLEET, HOURS), id="cur-2.0-csv"),
    pytest.param(lambda p: write_cur(p / "c.parquet", FLEET, HOURS), id="cur-2.0-parquet"),
]


@pytest.mark.parametrize("write", WRITERS)
def test_every_format_gives_the_same_hourly_usage_per_workload(
    tmp_path: Path, write: Writer
) -> None:
    u = read_usage(write(tmp_path))
    assert u.start == START and u.hours == HOURS
    # the default mapping: the workload tag, else one workload per instance type
    assert u.workloads() == ["chat-api", "p3-8xlarge", "train"]
    assert u.names == {"p3-8xlarge": "p3.8xlarge"}
    assert np.array_equal(u.instance_hours("chat-api", "p3.2xlarge"), np.full(HOURS, 3.0))
    assert np.array_equal(u.instance_hours("p3-8xlarge", "p3.8xlarge"), np.full(HOURS, 2.0))
    assert u.by_tier() == {"committed": 48.0, "spot": 96.0, "on_demand": 144.0}
    # what ran on a commitment already bought, per commitment type
    assert np.array_equal(u.covered_instance_hours("train", "g5.12xlarge"), np.ones(HOURS))
    assert u.covered_instance_hours("chat-api", "p3.2xlarge").sum() == 0
    assert u.by_commitment() == {"Savings Plan": 48.0}
    assert u.files[0].usage_lines == 6 * HOURS
    left = {x.what: x for x in u.left_over}
    assert all(x.lines > 0 for x in left.values())
    assert sum(x.lines for x in left.values()) + u.files[0].usage_lines == u.files[0].lines


def test_focus_idle_commitment_is_reported_not_planned(tmp_path: Path) -> None:
    u = read_usage(write_focus(tmp_path / "f.csv", FLEET, HOURS))
    assert u.unused_commitment_hours == {"Savings Plan": 48.0}  # 24 h a day, 2 days
    assert "SP:idle" not in set(u.frame["instance_type"])


def test_rules_first_match_wins_and_unmatched_usage_is_kept_as_unmapped(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - {workload: chat, tags: {team: ch*}}\n"
        "  - {workload: never, instance_type: 'p3.2*'}\n"  # also matches chat's lines
        "  - {workload: research, tags: {team: research}, instance_type: 'p3.*'}\n"
    )
    for path in (
        write_cur(tmp_path / "c.parquet", FLEET, HOURS),
        write_focus(tmp_path / "f.csv", FLEET, HOURS),
    ):
        u = read_usage(path, load_rules(rules))
        assert u.workloads() == ["chat", "research", UNMAPPED]  # by instance-hours
        assert u.unmapped() == {"g5.12xlarge": 48.0}
        assert u.frame["instance_hours"].sum() == 6 * HOURS  # nothing dropped


def test_rules_by_account(tmp_path: Path) -> None:
    rules = MappingRules.model_validate(
        {"rules": [{"workload": "ml", "account": "4444*"}], "unmatched": "rest"}
    )
    u = read_usage(write_focus(tmp_path / "f.parquet", FLEET, HOURS), rules)
    assert set(u.workloads()) == {"ml", "rest"}
    assert u.instance_types("ml") == ["g5.12xlarge"]


def _csv(path: Path, header: str, *rows: str) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


FOCUS_MIN = "ChargePeriodStart,ChargePeriodEnd,ConsumedQuantity,ConsumedUnit,ChargeDescription"


def test_a_line_over_several_hours_is_spread_by_overlap(tmp_path: Path) -> None:
    path = _csv(
        tmp_path / "gcp.csv",
        FOCUS_MIN + ",x_MachineType",
        # a day of one instance, in seconds (GCP counts seconds)
        "2026-01-01T00:00:00Z,2026-01-02T00:00:00Z,86400,seconds,A2 instance,a2-highgpu-1g",
        # half an hour on each side of 01:00
        '2026-01-01T00:30:00Z,2026-01-01T01:30:00Z,1,Hours,"$3.06 per On Demand Linux '
        'p3.2xlarge Instance Hour",',
    )
    u = read_usage(path)
    assert u.hours == 24
    assert np.allclose(u.instance_hours("a2-highgpu-1g", "a2-highgpu-1g"), np.ones(24))
    p3 = u.instance_hours("p3-2xlarge", "p3.2xlarge")
    assert np.allclose(p3[:3], [0.5, 0.5, 0.0]) and p3.sum() == pytest.approx(1.0)


def test_instance_type_from_the_charge_description_when_nothing_else_says(
    tmp_path: Path,
) -> None:
    path = _csv(
        tmp_path / "f.csv",
        FOCUS_MIN,
        '2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,2,Hrs,"$32.77 per On Demand Linux '
        'p4d.24xlarge Instance Hour"',
        "2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,5,Hrs,NAT gateway hours",
    )
    u = read_usage(path)
    assert u.workloads() == ["p4d-24xlarge"]
    assert {x.what: x.lines for x in u.left_over} == {"hourly usage with no instance type": 1}


def test_a_directory_reads_every_export_and_skips_other_files(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    write_focus(tmp_path / "a" / "part-1.parquet", FLEET[:1], HOURS)
    write_cur(tmp_path / "b.csv.gz", FLEET[1:2], HOURS)
    (tmp_path / "manifest.json").write_text("{}")
    u = read_usage(tmp_path)
    assert [Path(f.path).name for f in u.files] == ["part-1.parquet", "b.csv.gz"]
    assert {f.format for f in u.files} == {"FOCUS 1.x", "CUR 2.0"}
    assert u.workloads() == ["chat-api", "p3-8xlarge"]


# --- bad input: exit-2 errors naming file, line or row group, column, expectation


def _good_lines(tmp_path: Path) -> list[str]:
    return write_focus(tmp_path / "good.csv", FLEET, 4).read_text().splitlines()


def _with(lines: list[str], index: int, column: str, value: str) -> list[str]:
    """``lines`` with one cell replaced (each generated line is one CSV row)."""
    rows = list(csv.reader(lines))
    rows[index][rows[0].index(column)] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().splitlines()


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        pytest.param("ConsumedQuantity", "abc", "a number", id="quantity-text"),
        pytest.param("ConsumedQuantity", "-1", "at least 0", id="quantity-negative"),
        pytest.param("ChargePeriodStart", "yesterday", "an ISO 8601 time", id="start-text"),
        pytest.param(
            "ChargePeriodEnd", "2025-12-31T00:00:00Z", "a time after ChargePeriodStart", id="end"
        ),
    ],
)
def test_bad_csv_line_names_file_line_column_and_expectation(
    tmp_path: Path, column: str, value: str, expected: str
) -> None:
    lines = _with(_good_lines(tmp_path), 7, column, value)
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as e:
        read_usage(path)
    assert e.value.source == str(path)
    assert e.value.field == f"line 8, column {column}"
    assert expected in e.value.expected
    assert e.value.got == value


def test_line_numbers_count_physical_lines_of_quoted_fields(tmp_path: Path) -> None:
    path = _csv(
        tmp_path / "f.csv",
        FOCUS_MIN,
        '2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,1,Hrs,"two\nlines p3.2xlarge"',
        "2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,x1,Hrs,p3.2xlarge",
    )
    with pytest.raises(InputError) as e:
        read_usage(path)
    assert e.value.field == "line 4, column ConsumedQuantity"


def test_bad_parquet_row_names_its_row_group(tmp_path: Path) -> None:
    good = write_focus(tmp_path / "good.parquet", FLEET * 20, 200, row_group=10_240)
    bad = tmp_path / "bad.parquet"
    lit = str(good).replace("'", "''")
    duckdb.execute(
        "COPY (SELECT * EXCLUDE (file_row_number) REPLACE (CASE WHEN file_row_number = 21000 "
        "THEN -2.0 ELSE ConsumedQuantity END AS ConsumedQuantity) "
        f"FROM read_parquet('{lit}', file_row_number = true)) TO '{bad}' "
        "(FORMAT PARQUET, ROW_GROUP_SIZE 10240)"
    )
    row = duckdb.execute(
        f"SELECT file_row_number FROM read_parquet('{bad}', file_row_number = true) "
        "WHERE ConsumedQuantity < 0"
    ).fetchall()
    assert len(row) == 1
    with pytest.raises(InputError) as e:
        read_usage(bad)
    n = int(row[0][0])
    assert n >= 10_240  # not in the first group: the group number is computed
    assert e.value.field == f"row group {n // 10_240} (row {n + 1:,}), column ConsumedQuantity"
    assert "at least 0" in e.value.expected


def test_missing_columns_name_the_header_and_what_is_missing(tmp_path: Path) -> None:
    path = _csv(tmp_path / "f.csv", "ChargePeriodStart,ConsumedQuantity", "x,1")
    with pytest.raises(InputError) as e:
        read_usage(path)
    assert e.value.field == "line 1"
    assert "ChargePeriodEnd" in str(e.value.got) and "ConsumedUnit" in str(e.value.got)


def test_an_export_without_instance_usage_is_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path / "f.csv", FOCUS_MIN, "2026-01-01T00:00Z,2026-01-01T01:00Z,3,GB,S3")
    with pytest.raises(InputError, match="none of them instance usage"):
        read_usage(path)


def test_a_missing_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError) as e:
        read_usage(tmp_path / "nope")
    assert e.value.source == str(tmp_path / "nope")


def test_bad_rules_file_names_the_field(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {workload: Chat API, account: '1'}\n")
    with pytest.raises(InputError) as e:
        load_rules(rules)
    assert e.value.source == str(rules)
    assert e.value.field == "rules[0].workload"
