"""The daemon's fleet book: sticking to equivalent pools, and budget refusals."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from broker.daemon.book import FleetBook
from markets.cloud_fleet import LaunchRequest
from markets.model import Tier
from policies.workloads.spec import parse_workloads
from tests.fakes.lifecycle import QuietLifecycle

# Equal-priced pools (the book has no snapshot: every price is 0): which
# surplus instance keeps the plan's count must not depend on set order.
_STICK = """
import json
from broker.daemon.book import FleetBook, stick
from tests.fakes.lifecycle import QuietLifecycle
from policies.workloads.spec import parse_workloads
ws = parse_workloads({"workloads": [{"name": "w", "class": "batch",
    "instance_types": ["p3.2xlarge"], "unit_hours": 10}]})
pools = [f"aws/us-west-2/us-west-2{z}/p3.2xlarge" for z in "abcdef"]
want = {("w", pools[0], "spot"): 1}
running = {("w", p, "spot"): 1.0 for p in pools[3:]}
print(json.dumps(sorted(stick(want, running, FleetBook("me", ws, QuietLifecycle()), 0.05).items())))
"""


def test_stick_gives_the_same_moves_whatever_the_hash_seed() -> None:
    """Set order follows PYTHONHASHSEED; a seeded simulation must not."""
    outs = set()
    for seed in ("1", "2", "3", "4"):  # set order alone gives f, e, f, d
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", _STICK], env=env, capture_output=True, text=True, check=True
        )
        outs.add(run.stdout)
    assert len(outs) == 1
    moved = json.loads(outs.pop())
    # One of the three running instances keeps the plan's one (equal prices:
    # no move pays); the first by pool name.
    assert moved == [[["w", "aws/us-west-2/us-west-2d/p3.2xlarge", "spot"], 1]]


def _book() -> FleetBook:
    ws = parse_workloads(
        {
            "budget_usd_per_hour": 1.0,
            "workloads": [
                {"name": "w", "class": "batch", "instance_types": ["p3.2xlarge"], "unit_hours": 10},
            ],
        }
    )
    return FleetBook("me", ws, QuietLifecycle())


def test_a_budget_refusal_warns_when_it_starts_not_at_every_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = _book()
    book.price = lambda pool_key, tier: 3.0  # type: ignore[method-assign]
    req = LaunchRequest(
        idempotency_key="sf-test-0001",
        pool_key="aws/us-west-2/us-west-2a/p3.2xlarge",
        tier=Tier.SPOT,
        workload="w",
        count=1,
        owner="me",
        plan_generation=1,
    )
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with caplog.at_level(logging.DEBUG, logger="spotfolio"):
        for _ in range(3):
            assert book.within_budget([req], [], now) == []
    levels = [r.levelno for r in caplog.records if "budget_refused" in r.getMessage()]
    assert levels == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    # Once the refusal has cleared, a new one warns again.
    book.price = lambda pool_key, tier: 0.5  # type: ignore[method-assign]
    assert book.within_budget([req], [], now) == [req]
    book.price = lambda pool_key, tier: 3.0  # type: ignore[method-assign]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="spotfolio"):
        book.within_budget([req], [], now)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
