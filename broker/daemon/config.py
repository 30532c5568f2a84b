"""The daemon's configuration file: one validated YAML document.

Owns: ``DaemonConfig`` (with ``Intervals``, ``Backoff`` and ``SimSettings``)
and ``load_daemon_config``. Any problem names the file, the field path and
what was expected (``InputError``, CLI exit 2). Relative paths in the file
are relative to the file.

Example (every field but ``owner`` has a default)::

    owner: team-ml-prod          # value of the spotfolio:owner tag on our instances
    account: "123456789012"      # one active daemon per account (the lease name)
    store_url: sqlite:///var/lib/spotfolio/state.db   # or postgresql+psycopg://...
    workloads: workloads.yaml    # default: the shipped example fleet
    demand: demand.csv           # optional hourly serving demand
    market: aws                  # default | aws | gcp | a recorded-data path
    provider: aws                # aws | gcp | sim
    provider_options:            # provider settings (markets.aws.settings, markets.gcp.settings)
      queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/spotfolio-notices
      launch: {us-east-1: {launch_template_name: spotfolio-gpu}}
    planner: milp                # milp (CBC) | fast (greedy, milliseconds)
    horizon_hours: 24            # rolling horizon; the current hour is committed
    committed: {aws/us-east-1/g5.xlarge: 4}   # reservations the account holds
    intervals: {refresh_market_s: 900, replan_s: 3600, reconcile_s: 60, poll_notices_s: 5,
                upkeep_s: 30}     # upkeep_s < lifecycle.return_lead_s
    metrics_port: 9108           # 0: no endpoint
    metrics_addr: 127.0.0.1      # 0.0.0.0: reachable by a scraper elsewhere
    providers: [aws, gcp]        # clouds we launch in (default: every one with settings)
    clouds:                      # more clouds, acted in from the same plan (or all of them)
      gcp: {credentials_file: /etc/spotfolio/gcp.json,    # credentials by reference
            lease_scope: ml-prod-project,   # one daemon at a time in this cloud account
            options: {project: ml-prod-project, zones: [us-central1-a],  # markets.gcp.settings
                      instance_template: global/instanceTemplates/spotfolio-gpu}}
    horizon_start: 2026-03-01T00:00:00Z   # deadlines count from here (default: first plan)
    stale_hazard_multiplier: 2.0 # hazards x this while the market snapshot is stale
    checkpoint_hooks:            # called at notice time, within the window
      llm-finetune: {command: ["/opt/train/ckpt-now", "--fast"]}
      chat-api: {url: "http://127.0.0.1:9000/drain",      # secrets by reference:
                 headers: {X-Token: {env: DRAIN_TOKEN}},   # {env|ssm|secretsmanager: ...}
                 signing_key: {ssm: /spotfolio/hook-key}}  # broker.daemon.hooks
    lifecycle: {return_min_dwell_s: 1800}   # broker.lifecycle.LifecycleConfig

Must not: open markets, stores or providers (the composition roots do).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from broker.daemon.environ import read_environment, validate_with_environment
from broker.daemon.hooks import CheckpointHook
from broker.daemon.store.store import in_memory_url, redact_url
from broker.lifecycle import LifecycleConfig
from broker.lifecycle.values import REMOVED_TTL_MESSAGE
from markets.catalog import CATALOG
from markets.errors import InputError
from markets.keys import CommitmentKey
from markets.numbers import DAY_S, MAX_COUNT, MAX_USD, Bounded
from markets.registry import MARKETS, PROVIDERS
from markets.validation import FieldError, StrictModel, input_error_from, read_yaml
from policies.workloads.spec import WorkloadSet, default_workloads, load_workloads

__all__ = [
    "Backoff",
    "CloudSettings",
    "DaemonConfig",
    "Intervals",
    "SimSettings",
    "load_daemon_config",
]


# The years a plan epoch or a simulated start may fall in (as a demand file's hours).
FIRST_YEAR, LAST_YEAR = 2000, 2199


def _not_a_number(value: object) -> object:
    # pydantic reads a number as seconds since 1970: `horizon_start: 5` is a typo.
    if isinstance(value, bool | int | float):
        raise ValueError("an ISO-8601 time with its zone (2026-03-01T00:00:00Z), not a number")
    # YAML reads an unquoted time itself; as text, a refusal quotes it as written.
    return value.isoformat() if isinstance(value, datetime) else value


def _in_years(value: datetime) -> datetime:
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise ValueError(f"a time from {FIRST_YEAR} to {LAST_YEAR}")
    return value


Epoch = Annotated[AwareDatetime, BeforeValidator(_not_a_number), AfterValidator(_in_years)]


class Intervals(StrictModel):
    """How often each job runs (seconds)."""

    # A market snapshot older than this is refreshed; AWS spot prices move a
    # few % a week (docs/concepts/market.md), placement scores faster: 15 minutes.
    refresh_market_s: Annotated[float, Bounded(gt=0, le=DAY_S, unit="seconds")] = 900.0
    replan_s: Annotated[float, Bounded(gt=0, le=DAY_S, unit="seconds")] = (
        3600.0  # hourly: the plan's period
    )
    reconcile_s: Annotated[float, Bounded(gt=0, le=DAY_S, unit="seconds")] = 60.0
    # A few seconds: the AWS notice window is 120 s (docs/concepts/market.md).
    poll_notices_s: Annotated[float, Bounded(gt=0, le=60, unit="seconds")] = 5.0
    lease_renew_s: Annotated[float, Bounded(gt=0, le=DAY_S, unit="seconds")] = 10.0
    # Break-glass stretches due to be extended or ended are checked this
    # often; it must be shorter than the lifecycle's return_lead_s (300 s by
    # default), or a stretch can outrun the dollars the cap committed to it.
    upkeep_s: Annotated[float, Bounded(gt=0, le=DAY_S, unit="seconds")] = 30.0
    # Live serving demand (demand_metric) is read this often: a minute is
    # well inside the 4 min a 3 min replica readiness orders ahead.
    sense_demand_s: Annotated[float, Bounded(gt=0, le=3600, unit="seconds")] = 60.0


class Backoff(StrictModel):
    """Jittered exponential backoff on throttling (the pool cool-down after
    refused capacity is ``markets.ttl.UNAVAILABLE_OFFERING_TTL_S``)."""

    max_attempts: Annotated[int, Bounded(ge=1, le=20)] = 4
    base_s: Annotated[float, Bounded(ge=0, le=3600, unit="seconds")] = 0.5
    cap_s: Annotated[float, Bounded(ge=0, le=3600, unit="seconds")] = 8.0

    @model_validator(mode="before")
    @classmethod
    def _no_second_ttl(cls, data: object) -> object:
        # The pool cool-down after InsufficientInstanceCapacity is one
        # constant (markets.ttl), shared with the lifecycle.
        if isinstance(data, dict) and "unavailable_ttl_s" in data:
            raise ValueError(REMOVED_TTL_MESSAGE.format(field="backoff.unavailable_ttl_s"))
        return data


class SimSettings(StrictModel):
    """The simulated provider (``provider: sim``)."""

    seed: Annotated[int, Bounded(ge=0, le=MAX_COUNT)] = 0
    notice_seconds: Annotated[float, Bounded(gt=0, le=3600, unit="seconds")] = 120.0
    duplicate_rate: Annotated[float, Bounded(ge=0, le=1)] = 0.0
    reorder: bool = False
    listing_lag_s: Annotated[float, Bounded(ge=0, le=DAY_S, unit="seconds")] = 0.0
    throttle_rate: Annotated[float, Bounded(ge=0, le=1)] = 0.0
    # Rebalance recommendations (markets.sim.events states the model): the
    # share of revocations preceded by one (0: none sent), how far before the
    # interruption notice at most, and the share of recommendations that are
    # followed by a revocation (the rest are false alarms).
    rebalance_coverage: Annotated[float, Bounded(ge=0, le=1)] = 0.0
    rebalance_precision: Annotated[float, Bounded(gt=0, le=1)] = 0.5
    rebalance_lead_s: Annotated[float, Bounded(ge=0, le=DAY_S, unit="seconds")] = 1800.0
    # Running daemon only (not --hours): simulated time passes at the real
    # rate from here (default: the market's first hour), and with a
    # state_file the account lives in that file, so it outlives the process
    # (kill the daemon, start it again: the account is as the cloud left it).
    start: Epoch | None = None
    state_file: Path | None = None
    # With a state_file: each launch/terminate takes this long (wall clock),
    # half before the cloud acts and half for its answer.
    api_latency_s: Annotated[float, Bounded(ge=0, le=10, unit="seconds")] = 0.0


class CloudSettings(StrictModel):
    """One cloud the daemon acts in (``clouds.aws``, ``clouds.gcp``): how it
    signs in, the account its lease covers, and the provider's settings.
    Credentials are named, never written here."""

    # aws: a profile of the shared AWS config (a role_arn there is the role
    # assumed; unset: the default credential chain, as an instance role).
    profile: str | None = Field(default=None, min_length=1, max_length=128,
                                pattern=r"^[A-Za-z0-9_.+=,@-]+$")  # fmt: skip
    # gcp: a service-account or workload-identity JSON file (unset: the
    # application default credentials).
    credentials_file: Path | None = None
    # The cloud account acted in (an AWS account id, a GCP project): one
    # daemon at a time per scope, whatever its own ``account``.
    lease_scope: str | None = Field(default=None, min_length=1, max_length=128,
                                    pattern=r"^[A-Za-z0-9_.:@-]+$")  # fmt: skip
    # The provider's own settings, validated by it when the daemon starts
    # (markets.aws.settings: queue_url, launch...; markets.gcp.settings:
    # project, zones, instance_template...).
    options: dict[str, object] = Field(default_factory=dict)


# Which credentials setting each cloud reads.
_CREDENTIALS = {"aws": "profile", "gcp": "credentials_file"}


# A daemon config is a few KB; 1 MiB is beyond any hand-written one.
MAX_CONFIG_BYTES = 1024 * 1024
# Instances of one reservation group: far beyond any account's quota.
MAX_INSTANCES = 100_000
# A number handed to a market adapter (a region count, a price scale) is
# finite and bounded like every other number of the file.
_MARKET_NUMBER = Bounded(ge=-MAX_USD, le=MAX_USD)


def _market_value(value: str | bool | int | float) -> str | bool | int | float:
    if isinstance(value, bool | str):
        return value
    _MARKET_NUMBER.check(value)
    return value


MarketValue = Annotated[str | bool | int | float, AfterValidator(_market_value)]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_STORE_EXPECTED = (
    "sqlite:///path, postgresql+psycopg://user@host/database, or a SQLite file path "
    f"ending {', '.join(_SQLITE_SUFFIXES)}"
)


def store_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a store (``None``: nothing it shows
    before connecting). In-memory URLs pass here: ``--hours`` simulations
    keep one, and the running daemon refuses them (``check_durable_store``)."""
    if in_memory_url(url):
        return None
    if url != url.strip() or any(ord(c) < 32 or ord(c) == 127 for c in url):
        return f"{_STORE_EXPECTED} (no spaces or control characters around it)"
    if "://" not in url:
        return None if Path(url).suffix.lower() in _SQLITE_SUFFIXES else _STORE_EXPECTED
    try:
        parsed = make_url(url)
    except ArgumentError:
        return _STORE_EXPECTED
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        return f"{_STORE_EXPECTED} (a SQLite or PostgreSQL database, not {backend!r})"
    if backend == "postgresql" and not parsed.database:
        return f"{_STORE_EXPECTED} (the URL names no database)"
    return None


def commitment_group_problem(key: str) -> str | None:
    """What is wrong with ``key`` as a reservation group (``None``: it is
    provider/region/instance type of a pool the catalog prices)."""
    expected = "provider/region/instance type of a catalog pool, e.g. aws/us-east-1/g5.xlarge"
    try:
        group = CommitmentKey.parse(key)
    except InputError:
        return expected
    entry = CATALOG.get(group.instance_type)
    if entry is None:
        return f"{expected} (no instance type {group.instance_type[:80]!r} in the catalog)"
    if entry.instance.provider.value != group.provider:
        return f"{expected} ({group.instance_type} is a {entry.instance.provider.value} type)"
    if group.region not in {region for region, _zone in entry.zones}:
        return f"{expected} ({group.instance_type} is not offered in {group.region[:80]!r})"
    return None


class DaemonConfig(StrictModel):
    owner: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:/@+=-]+$")
    account: str = Field(default="default", min_length=1, max_length=64)
    # A durable store: a SQLite file (relative paths are relative to this
    # file) or a PostgreSQL URL. The running daemon refuses an in-memory one
    # (``check_durable_store``); ``--hours`` simulations keep their own.
    store_url: str = "sqlite:///spotfolio-daemon.db"
    # Set by ``load_daemon_config`` (where these settings were read, for
    # messages); not a setting, whatever the file says (and not in the
    # published JSON Schema).
    config_file: SkipJsonSchema[str | None] = None
    workloads: Path | None = None
    demand: Path | None = None
    # Reserved-ahead blocks (markets.blocks file): held ones the plan runs
    # deadline jobs in, offerings it may advise buying. The daemon never buys
    # one: a plan that would is logged as a recommendation (block_recommended).
    blocks: Path | None = None
    demand_seed: Annotated[int, Bounded(ge=0, le=MAX_COUNT)] = 0
    market: str = "default"
    market_options: dict[str, MarketValue] = Field(default_factory=dict)
    provider: str = "sim"  # a name of markets.registry.PROVIDERS (checked below)
    # The provider's own settings (aws: launch templates per region, queue_url...),
    # validated by the provider's own settings model.
    provider_options: dict[str, object] = Field(default_factory=dict)
    planner: Literal["milp", "fast"] = "milp"
    horizon_hours: Annotated[int, Bounded(ge=1, le=168, unit="hours")] = 24
    committed: dict[str, Annotated[int, Bounded(ge=0, le=MAX_INSTANCES)]] = Field(
        default_factory=dict
    )
    intervals: Intervals = Field(default_factory=Intervals)
    backoff: Backoff = Field(default_factory=Backoff)
    # The lease: a takeover waits this long after the holder's last renewal;
    # intervals.lease_renew_s must be under half of it.
    lease_ttl_s: Annotated[float, Bounded(gt=0, le=DAY_S, unit="seconds")] = 30.0
    # A launched instance may take this long to show in the cloud's listing
    # (EC2 DescribeInstances is eventually consistent): until then the store's
    # record of it counts as present.
    listing_grace_s: Annotated[float, Bounded(ge=0, le=DAY_S, unit="seconds")] = 120.0
    metrics_port: Annotated[int, Bounded(ge=0, le=65535)] = 9108
    # Address the metrics endpoint binds: loopback unless a scraper elsewhere
    # must reach it (the container image and Terraform modules set 0.0.0.0).
    metrics_addr: str = "127.0.0.1"
    # broker.lifecycle.LifecycleConfig's fields, validated by the daemon's wiring.
    lifecycle: dict[str, object] = Field(default_factory=dict)
    sim: SimSettings = Field(default_factory=SimSettings)
    # Clouds the daemon may launch in; None: the provider's own (aws: [aws]),
    # and for the simulated cloud every provider of its market. The plan, the
    # next-pool fallback and the lifecycle's replacements all keep to these.
    providers: list[Literal["aws", "gcp"]] | None = Field(default=None, min_length=1)
    # Several clouds acted in from one plan, each with its own settings (in
    # place of ``provider``/``provider_options``, or beside them for another
    # cloud). None: the one ``provider``.
    clouds: dict[Literal["aws", "gcp"], CloudSettings] | None = Field(default=None, min_length=1)
    # The plan epoch: workloads' deadline_hours count from here. None: the
    # first plan's start (kept in the store across restarts).
    horizon_start: Epoch | None = None
    # "Stale market data: keep the last good snapshot, mark it stale, widen
    # risk margins" (docs/concepts/market.md). While the snapshot is stale, every
    # pool's hazard counts this many times over, in the plan (the optimizer's
    # interruption_multiplier) and in the lifecycle (ranking, deadline margin,
    # return to spot). 2 is an assumption: prices and hazards drift a few %
    # a week, but what went unseen may be a revocation wave.
    stale_hazard_multiplier: Annotated[float, Bounded(ge=1, le=100)] = 2.0
    # Per workload: a command (argv) or a webhook called when a notice revokes
    # one of its instances, with the time left in the window as its budget.
    checkpoint_hooks: dict[str, CheckpointHook] = Field(default_factory=dict)

    @field_validator("metrics_addr")
    @classmethod
    def _ip_address(cls, addr: str) -> str:
        try:
            return str(ipaddress.ip_address(addr))
        except ValueError:
            raise ValueError("an IP address to bind (127.0.0.1, 0.0.0.0, ::)") from None

    @field_validator("provider")
    @classmethod
    def _registered_provider(cls, name: str) -> str:
        if name not in PROVIDERS:
            raise ValueError(f"one of {', '.join(PROVIDERS.names())}")
        return PROVIDERS.canonical(name)

    @model_validator(mode="after")
    def _store_url_is_a_store(self) -> DaemonConfig:
        why = store_url_problem(self.store_url)
        if why is not None:
            raise FieldError("store_url", why, redact_url(self.store_url))
        return self

    @model_validator(mode="after")
    def _market_named(self) -> DaemonConfig:
        m = self.market
        if not m.strip() or m != m.strip() or any(ord(c) < 32 for c in m):
            raise FieldError("market", f"{MARKETS.expected()}, or a recorded-data path", m)
        return self

    @model_validator(mode="after")
    def _committed_groups_exist(self) -> DaemonConfig:
        for key in self.committed:
            why = commitment_group_problem(key)
            if why is not None:
                raise FieldError(f"committed.{key}", why, key[:80])
        return self

    @model_validator(mode="after")
    def _renew_well_inside_the_ttl(self) -> DaemonConfig:
        # Two renewals per TTL at least: one late renewal (a slow store, a
        # long garbage collection) must not let the lease lapse.
        if not self.intervals.lease_renew_s < self.lease_ttl_s / 2:
            raise FieldError(
                "intervals.lease_renew_s",
                f"fewer seconds than half of lease_ttl_s ({self.lease_ttl_s:g} / 2), so the "
                "lease is renewed at least twice before it runs out",
                self.intervals.lease_renew_s,
            )
        return self

    @model_validator(mode="after")
    def _upkeep_before_lead(self) -> DaemonConfig:
        lead = self.lifecycle.get("return_lead_s", LifecycleConfig().return_lead_s)
        if isinstance(lead, int | float) and self.intervals.upkeep_s >= lead:
            raise FieldError(
                "intervals.upkeep_s",
                f"fewer seconds than lifecycle.return_lead_s ({lead:g}), so a break-glass "
                "stretch is extended or ended before its committed dollars run out",
                self.intervals.upkeep_s,
            )
        return self

    @model_validator(mode="after")
    def _clouds_agree(self) -> DaemonConfig:
        if self.clouds is None:
            return self
        if self.provider == "sim" and "provider" in self.model_fields_set:
            raise FieldError(
                "provider", "aws or gcp beside clouds (the simulated cloud acts alone)", "sim"
            )
        if self.provider in self.clouds and self.provider_options:
            raise FieldError(
                "provider_options",
                f"nothing beside clouds.{self.provider} (one place for a cloud's settings)",
                sorted(self.provider_options),
            )
        for name, cloud in self.clouds.items():
            for field, value in (("profile", cloud.profile),
                                 ("credentials_file", cloud.credentials_file)):  # fmt: skip
                if value is not None and _CREDENTIALS[name] != field:
                    raise FieldError(
                        f"clouds.{name}.{field}",
                        f"{_CREDENTIALS[name]} for {name} ({field} is another cloud's setting)",
                        str(value),
                    )
        return self

    @model_validator(mode="after")
    def _providers_it_can_act_in(self) -> DaemonConfig:
        # A real cloud is acted in only with its settings: a plan's pool in
        # another would be refused at every launch (the simulated cloud
        # serves every provider of its market).
        settings = self.cloud_settings
        if settings and self.providers is not None:
            other = sorted(set(self.providers) - set(settings))
            if other:
                raise FieldError(
                    "providers",
                    f"only clouds with settings ([{', '.join(settings)}]): no clouds."
                    f"{other[0]} says how to launch in {', '.join(other)}",
                    self.providers,
                )
        return self

    def check_durable_store(self) -> None:
        """Refuse a store that vanishes with the process (``sqlite://``,
        ``sqlite:///``, ``:memory:``, an empty URL): the write-ahead action
        log, the idempotency records and the notice dedup would be lost at
        every restart."""
        if in_memory_url(self.store_url):
            raise InputError(
                self.config_file or "config",
                "store_url",
                "a durable store for the daemon (a SQLite file path, sqlite:///path, or a "
                "PostgreSQL URL): an in-memory store loses the action log at every restart",
                got=redact_url(self.store_url),
            )

    @property
    def lease_name(self) -> str:
        return f"account/{self.account}"

    @property
    def cloud_settings(self) -> dict[str, CloudSettings]:
        """The real clouds acted in, each with its settings (empty: the
        simulated cloud): ``clouds``, and ``provider`` with its
        ``provider_options`` unless ``clouds`` names it."""
        out: dict[str, CloudSettings] = {str(k): v for k, v in (self.clouds or {}).items()}
        if self.provider != "sim" and self.provider not in out:
            out[self.provider] = CloudSettings(options=self.provider_options)
        return dict(sorted(out.items()))

    @property
    def lease_names(self) -> tuple[str, ...]:
        """Every lease the daemon holds: its account's, and one per cloud
        with a ``lease_scope`` (``aws/123456789012``), in a fixed order."""
        scoped = sorted(
            f"{name}/{c.lease_scope}"
            for name, c in self.cloud_settings.items()
            if c.lease_scope is not None
        )
        return (self.lease_name, *scoped)

    @property
    def launch_providers(self) -> tuple[str, ...] | None:
        """Clouds to launch in (``None``: any pool of the market)."""
        if self.providers is not None:
            return tuple(self.providers)
        return tuple(self.cloud_settings) or None

    def workload_set(self) -> WorkloadSet:
        """The fleet named by ``workloads`` (default: the shipped example fleet)."""
        return load_workloads(self.workloads) if self.workloads else default_workloads()

    def check_workloads(self, workloads: WorkloadSet, source: str = "checkpoint_hooks") -> None:
        """Every workload named in ``checkpoint_hooks`` exists."""
        names = {w.name for w in workloads.workloads}
        for name in self.checkpoint_hooks:
            if name not in names:
                raise InputError(
                    source,
                    f"checkpoint_hooks.{name}",
                    f"a configured workload ({', '.join(sorted(names))})",
                    got=name,
                )


def load_daemon_config(
    path: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    check_paths: bool = True,
    **overrides: object,
) -> DaemonConfig:
    """Read, validate and resolve paths relative to the file; with
    ``environ``, its ``SPOTFOLIO_*`` keys override the file's and
    ``overrides`` both (``broker.daemon.environ``). ``check_paths=False``
    skips the checks that the files and directories it names exist (for a
    config rendered for another machine, such as a container's)."""
    source = str(path)
    try:
        if Path(path).stat().st_size > MAX_CONFIG_BYTES:
            raise InputError(source, None, f"a config file of at most {MAX_CONFIG_BYTES:,} bytes")
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("--config", None, f"a readable UTF-8 YAML file ({e})", got=source) from e
    data = read_yaml(text, source)
    if not isinstance(data, dict):
        raise InputError(source, None, "a mapping of daemon settings", got=type(data).__name__)
    data = {**data, "config_file": source}
    cfg = validate_with_environment(DaemonConfig, data, source, environ, overrides)
    try:  # the lifecycle's own settings, checked here so a bad one names this file
        LifecycleConfig.model_validate(cfg.lifecycle)
    except ValidationError as e:
        raise input_error_from(source, e, prefix="lifecycle") from e
    base = Path(path).resolve().parent
    updates: dict[str, object] = {}
    for name, p in (("workloads", cfg.workloads), ("demand", cfg.demand), ("blocks", cfg.blocks)):
        if p is not None and not p.is_absolute():
            updates[name] = base / p
    state = cfg.sim.state_file
    if state is not None and not state.is_absolute():
        updates["sim"] = cfg.sim.model_copy(update={"state_file": base / state})
    if cfg.clouds is not None:
        clouds = {
            name: c.model_copy(update={"credentials_file": base / c.credentials_file})
            if c.credentials_file is not None and not c.credentials_file.is_absolute()
            else c
            for name, c in cfg.clouds.items()
        }
        if clouds != cfg.clouds:
            updates["clouds"] = clouds
    store = _resolve_sqlite(cfg.store_url, base)
    if store != cfg.store_url:
        updates["store_url"] = store
    market = _resolve_market(cfg.market, base) if check_paths else cfg.market
    if market is None:
        raise _named(source, environ, overrides, "market",
                     f"{MARKETS.expected()}, or an existing recorded-data file or directory",
                     cfg.market)  # fmt: skip
    if market != cfg.market:
        updates["market"] = market
    cfg = cfg.model_copy(update=updates) if updates else cfg
    if check_paths:
        _check_files(cfg, source, environ, overrides)
    return cfg


def _named(
    source: str,
    environ: Mapping[str, str] | None,
    overrides: Mapping[str, object],
    field: str,
    expected: str,
    got: object,
) -> InputError:
    """An error about ``field`` naming where its value came from: the
    environment's variable or the file's field (a command line's value is
    named as its option by the command, which knows the option)."""
    top = field.split(".")[0]
    if overrides.get(top) is not None:
        return InputError(source, field, expected, got=got)
    origins = read_environment(DaemonConfig, environ or {}).origins
    origin = origins.get(field) or origins.get(top)
    if origin is not None:
        return InputError(origin[0], None, expected, got=got)
    return InputError(source, field, expected, got=got)


def _resolve_market(market: str, base: Path) -> str | None:
    """A registered market name as it is; a recorded-data path relative to
    the file (or, as before the file, the working directory) made absolute;
    ``None`` when it names neither."""
    if market in MARKETS:
        return market
    path = Path(market).expanduser()
    for candidate in (path,) if path.is_absolute() else (base / path, Path.cwd() / path):
        if candidate.exists():
            return str(candidate)
    return None


def _check_files(
    cfg: DaemonConfig,
    source: str,
    environ: Mapping[str, str] | None,
    overrides: Mapping[str, object],
) -> None:
    """The files the settings name exist (inputs) or can be made (state),
    checked now rather than when a job first opens them."""
    inputs = [("workloads", cfg.workloads), ("demand", cfg.demand), ("blocks", cfg.blocks)]
    inputs += [
        (f"clouds.{name}.credentials_file", c.credentials_file)
        for name, c in (cfg.clouds or {}).items()
    ]
    for field, path in inputs:
        if path is not None and not path.is_file():
            what = "a directory" if path.is_dir() else "no such file"
            raise _named(source, environ, overrides, field, f"an existing file ({what})", str(path))
    outputs: list[tuple[str, Path]] = []
    if cfg.sim.state_file is not None:
        outputs.append(("sim.state_file", cfg.sim.state_file))
    sqlite = _sqlite_file(cfg.store_url)
    if sqlite is not None:
        outputs.append(("store_url", sqlite))
    for field, path in outputs:
        if path.is_dir():
            why = "a file path, not a directory"
        elif not path.parent.is_dir():
            why = f"a file in an existing directory (no directory {path.parent})"
        else:
            continue
        got = redact_url(cfg.store_url) if field == "store_url" else str(path)
        raise _named(source, environ, overrides, field, why, got)


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite store (``None``: another database, or in memory)."""
    if in_memory_url(url):
        return None
    if "://" not in url:
        return Path(url)
    parsed = make_url(url)  # store_url_problem parsed it already
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return Path(parsed.database)


def _resolve_sqlite(url: str, base: Path) -> str:
    """A SQLite store's relative file path made absolute against ``base``
    (the config file's directory), as documented; other URLs unchanged."""
    if in_memory_url(url):
        return url
    if "://" not in url:  # a plain file path
        return url if Path(url).is_absolute() else str(base / url)
    scheme, sep, rest = url.partition(":///")
    if not sep or not scheme.startswith("sqlite") or rest.startswith("/"):
        return url
    path, q, query = rest.partition("?")
    return f"{scheme}:///{base / path}{q}{query}"
