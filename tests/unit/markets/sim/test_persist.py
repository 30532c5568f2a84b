"""The simulated account's state file: a versioned JSON document that a
restarted process reads back into the same account, and refuses when it is
an older pickle, another version or not an account at all."""

from __future__ import annotations

import json
import pickle
from datetime import timedelta
from pathlib import Path

import pytest

from markets.clock import ManualClock
from markets.cloud_fleet import LaunchRequest, TerminateRequest
from markets.errors import CapacityUnavailableError, InputError, ThrottledError
from markets.model import Tier
from markets.registry import open_provider
from markets.sim.cloud import SimCloud, SimOptions
from markets.sim.codec import ACCOUNT_FORMAT, ACCOUNT_VERSION, encode
from markets.sim.persist import PersistentSimCloud, load_state
from tests.fakes.tiny_market import T0, TinyMarket, pool_key

A, B = pool_key("a"), pool_key("b")
EVENTS = {A: [T0 + timedelta(minutes=m) for m in (20, 50, 95)]}


def _launch(key: str, pool: str = A, tier: Tier = Tier.SPOT, count: int = 1) -> LaunchRequest:
    return LaunchRequest(
        idempotency_key=key,
        pool_key=pool,
        tier=tier,
        workload="w",
        count=count,
        owner="me",
        plan_generation=1,
    )


def _busy_account(path: Path, base: ManualClock) -> PersistentSimCloud:
    """An account with a bit of everything: spot and on-demand instances, a
    doomed one, duplicated notices (one acknowledged), a replayable
    terminate, an injected fault and an exhausted pool."""
    opts = SimOptions(seed=4, duplicate_rate=0.5, reorder=True, listing_lag_s=5.0)
    cloud, _clock = PersistentSimCloud.open(TinyMarket(events=EVENTS), path, opts, base=base)
    cloud.launch(_launch("sf-key-0001", count=3))
    ids = cloud.launch(_launch("sf-key-0002", pool=B, tier=Tier.ON_DEMAND, count=2)).instance_ids
    base.advance(timedelta(minutes=25))
    polled = cloud.poll_notices()
    cloud.ack_notice(polled[0])
    cloud.terminate(
        TerminateRequest(idempotency_key="sf-term-0001", instance_ids=ids[:1], owner="me")
    )
    cloud.cloud.inject("launch", ThrottledError("slow down"))
    cloud.cloud.inject("launch", CapacityUnavailableError("none left", pool_key=B))
    cloud.cloud.exhaust(B, until=T0 + timedelta(hours=2))
    cloud.list_fleet("me")  # a call saves the account
    return cloud


def test_an_account_read_back_is_the_account_that_was_saved(tmp_path: Path) -> None:
    path = tmp_path / "account.json"
    base = ManualClock(T0)
    live = _busy_account(path, base)
    restored, clock = load_state(TinyMarket(events=EVENTS), path, base)
    assert clock.now() == live.cloud.clock.now()
    assert encode(restored) == encode(live.cloud)
    # ... and it goes on as the saved one would: same faults, revocations,
    # notices (duplicates and order drawn from the same random state) and bills.
    for cloud in (live.cloud, restored):
        with pytest.raises(ThrottledError):
            cloud.launch(_launch("sf-key-0003"))
    for cloud in (live.cloud, restored):
        with pytest.raises(CapacityUnavailableError):
            cloud.launch(_launch("sf-key-0003"))
    base.advance(timedelta(hours=2))
    outcomes = []
    for cloud in (live.cloud, restored):
        new = cloud.launch(_launch("sf-key-0004", pool=B, tier=Tier.ON_DEMAND)).instance_ids
        outcomes.append(
            (
                new,
                [(n.notice_id, n.receipt) for n in cloud.poll_notices(max_notices=50)],
                cloud.counters,
                cloud.hourly_cost_usd(T0, 3)[0].tolist(),
                cloud.launch(_launch("sf-key-0001", count=3)).replayed,
            )
        )
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][4]  # an idempotency key saved still replays


def test_the_state_file_is_plain_json_with_its_format_and_version(tmp_path: Path) -> None:
    path = tmp_path / "account.json"
    _busy_account(path, ManualClock(T0))
    doc = json.loads(path.read_text())
    assert (
        (doc["format"], doc["version"])
        == (ACCOUNT_FORMAT, ACCOUNT_VERSION)
        == (
            "spotfolio.sim.account",
            2,
        )
    )
    assert {"offset_s", "state"} <= set(doc)


def test_the_registry_opens_an_account_kept_in_a_file_and_reopens_it(tmp_path: Path) -> None:
    path = tmp_path / "account.json"
    market = TinyMarket()
    first = open_provider("sim", market=market, state_file=path, start=T0, seed=1)
    (iid,) = first.launch(_launch("sf-key-0010")).instance_ids
    again = open_provider("sim", market=market, state_file=path)  # its time from the file
    assert [i.instance_id for i in again.list_fleet("me")] == [iid]
    with pytest.raises(InputError, match="clock"):
        open_provider("sim", market=market, state_file=path, clock=ManualClock(T0))


def _refused(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        load_state(TinyMarket(), path)
    with pytest.raises(InputError):  # the daemon's way in refuses it as well
        PersistentSimCloud.open(TinyMarket(), path, SimOptions())
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert "spotfolio.sim.account version 2" in message
    return info.value


def test_an_old_pickled_account_is_refused_with_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "account.pkl"
    cloud = SimCloud(TinyMarket(), ManualClock(T0))
    state = {"options": cloud.options, "counters": cloud.counters, "_seq": 3}
    path.write_bytes(pickle.dumps({"version": 1, "offset_s": 0.0, "state": state}))
    assert "pickle" in str(_refused(path))


def test_an_account_of_another_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "account.json"
    _busy_account(path, ManualClock(T0))
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "version": 3}))
    err = _refused(path)
    assert err.field == "version" and err.got == 3


@pytest.mark.parametrize(
    ("content", "field"),
    [
        pytest.param('{"hello": "world"}', "format", id="foreign-json"),
        pytest.param('{"format": "terraform.tfstate", "version": 2}', "format", id="other-format"),
        pytest.param("not json at all", None, id="not-json"),
        pytest.param(
            '{"format": "spotfolio.sim.account", "version": 2, "offset_s": 0}',
            "state",
            id="no-state",
        ),
    ],
)
def test_a_foreign_file_is_refused(tmp_path: Path, content: str, field: str | None) -> None:
    path = tmp_path / "account.json"
    path.write_text(content)
    assert _refused(path).field == field
