"""The commitments a bill names, read from golden FOCUS and CUR 2.0 bills."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from markets.commitments import CommitmentKind
from markets.usage import read_usage
from markets.usage.commitments import commitment_key, to_owned
from tests.fakes.bills import (
    RI_COUNT,
    RI_ID,
    RI_RATE,
    SP_ID,
    SP_RATE,
    SP_USD_PER_HOUR,
    write_cur_bill,
    write_focus_bill,
)

DAYS = 3


@pytest.mark.parametrize("name", ["focus.csv", "focus.parquet", "cur.parquet", "cur.csv"])
def test_the_reserved_instance_and_the_savings_plan_are_found_with_their_scope(
    tmp_path: Path, name: str
) -> None:
    write = write_focus_bill if name.startswith("focus") else write_cur_bill
    truth = write(tmp_path / name, days=DAYS)
    u = read_usage(tmp_path / name)
    by = {c.id: c for c in u.commitments}
    assert set(by) == {RI_ID, SP_ID}
    ri, sp = by[RI_ID], by[SP_ID]
    assert ri.kind == CommitmentKind.RESERVED.value
    assert (ri.instance_type, ri.region, ri.count) == ("g5.xlarge", "us-east-1", RI_COUNT)
    assert [r[:2] for r in ri.rates] == [("g5.xlarge", "us-east-1")]
    assert ri.rates[0][2] == pytest.approx(RI_RATE)
    assert ri.utilisation == pytest.approx(1.0)
    assert sp.kind == CommitmentKind.SAVINGS_PLAN_COMPUTE.value
    assert sp.usd_per_hour == pytest.approx(SP_USD_PER_HOUR, rel=1e-6)
    assert sp.region is None and sp.instance_type is None  # any region, any family
    assert [r[:2] for r in sp.rates] == [("p3.2xlarge", "us-east-1")]
    assert sp.rates[0][2] == pytest.approx(SP_RATE)
    # 6 of 24 hours at night: a quarter of the plan's dollars used
    assert sp.utilisation == pytest.approx(0.25, abs=1e-6)
    assert sp.used_instance_hours == 3 * 6 * DAYS
    if name.startswith("cur"):  # CUR 2.0 states the term and the expiry
        assert (ri.term_years, ri.end, ri.payment) == (1, truth.ri_end, "no_upfront")
        assert (sp.term_years, sp.end) == (1, truth.sp_end)
    else:  # FOCUS has no column for either
        assert (ri.term_years, ri.end, sp.term_years, sp.end) == (None, None, None, None)


def test_a_bill_commitment_becomes_the_owned_value_the_planner_takes(tmp_path: Path) -> None:
    truth = write_cur_bill(tmp_path / "c.parquet", days=DAYS)
    u = read_usage(tmp_path / "c.parquet")
    assumed = truth.start + timedelta(days=999)
    owned = {c.id: to_owned(c, assumed) for c in u.commitments}
    ri, sp = owned[RI_ID], owned[SP_ID]
    assert ri is not None and sp is not None
    assert ri.group == "aws/us-east-1/g5.xlarge" and ri.count == RI_COUNT
    assert ri.end == truth.ri_end  # the bill's own expiry, not the assumption
    assert sp.kind is CommitmentKind.SAVINGS_PLAN_COMPUTE and sp.end == truth.sp_end
    assert sp.usd_per_hour == pytest.approx(SP_USD_PER_HOUR, rel=1e-5)
    assert commitment_key(RI_ID) == "ri-g5-0001"
