"""``whatif --usage`` on the golden bills (``tests.fakes.bills``): FOCUS 1.2 CSV
and CUR 2.0 Parquet, 14 and 85 days, one region, an owned reserved instance
and Savings Plan, a spot burst, three teams. What the advice must hold to:
as-billed at the bill's EffectiveCost, one market for both sides, no
commitment beyond usage net of what is owned, none from under 30 days or
outside the bill's region, and a total for every team tag."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from broker.cli import main
from broker.cli.report.htmlpage import render_html
from broker.cli.report.text import render_text
from tests.fakes.bills import (
    REGION,
    RI_COUNT,
    RI_ID,
    RI_RATE,
    bursting,
    golden,
    serving_count,
    write_cur_bill,
    write_focus_bill,
)

# (writer, file name, days); the what-if replays the last min(30, days - 1) days
BILLS = [
    pytest.param((write_focus_bill, "focus.csv", 14), id="focus-14d"),
    pytest.param((write_cur_bill, "cur.parquet", 14), id="cur-14d"),
    pytest.param((write_focus_bill, "focus.csv", 85), id="focus-85d"),
]


def _whatif(bill: Path) -> dict[str, Any]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        # a generous time limit: the plans' figures must not depend on load
        assert main(["whatif", "--json", "--usage", str(bill), "--scenarios", "0",
                     "--time-limit", "600"]) == 0  # fmt: skip
    out = json.loads(buf.getvalue())
    assert isinstance(out, dict)
    return out


@pytest.fixture(scope="module", params=BILLS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    write, name, days = request.param
    path = tmp_path_factory.mktemp("bill") / name
    write(path, days=days)
    return days, _whatif(path)


def _replayed(days: int) -> range:
    used = min(30, days - 1)
    return range((days - used) * 24, days * 24)


def test_as_billed_is_the_bills_effective_cost_over_the_replayed_hours(run: Any) -> None:
    days, doc = run
    lines, _ = golden(days=days)
    window = _replayed(days)
    truth = float(lines.loc[lines["h"].isin(window), "cost"].sum())  # idle commitment included
    as_billed = doc["scenarios"][0]
    assert as_billed["name"] == "as_billed"
    assert as_billed["total_cost_usd"] == pytest.approx(truth, rel=0.005)


def test_the_bills_prices_are_the_replays_where_it_shows_them(run: Any) -> None:
    days, doc = run
    window = _replayed(days)
    got = doc["as_billed"]["prices_from_bill"]
    assert got["spot"]["type_hours"] == sum(bursting(h) for h in window)
    assert got["spot"]["types"] == [f"{REGION}/p4d.24xlarge"]
    assert f"{REGION}/g5.xlarge" in got["on_demand"]["types"]
    # the bill's spot dollars are what the replay prices its spot lines at
    spot = [d for d in doc["as_billed"]["days"] if d["difference_usd"] != 0]
    assert all(abs(d["difference_usd"]) < 0.05 * d["effective_cost_usd"] for d in spot)


def test_every_team_tag_has_a_total(run: Any) -> None:
    _, doc = run
    teams = {r["team"]: r["total_usd"] for r in doc["advice"]["cost_by_team"]}
    assert set(teams) == {"chat", "research", "data"}
    ours = next(s for s in doc["scenarios"] if s["name"] == "spotfolio")
    assert sum(teams.values()) == pytest.approx(ours["total_cost_usd"], abs=1.0)


def test_no_commitment_from_under_30_days_or_outside_the_bills_region(run: Any) -> None:
    days, doc = run
    bought = doc["advice"]["commitments"]
    if days < 30:
        assert bought == []
    assert all(c["region"] == REGION for c in bought)


def test_nothing_is_bought_beyond_usage_net_of_what_is_owned(run: Any) -> None:
    days, doc = run
    net = np.array([serving_count(h % 24) - RI_COUNT for h in _replayed(days)], dtype=float)
    instances = 0.0  # g5.xlarge instances the advice commits to
    plan = 0.0  # a g5 savings plan's dollars, in g5 instances at its rate
    for c in doc["advice"]["commitments"]:
        if c["kind"] == "instances" and c["instance_type"] == "g5.xlarge":
            instances += c["count"]
            # Cost Explorer's rule: each one busy, net of what is owned, at least
            # its break-even share of the hours, and never above the peak
            assert float((net >= c["count"]).mean()) >= c["breakeven_utilisation"]
        elif c["kind"] == "savings_plan" and c["family"] == "g5":
            plan += c["hourly_usd"] / RI_RATE
        assert "p4d" not in c["instance_type"]  # a burst on spot buys no commitment
    assert instances <= net.max()
    # a plan covers only what the instances owned and recommended leave
    assert plan <= max(0.0, net.min() - instances) + 1e-6


def test_spotfolio_costs_no_more_than_as_billed_or_any_baseline_with_nothing_unmet(
    run: Any,
) -> None:
    _, doc = run
    rows = {s["name"]: s for s in doc["scenarios"]}
    ours = rows["spotfolio"]
    assert ours["unmet_unit_hours"] == 0
    assert all(ours["total_cost_usd"] <= r["total_cost_usd"] for r in rows.values())


def test_text_and_html_show_as_billed_and_what_is_owned_first(run: Any) -> None:
    _, doc = run
    text = render_text(doc)
    heads = [line for line in text.splitlines() if line.startswith("== ")]
    assert heads[:2] == ["== As billed: the bill itself", "== Given what is owned"]
    assert RI_ID in text  # the owned reserved instance, named
    html = render_html(doc)
    found = re.findall(r'<section id="([^"]+)"', html)
    assert found[:2] == ["as_billed", "owned"]
