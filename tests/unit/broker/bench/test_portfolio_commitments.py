"""The portfolio bench's commitments are the what-if's whole-period plan's, counted hour by hour."""

from __future__ import annotations

import numpy as np
import pytest

from broker.bench.portfolio import whole_period_plan
from broker.whatif.run import whole_period_options
from policies.cost_table import CostTable
from policies.workloads.spec import parse_workloads
from tests.unit.broker.planning.optimizer.test_solve import _market, _pool, _serving


def test_a_daytime_peak_is_not_committed_for_the_hours_around_it() -> None:
    # Ten days of 10 units, 20 from 09:00 to 21:00 UTC: the units above 10 are
    # busy half the hours. At 0.6 x on-demand a committed unit pays off only
    # if busy more than 60 % of them (docs/concepts/reservations.md), so the plan
    # commits the base. Six-hour periods (plan at each period's peak hour)
    # see the peak in three periods of four (75 %) and commit 20.
    hours = 240
    hod = np.arange(hours) % 24  # the market's snapshot is at 00:00 UTC
    demand = {"api": np.where((hod >= 9) & (hod < 21), 20.0, 10.0)}
    ws = parse_workloads({"workloads": [_serving()]}, demand_supplied=True)
    snap = _market(_pool("us-east-1a", committed=0.6, spot=None))
    assert snap.at.hour == 0
    costs = CostTable.compute(snap, ws, whole_period_options(hours).cost_options)
    plan = whole_period_plan(snap, ws, demand, hours, costs=costs)
    assert plan.committed_instances() == {"aws/us-east-1/g1": 10}
    assert plan.unmet_unit_hours["api"] == pytest.approx(0.0, abs=1e-6)
