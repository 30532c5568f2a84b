"""``spotfolio whatif`` and ``spotfolio plan``: the main job on the command line.

``whatif`` prints, side by side, all on-demand, committed at the quantile rule
+ on-demand, a static ASG-like mix, and Spotfolio's plan, each billed on the
actual demand and market. ``--json`` prints one object::

    {
      "schema": "spotfolio.whatif/1",
      "market": "default", "stale": false, "start": "...", "hours": 720,
      "scenarios": [
        {"name": "as_billed" | "on_demand" | "committed_quantile" | "static_mix" | "spotfolio",
         "total_cost_usd": float,               # as_billed (only with --usage, first):
                                                 # the bill's EffectiveCost, and beside it
         "billed_cost_usd": float,               # BilledCost and the amortisation between
         "amortisation_usd": float,              # them (as_billed only)
         "savings_vs_as_billed": float,          # only with --usage: fraction vs as_billed
         "saving_vs_as_billed_usd": float,       # ... and in dollars
         "cost_by_tier_usd": {"committed": float, "on_demand": float, "spot": float},
         "unmet_unit_hours": float,
         "unmet_unit_hours_by_class": {"serving": float, "training": float, "batch": float},
         "savings_vs_on_demand": float,          # fraction, 0.3 = 30 % cheaper
         "expected_revocations": float,
         "break_glass_usd": float,               # on-demand bought because spot was lost
         "forecast_error_usd": float,            # on-demand bought because demand beat the forecast
         "catch_up_usd": float,                  # on-demand to finish jobs behind at the deadline
         "budget_exceeded_hours": int,
         "committed_instances": {group: int},
         "commitments": [{"group": str, "instances": int, "term_years": int,
                          "kind": "instances" | "savings_plan",  # a plan: instances are
                          "usd_per_hour": float,                 # $0.001/h steps
                          "payment": str, "usd_per_instance_hour": float,
                          "obligation_usd": float,       # the whole term
                          "monthly_saving_usd": float,   # vs the spot/on-demand mix
                          "utilisation": float, "breakeven_utilisation": float}],
         "planned_cost_usd": float,
         "plan_gap": float | null, "plan_status": "optimal" | "within_gap" | "feasible" | null,
         "gap_met": bool | null,                 # null: not an optimizer's plan
         "budget_limited": [str]}                # budgets that left its demand unmet
      ],
      "budget_unmet": [{"scenario": str, "unmet_unit_hours": float, "budgets": [str]}],
      "stress": {"interruption_multiplier": float, "availability_multiplier": float,
                 "label": str,
                 "scenarios": [{"name": str, "x1_total_cost_usd": float,
                                "stressed_total_cost_usd": float, ...}]},  # [] at x1
      "committed_sweep": [                       # only with --committed
        {"share_of_peak": float, "committed_units": float, "group": str,
         "instances": int, "total_cost_usd": float, "marginal_occupancy": float | null,
         "obligation_usd": float,                # the level's commitment over its term
         "delta_usd": float | null,              # total less the previous level's
         "monthly_delta_usd": float | null,
         "verdict": "pays" | "costs" | null}     # from the totals: pays iff delta < 0
      ],
      "breakeven_occupancy": float | null,       # a committed unit pays above this occupancy
                                                 # against the spot/on-demand mix
      "breakeven_occupancy_on_demand": float | null,  # ... against on-demand alone
      "owned": [{"id": str, "kind": str, "group": str | null, "count": int,   # only with
                 "usd_per_hour": float, "end": str, "hours_left": float,     # --owned
                 "utilisation": float | null,   # paid instance-hours the plan used
                 "coverage": float | null,      # share of the demand that can use it covered
                 "at_expiry": str | null}],     # expiring in the horizon: what was re-decided
      "next_buy": [<a commitment, as in "commitments">],  # bought on top of the owned
      "explanation": [str],                      # the optimizer's reasons, one line each
      "seconds": {...},
      "as_billed": {...},                        # only with --usage: the bill's dollars over
                                                 # the replayed hours, reconciled per day
                                                 # (broker.whatif.as_billed.AsBilled.to_dict)
      "usage": {...},                            # only with --usage: the bill read
                                                 # (broker.cli._usage.UsageInputs.to_dict)
      "recorded_data": [str],                    # on recorded data without --start: the
                                                 # span replayed and its sources
      "usage_summary": [str],                    # only with --usage: the bill in lines
      "timeline": {"basis": "planned", "step_hours": int,   # broker.whatif.series: the
                   "scenarios": {name: {tier: [float]}}},   # plans' dollars per step
      "spot_by_zone": [{"scenario": str, "zone": str, "instance_hours": float,
                        "planned_usd": float, "share": float}],
      "advice": {...},                           # what to do: commitments to buy, whole
                                                 # instances per pool and tier for the first
                                                 # week, cost per workload and team, the
                                                 # totals reconciled (broker.whatif.advice)
      "risk": {...},                             # unless --scenarios 0: P10/P50/P90 of cost
                                                 # and unmet demand over sampled spot and
                                                 # demand (broker.whatif.risk.RiskBand)
      "timings": {"phases": {name: {"cpu_s": float, "wall_s": float,   # only with
                                    "peak_rss_mib": float}},           # --timings
                  "total": {...}}                # (broker.whatif.phases.PhaseClock)
    }

``--timings`` prints each phase's CPU seconds (the solver's processes
included), wall seconds and peak memory as a table on stderr.

``--format text|json|csv|markdown|html`` renders that document
(``broker.cli.report``; ``--json`` is ``--format json``), to stdout or whole
to ``--out FILE``; each file written (``--out``, ``--plot``) is named on
stderr. A CSV holds one table: the scenarios, or the one ``--table NAME``
names (``broker.cli.report.csvfile.TABLES``: ``advice_commitments``,
``advice_first_week``, ``advice_cost_by_team``, ...); ``--table all --out
r.csv`` writes every table the run has, ``r.csv`` the scenarios and
``r.<table>.csv`` each other one.
The text output starts with the title, then the "What to do" section (``advice``).

``plan`` runs one optimization and prints the plan with its explanation
(JSON: ``status``, ``gap``, ``gap_met``, ``lower_bound_usd``, ``budget_unmet``
beside the allocations). Both warn on stderr when a budget leaves demand
unmet or a ``--gap`` target is missed, and exit 3 on the former with
``--strict``.

Owns: both commands, the options they share (declared once in
``_COMMON_OPTIONS`` and stacked by ``_common_options``, which hands a command
its values as one ``CommonOptions``), and their output. Must not: plan, bill
or read market data itself (``broker.whatif.run``, ``broker.planning.optimizer``,
``markets``), all imported inside the commands so that ``spotfolio --help``
stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from broker.cli._adapter_options import market_options as market_options_of
from broker.cli._numbers import ranged
from broker.cli._options import OptionDecorator, bundled
from broker.cli._output import console, emit_json, err_console
from broker.cli._plot import check_plot_path, plot_whatif
from broker.cli.progress import progress
from broker.cli.report import FORMATS as REPORT_FORMATS
from broker.cli.report import render, text_width
from broker.cli.report.output import check_out, emit, format_of, wrote
from broker.jsondoc import number, obj
from markets.clock import ensure_utc
from markets.errors import InfeasiblePlanError, InputError
from markets.extras import require
from markets.numbers import MAX_COUNT
from markets.protocols import PriceSource
from markets.registry import open_market

if TYPE_CHECKING:
    from broker.cli._usage import UsageInputs
    from broker.planning.demand import DemandSet
    from broker.planning.optimizer.problem import PlanningProblem, PlanOptions
    from broker.planning.plan import Plan
    from broker.whatif.run import WhatIfResult
    from markets.blocks import CapacityBlock
    from markets.commitments import OwnedCommitment
    from markets.model import Quota
    from policies.workloads.spec import WorkloadSet

__all__ = ["plan_command", "whatif_command"]


def _levels(text: str | None) -> tuple[float, ...]:
    if not text:
        return ()
    out = []
    for part in text.split(","):
        part = part.strip().rstrip("%")
        try:
            v = float(part)
        except ValueError as e:
            raise InputError("--committed", None, "shares of peak like 0.4,0.6", got=text) from e
        v = v / 100 if v > 1 else v
        if not 0 <= v <= 1:
            raise InputError("--committed", None, "shares of peak between 0 and 1", got=text)
        out.append(v)
    return tuple(out)


@dataclass(frozen=True)
class CommonOptions:
    """The values of the options ``whatif`` and ``plan`` share (``_COMMON_OPTIONS``;
    the field names are click's parameter names)."""

    market: str
    market_options: tuple[str, ...]
    policies: Path | None
    demand: Path | None
    days: int
    start: str | None
    interruption_multiplier: float
    checkpoint_minutes: float | None
    period_hours: int | None
    solver: str
    gap: float | None
    time_limit_s: float
    as_json: bool


def _inputs(c: CommonOptions) -> tuple[PriceSource, WorkloadSet, DemandSet | None]:
    # lazy: pandas, pydantic and YAML; ``spotfolio --help`` imports this module
    from broker.planning.demand import load_demand
    from policies.workloads.spec import default_workloads, load_workloads

    ws = (
        load_workloads(c.policies, demand_supplied=c.demand is not None)
        if c.policies
        else default_workloads()
    )
    src = open_market(c.market, **market_options_of(c.market_options))
    if not isinstance(src, PriceSource):
        raise InputError("--market", None, "a market (default, aws, gcp, a file or a directory)",
                         got=c.market)  # fmt: skip
    dem = load_demand(c.demand, ws) if c.demand else None
    return src, ws, dem


_COMMON_OPTIONS: list[OptionDecorator] = [
    click.option("--market", default="default", show_default=True,
                 help="default, aws, gcp, a `market fetch` file or a directory of datasets."),
    click.option("--market-option", "market_options", multiple=True, metavar="KEY=VALUE",
                 help="Options for the market adapter (repeatable), e.g. project=P, "
                      "regions=us-central1, prices=gcp_prices.csv.gz."),
    click.option("--policies", type=click.Path(path_type=Path, dir_okay=False),
                 help="Workloads YAML (default: the built-in example)."),
    click.option("--demand", type=click.Path(path_type=Path, dir_okay=False),
                 help="Hourly serving demand, CSV or YAML."),
    click.option("--days", type=ranged(ge=1, le=366, integer=True), default=30, show_default=True),
    click.option("--start", default=None, help="ISO time to start (default: the market's)."),
    click.option("--interruption-multiplier", type=ranged(ge=0, le=100), default=1.0,
                 show_default=True, help="Scale every pool's interruption hazard."),
    click.option("--checkpoint-minutes", type=ranged(ge=0, le=600), default=None,
                 help="Checkpoint write time for every job (overrides the workloads)."),
    click.option("--period-hours", type=ranged(ge=0, le=168, integer=True), default=None,
                 help="Planning period in hours; 0 = adaptive (merge hours no input "
                      "separates; the default beyond a week, else 1 h)."),
    click.option("--solver", type=click.Choice(["cbc", "highs"]), default="cbc",
                 show_default=True),
    click.option("--gap", type=ranged(ge=0.0001, le=0.5), default=None,
                 help="Solve until each plan is proven within this fraction of the optimum "
                      "(e.g. 0.005); default: the quick solve, its gap reported."),
    click.option("--time-limit", "time_limit_s", type=ranged(ge=1, le=3600), default=60.0,
                 show_default=True, help="With --gap: seconds each proof may take."),
    click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
]  # fmt: skip


# The command callback gets the shared options' values as one CommonOptions
# (its first argument) and its own options as keyword arguments.
_common_options = bundled(CommonOptions, _COMMON_OPTIONS)


def _options(c: CommonOptions) -> PlanOptions:
    # lazy: numpy, pydantic and YAML; ``spotfolio --help`` imports this module
    from broker.planning.optimizer.problem import PlanOptions

    opts = PlanOptions(
        period_hours=(0 if c.days > 7 else 1) if c.period_hours is None else c.period_hours,
        interruption_multiplier=c.interruption_multiplier,
        checkpoint_write_seconds=(
            None if c.checkpoint_minutes is None else c.checkpoint_minutes * 60
        ),
        solver=c.solver,
    )
    if c.gap is None:
        return opts
    # --gap: the thorough search, then a warm-started MILP until proven
    return replace(opts, gap=c.gap, polish_s=c.time_limit_s, time_limit_s=c.time_limit_s)


def _start(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        at = ensure_utc(datetime.fromisoformat(text))
    except ValueError as e:
        raise InputError("--start", None, "an ISO 8601 time like 2026-01-01T00:00", got=text) from e
    if at != at.replace(minute=0, second=0, microsecond=0):
        raise InputError("--start", None, "a whole hour like 2026-01-01T00:00", got=text)
    if not 2000 <= at.year < 2200:  # pandas' nanosecond times end in 2262
        raise InputError("--start", None, "a time from 2000 to 2200", got=text)
    return at


# --- budgets that leave demand unmet, what a plan proved, the stressed market ---
# (one block, shared by both commands)


@dataclass(frozen=True)
class CheckOptions:
    """``--strict`` and ``--availability-multiplier`` (``_CHECK_OPTIONS``)."""

    strict: bool
    availability_multiplier: float


_CHECK_OPTIONS: list[OptionDecorator] = [
    click.option("--availability-multiplier", type=ranged(ge=0, le=1), default=1.0,
                 show_default=True,
                 help="Scale every pool's spot availability (held share and capacity): "
                      "the plan and the billed market (what-if: shown beside x1)."),
    click.option("--strict", is_flag=True,
                 help="Exit 3, naming the budgets, when a budget leaves demand unmet."),
]  # fmt: skip
_check_options = bundled(CheckOptions, _CHECK_OPTIONS)


def _budget_unmet(name: str, unmet: float, budgets: Sequence[str]) -> dict[str, object] | None:
    """The JSON of budgets that left demand unmet (``None``: none did), and
    the warning line that always goes with it."""
    if not budgets or unmet <= 1e-6:
        return None
    err_console.print(f"warning: {name}: budgets leave {unmet:,.1f} unit-hours of demand unmet "
                      f"({'; '.join(budgets)}): not a saving", soft_wrap=True)  # fmt: skip
    return {"scenario": name, "unmet_unit_hours": round(unmet, 3), "budgets": list(budgets)}


def _strict(checks: CheckOptions, found: Sequence[Mapping[str, object]]) -> None:
    if checks.strict and found:
        conflicts = [f"{f['scenario']}: {b}" for f in found for b in _texts(f["budgets"])]
        raise InfeasiblePlanError("budgets leave demand unmet (--strict)", conflicts)


def _texts(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _gap_warning(common: CommonOptions, what: str, gap: object, met: object) -> None:
    """A missed ``--gap`` target is said, not only recorded as ``gap_met: false``."""
    if common.gap is None or met is True:
        return
    got = "nothing proven" if not isinstance(gap, int | float) else f"proven {float(gap):.2%}"
    err_console.print(f"warning: {what} missed the --gap target {common.gap:.2%} ({got}; "
                      "gap_met: false)", soft_wrap=True)  # fmt: skip


def _stress_rows(result: WhatIfResult, ws: WorkloadSet) -> list[dict[str, object]]:
    """x1 beside the stressed market, per scenario (JSON ``stress.scenarios``)."""
    if result.unstressed is None:
        return []
    x1_od = result.unstressed.scenario("on_demand").bill.total_usd
    od = result.scenario("on_demand").bill.total_usd
    out = []
    for s in result.scenarios:
        base = result.unstressed.scenario(s.name).to_dict(x1_od, ws)
        now = s.to_dict(od, ws)
        out.append({"name": s.name,
                    "x1_total_cost_usd": base["total_cost_usd"],
                    "stressed_total_cost_usd": now["total_cost_usd"],
                    "x1_unmet_unit_hours": base["unmet_unit_hours"],
                    "stressed_unmet_unit_hours": now["unmet_unit_hours"],
                    "x1_expected_revocations": base["expected_revocations"],
                    "stressed_expected_revocations": now["expected_revocations"]})  # fmt: skip
    return out


# --- end of the block -------------------------------------------------------------


# --- commitments: term, payment, what is owned (broker.planning.optimizer.commitments)
_TERMS = {"1y": 1, "3y": 3}
_F = TypeVar("_F", bound=Callable[..., object])


def _commitment_options(f: _F) -> _F:
    """``--term``, ``--payment`` and ``--owned``, handed to the command as
    ``term``, ``payment`` and ``owned``."""
    options = [
        click.option("--term", type=click.Choice(list(_TERMS)), default="1y", show_default=True,
                     help="Commitment term bought (valued over the whole term)."),
        click.option("--payment", type=click.Choice(["no_upfront", "partial_upfront",
                                                     "all_upfront"]),
                     default="no_upfront", show_default=True,
                     help="How commitments are paid (the catalog's price ratios; GCP CUDs "
                          "are monthly only)."),
        click.option("--owned", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="Commitments already owned (YAML or CSV: markets/commitments.py): "
                          "plan around them and say what to buy next."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


def _quota_option(f: _F) -> _F:
    """``--quota FILE``, handed to the command as ``quota``."""
    return click.option(
        "--quota", type=click.Path(path_type=Path, dir_okay=False), default=None,
        help="Account quotas to keep to (YAML or JSON: markets/quotas.py), e.g. "
             "96 P vCPUs on-demand in us-east-1; the output shows what they cost.",
    )(f)  # fmt: skip


def _load_quotas(path: Path | None) -> tuple[Quota, ...]:
    # lazy: YAML; ``spotfolio --help`` imports this module
    from markets.quotas import load_quotas

    return () if path is None else load_quotas(path)


def _load_blocks(path: Path | None) -> tuple[CapacityBlock, ...]:
    # lazy: YAML; ``spotfolio --help`` imports this module
    from markets.blocks import load_blocks

    return () if path is None else load_blocks(path)


def _with_commitments(opts: PlanOptions, term: str, payment: str) -> PlanOptions:
    return replace(opts, term_years=_TERMS[term], payment=payment)


def _owned_from(
    billed: UsageInputs | None,
    account: str | None,
    given: tuple[OwnedCommitment, ...],
    src: PriceSource,
) -> tuple[tuple[OwnedCommitment, ...], UsageInputs | None]:
    """The bill's commitments, the account's (``--account``) and ``--owned``
    merged (``broker.cli._owned``); the bill's inputs carry where each came from."""
    from broker.cli._owned import account_owned, merge_owned

    regions = (
        sorted({str(r) for r in billed.usage.frame["region"].dropna()})
        if billed is not None
        else sorted({p.region for p in src.pools()})
    )
    acc = account_owned(account, regions) if account is not None else []
    bill = billed.usage.commitments if billed is not None else ()
    end = billed.usage.index[-1] + timedelta(hours=1) if billed is not None else None
    have, sources = merge_owned(bill, acc, given, None if end is None else end.to_pydatetime())
    if billed is not None:
        billed = replace(billed, owned_sources=sources)
    return have, billed


def _on_the_bills_dates(
    src: PriceSource, market: str, start: datetime | None, days: int
) -> PriceSource:
    """The embedded market (synthetic: no calendar) moved by whole weeks to
    cover a bill outside its span (``markets.shifted``); a recorded or live
    market is its own dates: a bill it does not cover is refused naming
    ``--start`` and ``--market``."""
    from broker.cli._shifted import shifted, week_offset
    from markets.protocols import HistorySource

    if start is None or not isinstance(src, HistorySource):
        return src
    lo, hi = src.span()
    t0 = start - timedelta(days=1)  # a day of history before the window
    inside = lo <= t0 and start + timedelta(days=days) <= hi
    if inside:
        return src
    if market != "default":
        raise InputError(
            "--usage", None,
            f"a bill within the market's span {lo:%Y-%m-%d} to {hi:%Y-%m-%d} (choose the "
            "replayed days with --start, or a market that covers the bill with --market; "
            "--market default replays any date)",
            got=f"{start:%Y-%m-%d} + {days} days",
        )  # fmt: skip
    offset = week_offset((lo, hi), t0, (days + 1) * 24)
    err_console.print(
        f"the bill's dates ({start:%Y-%m-%d} + {days} days) are outside the embedded "
        f"market's span ({lo:%Y-%m-%d} to {hi:%Y-%m-%d}): replaying it moved "
        f"{abs(offset.days):,} days to the bill's dates (a synthetic market has no calendar; "
        "--market names a recorded or live one)",
        markup=False, highlight=False, soft_wrap=True,
    )  # fmt: skip
    return shifted(src, offset)


def _load_owned(path: Path | None) -> tuple[OwnedCommitment, ...]:
    # lazy: YAML; ``spotfolio --help`` imports this module
    from markets.commitments import load_owned

    return () if path is None else load_owned(path)


@click.command(name="whatif")
@_check_options
@_common_options
@_commitment_options
@_quota_option
@click.option(
    "--blocks", "blocks_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help="Reserved-ahead blocks (YAML or JSON: markets/blocks.py): Capacity Block offerings, "
         "held blocks and ODCRs; the output prices them for the deadline jobs and names "
         "what to reserve and when.",
)  # fmt: skip
@click.option(
    "--committed",
    "committed",
    default=None,
    help="Committed shares of peak to compare, e.g. 0.4,0.6.",
)
@click.option(
    "--seed",
    type=ranged(ge=0, le=MAX_COUNT, integer=True),
    default=0,
    show_default=True,
    help="Seeds the built-in demand shapes and the risk band's samples.",
)
@click.option(
    "--scenarios",
    type=ranged(ge=0, le=10_000, integer=True),
    default=None,
    help="Sampled spot and demand scenarios for the risk band (P10/P50/P90); "
    "0: none. Default: broker.whatif.risk.DEFAULT_SCENARIOS (20).",
)
@click.option(
    "--workers",
    type=ranged(ge=1, le=1024, integer=True),
    default=None,
    help="Processes for the risk band's samples and the committed sweep's levels "
    "(default: this machine's cores; 1: all in this process). Used when they would "
    "take more than a few seconds; the results are the same.",
)
@click.option(
    "--replan-hours",
    type=ranged(ge=1, le=168, integer=True),
    default=6,
    show_default=True,
    help="Spotfolio's scenario replays the daemon's planning loop: re-plan this often.",
)
@click.option(
    "--plot",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write a PNG: cost by tier per scenario and the committed sweep.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(REPORT_FORMATS)),
    default=None,
    help="Output format (default text; --json is --format json); html is one "
    "self-contained page with inline charts.",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the output to this file (whole or not at all) instead of stdout.",
)
@click.option(
    "--table",
    default=None,
    help="With --format csv: the table to write (default scenarios; "
    "advice_commitments, advice_first_week, advice_cost_by_workload, "
    "advice_cost_by_team, advice_totals, risk_usd, committed_sweep, ...), "
    "or 'all' with --out (one file per table).",
)
@click.option(
    "--usage",
    type=click.Path(path_type=Path),
    default=None,
    help="Your bill as the demand: a FOCUS 1.x or CUR 2.0 export (CSV or Parquet) "
    "or a directory of them, read as hourly usage per workload.",
)
@click.option(
    "--usage-rules",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="YAML rules mapping bill lines to workloads (default: the 'workload' "
    "tag, else one workload per instance type).",
)
@click.option("--account", default=None, metavar="aws|gcp:PROJECT",
              help="Also read what the account owns (reserved instances, Savings Plans, "
                   "CUDs; read-only calls, the default credentials) and plan it as owned, "
                   "merged with the bill's commitments and --owned.")  # fmt: skip
@click.option("--timings", is_flag=True, default=False,
              help="Print each phase's CPU seconds, wall seconds and peak memory to stderr "
                   "(and, with --json, a 'timings' block).")  # fmt: skip
def whatif_command(
    common: CommonOptions,
    checks: CheckOptions,
    committed: str | None,
    seed: int,
    scenarios: int | None,
    workers: int | None,
    replan_hours: int,
    plot: Path | None,
    fmt: str | None,
    out_path: Path | None,
    table: str | None,
    usage: Path | None,
    usage_rules: Path | None,
    account: str | None,
    term: str,
    payment: str,
    owned: Path | None,
    quota: Path | None,
    blocks_file: Path | None,
    timings: bool,
) -> None:
    """Compare on-demand, committed, static-mix and Spotfolio's plan on your data."""
    # lazy: the planning stack (pandas, PuLP); ``spotfolio --help`` imports this module
    from broker.whatif.phases import PhaseClock
    from broker.whatif.run import commitment_dict, owned_dict, run_whatif
    from broker.whatif.series import spot_by_zone, timeline_dict

    if plot is not None:  # before a minute of planning, not after
        require("matplotlib", "--plot", got=str(plot))
    levels = _levels(committed)
    if plot is not None:
        check_plot_path(plot)  # before the run: a bad --plot fails in a second, not an hour
    fmt = _format(fmt, common.as_json, out_path)
    _check_table(table, fmt, out_path)
    start = _start(common.start)
    have = _load_owned(owned)
    quotas = _load_quotas(quota)
    blocks = _load_blocks(blocks_file)
    billed = None
    bill_prices = None
    if usage is not None:  # --usage: the bill's hourly usage per workload is the demand
        if common.demand is not None:
            raise InputError("--usage", None, "either --usage or --demand, not both",
                             got=str(usage))  # fmt: skip
        require("duckdb", "--usage", got=str(usage))  # before importing markets.usage
        # lazy: DuckDB and pandas; ``spotfolio --help`` imports this module
        from broker.cli._usage import usage_inputs, usage_window
        from policies.workloads.spec import load_workloads

        src, _, _ = _inputs(replace(common, policies=None))
        own = load_workloads(common.policies, demand_supplied=True) if common.policies else None
        billed = usage_inputs(usage, usage_rules, src.instance_types(), own,
                              str(common.policies), start=start, days=common.days)  # fmt: skip
        ws = billed.workloads
        dem: DemandSet | None = billed.demand
        start, days, note = usage_window(billed.usage, start, common.days)
        common = replace(common, days=days)
        if note is not None:
            err_console.print(note, markup=False, highlight=False, soft_wrap=True)
        src = _on_the_bills_dates(src, common.market, start, days)
        # lazy: pandas; ``spotfolio --help`` imports this module
        from markets.billed import BillPrices, with_bill_prices

        bill_prices = BillPrices.from_frame(billed.usage.frame)
        src = with_bill_prices(src, bill_prices)  # one market for the bill and the plans
    elif usage_rules is not None:
        raise InputError("--usage-rules", None, "--usage with it", got=str(usage_rules))
    else:
        src, ws, dem = _inputs(common)
    if billed is not None or account is not None:  # what is owned: bill, account, --owned
        have, billed = _owned_from(billed, account, have, src)
    recorded: list[str] = []
    if start is None:  # recorded data: replay where its prices and availability overlap
        # lazy: numpy and pandas; ``spotfolio --help`` imports this module
        from markets.replay import ReplayMarket

        if isinstance(src, ReplayMarket):
            start, days, recorded = src.coverage().replay(common.days)
            common = replace(common, days=days)
            err_console.print("\n".join(recorded), markup=False, highlight=False, soft_wrap=True)
    opts = _with_commitments(_options(common), term, payment)
    # lazy: numpy and pandas; ``spotfolio --help`` imports this module
    from markets.quotas import with_quotas

    def run(market: PriceSource, what: str, sweep: tuple[float, ...]) -> WhatIfResult:
        with progress(what) as say:  # on a terminal only (broker.cli.progress)
            return run_whatif(market, ws, start=start, days=common.days, demand=dem,
                              options=opts, committed_levels=sweep, seed=seed,
                              progress=say, replan_hours=replan_hours,
                              availability_multiplier=checks.availability_multiplier,
                              owned=have, workers=workers, clock=clock)  # fmt: skip

    clock = PhaseClock()
    result = run(with_quotas(src, quotas), "whatif", levels)
    # What the quotas cost: the same what-if without them, side by side.
    free = run(src, "whatif without the quotas", ()) if quotas else None
    od = result.scenario("on_demand").bill.total_usd
    rows = [s.to_dict(od, ws) for s in result.scenarios]
    found = [f for s, r in zip(result.scenarios, rows, strict=True)
             if (f := _budget_unmet(s.name, number(r["unmet_unit_hours"], "unmet"),
                                    s.budget_limited())) is not None]  # fmt: skip
    _strict(checks, found)
    # lazy: pandas; ``spotfolio --help`` imports this module
    from broker.whatif.as_billed import as_billed, with_savings

    bill_as_billed = None
    if billed is not None and result.inputs is not None:  # the bill itself, first
        bill_as_billed = as_billed(billed.usage.frame, result.start, result.hours,
                                   result.inputs.snapshot, result.inputs.actuals,
                                   from_bill=bill_prices,
                                   commitments=billed.usage.commitments)  # fmt: skip
    rows = with_savings(rows, bill_as_billed)
    ours = next(r for r in rows if r["name"] == "spotfolio")
    _gap_warning(common, "spotfolio's re-plans", ours["plan_gap"], ours["gap_met"])
    out: dict[str, object] = {
        "schema": "spotfolio.whatif/1",
        "market": result.market,
        "stale": result.stale,
        "start": result.start.isoformat(),
        "hours": result.hours,
        "scenarios": rows,
        "explanation": result.scenario("spotfolio").plan.explain().splitlines(),
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
        "budget_unmet": found,
        "stress": {
            "interruption_multiplier": result.stress.interruption_multiplier,
            "availability_multiplier": result.stress.availability_multiplier,
            "label": result.stress.label(),
            "scenarios": _stress_rows(result, ws),
        },
    }
    if bill_as_billed is not None:
        out["as_billed"] = bill_as_billed.to_dict()
    if billed is not None:
        out["usage"] = billed.to_dict()
    if recorded:
        out["recorded_data"] = recorded
    if levels:
        out["committed_sweep"] = [
            {"share_of_peak": p.share_of_peak, "committed_units": round(p.committed_units, 2),
             "group": p.group, "instances": p.instances,
             "total_cost_usd": round(p.scenario.bill.total_usd, 2),
             "marginal_occupancy": p.marginal_occupancy,
             "obligation_usd": round(p.obligation_usd, 2),
             "delta_usd": None if p.delta_usd is None else round(p.delta_usd, 2),
             "monthly_delta_usd": (None if p.delta_usd is None
                                   else round(p.monthly_delta_usd(result.hours) or 0.0, 2)),
             "verdict": None if p.pays is None else ("pays" if p.pays else "costs")}
            for p in result.sweep
        ]  # fmt: skip
        out["breakeven_occupancy"] = result.breakeven_occupancy
        out["breakeven_occupancy_on_demand"] = result.breakeven_occupancy_on_demand
    if free is not None:
        out["quota"] = _quota_doc(quotas, result, free, ws)
    if blocks and result.inputs is not None:  # what the blocks save the deadline jobs
        # lazy: the planning stack; ``spotfolio --help`` imports this module
        from broker.whatif.blocks import price_blocks

        with progress("whatif blocks"):
            pricing = price_blocks(result.inputs.snapshot, ws, blocks, hours=result.hours,
                                   options=opts)  # fmt: skip
        if pricing is not None:
            out["blocks"] = pricing.to_dict()
    if have:
        out["owned"] = [owned_dict(c, result.start) | result.owned_use.get(c.id, {})
                        for c in result.owned]  # fmt: skip
        out["next_buy"] = [commitment_dict(c) for c in result.next_buy]
    # lazy: numpy and pandas; ``spotfolio --help`` imports this module
    from broker.whatif.advice import advise
    from broker.whatif.risk import DEFAULT_SCENARIOS, risk_band

    # commitments only in the regions the bill's usage ran in (with --usage)
    regions = None
    if billed is not None:
        regions = frozenset(str(r) for r in billed.usage.frame["region"].dropna().unique())
    with clock.phase("advice"):
        out["advice"] = advise(result, allowed_regions=regions, seed=seed).to_dict()
    n = DEFAULT_SCENARIOS if scenarios is None else scenarios
    if n > 0:
        # on a terminal only
        with progress("whatif risk band") as say, clock.phase("risk band"):
            band = risk_band(result, n, seed, progress=say, workers=workers)
        out["risk"] = band.to_dict()
        out["seconds"] = {**obj(out["seconds"]), "risk_s": round(band.seconds, 3)}
    if billed is not None:
        out["usage_summary"] = billed.lines()
    with clock.phase("report"):
        # the charts' blocks (broker.whatif.series: the plans' figures, not the bill's)
        plans = [(s.name, s.plan) for s in result.scenarios]
        out["timeline"] = timeline_dict(plans, result.hours)
        out["spot_by_zone"] = spot_by_zone(plans, result.hours)
        if plot is not None:
            plot_whatif(out, plot)
            wrote(plot)
        if table is None:
            if timings:  # the report's own time is in the table, not the JSON
                out["timings"] = clock.as_dict()
            # a file is laid out for the reader's terminal, not this one
            text = render(fmt, out, text_width(isatty=None if out_path is None else False))
    if timings:
        err_console.print("\n".join(clock.lines()), markup=False, highlight=False)
    if table is not None:
        _emit_tables(out, table, out_path)
        return
    emit(text, out_path)


def _quota_doc(
    quotas: Sequence[Quota], kept: WhatIfResult, free: WhatIfResult, ws: WorkloadSet
) -> dict[str, object]:
    """Each scenario's bill keeping to ``quotas`` beside the same run
    without them: the difference is what the quotas cost."""
    od = kept.scenario("on_demand").bill.total_usd
    od_free = free.scenario("on_demand").bill.total_usd
    rows: list[dict[str, object]] = []
    for s in kept.scenarios:
        mine = s.to_dict(od, ws)
        other = free.scenario(s.name).to_dict(od_free, ws)
        with_q = number(mine["total_cost_usd"], "total_cost_usd")
        without = number(other["total_cost_usd"], "total_cost_usd")
        rows.append({"name": s.name, "total_cost_usd": round(with_q, 2),
                     "without_quotas_usd": round(without, 2),
                     "quota_cost_usd": round(with_q - without, 2),
                     "unmet_unit_hours": mine["unmet_unit_hours"],
                     "without_quotas_unmet_unit_hours": other["unmet_unit_hours"]})  # fmt: skip
    ours = next(r for r in rows if r["name"] == "spotfolio")
    cost = number(ours["quota_cost_usd"], "quota_cost_usd")
    lines = [f"The quotas cost Spotfolio's plan ${cost:,.2f} over the period "
             f"(${number(ours['total_cost_usd'], 'total'):,.2f} keeping to them, "
             f"${number(ours['without_quotas_usd'], 'without'):,.2f} without)."]  # fmt: skip
    return {
        "quotas": [
            {"key": q.key, "code": q.code, "limit": q.limit, "unit": q.unit.value} for q in quotas
        ],
        "scenarios": rows,
        "lines": lines,
    }


def _check_table(table: str | None, fmt: str, out: Path | None) -> None:
    """``--table`` names a table, with ``--format csv`` (and ``all`` with
    ``--out``): checked before the run."""
    from broker.cli.report.csvfile import TABLES

    if table is None:
        return
    if fmt != "csv":
        raise InputError("--table", None, "--format csv with it (a CSV holds one table)",
                         got=f"--table {table} --format {fmt}")  # fmt: skip
    if table not in (*TABLES, "all"):
        raise InputError("--table", None, f"one of {', '.join(TABLES)} or all", got=table)
    if table == "all" and out is None:
        raise InputError("--table", None, "all only with --out FILE.csv (one file per table)",
                         got=table)  # fmt: skip


def _emit_tables(doc: Mapping[str, object], table: str, out: Path | None) -> None:
    """The CSV of ``table`` (or, for ``all``, every table of ``doc``: ``out``
    holds the scenarios, ``<stem>.<table>.csv`` beside it each other one). A
    table this run has not made is refused before anything is written."""
    from broker.cli.report.csvfile import csv_tables, render_csv

    have = csv_tables(doc)
    if table != "all":
        if table not in have:
            raise InputError("--table", None, f"a table this run made ({', '.join(have)})",
                             got=table)  # fmt: skip
        emit(render_csv(doc, table), out)
        return
    assert out is not None  # _check_table
    texts = {name: render_csv(doc, name) for name in have}  # all rendered before any write
    for name, text in texts.items():
        emit(text, out if name == "scenarios" else out.with_name(f"{out.stem}.{name}.csv"))


def _format(fmt: str | None, as_json: bool, out: Path | None) -> str:
    """``--format`` with ``--json`` as its alias (without either, ``--out``'s
    suffix), and ``--out`` checked for it."""
    if as_json and fmt not in (None, "json"):
        raise InputError("--json", None, f"--json alone (it is --format json), or --format {fmt}",
                         got=f"--json --format {fmt}")  # fmt: skip
    # no --format: --out's suffix names it (r.html is html), else text
    chosen = "json" if as_json else fmt or format_of(out) or "text"
    if out is not None:
        check_out(out, chosen)
    return chosen


@click.command(name="plan")
@_check_options
@_common_options
@_commitment_options
@_quota_option
def plan_command(
    common: CommonOptions,
    checks: CheckOptions,
    term: str,
    payment: str,
    owned: Path | None,
    quota: Path | None,
) -> None:
    """Run one optimization on the given inputs and print the plan with its reasons."""
    # lazy: the planning stack (pandas, PuLP); ``spotfolio --help`` imports this module
    from broker.planning.demand import DemandSet
    from broker.planning.optimizer.problem import build_problem
    from broker.planning.optimizer.solve import solve
    from broker.whatif.stress import MarketStress, stressed

    start = _start(common.start)
    have = _load_owned(owned)
    quotas = _load_quotas(quota)
    src, ws, dem = _inputs(common)
    # The plan's hazard multiplier is the PlanOptions'; availability, the market's.
    src = stressed(src, MarketStress(availability_multiplier=checks.availability_multiplier))
    snapshot = src.snapshot(start)
    if quotas:
        snapshot = snapshot.with_quotas(quotas)
    hours = common.days * 24
    # Plans run on whole hours; a recorded market's latest time rarely is one.
    at = snapshot.at.replace(minute=0, second=0, microsecond=0)
    if dem is None:
        dem = DemandSet.from_shapes(ws, at - timedelta(days=28), 28 * 24 + hours)
    window = dem.window(at, hours)
    serving = {n: s.to_numpy(dtype=float) for n, s in window.serving.items()}
    opts = _with_commitments(_options(common), term, payment)
    problem = build_problem(snapshot, ws, serving, hours=hours, options=opts, owned=have)
    plan = solve(problem)
    quota_doc = _plan_quotas(problem, plan) if problem.quotas else None
    found = [f for f in [_budget_unmet("plan", plan.unmet_total(), plan.budget_limited)] if f]
    _strict(checks, found)
    _gap_warning(common, "the plan", plan.meta.get("gap"), plan.meta.get("gap_met"))
    if not common.as_json:
        console.print(plan.explain())
        if quota_doc is not None:
            console.print(str(quota_doc["line"]))
        bound, got = plan.meta.get("lower_bound_usd"), plan.meta.get("gap")
        if bound is not None and got is not None:
            console.print(f"status {plan.status}: lower bound ${bound:,.2f}, the plan is within "
                          f"{got:.2%} of the optimum")  # fmt: skip
        return
    emit_json({
        "schema": "spotfolio.plan/1",
        "start": plan.start.isoformat(), "hours": plan.hours, "status": plan.status,
        "gap": plan.meta.get("gap"), "gap_met": plan.meta.get("gap_met"),
        "lower_bound_usd": plan.meta.get("lower_bound_usd"),
        "budget_unmet": found[0] if found else None,
        "objective_usd": round(plan.objective_usd, 2),
        "planned_cost_by_tier_usd": {
            k: round(v, 2) for k, v in plan.planned_cost_by_tier().items()
        },
        "commitments": [
            {"group": c.group, "instances": c.instances, "units": c.units,
             "usd_per_instance_hour": c.usd_per_instance_hour, "term_years": c.term_years,
             "payment": c.payment, "obligation_usd": c.obligation_usd,
             "monthly_saving_usd": c.monthly_saving_usd, "utilisation": c.utilisation,
             "breakeven_utilisation": c.breakeven_utilisation}
            for c in plan.commitments if c.instances
        ],
        "allocations": plan.allocations.to_dict(orient="records"),
        "unmet_unit_hours": plan.unmet_unit_hours,
        "explanation": plan.explain().splitlines(),
        "quotas": quota_doc,
        "meta": plan.meta,
    })  # fmt: skip


def _plan_quotas(problem: PlanningProblem, plan: Plan) -> dict[str, object]:
    """Each quota's peak use in ``plan``, and what keeping to them costs:
    the same problem solved without them, beside it."""
    from broker.planning.optimizer.quotas import use
    from broker.planning.optimizer.solve import solve

    free = solve(replace(problem, quotas=()), explain=False)
    peak: dict[int, float] = {}
    for (i, _t), got in use(problem, plan.allocations).items():
        peak[i] = max(peak.get(i, 0.0), got)
    # This plan is one without the quotas too: the best known without them
    # is the cheaper of the two (either solve may stop short of the optimum).
    best_free = min(free.objective_usd, plan.objective_usd)
    cost = plan.objective_usd - best_free
    return {
        "quotas": [{"key": q.key, "code": q.code, "limit": q.limit, "unit": q.unit.value,
                    "peak_use": round(peak.get(i, 0.0), 6)}
                   for i, q in enumerate(problem.quotas)],
        "objective_without_quotas_usd": round(best_free, 2),
        "lower_bound_without_quotas_usd": free.meta.get("lower_bound_usd"),
        "quota_cost_usd": round(cost, 2),
        "line": f"quotas: the plan costs ${cost:,.2f} more keeping to them "
                f"(objective ${plan.objective_usd:,.2f}, ${best_free:,.2f} without)",
    }  # fmt: skip
