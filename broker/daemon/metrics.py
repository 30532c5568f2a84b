"""The daemon's Prometheus metrics, on a registry of its own.

Owns: ``DaemonMetrics`` (every metric the daemon exports, with its meaning)
and ``serve`` (the HTTP endpoint on a configured port, ``broker.daemon.health``).
A registry per daemon, not the process-global one, so tests and several
daemons in one process never share counters.

Names follow Prometheus' conventions: the unit in the name (``_seconds``,
``_usd``, ``_ratio``; ``_total`` on counters; ``_bucket``/``_sum``/``_count``
on histograms). Labels follow Karpenter's and OpenCost's node metrics:
``capacity_type`` (``spot``, ``on-demand``, ``reserved``: a tier's
``CAPACITY_TYPE``), ``instance_type``, ``zone`` and ``region``. Every label
value known in advance (``KNOWN_LABELS``) is exported from the start, at 0.

- ``spotfolio_cost_rate_usd_per_hour{capacity_type}``: what the live fleet
  costs per hour now, at the market's prices.
- ``spotfolio_spot_share_ratio``: share of live capacity units on spot (0-1).
- ``spotfolio_revocations_total``: spot interruption notices received (first
  delivery of each; duplicates are not counted).
- ``spotfolio_decisions_total{kind}``: lifecycle decisions by kind (shrink,
  replace, break_glass, checkpoint_only, ignore, and break-glass upkeep's
  return_to_spot, extend, end, open_on_demand).
- ``spotfolio_notice_to_decision_seconds``: from receiving a notice to its
  decision being durable in the store (histogram).
- ``spotfolio_break_glass_usd_total``: gross dollars committed to break-glass
  on-demand capacity (each stretch and each extension; what a stretch ending
  early releases is not subtracted: a counter only goes up).
- ``spotfolio_break_glass_committed_usd``: what counts against the cap now
  (dollars spent by closed stretches plus open commitments; the store's sum).
- ``spotfolio_break_glass_cap_usd``: the configured cap (absent without one).
- ``spotfolio_actions_total{kind,outcome}``: launches/terminations by outcome
  (done, replayed, failed, capacity, throttled, dry_run).
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
- ``spotfolio_spend_usd_total{capacity_type}``: dollars the live fleet has
  cost: each fleet update adds the cost rate seen at the previous one times
  the time between them (``observe_fleet``).
- ``spotfolio_pool_cost_rate_usd_per_hour``, ``spotfolio_pool_units`` and
  ``spotfolio_pool_revocations_total``, each by ``{instance_type, zone,
  region, capacity_type}``: at most ``POOL_LABEL_CAP`` pools keep their own
  labels (the first seen); the rest add up under ``other`` in the three pool
  labels, and ``spotfolio_pool_labels_folded_total`` counts the pools folded
  so (each once). A per-pool metric so has at most
  ``(POOL_LABEL_CAP + 1) * 3`` series.
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
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from broker.daemon import health
from broker.lifecycle.values import DecisionKind, ReturnKind
from markets.clock import Clock
from markets.cloud_fleet import Instance, InstanceState
from markets.errors import InputError
from markets.keys import PoolKey
from markets.model import MarketSnapshot
from markets.quotas import quota_use_of

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

__all__ = [
    "CAPACITY_TYPE",
    "KNOWN_LABELS",
    "LATENCY_BUCKETS_S",
    "OTHER_POOL",
    "POOL_LABEL_CAP",
    "DaemonMetrics",
    "PoolLabels",
]

# Per-pool series: each label value is a time series kept by every scraper
# for its retention; a fleet spread over hundreds of pools must not become
# hundreds of series per metric. 20 pools cover a fleet's regions x types in
# practice; the rest add up under "other".
POOL_LABEL_CAP = 20
OTHER_POOL = "other"
POOL_LABELS = ("instance_type", "zone", "region", "capacity_type")
# A tier as Karpenter's and OpenCost's ``capacity_type`` label spells it.
CAPACITY_TYPE = {"spot": "spot", "on_demand": "on-demand", "committed": "reserved"}
# Every value a labelled counter can take that is known before it happens:
# exported at 0 from the start, so a rate() or an alarm sees the series
# before its first increment.
KNOWN_LABELS: dict[str, tuple[tuple[str, ...], ...]] = {
    "decisions": tuple((k.value,) for k in (*DecisionKind, *ReturnKind)),
    "actions": tuple(
        (k, o)
        for k in ("launch", "terminate")
        for o in ("done", "replayed", "failed", "capacity", "throttled", "dry_run")
    ),
    "notices_dropped": (("malformed",), ("rejected",), ("foreign",), ("not_ours",)),
    "job_errors": tuple(
        (j,)
        for j in (
            "renew_lease",
            "refresh_market",
            "sense_demand",
            "replan",
            "reconcile",
            "poll_notices",
            "break_glass_upkeep",
        )
    ),
    "spend_usd": tuple((c,) for c in CAPACITY_TYPE.values()),
    "cost_rate": tuple((c,) for c in CAPACITY_TYPE.values()),
}
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


def capacity_type(tier: str) -> str:
    """A tier's ``capacity_type`` label value (an unknown tier: itself)."""
    return CAPACITY_TYPE.get(tier, tier)


class PoolLabels:
    """A pool key's ``(instance_type, zone, region)`` labels: its own for the
    first ``cap`` pools seen, ``other`` in all three for the rest (stable, so
    a counter's series never change label); ``folded`` is called once for
    each pool folded into ``other``."""

    def __init__(self, cap: int = POOL_LABEL_CAP, folded: Callable[[], None] | None = None) -> None:
        self.cap = cap
        self._folded = folded
        self._known: dict[str, tuple[str, str, str]] = {}
        self._others: set[str] = set()

    def __call__(self, pool_key: str) -> tuple[str, str, str]:
        labels = self._known.get(pool_key)
        if labels is not None:
            return labels
        if len(self._known) < self.cap:
            try:
                k = PoolKey.parse(pool_key)
            except InputError:
                k = None
            if k is not None:
                self._known[pool_key] = labels = (k.instance_type, k.zone, k.region)
                return labels
        if pool_key not in self._others and len(self._others) < AWAITED_CAP:
            self._others.add(pool_key)
            if self._folded is not None:
                self._folded()
        return (OTHER_POOL, OTHER_POOL, OTHER_POOL)


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
            "Live fleet cost per hour by capacity type",
            ["capacity_type"],
            registry=r,
        )
        self.spot_share = Gauge(
            "spotfolio_spot_share_ratio", "Share of live capacity units on spot", registry=r
        )
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
            "spotfolio_spend_usd",
            "Dollars the live fleet has cost, by capacity type",
            ["capacity_type"],
            registry=r,
        )
        self.pool_cost_rate = Gauge(
            "spotfolio_pool_cost_rate_usd_per_hour",
            "Live fleet cost per hour by pool (capped label set)",
            POOL_LABELS,
            registry=r,
        )
        self.pool_units = Gauge(
            "spotfolio_pool_units",
            "Live capacity units by pool (capped label set)",
            POOL_LABELS,
            registry=r,
        )
        self.pool_revocations = Counter(
            "spotfolio_pool_revocations",
            "Revocations of the fleet's instances by pool (capped label set)",
            POOL_LABELS,
            registry=r,
        )
        self.pool_labels_folded = Counter(
            "spotfolio_pool_labels_folded",
            "Pools beyond the label cap, counted under instance_type/zone/region other",
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
        self.pool_label = PoolLabels(folded=self.pool_labels_folded.inc)
        for attr, values in KNOWN_LABELS.items():
            metric = getattr(self, attr)
            for labels in values:
                metric.labels(*labels)
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
                    self.spend_usd.labels(capacity_type(tier)).inc(usd_per_hour * hours)
        if self._last_tick is None or now >= self._last_tick:
            self._last_tick = now
            rates: dict[str, float] = {}
            for (_, tier), (usd, _units) in pool_rates.items():
                rates[tier] = rates.get(tier, 0.0) + usd
            self._last_rates = rates
        by_label: dict[tuple[str, str, str, str], tuple[float, int]] = {}
        for (pool, tier), (usd, units) in pool_rates.items():
            label = (*self.pool_label(pool), capacity_type(tier))
            u0, n0 = by_label.get(label, (0.0, 0))
            by_label[label] = (u0 + usd, n0 + units)
        self.pool_cost_rate.clear()
        self.pool_units.clear()
        for label, (usd, units) in by_label.items():
            self.pool_cost_rate.labels(*label).set(usd)
            self.pool_units.labels(*label).set(units)

    def observe_quotas(self, snapshot: MarketSnapshot | None, fleet: Iterable[Instance]) -> None:
        """Each quota's share used by the live ``fleet`` (a quota with a 0
        limit reads 1 when used, 0 when not); quotas gone are dropped."""
        self.quota_used.clear()
        if snapshot is None or not snapshot.quotas:
            return
        alive = (InstanceState.PENDING, InstanceState.RUNNING)
        used = quota_use_of(
            snapshot, [(i.pool_key, i.tier, 1.0) for i in fleet if i.state in alive]
        )
        for q in snapshot.quotas:
            got = used.get(q.key, 0.0)
            ratio = got / q.limit if q.limit > 0 else float(got > 0)
            quota = q.code or f"{q.group}/{q.tier.value if q.tier else 'any'}"
            self.quota_used.labels(q.provider.value, q.region or "global", quota).set(ratio)

    def fleet_cost_rates(self, rates: Mapping[str, float], spot_share: float) -> None:
        """The live fleet's ``tier -> $/h`` and its spot share of units."""
        for tier, usd in rates.items():
            self.cost_rate.labels(capacity_type(tier)).set(usd)
        self.spot_share.set(spot_share)

    def revoked(self, pool_key: str, tier: str = "spot", *, unit_hours: float, usd: float) -> None:
        """One revocation of an instance of ``pool_key`` on ``tier`` and its
        preemption tax."""
        self.pool_revocations.labels(*self.pool_label(pool_key), capacity_type(tier)).inc()
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

    def serve(
        self, port: int, addr: str = "127.0.0.1", ready: Callable[[], str | None] | None = None
    ) -> int:
        """Expose ``/metrics``, ``/healthz`` and ``/readyz`` (``ready``: None
        when ready, else why not) on ``addr:port`` (``broker.daemon.health``);
        returns the port (``port`` 0: a free one)."""
        server = health.serve(self.registry, port, addr, ready)
        self._servers.append(server)
        bound: int = server.server_port
        return bound

    def stop_serving(self) -> None:
        """Close every endpoint ``serve`` opened (tests; the daemon's dies with it)."""
        while self._servers:
            server = self._servers.pop()
            server.shutdown()
            server.server_close()
