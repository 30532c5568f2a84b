"""The option plumbing shared by ``spotfolio cost effective|breakeven|checkpoint``.

Owns: the rate options (``--interruptions``, ``--per``, ``--restart-hours``,
the notice window, ``--json``) and the run options (units, hours, prices,
checkpointing) as click decorators; checking a number option
(``finite``); the notice window from ``--provider``/``--notice-seconds``
(``resolve_notice``); and turning the options into a ``policies`` ``SpotRun``
(``build_run``), with every validation error naming the option, not the
field (``InputError``, exit 2).

The values reach a command as one frozen ``RateOptions`` / ``RunOptions``
(``broker.cli._options.bundled``).

Must not: compute any cost, or print. ``policies`` (and pydantic) are
imported inside the functions so that ``spotfolio --help`` stays fast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from broker.cli._numbers import ranged
from broker.cli._options import OptionDecorator, bundled
from markets.errors import InputError
from markets.numbers import DAY_S, MAX_HOURS, MAX_UNITS, MAX_USD_PER_HOUR

if TYPE_CHECKING:
    from policies.effective_cost import SpotRun

__all__ = [
    "PER_CHOICES",
    "RateOptions",
    "RunOptions",
    "build_run",
    "finite",
    "rate_options",
    "resolve_notice",
    "run_options",
]

PER_CHOICES = ("wall-hour", "wall-day", "productive-hour", "productive-day")

# SpotRun field -> (option, what it expects): errors name the option, not the field.
_FIELD_OPTION = {
    "units": ("--units", "a number of capacity units > 0"),
    "productive_hours": ("--hours", "productive hours > 0"),
    "on_demand_usd_per_unit_hour": ("--on-demand", "a price per unit-hour > 0"),
    "spot_usd_per_unit_hour": ("--spot", "a price per unit-hour >= 0"),
    "checkpoint_overhead": ("--checkpoint-overhead", "a fraction >= 0 (0.05 = 5 %)"),
    "checkpoint_write_hours": ("--checkpoint-write-hours", "hours >= 0"),
    "checkpoint_interval_hours": ("--checkpoint-interval-hours", "hours > 0"),
    "interruptions": ("--interruptions", "a count >= 0"),
    "restart_hours": ("--restart-hours", "hours >= 0"),
    "lost_work_hours": ("--lost-work-hours", "hours >= 0"),
    "notice_seconds": ("--notice-seconds", "seconds >= 0"),
    "notice_checkpoint_write_seconds": ("--notice-write-seconds", "seconds >= 0"),
}


@dataclass(frozen=True)
class RateOptions:
    """The rate options' values (field names are click's parameter names)."""

    interruptions: float
    per: str
    restart_hours: float
    provider: str | None
    notice_seconds: float | None
    notice_write_seconds: float | None
    as_json: bool


@dataclass(frozen=True)
class RunOptions(RateOptions):
    """The run options' values, with the rate options'."""

    units: float
    hours: float
    on_demand: float
    spot: float
    checkpoint_overhead: float | None
    checkpoint_write_hours: float | None
    checkpoint_interval_hours: float | None
    lost_work_hours: float | None


_RATE_OPTIONS: list[OptionDecorator] = [
    click.option(
        "--interruptions",
        type=ranged(ge=0, le=1e6),
        default=0.0,
        show_default=True,
        help="Interruptions per --per.",
    ),
    click.option(
        "--per",
        type=click.Choice(PER_CHOICES),
        default="wall-hour",
        show_default=True,
        help="Unit and convention of --interruptions.",
    ),
    click.option(
        "--restart-hours",
        type=ranged(ge=0, le=MAX_HOURS),
        default=0.0,
        show_default=True,
        help="R: re-provision, reload, warm up, per interruption.",
    ),
    click.option(
        "--provider",
        type=click.Choice(["aws", "gcp"]),
        default=None,
        help="Sets the notice window (aws 120 s, gcp 30 s).",
    ),
    click.option(
        "--notice-seconds",
        type=ranged(ge=0, le=DAY_S),
        default=None,
        help="Notice window in seconds (overrides --provider).",
    ),
    click.option(
        "--notice-write-seconds",
        type=ranged(ge=0, le=DAY_S),
        default=None,
        help="Write time of a notice-triggered checkpoint.",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print JSON (stable schema)."),
]
_RUN_OPTIONS: list[OptionDecorator] = [
    click.option(
        "--units", type=ranged(gt=0, le=MAX_UNITS), required=True, help="Capacity units (GPUs)."
    ),
    click.option(
        "--hours",
        type=ranged(gt=0, le=MAX_HOURS),
        required=True,
        help="Productive hours the work needs.",
    ),
    click.option(
        "--on-demand",
        type=ranged(gt=0, le=MAX_USD_PER_HOUR),
        required=True,
        help="On-demand $ per unit-hour.",
    ),
    click.option(
        "--spot",
        type=ranged(ge=0, le=MAX_USD_PER_HOUR),
        required=True,
        help="Spot $ per unit-hour.",
    ),
    click.option(
        "--checkpoint-overhead",
        type=ranged(ge=0, le=100),
        default=None,
        help="c = write/interval (lost work then counts as part of the restart).",
    ),
    click.option(
        "--checkpoint-write-hours",
        type=ranged(ge=0, le=MAX_HOURS),
        default=None,
        help="delta, hours per periodic checkpoint.",
    ),
    click.option(
        "--checkpoint-interval-hours",
        type=ranged(gt=0, le=MAX_HOURS),
        default=None,
        help="tau, hours of progress between checkpoints (default: Daly's optimum).",
    ),
    click.option(
        "--lost-work-hours",
        type=ranged(ge=0, le=MAX_HOURS),
        default=None,
        help="L per interruption (default tau/2, 0 if a notice checkpoint fits).",
    ),
]

# The callback gets the rate options' values as one RateOptions (first argument).
rate_options = bundled(RateOptions, _RATE_OPTIONS)
# The callback gets the rate and run options' values as one RunOptions.
run_options = bundled(RunOptions, [*_RATE_OPTIONS, *_RUN_OPTIONS])


def finite(option: str, value: float | None, expected: str, *, positive: bool = False) -> None:
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise InputError(option, None, expected, got=value)


def resolve_notice(
    provider: str | None, notice_seconds: float | None, write_s: float | None
) -> float | None:
    from policies.checkpoint import NOTICE_SECONDS  # lazy: pydantic; --help stays fast

    if notice_seconds is not None:
        return notice_seconds
    if provider is not None:
        return NOTICE_SECONDS[provider]
    if write_s is not None:
        raise InputError(
            "--notice-write-seconds", None, "--provider aws|gcp or --notice-seconds too"
        )
    return None


def build_run(o: RunOptions) -> SpotRun:
    from pydantic import ValidationError

    # lazy: policies pulls pydantic; ``spotfolio --help`` imports this module
    from policies.effective_cost import RateConvention, RateUnit, SpotRun

    if o.checkpoint_overhead is not None and (
        o.checkpoint_write_hours is not None or o.checkpoint_interval_hours is not None
    ):
        raise InputError(
            "--checkpoint-overhead",
            None,
            "either --checkpoint-overhead or --checkpoint-write-hours "
            "(+ --checkpoint-interval-hours), not both",
        )
    if o.checkpoint_interval_hours is not None and o.checkpoint_write_hours is None:
        raise InputError("--checkpoint-interval-hours", None, "--checkpoint-write-hours too")
    convention, per = o.per.split("-")  # a --per choice: <convention>-<unit>
    notice = resolve_notice(o.provider, o.notice_seconds, o.notice_write_seconds)
    try:
        return SpotRun(
            units=o.units,
            productive_hours=o.hours,
            on_demand_usd_per_unit_hour=o.on_demand,
            spot_usd_per_unit_hour=o.spot,
            checkpoint_overhead=o.checkpoint_overhead,
            checkpoint_write_hours=o.checkpoint_write_hours,
            checkpoint_interval_hours=o.checkpoint_interval_hours,
            interruptions=o.interruptions,
            convention=RateConvention(convention),
            per=RateUnit(per),
            restart_hours=o.restart_hours,
            lost_work_hours=o.lost_work_hours,
            notice_seconds=notice,
            notice_checkpoint_write_seconds=o.notice_write_seconds,
        )
    except ValidationError as e:
        err = e.errors()[0]
        loc = err["loc"][0] if err["loc"] else ""
        option, expected = _FIELD_OPTION.get(str(loc), ("options", err["msg"]))
        raise InputError(option, None, expected, got=err.get("input")) from None
