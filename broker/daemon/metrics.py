"""The daemon's Prometheus metrics, on a registry of its own.

Owns: ``DaemonMetrics`` (every metric the daemon exports, with its meaning)
and ``serve`` (the HTTP endpoint, ``start_http_server`` on a configured port).
A registry per daemon, not the process-global one, so tests and several
daemons in one process never share counters.

Metrics (Prometheus adds ``_total`` to counters, ``_bucket``/``_sum``/
``_count`` to histograms):

- ``spotfolio_cost_rate_usd_per_hour{tier}``: what the live fleet costs per
  hour now, by tier (committed, on_demand, spot), at the market's prices.
- ``spotfolio_spot_share``: share of live capacity units on spot (0-1).
- ``spotfolio_revocations_total``: spot interruption notices received (first
  delivery of each; duplicates are not counted).
- ``spotfolio_decisions_total{kind}``: lifecycle decisions by kind (shrink,
  replace, break_glass, checkpoint_only, ignore).
- ``spotfolio_notice_to_decision_seconds``: from receiving a notice to its
  decision being durable in the store (histogram).
- ``spotfolio_break_glass_usd_total``: gross dollars committed to break-glass
  on-demand capacity (each stretch and each extension; what a stretch ending
  early releases is not subtracted: a counter only goes up).
- ``spotfolio_break_glass_committed_usd``: what counts against the cap now
  (dollars spent by closed stretches plus open commitments; the store's sum).
- ``spotfolio_break_glass_cap_usd``: the configured cap (absent without one).
- ``spotfolio_actions_total{kind,outcome}``: launches/terminations by outcome
  (done, replayed, failed, capacity, throttled, dry_run, budget).
- ``spotfolio_notices_dropped_total{reason}``: queue messages not handed over
  as notices: ``malformed`` (unreadable, left for the redrive policy),
  ``rejected`` (not from our account, region or instance; left too),
  ``foreign`` (not a notice; deleted), ``not_ours`` (about an instance
  without our tag; deleted). Redeliveries count again.
- ``spotfolio_job_errors_total{job}``: unexpected errors caught at a job boundary.
- ``spotfolio_plan_generation``: generation of the plan in force.
- ``spotfolio_lease_held``: 1 while this daemon holds the account's lease.
- ``spotfolio_build_info{version,python}``: 1, labelled with the installed
  spotfolio's version and the Python running it.
- ``spotfolio_market_staleness_seconds``: seconds since the last successful
  market refresh (read from the daemon's clock at scrape time; 0 before the
  first); ``spotfolio_market_last_refresh_timestamp_seconds`` its time.
- ``spotfolio_spend_usd_total{tier}``: dollars the live fleet has cost, by
  tier: each fleet update adds the cost rate seen at the previous one times
  the time between them (``observe_fleet``).
- ``spotfolio_pool_cost_rate_usd_per_hour{pool}``, ``spotfolio_pool_units{pool}``
  and ``spotfolio_pool_revocations_total{pool}``: per pool, with at most
  ``POOL_LABEL_CAP`` pool labels (the first pools seen) plus ``other``.
- ``spotfolio_notice_to_replacement_seconds``: from a revocation notice (its
  time at the cloud) to its replacement running: the first fleet listing
  that shows the launched instance ``running`` (``replacement_launched``,
  then ``replacements_seen``; histogram; the fleet chapter's resume time,
  before the job's own restart).
- ``spotfolio_preemption_tax_gpu_seconds`` and ``spotfolio_preemption_tax_usd``:
  per revocation, work lost since the last checkpoint plus the restart
  (``broker.daemon.preemption``), in capacity-unit seconds (GPUs by default;
  seconds, Prometheus' base unit: GPU-hours are ``/ 3600``) and dollars
  (histograms: ``_sum`` is the total, ``_count`` the revocations).

Must not: decide anything, or read a clock other than the one handed to
``watch_market_age`` (and that only when scraped).
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from markets.clock import Clock
from markets.fleet import Instance, InstanceState
from markets.model import MarketSnapshot
from markets.quotas import quota_use_of

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

__all__ = ["LATENCY_BUCKETS_S", "OTHER_POOL", "POOL_LABEL_CAP", "DaemonMetrics", "PoolLabels"]

# Per-pool series: each label value is a time series kept by every scraper
# for its retention; a fleet spread over hundreds of pools must not become
# hundreds of series per metric. 20 pools cover a fleet's regions x types in
# practice; the rest add up under "other".
POOL_LABEL_CAP = 20
OTHER_POOL = "other"
# Seconds from a notice to its replacement running: an instance boots in a
# minute or two, a capacity fallback over several pools takes longer.
REPLACEMENT_BUCKETS_S = (1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
# Replacement instances awaited at most (a launch the listing never shows,
# e.g. one that failed at once, must not grow the map forever).
AWAITED_CAP = 10_000
# Lost work per revocation, from nothing (a checkpoint that fits the notice)
# to a day of an 8-GPU job: dollars, and GPU-seconds (Prometheus' base unit;
# promtool refuses "_hours": GPU-hours are the series / 3600).
TAX_USD_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000)
TAX_GPU_SECONDS_BUCKETS = tuple(
    h * 3600 for h in (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250)
)


def _version() -> str:
    try:
        return version("spotfolio")
    except PackageNotFoundError:  # run from a source tree without installing
        return "unknown"


class PoolLabels:
    """The pool label of a pool key: its own for the first ``cap`` pools seen,
    ``other`` for the rest (stable, so a counter's series never change label)."""

    def __init__(self, cap: int = POOL_LABEL_CAP) -> None:
        self.cap = cap
        self._known: dict[str, str] = {}

    def __call__(self, pool_key: str) -> str:
        label = self._known.get(pool_key)
        if label is None:
            label = pool_key if len(self._known) < self.cap else OTHER_POOL
            if label != OTHER_POOL:
                self._known[pool_key] = label
        return label


# Seconds; fine below 1 s (the reaction target is p99 <= 1 s) and up to the
# AWS notice window of 120 s.
LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class DaemonMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        # replacement instance -> (its notice's id, the notice's time)
        self._awaited: dict[str, tuple[str, datetime]] = {}
        self.cost_rate = Gauge(
            "spotfolio_cost_rate_usd_per_hour",
            "Live fleet cost per hour by tier",
            ["tier"],
            registry=r,
        )
        self.spot_share = Gauge("spotfolio_spot_share", "Share of live units on spot", registry=r)
        self.revocations = Counter(
            "spotfolio_revocations", "Spot interruption notices received", registry=r
        )
        self.decisions = Counter(
            "spotfolio_decisions", "Lifecycle decisions by kind", ["kind"], registry=r
        )
        self.notice_latency = Histogram(
            "spotfolio_notice_to_decision_seconds",
            "Notice received to decision durable",
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.break_glass_usd = Counter(
            "spotfolio_break_glass_usd", "Dollars committed to break-glass on-demand", registry=r
        )
        self.break_glass_committed_usd = Gauge(
            "spotfolio_break_glass_committed_usd",
            "Break-glass dollars counting against the cap (spent + open commitments)",
            registry=r,
        )
        self.break_glass_cap_usd = Gauge(
            "spotfolio_break_glass_cap_usd", "Configured break-glass cap", registry=r
        )
        self.actions = Counter(
            "spotfolio_actions", "Provider actions by outcome", ["kind", "outcome"], registry=r
        )
        self.notices_dropped = Counter(
            "spotfolio_notices_dropped",
            "Queue messages not handed over as notices, by reason",
            ["reason"],
            registry=r,
        )
        self.job_errors = Counter(
            "spotfolio_job_errors", "Errors caught at a job boundary", ["job"], registry=r
        )
        self.plan_generation = Gauge(
            "spotfolio_plan_generation", "Plan generation in force", registry=r
        )
        self.lease_held = Gauge("spotfolio_lease_held", "1 while holding the lease", registry=r)
        self.build_info = Gauge(
            "spotfolio_build_info", "Spotfolio build", ["version", "python"], registry=r
        )
        self.build_info.labels(_version(), platform.python_version()).set(1)
        self.market_refreshed_at = Gauge(
            "spotfolio_market_last_refresh_timestamp_seconds",
            "Unix time of the last successful market refresh",
            registry=r,
        )
        self.market_staleness = Gauge(
            "spotfolio_market_staleness_seconds",
            "Seconds since the last successful market refresh",
            registry=r,
        )
        self.spend_usd = Counter(
            "spotfolio_spend_usd", "Dollars the live fleet has cost, by tier", ["tier"], registry=r
        )
        self.pool_cost_rate = Gauge(
            "spotfolio_pool_cost_rate_usd_per_hour",
            "Live fleet cost per hour by pool (capped label set)",
            ["pool"],
            registry=r,
        )
        self.pool_units = Gauge(
            "spotfolio_pool_units", "Live capacity units by pool (capped label set)", ["pool"],
            registry=r,
        )  # fmt: skip
        self.pool_revocations = Counter(
            "spotfolio_pool_revocations",
            "Revocations of the fleet's instances by pool (capped label set)",
            ["pool"],
            registry=r,
        )
        self.notice_to_replacement = Histogram(
            "spotfolio_notice_to_replacement_seconds",
            "Revocation notice to its replacement running",
            buckets=REPLACEMENT_BUCKETS_S,
            registry=r,
        )
        self.preemption_tax_unit_seconds = Histogram(
            "spotfolio_preemption_tax_gpu_seconds",
            "Capacity-unit seconds lost per revocation (since the last checkpoint, plus restart)",
            buckets=TAX_GPU_SECONDS_BUCKETS,
            registry=r,
        )
        self.preemption_tax_usd = Histogram(
            "spotfolio_preemption_tax_usd",
            "Dollars lost per revocation (since the last checkpoint, plus restart)",
            buckets=TAX_USD_BUCKETS,
            registry=r,
        )
        self.quota_used = Gauge(
            "spotfolio_quota_used_ratio",
            "Share of each account quota (the snapshot's) the live fleet uses",
            ["provider", "region", "quota"],
            registry=r,
        )
        self.pool_label = PoolLabels()
        self._last_refresh: datetime | None = None
        self._last_tick: datetime | None = None
        self._last_rates: dict[str, float] = {}
        self._servers: list[WSGIServer] = []

    # --- what the daemon reports ---------------------------------------------------
    def watch_market_age(self, clock: Clock) -> None:
        """Staleness is read from ``clock`` when scraped (0 before a refresh)."""

        def age_s() -> float:
            last = self._last_refresh
            return 0.0 if last is None else max(0.0, (clock.now() - last).total_seconds())

        self.market_staleness.set_function(age_s)

    def market_refreshed(self, at: datetime) -> None:
        self._last_refresh = at
        self.market_refreshed_at.set(at.timestamp())

    def observe_fleet(
        self, now: datetime, pool_rates: Mapping[tuple[str, str], tuple[float, int]]
    ) -> None:
        """The live fleet's ``(pool, tier) -> ($/h, units)`` at ``now``: spend
        accrues at the rates seen at the previous call; per-pool gauges are set."""
        if self._last_tick is not None and now > self._last_tick:
            hours = (now - self._last_tick).total_seconds() / 3600.0
            for tier, usd_per_hour in self._last_rates.items():
                if usd_per_hour > 0:
                    self.spend_usd.labels(tier).inc(usd_per_hour * hours)
        if self._last_tick is None or now >= self._last_tick:
            self._last_tick = now
            rates: dict[str, float] = {}
            for (_, tier), (usd, _units) in pool_rates.items():
                rates[tier] = rates.get(tier, 0.0) + usd
            self._last_rates = rates
        by_label: dict[str, tuple[float, int]] = {}
        for (pool, _), (usd, units) in pool_rates.items():
            label = self.pool_label(pool)
            u0, n0 = by_label.get(label, (0.0, 0))
            by_label[label] = (u0 + usd, n0 + units)
        self.pool_cost_rate.clear()
        self.pool_units.clear()
        for label, (usd, units) in by_label.items():
            self.pool_cost_rate.labels(label).set(usd)
            self.pool_units.labels(label).set(units)

    def observe_quotas(self, snapshot: MarketSnapshot | None, fleet: Iterable[Instance]) -> None:
        """Each quota's share used by the live ``fleet`` (a quota with a 0
        limit reads 1 when used, 0 when not); quotas gone are dropped."""
        self.quota_used.clear()
        if snapshot is None or not snapshot.quotas:
            return
        alive = (InstanceState.PENDING, InstanceState.RUNNING)
        used = quota_use_of(snapshot, [(i.pool_key, i.tier, 1.0) for i in fleet
                                       if i.state in alive])  # fmt: skip
        for q in snapshot.quotas:
            got = used.get(q.key, 0.0)
            ratio = got / q.limit if q.limit > 0 else float(got > 0)
            quota = q.code or f"{q.group}/{q.tier.value if q.tier else 'any'}"
            self.quota_used.labels(q.provider.value, q.region or "global", quota).set(ratio)

    def revoked(self, pool_key: str, *, unit_hours: float, usd: float) -> None:
        """One revocation of an instance of ``pool_key`` and its preemption tax."""
        self.pool_revocations.labels(self.pool_label(pool_key)).inc()
        self.preemption_tax_unit_seconds.observe(unit_hours * 3600.0)
        self.preemption_tax_usd.observe(usd)

    def replacement_launched(
        self, notice_id: str, notice_at: datetime, instance_ids: Iterable[str]
    ) -> None:
        """Notice ``notice_id``'s replacement was launched as ``instance_ids``:
        its time is observed when a listing shows one of them running."""
        for iid in instance_ids:
            self._awaited[iid] = (notice_id, notice_at)
        while len(self._awaited) > AWAITED_CAP:  # launches never seen: forget the oldest
            self._awaited.pop(next(iter(self._awaited)))

    def replacements_seen(self, fleet: Iterable[Instance], now: datetime) -> None:
        """The fleet as listed at ``now``: a replacement listed running
        observes notice -> running once per notice (its first instance)."""
        seen = {
            inst.instance_id
            for inst in fleet
            if inst.state is InstanceState.RUNNING and inst.instance_id in self._awaited
        }
        done: set[str] = set()
        for iid in seen:
            nid, at = self._awaited.pop(iid)
            if nid not in done:
                done.add(nid)
                self.notice_to_replacement.observe(max(0.0, (now - at).total_seconds()))
        # a notice observed once: its other instances are no longer awaited
        for iid in [i for i, (nid, _at) in self._awaited.items() if nid in done]:
            del self._awaited[iid]

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample's current value (0 when absent): for tests and reports."""
        v = self.registry.get_sample_value(name, labels or {})
        return 0.0 if v is None else float(v)

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Expose ``/metrics`` on ``addr:port`` over HTTP (a daemon thread of
        prometheus_client); returns the port (``port`` 0: a free one)."""
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        self._servers.append(server)
        bound: int = server.server_port
        return bound

    def stop_serving(self) -> None:
        """Close every endpoint ``serve`` opened (tests; the daemon's dies with it)."""
        while self._servers:
            server = self._servers.pop()
            server.shutdown()
            server.server_close()
