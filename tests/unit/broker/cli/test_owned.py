"""``merge_owned``: the bill's commitments, the account's and ``--owned`` as one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from broker.cli._owned import UNKNOWN_END_DAYS, merge_owned
from markets.commitments import CommitmentKind, OwnedCommitment
from markets.model import Provider
from markets.usage import read_usage
from tests.fakes.bills import RI_ID, SP_ID, write_cur_bill, write_focus_bill


@pytest.fixture
def focus(tmp_path: Path):
    truth = write_focus_bill(tmp_path / "f.csv", days=3)
    return truth, read_usage(tmp_path / "f.csv")


def _ri(cid: str, count: int, end_days: int, start) -> OwnedCommitment:
    return OwnedCommitment(
        id=cid,
        provider=Provider.AWS,
        kind=CommitmentKind.RESERVED,
        start=start - timedelta(days=100),
        end=start + timedelta(days=end_days),
        region="us-east-1",
        instance_type="g5.xlarge",
        count=count,
    )


def test_the_bill_alone_plans_both_with_an_unknown_expiry_said(focus) -> None:
    truth, u = focus
    end = truth.start + timedelta(hours=truth.hours)
    have, sources = merge_owned(u.commitments, [], [], end)
    assert sorted(c.id for c in have) == sorted([RI_ID, SP_ID])
    assert {s.expiry_from for s in sources} == {"unknown"}
    assert all(c.end == end + timedelta(days=UNKNOWN_END_DAYS) for c in have)


def test_the_account_gives_the_expiry_and_is_not_counted_twice(focus) -> None:
    truth, u = focus
    # the account names the reservation by its id, the bill by its ARN
    acc = [_ri("ri-g5-0001", 8, 40, truth.start), _ri("ri-other", 2, 90, truth.start)]
    have, sources = merge_owned(u.commitments, acc, [], truth.start + timedelta(days=3))
    assert len(have) == 3  # the bill's RI, its SP and the account's other RI
    ri = next(c for c in have if c.id == RI_ID)
    assert ri.end == truth.start + timedelta(days=40) and ri.count == 8
    by = {s.id: s for s in sources}
    assert (by[RI_ID].scope_from, by[RI_ID].expiry_from) == ("bill", "account")
    assert by["ri-other"].scope_from == "account" and by["ri-other"].bill is None


def test_owned_by_hand_wins_for_the_same_commitment(focus) -> None:
    truth, u = focus
    given = [_ri("ri-g5-0001", 6, 10, truth.start)]
    have, sources = merge_owned(u.commitments, [], given, None)
    ris = [c for c in have if c.kind is CommitmentKind.RESERVED]
    assert [(c.id, c.count) for c in ris] == [("ri-g5-0001", 6)]
    src = next(s for s in sources if s.id == "ri-g5-0001")
    assert src.scope_from == "--owned" and src.bill is not None and src.bill.id == RI_ID


def test_cur_expiry_comes_from_the_bill(tmp_path: Path) -> None:
    truth = write_cur_bill(tmp_path / "c.parquet", days=3)
    u = read_usage(tmp_path / "c.parquet")
    acc = [_ri("ri-g5-0001", 8, 40, truth.start)]
    have, sources = merge_owned(u.commitments, acc, [], None)
    ri = next(c for c in have if c.id == RI_ID)
    assert ri.end == truth.ri_end  # the bill says, over the account
    assert next(s for s in sources if s.id == RI_ID).expiry_from == "bill"
