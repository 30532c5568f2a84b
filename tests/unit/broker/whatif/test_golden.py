"""The baselines' figures on the default what-if (30 days, the example fleet,
the embedded default market): the baselines keep their own published reaction
(``bill_plan``), so billing Spotfolio through the lifecycle manager must not
move theirs. (The static mix's spot work is not scaled by the pool's
expected held share. The committed quantile values commitments over their
term, so the finite jobs' a2-highgpu-8g and a2-highgpu-1g reservations, 20
and 30 days of use of a 1-year obligation, are not bought.)"""

from __future__ import annotations

import pytest

from broker.whatif.run import run_whatif
from markets.registry import open_market
from policies.workloads.spec import default_workloads

# The baselines of ``spotfolio whatif --json``, dollars.
BASELINES_USD = {
    "on_demand": 81_904.86,
    "committed_quantile": 74_450.58,
    "static_mix": 62_573.95,
}


@pytest.mark.slow
def test_default_whatif_keeps_the_baselines_figures_and_reports_the_lifecycle() -> None:
    result = run_whatif(open_market("default"), default_workloads())
    for name, usd in BASELINES_USD.items():
        bill = result.scenario(name).bill
        assert round(bill.total_usd, 2) == pytest.approx(usd, abs=0.005), name
        assert bill.decisions is None and bill.decided_by is None, name
    ours = result.scenario("spotfolio")
    row = ours.to_dict(result.scenario("on_demand").bill.total_usd, default_workloads())
    assert row["decided_by"] == "broker.lifecycle.manager:LifecycleManager"
    decisions = row["decisions"]
    assert isinstance(decisions, dict) and sum(decisions.values()) > 0
    cap = default_workloads().break_glass_cap_usd
    assert cap is not None and ours.bill.break_glass_committed_usd is not None
    assert ours.bill.break_glass_committed_usd <= cap + 1e-6
