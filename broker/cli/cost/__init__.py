"""``spotfolio cost ...``: the economics calculators (effective, breakeven,
checkpoint, reserve). Thin wrappers over ``policies``; no economics here.

This module owns the ``cost`` group and the contract of its commands, below:
the rate convention and the stable JSON schemas. The commands live one per
module (``broker.cli.cost.effective``, ``cost_breakeven``,
``cost_checkpoint``, ``cost_reserve``), over the shared option parsing
(``broker.cli.cost.options``: a bad option becomes an ``InputError``, exit 2,
one line naming the option), output (``broker.cli.cost.output``) and demand
reading (``broker.cli.cost.demand``). Must not: compute any cost.
``policies`` (and numpy) are imported inside the commands so that
``spotfolio --help`` stays fast.

``--per`` fixes the rate convention (docs/concepts/effective-cost.md): ``wall-hour`` /
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
``breakeven_occupancy``, ``term_hours`` (null: the series repeats over the
term; else ``--finite``'s term, every hour billed), ``monthly_saving_usd``
(the optimum against no commitment), ``optimal`` and ``no_commitment`` (level objects),
``levels`` (list of level objects), ``steps`` (list: ``from_units``,
``to_units``, ``marginal_occupancy``, ``delta_usd``, ``pays``). A level object:
``committed_units``, ``share_of_peak``, ``committed_usd``,
``alternative_unit_hours``, ``alternative_usd``, ``total_usd``, ``occupancy``
(null with no commitment).
"""

from __future__ import annotations

import click

from broker.cli.cost.breakeven import breakeven
from broker.cli.cost.checkpoint import checkpoint
from broker.cli.cost.effective import effective
from broker.cli.cost.reserve import reserve

__all__ = ["group"]


@click.group(
    name="cost",
    help="Economics calculators: effective spot cost, break-even, "
    "checkpoint interval, reservations.",
)
def group() -> None:
    pass


for _command in (effective, breakeven, checkpoint, reserve):
    group.add_command(_command)
