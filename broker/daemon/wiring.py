"""The daemon's production wiring: the pieces the CLI and the simulated
account compose the same way.

Owns: ``default_lifecycle`` (the project's ``LifecycleManager``, configured
from the daemon's config), ``LifecycleFactory`` (its signature, for a run
that brings its own), ``open_account`` (the market, the provider and the
clock a config names: a real cloud, or several acted in as one
(``markets.clouds.Clouds``), on the system clock, or the simulated cloud on
its own; ``open_cloud`` signs each in as its ``clouds:`` settings say),
``open_demand_sources`` (the metric readers a serving workload's
``demand_metric`` names), ``learning_market`` (a market whose snapshots carry the
hazards learned from the account's own record in the store:
``markets.hazard.learning``) and ``build_daemon`` (the production daemon of a config:
store, workloads, metrics, lifecycle). This is the one place the daemon names the concrete
lifecycle manager: the daemon and its jobs are typed against
``broker.daemon.lifecycle.Lifecycle``, and the annotated assignment in
``default_lifecycle`` is what makes mypy check that the manager satisfies it.

Must not: run anything (no clock read; opening the store and the adapters is
all the I/O it does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import ValidationError

from broker.daemon.config import CloudSettings, DaemonConfig
from broker.daemon.daemon import Daemon
from broker.daemon.executor import Request
from broker.daemon.hooks import HookRunner
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.plan_job import REVOCATION_KINDS
from broker.daemon.store.store import Store
from broker.lifecycle import LifecycleConfig, LifecycleManager
from broker.lifecycle.placement import PlacementReader
from markets.clock import Clock, SystemClock
from markets.clouds import Clouds
from markets.extras import needs_extra
from markets.hazard.clustering import failure_domains
from markets.hazard.learning import LearnedMarket
from markets.hazard.posterior import Exposure
from markets.model import FailureDomain
from markets.protocols import MetricSource, PriceSource, Provider
from markets.registry import open_market, open_provider
from markets.secretref import EnvSecrets, SecretResolver
from markets.signals.prometheus import PrometheusReader
from markets.sim.cloud import SimOptions
from markets.validation import input_error_from
from policies.workloads.spec import WorkloadSet

__all__ = [
    "Account",
    "LifecycleFactory",
    "build_daemon",
    "default_lifecycle",
    "hook_secrets",
    "learning_market",
    "open_account",
    "open_cloud",
    "open_config_market",
    "open_demand_sources",
    "sim_options",
]

LifecycleFactory = Callable[[WorkloadSet, Clock, DaemonConfig], Lifecycle]


def default_lifecycle(
    workloads: WorkloadSet,
    clock: Clock,
    config: DaemonConfig,
    *,
    placement: PlacementReader | None = None,
) -> Lifecycle:
    """The project's lifecycle manager, configured from the daemon's config:
    its ``lifecycle:`` settings, plus what the daemon knows better, unless
    set there: the clouds it launches in (``launch_providers``), the plan
    epoch (``horizon_start``; else the daemon passes its first plan's start)
    and the stale-market hazard multiplier. ``placement``: what reads the
    current placement scores at reaction time (the AWS market; else the
    snapshot's scores)."""
    # The config's free-form ``lifecycle:`` mapping, validated here.
    settings: dict[str, object] = {
        "providers": config.launch_providers,
        "horizon_start": config.horizon_start,
        "stale_hazard_multiplier": config.stale_hazard_multiplier,
        **config.lifecycle,
    }
    try:
        cfg = LifecycleConfig.model_validate(settings)
    except ValidationError as e:
        raise input_error_from("config", e, prefix="lifecycle") from e
    # mypy: it satisfies the protocol
    manager: Lifecycle = LifecycleManager(workloads, clock, cfg, placement=placement)
    return manager


def sim_options(config: DaemonConfig) -> SimOptions:
    """The simulated cloud's options from the config's ``sim:`` settings and
    the clouds the daemon launches in."""
    s = config.sim
    return SimOptions(
        notice_seconds=s.notice_seconds,
        seed=s.seed,
        duplicate_rate=s.duplicate_rate,
        reorder=s.reorder,
        listing_lag_s=s.listing_lag_s,
        throttle_rate=s.throttle_rate,
        rebalance_coverage=s.rebalance_coverage,
        rebalance_precision=s.rebalance_precision,
        rebalance_lead_s=s.rebalance_lead_s,
        providers=config.launch_providers,
    )


@runtime_checkable
class _KeepsTime(Protocol):
    """A provider with its own clock (the simulated cloud): the daemon runs on it."""

    @property
    def clock(self) -> Clock: ...


@dataclass(frozen=True)
class Account:
    """What a config names to act on: its market, its provider and the clock
    the daemon runs on."""

    market: PriceSource
    provider: Provider
    clock: Clock


# The cloud markets whose snapshots can carry the account's quotas.
_QUOTA_MARKETS = frozenset({"aws", "gcp"})


def open_config_market(config: DaemonConfig) -> PriceSource:
    """The market ``config`` names (``market``, with its ``market_options``).
    A cloud market reads the account's quotas into each snapshot (the
    market caches them for ``markets.ttl.QUOTA_TTL_S``), so every planning
    cycle and every replacement keeps to them; ``read_quotas: false`` in
    ``market_options`` turns that off."""
    options: dict[str, object] = dict(config.market_options)
    if config.market in _QUOTA_MARKETS:
        options.setdefault("read_quotas", True)
    return open_market(config.market, **options)


def open_account(config: DaemonConfig) -> Account:
    """The market and provider ``config`` names, through the registries. A
    real cloud runs on the system clock; the simulated cloud (``sim``) keeps
    its own (simulated time at the real rate from ``sim.start`` or the
    market's first hour; with ``sim.state_file`` the account lives in that
    file and outlives the process)."""
    market = open_config_market(config)
    clouds = config.cloud_settings
    if clouds:
        opened = {name: open_cloud(name, c, config.owner) for name, c in clouds.items()}
        if config.clouds is None:  # one provider: acted in as it is
            return Account(market, opened[config.provider], SystemClock())
        return Account(market, Clouds(opened), SystemClock())
    s = config.sim
    cloud = open_provider(
        "sim",
        market=market,
        options=sim_options(config),
        start=s.start,
        state_file=s.state_file,
        latency_s=s.api_latency_s,
    )
    if not isinstance(cloud, _KeepsTime):
        raise TypeError("the simulated cloud keeps its own clock")  # its factory says so
    return Account(market, cloud, cloud.clock)


def open_cloud(name: str, cloud: CloudSettings, owner: str) -> Provider:
    """The provider of one cloud of the config, signed in as its settings
    say: an AWS profile, a GCP credentials file (else each cloud's default
    credentials)."""
    options: dict[str, object] = dict(cloud.options)
    if cloud.profile is not None:
        options["profile"] = cloud.profile
    if cloud.credentials_file is not None:
        options["credentials_file"] = str(cloud.credentials_file)
    return open_provider(name, owner=owner, **options)


def hook_secrets(config: DaemonConfig) -> SecretResolver:
    """How the checkpoint hooks' secret references resolve: from the daemon's
    environment, and from SSM / Secrets Manager (the default AWS credential
    chain and region) when a hook names one."""
    kinds = {r.kind for h in config.checkpoint_hooks.values() for r in h.references()}
    if not kinds & {"ssm", "secretsmanager"}:
        return EnvSecrets()
    # boto3 loads only for a config that names an AWS secret (a simulated
    # account starts without it).
    from markets.aws.secrets import AwsSecrets

    return AwsSecrets.from_env()


def open_demand_sources(workloads: WorkloadSet) -> dict[str, MetricSource]:
    """A metric reader per serving workload with a ``demand_metric``: one
    Prometheus reader per server URL, one CloudWatch reader per region."""
    by_key: dict[tuple[str, str], MetricSource] = {}
    out: dict[str, MetricSource] = {}
    for w in workloads.workloads:
        m = w.demand_metric
        if m is None:
            continue
        key = (m.source, m.url or m.region or "")
        if key not in by_key:
            if m.source == "prometheus" and m.url is not None:
                by_key[key] = PrometheusReader(m.url)
            elif m.region is not None:
                # botocore loads only for a workload that names CloudWatch (the aws extra).
                with needs_extra(f"{w.name}.demand_metric", got="source: cloudwatch"):
                    from markets.signals.cloudwatch import CloudWatchReader

                    by_key[key] = CloudWatchReader.from_settings(m.region)
        out[w.name] = by_key[key]
    return out


def learning_market(market: PriceSource, store: Store, owner: str) -> PriceSource:
    """``market`` with each pool's hazard updated by the revocations and spot
    hours the daemon ``owner`` recorded in ``store`` (counted by its plan
    job: ``broker.daemon.plan_job``), and the failure domains its revocations
    show."""

    def experience() -> dict[str, Exposure]:
        with store.transaction() as tx:
            return {k: Exposure(n, h) for k, (n, h) in tx.experience(owner).items() if h > 0}

    def domains() -> tuple[FailureDomain, ...]:
        with store.transaction() as tx:
            times, span_s = tx.revocation_times(owner, REVOCATION_KINDS)
        if span_s <= 0:
            return ()
        return failure_domains(times, span_s=span_s, source="account")

    return LearnedMarket(market, experience, domains)


def build_daemon(
    config: DaemonConfig,
    *,
    dry_run: bool = False,
    announce: Callable[[Request], None] | None = None,
) -> tuple[Daemon, Store]:
    """The production daemon of ``config`` and its store: the account it
    names, the workloads file, the project's lifecycle manager and metrics.
    An in-memory store is refused (``DaemonConfig.check_durable_store``)."""
    config.check_durable_store()  # before anything is opened
    account = open_account(config)
    workloads = config.workload_set()
    store = Store(config.store_url)
    daemon = Daemon(
        config,
        account.provider,
        learning_market(account.market, store, config.owner),
        store,
        default_lifecycle(
            workloads,
            account.clock,
            config,
            # A market that can read the scores now (AWS) ranks reactions with them.
            placement=account.market if isinstance(account.market, PlacementReader) else None,
        ),
        account.clock,
        workloads=workloads,
        metrics=DaemonMetrics(),
        dry_run=dry_run,
        announce=announce,
        hook_runner=HookRunner(secrets=hook_secrets(config)),
        renew_in_background=True,  # through start-up and long plans
        demand_sources=open_demand_sources(workloads),
    )
    return daemon, store
