"""Failure domains in the fleet bench: the product with and without them on
the same window, side by side in the setting's block.

A synthetic week before the window in which zones a and b revoke together
(b five minutes after a) and c on its own; in the window a revokes, then b.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from broker.bench.fleet import evaluate_window, summarize
from broker.bench.product.fleet import FleetRun, ProductFleet
from broker.simulate.fleet import FleetSetting, FleetWindow, simulate_fleet

TICK_S = 300
PAST, WINDOW = 2016, 288  # a week and a day of 5-minute ticks


def _held(n: int, drops: list[tuple[int, int]]) -> npt.NDArray[np.bool_]:
    h = np.ones(n, dtype=bool)
    for start, ticks in drops:
        h[start : start + ticks] = False
    return h


def _window() -> FleetWindow:
    shocks = range(40, PAST - 20, 70)
    past = np.vstack(
        [
            _held(PAST, [(s, 6) for s in shocks]),
            _held(PAST, [(s + 1, 6) for s in shocks]),
            _held(PAST, [(s + 35, 6) for s in shocks]),
        ]
    )
    held = np.vstack([_held(WINDOW, [(24, 12)]), _held(WINDOW, [(25, 12)]), _held(WINDOW, [])])
    return FleetWindow(
        group="synthetic",
        zones=("us-west-2a", "us-west-2b", "us-west-2c"),
        tick_s=TICK_S,
        held=held,
        past=past,
        spot_price_ratio=(0.2, 0.25, 0.3),
        notice_s=120,
        provider="aws",
    )


def test_the_product_finds_the_domain_in_its_record_and_replaces_outside_it() -> None:
    seen: list[tuple[bool, str]] = []
    original = ProductFleet._handle

    def spy(self: ProductFleet, run: FleetRun, *args: object) -> None:
        original(self, run, *args)  # type: ignore[arg-type]
        seen.append((self.failure_domains, run.decisions[-1].reason))

    ProductFleet._handle = spy  # type: ignore[assignment, method-assign]
    try:
        for on in (False, True):
            simulate_fleet(FleetSetting(replicas=4), _window(), ProductFleet(failure_domains=on))
    finally:
        ProductFleet._handle = original  # type: ignore[method-assign]
    first = {on: next(r for o, r in seen if o is on) for on in (False, True)}
    assert "spot in aws/us-west-2/us-west-2b/replica" in first[False]
    assert "spot in aws/us-west-2/us-west-2c/replica" in first[True]
    assert "outside failure domain aws/us-west-2a+aws/us-west-2b" in first[True]


def test_the_bench_reports_unserved_hours_with_and_without_domains_side_by_side() -> None:
    r = evaluate_window(FleetSetting(replicas=4), _window(), ("spotfolio",))
    assert r.with_domains is not None
    block = summarize([r], ("spotfolio",))["failure_domains"]
    assert block["windows"] == 1
    without, with_d = block["without"], block["with_domains"]
    assert without["unserved_replica_hours"] == round(
        r.outcomes["spotfolio"].unserved_replica_hours, 3
    )
    assert with_d["unserved_replica_hours"] == round(r.with_domains.unserved_replica_hours, 3)
    changed = (r.outcomes["spotfolio"].launches, r.outcomes["spotfolio"].cost_usd) != (
        r.with_domains.launches,
        r.with_domains.cost_usd,
    )
    assert block["windows_changed"] == int(changed) == 1


def test_without_spotfolio_there_is_no_domains_block() -> None:
    r = evaluate_window(FleetSetting(replicas=4), _window(), ("on_demand",))
    assert r.with_domains is None
    assert "failure_domains" not in summarize([r], ("on_demand",))
