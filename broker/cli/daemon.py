"""``spotfolio daemon``: run the provisioning daemon, or a simulated account.

The command line of the daemon's composition root (``broker.daemon.wiring``:
the market and the provider by name through ``markets.registry`` — ``aws``,
``gcp`` or ``sim``, the simulated cloud, whose clock the daemon then runs on —,
the store and the lifecycle manager). The daemon's stack (SQLAlchemy,
prometheus-client, APScheduler, PuLP) is imported when the command runs, not
when ``spotfolio`` starts: every ``spotfolio`` invocation imports this module.

- ``spotfolio daemon --config FILE [--provider aws|gcp|sim] [--dry-run] [--once]``
  runs the daemon (APScheduler jobs, metrics on ``metrics_addr:metrics_port``) until
  SIGTERM; ``--once`` runs one start-up pass (lease, recovery, plan,
  reconcile, notices) and exits; ``--dry-run`` prints the actions instead of
  calling any mutating API, then their cost against the fleet now per
  workload and tier, $/h and over the horizon (``broker.daemon.drycost``).
  With ``provider: sim`` the simulated cloud's
  time runs at the real rate from ``sim.start`` (default: the market's first
  hour); ``sim.state_file`` keeps the simulated account in a file, so the
  daemon can be killed and restarted against the same account
  (``markets.sim.persist``).
- ``spotfolio daemon --provider sim --hours H [--market M] [--json]`` runs a
  simulated account for H hours in accelerated time and prints one object::

    {"schema": "spotfolio.daemon.sim/1", "start": iso, "hours": int,
     "revocations": int,                  # spot instances the cloud took back
     "decisions": {"shrink": int, "replace": int, "break_glass": int,
                   ...other kinds seen: "ignore", "checkpoint_only", "return_to_spot"},
     "unhandled_notices": int,            # interruption/rebalance notices never acknowledged
     "duplicate_launches": int,           # the same launch sent twice without its key (must be 0)
     "orphaned_instances": int,           # live instances the store does not know (must be 0)
     "decision_latency_ms": {"p50": float | null, "p99": float | null},
     "decisions_after_deadline": int,     # decided after the notice's deadline
     "budget_exceeded": bool, "budget_exceeded_hours": int,
     "cost_usd": float, "cost_by_tier_usd": {"committed", "on_demand", "spot"},
     "break_glass_usd": float, "break_glass_cap_usd": float | null,
     "break_glass_cap_exceeded": bool,
     "counters": {"launch_requests", "launches", "instances_launched", "replays",
                  "terminations", "notices_sent", "throttled", "capacity_refusals",
                  "plan_generation"},
     "disruption": {workload: {"broker_terminations": int,  # spot, or a gang's any tier
                               "broker_terminations_all_tiers": int, "revocations": int,
                               "job_hours": int, "hours_with_broker_terminations": int,
                               "broker_terminations_per_job_hour": float},
                    "fleet": {"broker_terminations", "revocations", "job_hours",
                              "broker_terminations_per_job_hour"}},
     "seconds": float}                    # wall-clock seconds the simulation took
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import sys
from collections.abc import Collection, Iterator
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

import click

from broker.cli._adapter_options import market_options
from broker.cli._logcontext import context as log_context
from broker.cli._logcontext import errors_as_json, utc_stamp
from broker.cli._logcontext import set_context as set_log_context
from broker.cli._numbers import ranged
from broker.cli._output import console, emit_json
from broker.daemon.logline import LogLine
from markets.errors import InputError
from markets.numbers import MAX_COUNT
from markets.protocols import HistorySource
from markets.redaction import RedactingFilter
from markets.registry import PROVIDERS

if TYPE_CHECKING:  # types only: the daemon's stack loads when the command runs
    from broker.daemon.config import DaemonConfig
    from broker.daemon.executor import Request

__all__ = ["daemon_command"]

# Simulated accounts run jobs at coarser cadences than a real daemon: the
# simulated hour is what matters, and a month must replay in about a minute.
SIM_INTERVALS = {"refresh_market_s": 3600.0, "replan_s": 3600.0, "reconcile_s": 900.0}


# The project's loggers: the daemon's ("spotfolio.*") and each package's
# module loggers (``logging.getLogger(__name__)``: "markets.aws.provider"...).
PROJECT_LOGGERS = ("spotfolio", "markets", "policies", "broker")
# A string field that is a plain decimal ("0.25", "-3.10") is a number the
# call site formatted (``usd=f"{x:.2f}"``): written as a JSON number.
_DECIMAL = re.compile(r"-?\d+\.\d+")
_RESERVED = frozenset(
    {"ts", "level", "logger", "event", "message", "args", "exc_type", "exc", "stack"}
)


def _typed(value: object) -> object:
    """A field's value as JSON keeps it: numbers, booleans and null stay as
    they are (NaN and infinities, which JSON lacks, as strings), times as
    ISO-8601, decimal strings as numbers, the rest as str."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return _typed(value.value)
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [_typed(v) for v in items]
    s = str(value)
    return float(s) if _DECIMAL.fullmatch(s) else s


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (ISO-8601 UTC, milliseconds),
    ``level``, ``logger``, ``owner`` and ``account`` (the config's; null
    until it is read), then ``event`` and its typed fields (a ``LogLine``
    from ``kv``; lists as arrays) or ``message`` and ``args`` (a %-style
    call), and ``exc_type`` and ``exc`` (the traceback) when an exception is
    logged."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": utc_stamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            **log_context(),
        }
        msg = record.msg
        if isinstance(msg, LogLine) and not record.args:
            out["event"] = msg.event
            for k, v in msg.fields.items():
                out[f"{k}_" if k in _RESERVED else k] = _typed(v)
        else:
            out["message"] = record.getMessage()
            if isinstance(record.args, tuple) and record.args:
                out["args"] = [_typed(a) for a in record.args]
        if record.exc_info and record.exc_info[0] is not None:
            out["exc_type"] = record.exc_info[0].__name__
            # the redaction filter's text when it ran (exc_text), else our own
            out["exc"] = record.exc_text or self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str)


# The project's logger roots: "spotfolio.*" (the daemon's jobs) and the
# packages' own __name__ loggers (markets.aws.notices, ...). All go to one
# handler, so every record passes the redaction filter.
PROJECT_LOGGERS = ("spotfolio", "markets", "policies", "broker")


def _logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonLogFormatter()
        if fmt == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    )
    # Before any formatter: URL passwords and secret-named values never reach stderr.
    handler.addFilter(RedactingFilter())
    for name in PROJECT_LOGGERS:
        log = logging.getLogger(name)
        log.handlers[:] = [handler]
        log.setLevel(level.upper())
        log.propagate = False


# An error the market or provider registries raise names the command-line
# option; a value that came from the config file is that file's field.
_CONFIG_FIELD = {
    "--market": "market",
    "--market-option": "market_options",
    "--provider": "provider",
    "providers": "providers",
    "checkpoint_hooks": "",  # its field names the hook already
    "config": "",
}


@contextlib.contextmanager
def _in_config(path: str | None, given: Collection[str]) -> Iterator[None]:
    """Re-raise an ``InputError`` about a setting the config file gave
    (not one of the ``given`` options) as an error naming the file and field."""
    try:
        yield
    except InputError as e:
        field = _CONFIG_FIELD.get(e.source)
        if path is None or field is None or e.source in given:
            raise
        where = ".".join(p for p in (field, e.field) if p) or None
        raise InputError(path, where, e.expected, got=e.got) from e


def _given(**options: object) -> set[str]:
    """The options the command line set (``market`` -> ``--market``)."""
    return {f"--{k.replace('_', '-')}" for k, v in options.items() if v not in (None, ())}


def _config(path: str | None, **overrides: Any) -> DaemonConfig:
    """The config file (or none), the ``SPOTFOLIO_*`` environment over it and
    the command line's options over both (``broker.daemon.environ``)."""
    from broker.daemon.config import DaemonConfig, load_daemon_config
    from broker.daemon.environ import validate_with_environment

    try:
        if path is not None:
            return load_daemon_config(path, environ=os.environ, **overrides)
        return validate_with_environment(
            DaemonConfig, {"owner": "spotfolio-sim"}, "options", os.environ, overrides
        )
    except InputError as e:
        # A value the command line gave is named as its option, not as the file's field.
        option = {v: k for k, v in _CONFIG_FIELD.items() if v}.get(e.field or "")
        if option is None or overrides.get(e.field or "") is None:
            raise
        raise InputError(option, None, e.expected, got=e.got) from e


def _announce(request: Request) -> None:
    data = request.model_dump(mode="json")
    kind = "launch" if "count" in data else "terminate"
    what = (
        f"{data['count']} x {data['pool_key']} {data['tier']} for {data['workload']}"
        if kind == "launch"
        else ",".join(data["instance_ids"])
    )
    click.echo(f"would {kind}: {what} (key {data['idempotency_key']})")


def _choose_log_format(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    # Eager: set before any other option or file is read, so their errors use it.
    errors_as_json(value == "json")
    return value


@click.command("daemon")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Daemon settings (YAML); required unless --hours runs a simulation.",
)
@click.option(
    "--provider",
    type=click.Choice(PROVIDERS.names()),
    default=None,
    help="Cloud to act in (overrides the config's provider).",
)
@click.option("--dry-run", is_flag=True, help="Print the actions; call no mutating API.")
@click.option(
    "--once", is_flag=True, help="One start-up pass (plan, reconcile, notices), then exit."
)
@click.option(
    "--hours",
    type=ranged(ge=1, le=24 * 365, integer=True),
    default=None,
    help="With --provider sim: simulate this many hours in accelerated time.",
)
@click.option("--market", default=None, help="Market: default, aws, gcp or a recorded-data path.")
@click.option(
    "--market-option",
    "market_option",
    multiple=True,
    metavar="KEY=VALUE",
    help="Options for the market adapter (repeatable; added to the config's "
    "market_options), e.g. regions=us-west-2.",
)
@click.option(
    "--start",
    default=None,
    metavar="ISO",
    help="With --provider sim: simulated time starts here (sim.start).",
)
@click.option(
    "--seed",
    type=ranged(ge=0, le=MAX_COUNT, integer=True),
    default=None,
    help="Seed of the simulated cloud.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the simulation's result as JSON.")
@click.option(
    "--log-format",
    type=click.Choice(["kv", "json"]),
    default="kv",
    show_default=True,
    is_eager=True,
    callback=_choose_log_format,
    help="Log lines, and a fatal start-up error, as key=value text or JSON.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def daemon_command(
    config_path: str | None,
    provider: str | None,
    dry_run: bool,
    once: bool,
    hours: int | None,
    market: str | None,
    market_option: tuple[str, ...],
    start: str | None,
    seed: int | None,
    as_json: bool,
    log_format: str,
    log_level: str,
) -> None:
    """Keep a cloud account's fleet at the plan (or simulate an account)."""
    _logging(log_format, "warning" if hours is not None and log_level == "info" else log_level)
    if hours is not None:
        _simulate(config_path, provider, hours, market, market_option, start, seed, as_json)
        return
    if config_path is None:
        raise InputError("--config", None, "a daemon config file (or --provider sim --hours H)")
    config = _with_sim(_config(config_path, provider=provider, market=market), market_option, start)
    set_log_context(owner=config.owner, account=config.account)
    given = _given(provider=provider, market=market, market_option=market_option)
    with _in_config(config_path, given):
        _run(config, dry_run=dry_run, once=once)


def _with_sim(
    config: DaemonConfig, pairs: tuple[str, ...], start: str | None, seed: int | None = None
) -> DaemonConfig:
    """The config with the command line's market options, sim start and seed
    laid over it (validated as the config file's fields are)."""
    from pydantic import ValidationError  # pydantic and PyYAML: when the command runs

    from markets.validation import input_error_from

    sim: dict[str, object] = {"start": start, "seed": seed}
    data = config.model_dump()
    data["market_options"] = {**config.market_options, **market_options(pairs)}
    data["sim"] = {**data["sim"], **{k: v for k, v in sim.items() if v is not None}}
    try:
        return type(config).model_validate(data)
    except ValidationError as e:
        err = input_error_from("options", e)
        option = next((o for f, o in _OVERLAY if (err.field or "").startswith(f)), None)
        if option is None:
            raise err from e
        raise InputError(option, None, err.expected, got=err.got) from e


# The fields _with_sim lays over a config, and the option each came from.
_OVERLAY = (("sim.start", "--start"), ("sim.seed", "--seed"), ("market_options", "--market-option"))


def _simulate(
    config_path: str | None,
    provider: str | None,
    hours: int,
    market: str | None,
    pairs: tuple[str, ...],
    start: str | None,
    seed: int | None,
    as_json: bool,
) -> None:
    from broker.daemon.accelerated import simulate_daemon
    from broker.daemon.wiring import open_config_market

    if provider not in (None, "sim"):
        raise InputError(
            "--hours", None, "--provider sim (a simulation needs the simulated cloud)", got=provider
        )
    overrides: dict[str, object] = {"provider": "sim", "market": market}
    if config_path is None:
        overrides.update(
            store_url="sqlite://", planner="fast", metrics_port=0, intervals=SIM_INTERVALS
        )
    config = _with_sim(_config(config_path, **overrides), pairs, start, seed)
    set_log_context(owner=config.owner, account=config.account)
    with _in_config(config_path, _given(market=market, market_option=pairs)):
        market_source = open_config_market(config)
        if not isinstance(market_source, HistorySource):  # the live markets have no history
            raise InputError(
                "--market",
                None,
                "a market with an hourly history (default or recorded data)",
                got=config.market,
            )
        report = simulate_daemon(config, market_source, hours=hours, start=config.sim.start)
    out = report.to_dict()
    if as_json:
        emit_json(out)
        return
    from rich.table import Table

    t = Table(title=f"simulated account, {hours} h from {out['start']}")
    t.add_column("measure")
    t.add_column("value", justify="right")
    for k in (
        "revocations",
        "unhandled_notices",
        "duplicate_launches",
        "orphaned_instances",
        "budget_exceeded",
        "cost_usd",
        "break_glass_usd",
    ):
        t.add_row(k, str(out[k]))
    t.add_row("decisions", ", ".join(f"{k} {v}" for k, v in out["decisions"].items()))
    lat = out["decision_latency_ms"]
    t.add_row("decision latency ms (p50 / p99)", f"{lat['p50']} / {lat['p99']}")
    console.print(t)


def _run(config: DaemonConfig, *, dry_run: bool, once: bool) -> None:
    from broker.daemon.drycost import cost_diff, render
    from broker.daemon.schedule import run_scheduled
    from broker.daemon.wiring import build_daemon
    from broker.planning.reconcile import live_ours

    would: list[Request] = []

    def announce(request: Request) -> None:
        _announce(request)
        would.append(request)

    daemon, store = build_daemon(config, dry_run=dry_run, announce=announce if dry_run else None)
    if once or dry_run:
        daemon.start()
        daemon.poll_notices()
        daemon.stop()
        with store.transaction() as tx:
            pending = tx.count_actions(config.owner, "pending")
        store.close()
        click.echo(f"generation {daemon.state.generation}; pending actions {pending}")
        if dry_run:  # what the actions would do to the bill
            fleet = live_ours(daemon.book.last_fleet, config.owner)
            lines = cost_diff(fleet, would, daemon.book.price)
            click.echo(render(lines, config.horizon_hours))
        return
    run_scheduled(
        daemon, metrics_port=config.metrics_port or None, metrics_addr=config.metrics_addr
    )
    if daemon.fatal is not None:  # a job stopped the daemon: exit 1 (2 for bad input)
        raise daemon.fatal
