"""``markets.billed``: the bill's prices where it shows them, the market's elsewhere."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from markets.billed import BillPrices, with_bill_prices
from markets.protocols import RevocationSource
from markets.registry import open_market

AT = pd.Timestamp(datetime(2026, 1, 9, 3, tzinfo=UTC))


def _bill() -> BillPrices:
    frame = pd.DataFrame(
        {
            "hour": [AT, AT],
            "workload": ["a", "b"],
            "instance_type": ["p4d.24xlarge", "g5.xlarge"],
            "region": ["us-east-1", "us-east-1"],
            "tier": ["spot", "on_demand"],
            "commitment": [None, None],
            "instance_hours": [4.0, 2.0],
            "cost_usd": [40.0, 2.5],
            "billed_usd": [40.0, 2.5],
        }
    )
    return BillPrices.from_frame(frame)


def test_the_bills_hour_has_its_price_and_spot_held_and_the_rest_is_the_markets() -> None:
    m = open_market("default")
    assert isinstance(m, RevocationSource)
    w = with_bill_prices(m, _bill())
    assert isinstance(w, RevocationSource)
    start = AT.to_pydatetime().replace(hour=0)
    got, base = w.hourly(start, 24), m.hourly(start, 24)
    p4d = got["pool_key"].str.startswith("aws/us-east-1/") & got["pool_key"].str.endswith(
        "/p4d.24xlarge"
    )
    hit = p4d & (pd.to_datetime(got["hour"], utc=True) == AT)
    assert hit.sum() >= 2
    assert list(got.loc[hit, "spot_usd_per_hour"]) == pytest.approx([10.0] * int(hit.sum()))
    assert (got.loc[hit, "spot_available"] == 1.0).all()
    rest = ~hit & ~got["pool_key"].str.endswith("/g5.xlarge")
    assert got.loc[rest, "spot_usd_per_hour"].equals(base.loc[rest, "spot_usd_per_hour"])
    snap = w.snapshot(AT.to_pydatetime())
    g5 = [
        p
        for p in snap.pools
        if p.pool.region == "us-east-1" and p.pool.instance_type == "g5.xlarge"
    ]
    assert g5 and all(p.on_demand_usd_per_hour == pytest.approx(1.25) for p in g5)
    assert _bill().counts(start, 24) == {"spot": 1, "on_demand": 1}
    assert _bill().counts(start, 3) == {"spot": 0, "on_demand": 0}
