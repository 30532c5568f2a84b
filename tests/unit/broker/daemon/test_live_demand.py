"""Live serving demand in the simulated account: a serving workload driven
by a real Prometheus server's metric scales ahead of a step up (by at least
the replica readiness) and holds its replicas for the cooldown after a step
down."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from broker.daemon.accelerated import simulate_daemon
from broker.daemon.config import DaemonConfig
from markets.cloud_fleet import ActionResult, LaunchRequest, TerminateRequest
from markets.errors import TransientError
from markets.sim.cloud import SimCloud
from policies.workloads.spec import parse_workloads
from tests.fakes.prometheus import PROMETHEUS_ABSENT, daily_steps, prometheus_with
from tests.fakes.tiny_market import T0, TinyMarket

pytestmark = pytest.mark.skipif(
    PROMETHEUS_ABSENT, reason="prometheus/promtool not on PATH (Debian's prometheus package)"
)

UP = T0 + timedelta(hours=9)  # the metric steps 100 -> 300 req/s here every day
DOWN = T0 + timedelta(hours=12)  # and back to 100 here
READINESS_MIN = 3.0


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    history = daily_steps(T0 - timedelta(days=1), 2, up_hour=9, down_hour=12, low=100, high=300)
    with prometheus_with([('rps{job="api"}', history)], tmp_path_factory.mktemp("p")) as url:
        yield url


@dataclass
class Recorder:
    """The simulated cloud, and the api replicas alive after each call."""

    cloud: SimCloud
    alive: list[tuple[datetime, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.cloud.name

    def _note(self) -> None:
        n = sum(1 for i in self.cloud.alive() if i.workload == "api")
        if not self.alive or self.alive[-1][1] != n:
            self.alive.append((self.cloud.clock.now(), n))

    def launch(self, request: LaunchRequest) -> ActionResult:
        out = self.cloud.launch(request)
        self._note()
        return out

    def terminate(self, request: TerminateRequest) -> ActionResult:
        out = self.cloud.terminate(request)
        self._note()
        return out

    def __getattr__(self, name: str) -> Any:  # list_fleet, notices: the cloud's own
        return getattr(self.cloud, name)


def _first(alive: Sequence[tuple[datetime, int]], pred: Any, after: datetime) -> datetime:
    return next(t for t, n in alive if t >= after and pred(n))


def test_a_prometheus_metric_scales_the_fleet_ahead_of_a_step_and_holds_it_after(
    prom: str, tmp_path: Path
) -> None:
    ws = parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["p3.2xlarge"],
                    "throughput": {"p3.2xlarge": 1.0},
                    "max_spot_share": 0.0,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                    "restart_minutes": READINESS_MIN,
                    "demand_metric": {
                        "source": "prometheus",
                        "url": prom,
                        "query": 'rps{job="api"}',
                        "value_per_replica": 100,
                        "margin": 0.2,
                    },
                }
            ]
        }
    )
    cfg = DaemonConfig.model_validate(
        {
            "owner": "me",
            "store_url": f"sqlite:///{tmp_path / 's.db'}",
            "planner": "fast",
            "metrics_port": 0,
            "intervals": {"reconcile_s": 60, "sense_demand_s": 60, "replan_s": 3600},
        }
    )
    rec: dict[str, Recorder] = {}

    def wrap(cloud: SimCloud) -> Recorder:
        rec["r"] = Recorder(cloud)
        return rec["r"]

    start = T0 + timedelta(hours=7)
    report = simulate_daemon(cfg, TinyMarket(), hours=6, start=start, workloads=ws,
                             wrap_provider=wrap)  # type: ignore[arg-type]  # fmt: skip
    assert report.duplicate_launches == 0 and report.orphaned_instances == 0
    alive = rec["r"].alive
    # 100 req/s x 1.2 / 100 per replica -> 2 replicas; 300 -> 4 (min 1 never binds here).
    low, high = 2, 4
    before = [n for t, n in alive if t < UP - timedelta(minutes=10)]
    assert before and before[-1] == low
    # Ordered with the lookahead (readiness 3 min + 1 min): at 08:56, not later
    # than readiness ahead of the step, and not an hour early either.
    up_at = _first(alive, lambda n: n >= high, start)
    assert up_at <= UP - timedelta(minutes=READINESS_MIN)
    assert UP - timedelta(minutes=5) < up_at <= UP - timedelta(minutes=4)
    # Held for the 15 min cooldown after the step down, then let go.
    down_at = _first(alive, lambda n: n < high, up_at)
    assert DOWN + timedelta(minutes=15) <= down_at < DOWN + timedelta(minutes=16)
    assert [n for t, n in alive if up_at <= t < down_at] == [high]
    assert alive[-1][1] == low


class Flaky:
    """A MetricSource at 300 req/s that fails from ``down_from`` on."""

    name = "flaky"

    def __init__(self, down_from: datetime) -> None:
        self.down_from = down_from
        self.failures = 0

    def series(
        self, query: str, start: datetime, end: datetime, step_s: float
    ) -> Sequence[tuple[datetime, float]]:
        if end >= self.down_from:
            self.failures += 1
            raise TransientError("prometheus http://p:9090: HTTP 503")
        return [(end, 300.0)]


def _api(**metric: object) -> dict[str, object]:
    return {
        "name": "api",
        "class": "serving",
        "instance_types": ["p3.2xlarge"],
        "throughput": {"p3.2xlarge": 1.0},
        "max_spot_share": 0.0,
        "max_zone_share": 1.0,
        "max_pool_share": 1.0,
        "demand_metric": {
            "source": "prometheus",
            "url": "http://p:9090",
            "query": "q",
            "value_per_replica": 100,
            "margin": 0.0,
            "season_hours": 0,
        }
        | metric,
    }


def test_a_metric_server_that_goes_down_keeps_the_replicas_it_last_read(tmp_path: Path) -> None:
    ws = parse_workloads({"workloads": [_api()]})
    cfg = DaemonConfig.model_validate(
        {"owner": "me", "store_url": "sqlite://", "planner": "fast", "metrics_port": 0}
    )
    src = Flaky(T0 + timedelta(hours=1))
    rec: dict[str, Recorder] = {}

    def wrap(cloud: SimCloud) -> Recorder:
        rec["r"] = Recorder(cloud)
        return rec["r"]

    simulate_daemon(
        cfg,
        TinyMarket(),
        hours=3,
        start=T0,
        workloads=ws,
        wrap_provider=wrap,  # type: ignore[arg-type]
        demand_sources={"api": src},
    )
    assert src.failures > 60  # two hours of failed reads, a minute apart
    assert rec["r"].alive == [(T0, 3)]  # 300 / 100: launched at once, never scaled down


def test_the_wiring_opens_one_reader_per_server_and_cloudwatch_per_region() -> None:
    from broker.daemon.wiring import open_demand_sources
    from markets.signals.cloudwatch import CloudWatchReader
    from markets.signals.prometheus import PrometheusReader

    cw = {"source": "cloudwatch", "url": None, "region": "eu-west-1", "query": "SUM(METRICS())"}
    a, b, c = _api(), _api() | {"name": "api2"}, _api(**cw) | {"name": "api3"}
    sources = open_demand_sources(parse_workloads({"workloads": [a, b, c]}))
    assert isinstance(sources["api"], PrometheusReader) and sources["api"] is sources["api2"]
    assert isinstance(sources["api3"], CloudWatchReader)
