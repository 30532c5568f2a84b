"""Failure domains: zones whose revocations come together, planted and real."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from markets.files.traces import load_spot_traces
from markets.hazard.clustering import failure_domains
from markets.hazard.probes import trace_revocation_times_s
from tests.paths import SHARED_DATA

DAY_S = 86400.0
TRACES = SHARED_DATA / "spot-availability-traces"


def _poisson(rng: np.random.Generator, rate_per_s: float, span_s: float) -> NDArray[np.float64]:
    return np.sort(rng.uniform(0.0, span_s, rng.poisson(rate_per_s * span_s)))


def test_zones_sharing_shocks_form_one_domain_and_an_independent_zone_stays_out() -> None:
    rng = np.random.default_rng(11)
    span = 20 * DAY_S
    shocks = _poisson(rng, 4 / DAY_S, span)
    events = {
        # a and b: each joins 80 % of common shocks within two minutes
        "aws/us-east-1/us-east-1a/p3.2xlarge": shocks[rng.random(shocks.size) < 0.8] + 60,
        "aws/us-east-1/us-east-1b/p3.2xlarge": shocks[rng.random(shocks.size) < 0.8] + 120,
        # a second pool of zone a: merged into its zone
        "aws/us-east-1/us-east-1a/g4dn.xlarge": _poisson(rng, 1 / DAY_S, span),
        # c: the same rate, on its own
        "aws/us-east-1/us-east-1c/p3.2xlarge": _poisson(rng, 3.2 / DAY_S, span),
    }
    domains = failure_domains(events, span_s=span)
    assert [d.zones for d in domains] == [("aws/us-east-1a", "aws/us-east-1b")]
    d = domains[0]
    assert d.co_share > 0.6 and d.co_share > 5 * d.baseline
    assert d.events == sum(len(v) for k, v in events.items() if "1c" not in k)


def test_independent_zones_form_no_domain() -> None:
    rng = np.random.default_rng(3)
    span = 30 * DAY_S
    events = {
        f"aws/us-east-1/us-east-1{z}/p3.2xlarge": _poisson(rng, 6 / DAY_S, span) for z in "abc"
    }
    assert failure_domains(events, span_s=span) == ()


def test_a_zone_whose_own_revocations_bunch_is_a_domain_of_one() -> None:
    rng = np.random.default_rng(5)
    span = 20 * DAY_S
    first = _poisson(rng, 2 / DAY_S, span)
    bursts = np.sort(np.concatenate([first, first + 90.0, first + 200.0]))
    events = {
        "gcp/us-central1/us-central1-a/a2": bursts,
        "gcp/us-central1/us-central1-b/a2": _poisson(rng, 2 / DAY_S, span),
    }
    domains = failure_domains(events, span_s=span)
    assert [d.zones for d in domains] == [("gcp/us-central1-a",)]


def test_too_few_revocations_make_no_domain() -> None:
    events = {"aws/r/ra/x": [10.0, 20.0], "aws/r/rb/x": [12.0, 22.0]}
    assert failure_domains(events, span_s=DAY_S) == ()
    with pytest.raises(ValueError):
        failure_domains(events, span_s=0.0)


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"needs the traces at {TRACES}")
def test_real_us_west_2_zones_probed_together_form_a_domain() -> None:
    # The 2023-02-15 p3.2xlarge availability traces: three zones probed on one
    # clock; cross-zone revocations within a probe come 7-10 times as often as
    # by chance.
    traces = [
        t
        for t in load_spot_traces(TRACES)
        if t.kind == "availability" and t.nodes == 1 and t.start.date().isoformat() == "2023-02-15"
    ]
    assert len({t.zone for t in traces}) == 3
    start = min(t.start for t in traces).timestamp()
    events = {t.pool_key: trace_revocation_times_s(t) - start for t in traces}
    span = max(t.hours for t in traces) * 3600.0
    domains = failure_domains(events, span_s=span, resolution_s=traces[0].gap_seconds)
    assert len(domains) == 1 and len(domains[0].zones) == 3
    assert domains[0].co_share > 2 * domains[0].baseline
