"""``spotfolio cost ...``: the economics calculators (effective, breakeven,
checkpoint, reserve). Thin wrappers over ``policies``; no economics here.

Owns: option parsing, turning bad options into ``InputError`` (exit 2, one line
naming the option), reading a demand CSV, and output. Must not: compute any
cost itself. ``policies`` (and numpy) are imported inside the commands so that
``spotfolio --help`` stays fast.

``--per`` fixes the rate convention (economics.md section 1): ``wall-hour`` /
``wall-day`` count interruptions per wall-clock hour/day on spot (a hazard, the
default); ``productive-hour`` / ``productive-day`` per hour/day of progress, as
in the worked examples.

JSON output (``--json``), stable schemas; the ``schema`` key names the version.
Rounding of top-level numbers: ``*_usd`` to cents, ``*_usd_per_unit_hour`` to
4 dp, everything else to 6 dp; ``exact`` repeats every numeric top-level field
at full precision. ``null`` means unbounded/not applicable as stated per field.

``spotfolio.cost.effective/1``: ``convention``, ``units``, ``base_hours``,
``checkpoint_hours``, ``lost_work_hours``, ``restart_hours``, ``total_hours``
(per unit, whole run), ``interruptions_per_hour``, ``interruptions_expected``,
``checkpoint_interval_hours`` (null: unknown, or never checkpoint),
``lost_work_per_interruption_hours`` (null: unbounded, never checkpointing),
``spot_total_usd``, ``on_demand_total_usd``, ``saving_usd``,
``saving_fraction`` (negative = a hidden premium),
``effective_usd_per_unit_hour``, ``calendar_stretch``,
``usd_per_interruption`` (null with the lost work), ``wasted_unit_hours``,
``spot_worth_it``, ``exact``.

``spotfolio.cost.breakeven/1``: ``convention``, ``price_ratio`` (on-demand /
spot; null if spot is free), ``spot_finishes``, ``spot_worth_it``,
``breakeven_spot_usd_per_unit_hour`` (null if spot never finishes),
``breakeven_discount``, ``breakeven_interruptions_per_hour``,
``breakeven_interruptions_per_day``, ``breakeven_mean_minutes_between`` (rate
null = any rate pays), ``checkpoint_window_status`` (``not_computed`` without
``--checkpoint-write-hours`` | ``never_pays`` | ``window``),
``checkpoint_window`` (null, or ``min_interval_hours``, ``max_interval_hours``,
``min_interval_s``, ``max_interval_s``; max null = no upper edge), ``exact``.

``spotfolio.cost.checkpoint/1``: ``convention``, ``interruptions_per_hour``,
``mean_hours_between`` (null: never interrupted), ``checkpoint_write_hours``,
``young_interval_hours``, ``daly_interval_hours``, ``interval_hours`` (the one
used: given, else Daly), ``overhead_fraction``,
``lost_work_per_interruption_hours``, ``time_factor`` (T_total / T_prod),
``productive_fraction`` (1 / time_factor), ``notice_seconds``,
``notice_write_seconds``, ``notice_checkpoint_fits`` (null: no notice
checkpoint), ``exact``.

``spotfolio.cost.reserve/1``: ``hours``, ``peak_units``, ``mean_units``,
``committed_usd_per_unit_hour``, ``alternative_usd_per_unit_hour``,
``breakeven_occupancy``, ``optimal`` and ``no_commitment`` (level objects),
``levels`` (list of level objects), ``steps`` (list: ``from_units``,
``to_units``, ``marginal_occupancy``, ``delta_usd``, ``pays``). A level object:
``committed_units``, ``share_of_peak``, ``committed_usd``,
``alternative_unit_hours``, ``alternative_usd``, ``total_usd``, ``occupancy``
(null with no commitment).
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from broker.cli._output import console, emit_json
from markets.errors import InputError, SpotNeverFinishesError

if TYPE_CHECKING:
    from policies.effective_cost import SpotRun
    from policies.reservations import CommitmentCost

__all__ = ["group"]

F = TypeVar("F", bound=Callable[..., Any])

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


@click.group(
    name="cost",
    help="Economics calculators: effective spot cost, break-even, "
    "checkpoint interval, reservations.",
)
def group() -> None:
    pass


# -- shared option plumbing ---------------------------------------------------------


def _rate_options(f: F) -> F:
    opts = [
        click.option("--interruptions", type=float, default=0.0, show_default=True,
                     help="Interruptions per --per."),
        click.option("--per", type=click.Choice(PER_CHOICES), default="wall-hour",
                     show_default=True, help="Unit and convention of --interruptions."),
        click.option("--restart-hours", type=float, default=0.0, show_default=True,
                     help="R: re-provision, reload, warm up, per interruption."),
        click.option("--provider", type=click.Choice(["aws", "gcp"]), default=None,
                     help="Sets the notice window (aws 120 s, gcp 30 s)."),
        click.option("--notice-seconds", type=float, default=None,
                     help="Notice window in seconds (overrides --provider)."),
        click.option("--notice-write-seconds", type=float, default=None,
                     help="Write time of a notice-triggered checkpoint."),
        click.option("--json", "as_json", is_flag=True, help="Print JSON (stable schema)."),
    ]  # fmt: skip
    return functools.reduce(lambda g, o: o(g), reversed(opts), f)


def _run_options(f: F) -> F:
    opts = [
        click.option("--units", type=float, required=True, help="Capacity units (GPUs)."),
        click.option("--hours", type=float, required=True, help="Productive hours the work needs."),
        click.option("--on-demand", type=float, required=True,
                     help="On-demand $ per unit-hour."),
        click.option("--spot", type=float, required=True, help="Spot $ per unit-hour."),
        click.option("--checkpoint-overhead", type=float, default=None,
                     help="c = write/interval (lost work then counts as part of the restart)."),
        click.option("--checkpoint-write-hours", type=float, default=None,
                     help="delta, hours per periodic checkpoint."),
        click.option("--checkpoint-interval-hours", type=float, default=None,
                     help="tau, hours of progress between checkpoints (default: Daly's optimum)."),
        click.option("--lost-work-hours", type=float, default=None,
                     help="L per interruption (default tau/2, 0 if a notice checkpoint fits)."),
    ]  # fmt: skip
    return _rate_options(functools.reduce(lambda g, o: o(g), reversed(opts), f))


def _finite(option: str, value: float | None, expected: str, *, positive: bool = False) -> None:
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise InputError(option, None, expected, got=value)


def _notice(
    provider: str | None, notice_seconds: float | None, write_s: float | None
) -> float | None:
    from policies.checkpoint import NOTICE_SECONDS

    if notice_seconds is not None:
        return notice_seconds
    if provider is not None:
        return NOTICE_SECONDS[provider]
    if write_s is not None:
        raise InputError(
            "--notice-write-seconds", None, "--provider aws|gcp or --notice-seconds too"
        )
    return None


def _build_run(o: dict[str, Any]) -> SpotRun:
    from pydantic import ValidationError

    from policies.effective_cost import SpotRun

    if o["checkpoint_overhead"] is not None and (
        o["checkpoint_write_hours"] is not None or o["checkpoint_interval_hours"] is not None
    ):
        raise InputError(
            "--checkpoint-overhead",
            None,
            "either --checkpoint-overhead or --checkpoint-write-hours "
            "(+ --checkpoint-interval-hours), not both",
        )
    if o["checkpoint_interval_hours"] is not None and o["checkpoint_write_hours"] is None:
        raise InputError("--checkpoint-interval-hours", None, "--checkpoint-write-hours too")
    convention, per = o["per"].split("-")
    fields = {
        "units": o["units"],
        "productive_hours": o["hours"],
        "on_demand_usd_per_unit_hour": o["on_demand"],
        "spot_usd_per_unit_hour": o["spot"],
        "checkpoint_overhead": o["checkpoint_overhead"],
        "checkpoint_write_hours": o["checkpoint_write_hours"],
        "checkpoint_interval_hours": o["checkpoint_interval_hours"],
        "interruptions": o["interruptions"],
        "convention": convention,
        "per": per,
        "restart_hours": o["restart_hours"],
        "lost_work_hours": o["lost_work_hours"],
        "notice_seconds": _notice(o["provider"], o["notice_seconds"], o["notice_write_seconds"]),
        "notice_checkpoint_write_seconds": o["notice_write_seconds"],
    }
    try:
        return SpotRun(**fields)
    except ValidationError as e:
        err = e.errors()[0]
        loc = err["loc"][0] if err["loc"] else ""
        option, expected = _FIELD_OPTION.get(str(loc), ("options", err["msg"]))
        raise InputError(option, None, expected, got=err.get("input")) from None


def _round(key: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, float) or not math.isfinite(value):
        return value
    if key.endswith("_usd"):
        return round(value, 2)
    if key.endswith("_usd_per_unit_hour"):
        return round(value, 4)
    return round(value, 6)


def _with_exact(
    schema: str, fields: dict[str, Any], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"schema": schema}
    out.update({k: _round(k, v) for k, v in fields.items()})
    out.update(extra or {})
    out["exact"] = {
        k: v for k, v in fields.items() if isinstance(v, float) and not isinstance(v, bool)
    }
    return out


def _table(title: str, rows: list[tuple[str, str]]) -> None:
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)


def _usd(x: float) -> str:
    return f"-${-x:,.2f}" if x < 0 else f"${x:,.2f}"


def _num(x: float | None, unit: str = "", fmt: str = ",.4g") -> str:
    if x is None or math.isinf(x):
        return "unbounded"
    return f"{x:{fmt}}{unit}"


# -- effective ----------------------------------------------------------------------


@group.command("effective")
@_run_options
def effective(**opts: Any) -> None:
    """Effective $ per productive unit-hour of a spot run, and the saving vs on-demand."""
    from dataclasses import asdict

    from policies.effective_cost import effective_cost

    b = effective_cost(_build_run(opts))
    if opts["as_json"]:
        fields = asdict(b)
        fields["convention"] = b.convention.value
        emit_json(_with_exact("spotfolio.cost.effective/1", fields))
        return
    verdict = "spot pays" if b.spot_worth_it else "on-demand is cheaper (hidden premium)"
    _table(
        f"Effective spot cost ({b.convention.value} convention)",
        [
            ("productive hours", _num(b.base_hours, " h")),
            ("checkpoint hours", _num(b.checkpoint_hours, " h")),
            ("lost work hours", _num(b.lost_work_hours, " h")),
            ("restart hours", _num(b.restart_hours, " h")),
            ("total hours", f"{_num(b.total_hours, ' h')} (+{b.calendar_stretch:.1%} calendar)"),
            ("interruptions expected", _num(b.interruptions_expected)),
            ("cost per interruption", _usd(b.usd_per_interruption)),
            ("spot total", _usd(b.spot_total_usd)),
            ("on-demand total", _usd(b.on_demand_total_usd)),
            ("saving", f"{_usd(b.saving_usd)} ({b.saving_fraction:.1%})"),
            ("effective price", f"${b.effective_usd_per_unit_hour:.4f} per unit-hour"),
            ("verdict", verdict),
        ],
    )


# -- breakeven ----------------------------------------------------------------------


@group.command("breakeven")
@_run_options
def breakeven(**opts: Any) -> None:
    """Spot price, interruption rate and checkpoint intervals at which spot = on-demand."""
    from policies.breakeven import (
        breakeven_checkpoint_window,
        breakeven_interruption_rate,
        breakeven_spot_price,
        price_ratio,
    )
    from policies.effective_cost import effective_cost

    run = _build_run(opts)
    try:
        price: float | None = breakeven_spot_price(run)
        worth = effective_cost(run).spot_worth_it
    except SpotNeverFinishesError:
        price, worth = None, False
    rate = breakeven_interruption_rate(run)
    status, window = "not_computed", None
    if run.checkpoint_write_hours is not None:
        w = breakeven_checkpoint_window(run)
        status = "never_pays" if w is None else "window"
        if w is not None:
            window = {
                "min_interval_hours": w.min_interval_hours,
                "max_interval_hours": w.max_interval_hours,
                "min_interval_s": w.min_interval_s,
                "max_interval_s": w.max_interval_s,
            }
    od = run.on_demand_usd_per_unit_hour
    fields: dict[str, Any] = {
        "convention": rate.convention.value,
        "price_ratio": price_ratio(run),
        "spot_finishes": price is not None,
        "spot_worth_it": worth,
        "breakeven_spot_usd_per_unit_hour": price,
        "breakeven_discount": None if price is None else 1.0 - price / od,
        "breakeven_interruptions_per_hour": rate.interruptions_per_hour,
        "breakeven_interruptions_per_day": rate.interruptions_per_day,
        "breakeven_mean_minutes_between": rate.mean_minutes_between,
        "checkpoint_window_status": status,
    }
    if opts["as_json"]:
        rounded = None if window is None else {k: _round(k, v) for k, v in window.items()}
        emit_json(_with_exact("spotfolio.cost.breakeven/1", fields, {"checkpoint_window": rounded}))
        return
    per = "productive" if rate.convention.value == "productive" else "wall-clock"
    rows = [
        ("break-even spot price", "never finishes" if price is None else f"${price:.4f}"),
        ("break-even discount", "-" if price is None else f"{1 - price / od:.1%}"),
        (
            f"break-even rate ({per})",
            f"{_num(rate.interruptions_per_day, ' / day')} "
            f"(one every {_num(rate.mean_minutes_between, ' min', ',.1f')})",
        ),
    ]
    if window is not None:
        rows.append(("checkpoint at least every", _num(window["min_interval_s"], " s", ",.1f")))
        rows.append(("checkpoint at most every", _num(window["max_interval_hours"], " h")))
    elif status == "never_pays":
        rows.append(("checkpoint interval", "no interval makes spot pay"))
    _table("Spot break-even", rows)


# -- checkpoint ---------------------------------------------------------------------


@group.command("checkpoint")
@click.option("--checkpoint-write-hours", type=float, required=True, help="delta, hours.")
@click.option("--checkpoint-interval-hours", type=float, default=None,
              help="Evaluate this tau instead of Daly's optimum.")  # fmt: skip
@_rate_options
def checkpoint(**opts: Any) -> None:
    """Young/Daly checkpoint intervals, overhead, and the notice-checkpoint check."""
    from policies.checkpoint import daly_interval, notice_checkpoint_fits, young_interval
    from policies.effective_cost import HOURS_PER_DAY, RateConvention, time_factor

    delta, tau_in = opts["checkpoint_write_hours"], opts["checkpoint_interval_hours"]
    _finite("--checkpoint-write-hours", delta, "hours >= 0")
    _finite("--checkpoint-interval-hours", tau_in, "hours > 0", positive=True)
    _finite("--interruptions", opts["interruptions"], "a count >= 0")
    _finite("--restart-hours", opts["restart_hours"], "hours >= 0")
    _finite("--notice-seconds", opts["notice_seconds"], "seconds >= 0")
    _finite("--notice-write-seconds", opts["notice_write_seconds"], "seconds >= 0")
    conv_name, per = opts["per"].split("-")
    conv = RateConvention(conv_name)
    rate = opts["interruptions"] / (HOURS_PER_DAY if per == "day" else 1.0)
    mtbi = math.inf if rate == 0 else 1.0 / rate
    young, daly = young_interval(delta, mtbi), daly_interval(delta, mtbi)
    tau = daly if tau_in is None else tau_in
    overhead = 0.0 if delta == 0 or math.isinf(tau) else delta / tau
    write_s = opts["notice_write_seconds"]
    notice = _notice(opts["provider"], opts["notice_seconds"], write_s)
    fits = None if write_s is None or notice is None else notice_checkpoint_fits(write_s, notice)
    lost = 0.0 if fits else tau / 2.0
    factor = time_factor(overhead, rate, opts["restart_hours"] + lost, conv)
    fields: dict[str, Any] = {
        "convention": conv.value,
        "interruptions_per_hour": rate,
        "mean_hours_between": mtbi,
        "checkpoint_write_hours": delta,
        "young_interval_hours": young,
        "daly_interval_hours": daly,
        "interval_hours": tau,
        "overhead_fraction": overhead,
        "lost_work_per_interruption_hours": lost,
        "time_factor": factor,
        "productive_fraction": 1.0 / factor,
        "notice_seconds": notice,
        "notice_write_seconds": write_s,
        "notice_checkpoint_fits": fits,
    }
    if opts["as_json"]:
        emit_json(_with_exact("spotfolio.cost.checkpoint/1", fields))
        return
    rows = [
        ("mean time between interruptions", _num(mtbi, " h")),
        ("Young interval", _num(young, " h")),
        ("Daly interval", _num(daly, " h")),
        ("interval used", _num(tau, " h")),
        ("checkpoint overhead", f"{overhead:.2%}"),
        ("lost work per interruption", _num(lost, " h")),
        ("productive fraction", f"{1.0 / factor:.2%}"),
    ]
    if fits is not None:
        rows.append(
            ("notice checkpoint fits", f"{'yes' if fits else 'no'} ({write_s:g} s in {notice:g} s)")
        )
    _table(f"Checkpoint interval ({conv.value} convention)", rows)


# -- reserve ------------------------------------------------------------------------


def _parse_number(text: str, source: str, field: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(source, field, "a number >= 0", got=text) from None
    if not math.isfinite(value) or value < 0:
        raise InputError(source, field, "a number >= 0", got=text)
    return value


def _read_demand_csv(path: Path, column: str | None) -> list[float]:
    src = str(path)
    with path.open(newline="") as fh:
        rows = [(n, row) for n, row in enumerate(csv.reader(fh), 1) if any(c.strip() for c in row)]
    if not rows:
        raise InputError(src, None, "at least one hour of demand")
    first = rows[0][1]
    has_header = any(not _is_number(c) for c in first)
    names = [c.strip() for c in first] if has_header else []
    if column is not None:
        if column not in names:
            raise InputError("--column", None, f"one of the CSV columns {names}", got=column)
        idx = names.index(column)
    elif len(first) == 1:
        idx = 0
    elif "demand" in [n.lower() for n in names]:
        idx = [n.lower() for n in names].index("demand")
    else:
        raise InputError(src, "line 1", "one column, a column named 'demand', or --column NAME")
    body = rows[1:] if has_header else rows
    if not body:
        raise InputError(src, None, "at least one hour of demand")
    out = []
    for n, row in body:
        if idx >= len(row):
            raise InputError(src, f"line {n}", f"a value in column {idx + 1}", got=",".join(row))
        out.append(_parse_number(row[idx].strip(), src, f"line {n}"))
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_demand(spec: str, column: str | None) -> list[float]:
    items = [s.strip() for s in spec.split(",")]
    if all(_is_number(s) for s in items):
        if column is not None:
            raise InputError("--column", None, "a CSV file given to --demand")
        return [_parse_number(s, "--demand", f"item {i}") for i, s in enumerate(items, 1)]
    try:
        return _read_demand_csv(Path(spec), column)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(
            "--demand", None, "a readable CSV file or a comma list of numbers", got=spec
        ) from e


def _parse_levels(spec: str | None, peak: int) -> list[int]:
    if not spec:
        return []
    out = []
    for i, item in enumerate(s.strip() for s in spec.split(",")):
        pct = item.endswith("%")
        text = item[:-1] if pct else item
        value = _parse_number(text, "--levels", f"item {i + 1}") if _is_number(text) else -1.0
        if value < 0 or (not pct and value != int(value)):
            raise InputError(
                "--levels", f"item {i + 1}", "whole units or a percentage of peak (40%)", got=item
            )
        # percentages of peak round half up to whole units
        out.append(math.floor(value / 100.0 * peak + 0.5) if pct else int(value))
    return out


@group.command("reserve")
@click.option("--demand", required=True, help="Hourly demand: a CSV file or a comma list.")
@click.option("--column", default=None, help="CSV column holding the demand.")
@click.option("--on-demand", type=float, required=True, help="On-demand $ per unit-hour.")
@click.option("--committed", type=float, default=None, help="Committed $ per unit-hour.")
@click.option(
    "--discount",
    type=float,
    default=None,
    help="Committed discount off on-demand (0.4 = 40 %), instead of --committed.",
)
@click.option(
    "--alternative",
    type=float,
    default=None,
    help="$ per unit-hour of the cheapest alternative (default: --on-demand; "
    "or the effective spot price for restart-tolerant work).",
)
@click.option("--levels", default=None, help="Commitment levels to compare: 40%,60% or 24,36.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (stable schema).")
def reserve(**opts: Any) -> None:  # fmt: skip
    """How many units to commit for an hourly demand series, and what-if levels."""
    from policies.reservations import commitment_cost, compare_commitment_levels

    od = opts["on_demand"]
    _finite("--on-demand", od, "a price per unit-hour > 0", positive=True)
    if (opts["committed"] is None) == (opts["discount"] is None):
        raise InputError("--committed", None, "exactly one of --committed PRICE or --discount D")
    if opts["discount"] is not None:
        d = opts["discount"]
        if not (math.isfinite(d) and 0 <= d < 1):
            raise InputError("--discount", None, "a fraction in [0, 1)", got=d)
        committed = (1.0 - d) * od
    else:
        committed = opts["committed"]
        _finite("--committed", committed, "a price per unit-hour >= 0")
    alt = od if opts["alternative"] is None else opts["alternative"]
    _finite("--alternative", alt, "a price per unit-hour > 0", positive=True)
    demand = _read_demand(opts["demand"], opts["column"])
    peak = math.ceil(max(demand) - 1e-9)
    levels = _parse_levels(opts["levels"], peak)
    cmp = compare_commitment_levels(demand, levels, committed, alt)
    none = commitment_cost(demand, 0, committed, alt)

    def level(c: CommitmentCost) -> dict[str, Any]:
        raw = {
            "committed_units": c.committed_units,
            "share_of_peak": c.committed_units / peak if peak else None,
            "committed_usd": c.committed_usd,
            "alternative_unit_hours": c.alternative_unit_hours,
            "alternative_usd": c.alternative_usd,
            "total_usd": c.total_usd,
            "occupancy": c.occupancy,
        }
        return {k: _round(k, v) for k, v in raw.items()}

    if opts["as_json"]:
        emit_json(
            {
                "schema": "spotfolio.cost.reserve/1",
                "hours": len(demand),
                "peak_units": cmp.peak_units,
                "mean_units": _round("mean_units", sum(demand) / len(demand)),
                "committed_usd_per_unit_hour": _round("_usd_per_unit_hour", committed),
                "alternative_usd_per_unit_hour": _round("_usd_per_unit_hour", alt),
                "breakeven_occupancy": _round("breakeven_occupancy", cmp.breakeven_occupancy),
                "optimal": level(cmp.optimal),
                "no_commitment": level(none),
                "levels": [level(c) for c in cmp.levels],
                "steps": [
                    {
                        "from_units": s.from_units,
                        "to_units": s.to_units,
                        "marginal_occupancy": _round("x", s.marginal_occupancy),
                        "delta_usd": _round("delta_usd", s.delta_usd),
                        "pays": s.pays,
                    }
                    for s in cmp.steps
                ],
            }
        )
        return
    rows = [
        ("hours of demand", f"{len(demand)} (peak {cmp.peak_units} units)"),
        ("break-even occupancy", f"{cmp.breakeven_occupancy:.1%}"),
        ("commit", f"{cmp.optimal.committed_units} units: {_usd(cmp.optimal.total_usd)}"),
        ("commit nothing", _usd(none.total_usd)),
    ]
    rows += [(f"at {c.committed_units} units", _usd(c.total_usd)) for c in cmp.levels]
    for s in cmp.steps:
        occ = "-" if s.marginal_occupancy is None else f"{s.marginal_occupancy:.1%}"
        rows.append(
            (
                f"{s.from_units} -> {s.to_units} units",
                f"{'saves' if s.pays else 'costs'} {_usd(abs(s.delta_usd))} "
                f"(added units busy {occ})",
            )
        )
    _table("Committed capacity", rows)
