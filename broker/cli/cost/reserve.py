"""``spotfolio cost reserve``: how many units to commit for an hourly demand
series, and what each what-if level costs (``policies.reservations``).

Owns: the command, its options, its table and its JSON
(``spotfolio.cost.reserve/1``, schema in ``broker.cli.cost``); the demand and
levels are read by ``broker.cli.cost.demand``. Must not: compute any cost
itself.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import click

from broker.cli._numbers import ranged
from broker.cli._output import emit_json
from broker.cli.cost.demand import parse_levels, read_demand
from broker.cli.cost.options import finite
from broker.cli.cost.output import fmt_usd, print_table, round_field
from markets.errors import InputError
from markets.numbers import MAX_USD_PER_HOUR

if TYPE_CHECKING:
    from policies.reservations import CommitmentCost

__all__ = ["reserve"]


@click.command("reserve")
@click.option("--demand", required=True, help="Hourly demand: a CSV file or a comma list.")
@click.option("--column", default=None, help="CSV column holding the demand.")
@click.option(
    "--on-demand",
    type=ranged(gt=0, le=MAX_USD_PER_HOUR),
    required=True,
    help="On-demand $ per unit-hour.",
)
@click.option(
    "--committed",
    type=ranged(ge=0, le=MAX_USD_PER_HOUR),
    default=None,
    help="Committed $ per unit-hour.",
)
@click.option(
    "--discount",
    type=ranged(ge=0, lt=1),
    default=None,
    help="Committed discount off on-demand (0.4 = 40 %), instead of --committed.",
)
@click.option(
    "--alternative",
    type=ranged(gt=0, le=MAX_USD_PER_HOUR),
    default=None,
    help="$ per unit-hour of the cheapest alternative (default: --on-demand; "
    "or the effective spot price for restart-tolerant work).",
)
@click.option("--levels", default=None, help="Commitment levels to compare: 40%,60% or 24,36.")
@click.option(
    "--finite",
    "finite_term",
    type=click.Choice(["1y", "3y"]),
    default=None,
    help="The series is a finite job's whole demand: a commitment of this term bills "
    "every hour of it (default: the series repeats over the term).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (stable schema).")
def reserve(
    demand: str,
    column: str | None,
    on_demand: float,
    committed: float | None,
    discount: float | None,
    alternative: float | None,
    levels: str | None,
    finite_term: str | None,
    as_json: bool,
) -> None:
    """How many units to commit for an hourly demand series, and what-if levels."""
    # lazy: policies pulls numpy; ``spotfolio --help`` imports this module
    from markets.commitments import HOURS_PER_MONTH, term_hours
    from policies.reservations import commitment_cost, compare_commitment_levels

    od = on_demand
    finite("--on-demand", od, "a price per unit-hour > 0", positive=True)
    if discount is not None and committed is None:
        d = discount
        if not (math.isfinite(d) and 0 <= d < 1):
            raise InputError("--discount", None, "a fraction in [0, 1)", got=d)
        committed_usd = (1.0 - d) * od
    elif committed is not None and discount is None:
        committed_usd = committed
        finite("--committed", committed_usd, "a price per unit-hour >= 0")
    else:
        raise InputError("--committed", None, "exactly one of --committed PRICE or --discount D")
    alt = od if alternative is None else alternative
    finite("--alternative", alt, "a price per unit-hour > 0", positive=True)
    hourly = read_demand(demand, column)
    peak = math.ceil(max(hourly) - 1e-9)
    level_units = parse_levels(levels, peak)
    term_h = None if finite_term is None else term_hours(int(finite_term[0]))
    cmp = compare_commitment_levels(hourly, level_units, committed_usd, alt, term_hours=term_h)
    none = commitment_cost(hourly, 0, committed_usd, alt, term_hours=term_h)
    # Per average month of the hours billed (the term for a finite series).
    monthly = (none.total_usd - cmp.optimal.total_usd) * HOURS_PER_MONTH / cmp.optimal.hours

    def level(c: CommitmentCost) -> dict[str, object]:
        raw = {
            "committed_units": c.committed_units,
            "share_of_peak": c.committed_units / peak if peak else None,
            "committed_usd": c.committed_usd,
            "alternative_unit_hours": c.alternative_unit_hours,
            "alternative_usd": c.alternative_usd,
            "total_usd": c.total_usd,
            "occupancy": c.occupancy,
        }
        return {k: round_field(k, v) for k, v in raw.items()}

    if as_json:
        emit_json(
            {
                "schema": "spotfolio.cost.reserve/1",
                "hours": len(hourly),
                "peak_units": cmp.peak_units,
                "mean_units": round_field("mean_units", sum(hourly) / len(hourly)),
                "committed_usd_per_unit_hour": round_field("_usd_per_unit_hour", committed_usd),
                "alternative_usd_per_unit_hour": round_field("_usd_per_unit_hour", alt),
                "breakeven_occupancy": round_field("breakeven_occupancy", cmp.breakeven_occupancy),
                "term_hours": term_h,
                "monthly_saving_usd": round_field("monthly_saving_usd", monthly),
                "optimal": level(cmp.optimal),
                "no_commitment": level(none),
                "levels": [level(c) for c in cmp.levels],
                "steps": [
                    {
                        "from_units": s.from_units,
                        "to_units": s.to_units,
                        "marginal_occupancy": round_field("x", s.marginal_occupancy),
                        "delta_usd": round_field("delta_usd", s.delta_usd),
                        "pays": s.pays,
                    }
                    for s in cmp.steps
                ],
            }
        )
        return
    rows = [
        ("hours of demand", f"{len(hourly)} (peak {cmp.peak_units} units)"),
        ("break-even occupancy", f"{cmp.breakeven_occupancy:.1%}"),
        ("commit", f"{cmp.optimal.committed_units} units: {fmt_usd(cmp.optimal.total_usd)}"),
        ("commit nothing", fmt_usd(none.total_usd)),
        ("saving per month", fmt_usd(monthly)),
    ]
    if term_h is not None:
        rows.insert(1, ("finite series", f"billed over the {term_h:,} h term"))
    rows += [(f"at {c.committed_units} units", fmt_usd(c.total_usd)) for c in cmp.levels]
    for s in cmp.steps:
        occ = "-" if s.marginal_occupancy is None else f"{s.marginal_occupancy:.1%}"
        rows.append(
            (
                f"{s.from_units} -> {s.to_units} units",
                f"{'saves' if s.pays else 'costs'} {fmt_usd(abs(s.delta_usd))} "
                f"(added units busy {occ})",
            )
        )
    print_table("Committed capacity", rows)
