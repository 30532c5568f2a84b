"""A cloud's ``lease_scope``: two daemons of different accounts that name
the same cloud account do not act in it at once; the leases are taken all
or none, renewed together, and released at stop."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from broker.daemon.daemon import Daemon, LeaseHeldError
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.schema import lease_t
from broker.daemon.wiring import default_lifecycle
from tests.unit.broker.daemon.test_daemon import World, _config

CLOUDS = {"aws": {"lease_scope": "123456789012", "options": {"launch": {"us-east-1": {}}}}}


def _daemon(w: World, tmp_path: Path, account: str) -> Daemon:
    config = _config(tmp_path, account=account, clouds=CLOUDS)
    return Daemon(config, w.cloud, w.market, w.store,
                  default_lifecycle(w.workloads, w.clock, config), w.clock,
                  workloads=w.workloads, metrics=DaemonMetrics(),
                  sleep=w.clock.advance)  # type: ignore[arg-type]  # fmt: skip


def _leases(w: World) -> dict[str, str]:
    now = w.clock.now()
    with w.store.transaction() as tx:
        rows = tx.conn.execute(select(lease_t.c.name, lease_t.c.holder, lease_t.c.expires_at))
        return {r.name: r.holder for r in rows if r.expires_at.replace(tzinfo=now.tzinfo) > now}


def test_a_cloud_account_is_acted_in_by_one_daemon_whatever_its_account(tmp_path: Path) -> None:
    w = World(tmp_path)
    first, second = _daemon(w, tmp_path, "team-a"), _daemon(w, tmp_path, "team-b")
    first.start()
    assert _leases(w) == {"account/team-a": first.holder, "aws/123456789012": first.holder}
    with pytest.raises(LeaseHeldError, match="aws/123456789012"):
        second.start()
    # all or none: the second kept not even its own account's lease
    assert "account/team-b" not in _leases(w)
    w.clock.advance(5)
    first.renew_lease()  # both leases renewed
    w.clock.advance(first.config.lease_ttl_s - 1)
    assert set(_leases(w)) == {"account/team-a", "aws/123456789012"}
    first.stop()
    assert _leases(w) == {}
    second.start()
    assert _leases(w) == {"account/team-b": second.holder, "aws/123456789012": second.holder}


def test_losing_a_cloud_lease_stops_the_renewal(tmp_path: Path) -> None:
    w = World(tmp_path)
    first, second = _daemon(w, tmp_path, "team-a"), _daemon(w, tmp_path, "team-b")
    first.start()
    w.clock.advance(first.config.lease_ttl_s + 1)  # first paused past both TTLs
    second.start()
    with pytest.raises(LeaseHeldError, match="lost the lease"):
        first.renew_lease()
