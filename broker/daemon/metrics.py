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

Must not: decide anything or read the clock.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = ["LATENCY_BUCKETS_S", "DaemonMetrics"]

# Seconds; fine below 1 s (the reaction target is p99 <= 1 s) and up to the
# AWS notice window of 120 s.
LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class DaemonMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
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

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample's current value (0 when absent): for tests and reports."""
        v = self.registry.get_sample_value(name, labels or {})
        return 0.0 if v is None else float(v)

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Expose ``/metrics`` over HTTP (a daemon thread of prometheus_client)."""
        start_http_server(port, addr=addr, registry=self.registry)
