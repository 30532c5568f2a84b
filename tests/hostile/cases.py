"""The hostile inputs: the shipped examples, mutated one value at a time.

``all_cases()`` lists every deterministic case (a pytest id each):

- ``workloads``: every numeric leaf of ``policies/examples/workloads.yaml``
  set to each of ``HOSTILE`` (NaN, infinities, booleans, 1e308, text, ...);
- ``daemon``: every numeric field of a daemon config that states them all
  (intervals, backoff, lease, lifecycle, sim, ...), the same way;
- ``demand-csv`` / ``demand-yaml``: cells, hours and starts of
  ``broker/examples/demand.csv`` (its first two days) and of a YAML demand;
- ``trace`` / ``prices``: a spot trace's ``gap_seconds``, ticks and prices,
  and cells of an AWS spot price CSV;
- ``cli``: every number option of the commands, each given hostile text.

A case is ``must_reject`` when the value is outside every documented range
(NaN, infinity, a boolean, 1e308, text that is not a number, a list): exit 0
on it is a silent accept. Other values (0, -1, 1e9, null) may pass or fail,
but never with a traceback, a hang or an error line that does not say where.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from broker.daemon.config import load_daemon_config
from broker.planning.demand import load_demand
from markets.files.prices import load_aws_spot_prices
from markets.files.traces import load_spot_trace
from policies.workloads.spec import default_workloads, load_workloads
from tests.hostile.harness import Case
from tests.paths import REPO

__all__ = ["HOSTILE", "all_cases", "leaves", "must_reject_value", "operator_cases", "set_path"]

WORKLOADS_YAML = REPO / "policies" / "examples" / "workloads.yaml"
DEMAND_CSV = REPO / "broker" / "examples" / "demand.csv"

# (label, value): a value a YAML or JSON document can hold.
HOSTILE: tuple[tuple[str, object], ...] = (
    ("nan", math.nan),
    ("inf", math.inf),
    ("-inf", -math.inf),
    ("true", True),
    ("false", False),
    ("1e308", 1e308),
    ("-1e308", -1e308),
    ("1e30-int", 10**30),
    ("1e308-text", "1e308"),
    ("text", "abc"),
    ("list", [1, 2]),
    ("mapping", {"a": 1}),
    ("null", None),
    ("-1", -1),
    ("0", 0),
    ("1e9", 1e9),
)
# Beyond every documented upper edge (markets.numbers: the largest is 1e12).
_HUGE = 1e13


def must_reject_value(value: object) -> bool:
    """Outside the range of every number field of ours."""
    if isinstance(value, (bool, list | dict)):
        return True
    if isinstance(value, int | float):
        return not math.isfinite(value) or abs(value) > _HUGE
    if isinstance(value, str):
        try:
            x = float(value)
        except ValueError:
            return True
        return not math.isfinite(x) or abs(x) > _HUGE
    return False


def _path_text(path: tuple[int | str, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def leaves(data: object, path: tuple[int | str, ...] = ()) -> Iterator[tuple[int | str, ...]]:
    """Paths of the numeric (not boolean) leaves of parsed YAML/JSON data."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from leaves(v, (*path, str(k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from leaves(v, (*path, i))
    elif isinstance(data, int | float) and not isinstance(data, bool):
        yield path


def set_path(data: Any, path: tuple[int | str, ...], value: object) -> Any:
    # Any: parsed YAML is untyped; ``path`` came from ``leaves`` on it.
    out = copy.deepcopy(data)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


def _dump_yaml(data: object) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _file_cases(
    kind: str,
    base: object,
    name: str,
    load: Callable[[Path], object],
    *,
    dump: Callable[[object], str] = _dump_yaml,
    skip: Callable[[tuple[int | str, ...]], bool] = lambda _p: False,
    subdir: str = "",
) -> Iterator[Case]:
    for path in leaves(base):
        if skip(path):
            continue
        field = _path_text(path)
        for label, value in HOSTILE:
            reject = must_reject_value(value)

            def make(tmp: Path, path: tuple[int | str, ...] = path, value: object = value) -> Any:
                target = tmp / subdir / name if subdir else tmp / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(dump(set_path(base, path, value)), encoding="utf-8")
                return lambda: load(target)

            def file_names(tmp: Path) -> tuple[str, ...]:
                return (str(tmp / subdir / name if subdir else tmp / name),)

            # JSON has no NaN or Infinity: the parser refuses the document, naming the file.
            json_constant = (
                dump is _dump_json and isinstance(value, float) and not math.isfinite(value)
            )
            names = (field,) if reject and not json_constant else ()
            yield Case(f"{kind}:{field}={label}", make, names, reject, file_names=file_names)


def _dump_json(data: object) -> str:
    return json.dumps(data)


# -- workloads -------------------------------------------------------------------


def _workload_cases() -> Iterator[Case]:
    base = yaml.safe_load(WORKLOADS_YAML.read_text(encoding="utf-8"))
    yield from _file_cases("workloads", base, "workloads.yaml", load_workloads)


# -- daemon configs --------------------------------------------------------------

DAEMON_BASE: dict[str, object] = {
    "owner": "hostile",
    "store_url": "sqlite:///state.db",
    "demand_seed": 0,
    "horizon_hours": 24,
    "committed": {"aws/us-east-1/g5.xlarge": 4},
    "intervals": {
        "refresh_market_s": 900,
        "replan_s": 3600,
        "reconcile_s": 60,
        "poll_notices_s": 5,
        "lease_renew_s": 10,
        "upkeep_s": 30,
    },
    "backoff": {"max_attempts": 4, "base_s": 0.5, "cap_s": 8},
    "lease_ttl_s": 30,
    "listing_grace_s": 120,
    "metrics_port": 9108,
    "stale_hazard_multiplier": 2.0,
    "sim": {
        "seed": 0,
        "notice_seconds": 120,
        "duplicate_rate": 0.0,
        "listing_lag_s": 0.0,
        "throttle_rate": 0.0,
        "api_latency_s": 0.0,
    },
    "lifecycle": {
        "churn_window_s": 600,
        "churn_max_share": 0.05,
        "churn_floor_units": 8,
        "resize_budget_interval_s": 3600,
        "deadline_margin_min_hours": 1,
        "batch_replace_max_premium": 0.25,
        "break_glass_min_hours": 1,
        "return_min_dwell_s": 1800,
        "return_margin": 1,
        "return_lead_s": 300,
        "max_spot_lifetime_hours": 168,
        "rebalance_window_s": 3600,
        "rebalance_min_samples": 10,
        "rebalance_min_precision": 0.5,
        "rebalance_stale_s": 600,
        "checkpoint_margin_s": 5,
        "pending_launch_ttl_s": 600,
        "remembered_notices": 100000,
        "deadline_tick_s": 600,
    },
}


def _daemon_cases() -> Iterator[Case]:
    yield from _file_cases("daemon", DAEMON_BASE, "daemon.yaml", load_daemon_config)


# -- demand files ----------------------------------------------------------------


def _demand_rows() -> list[list[str]]:
    lines = DEMAND_CSV.read_text(encoding="utf-8").splitlines()
    return [line.split(",") for line in lines[:49]]  # header + two days


def _demand_csv_case(cid: str, rows: list[list[str]], names: tuple[str, ...], reject: bool) -> Case:
    def make(tmp: Path) -> Any:
        target = tmp / "demand.csv"
        target.write_text("\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")
        return lambda: load_demand(target, default_workloads())

    return Case(cid, make, names, reject, file_names=lambda tmp: (str(tmp / "demand.csv"),))


_CELL_TEXT = (
    ("nan", "nan", True),
    ("inf", "inf", True),
    ("-inf", "-inf", True),
    ("1e308", "1e308", True),
    ("-1", "-1", True),
    ("text", "abc", True),
    ("empty", "", True),
    ("true", "true", True),
    ("1e9", "1e9", True),  # beyond MAX_UNITS of one hour's demand
    ("0", "0", False),
    ("1e5", "1e5", False),
)
_HOUR_TEXT = (
    ("year-9999", "9999-01-01T00:00:00Z", True),
    ("half-hour", "2026-01-05T00:30:00Z", True),
    ("text", "abc", True),
    ("empty", "", True),
    ("year-1", "0001-01-01T00:00:00Z", True),
    ("overflow", "2026-01-05T00:00:00+99:00", True),
)


def _demand_csv_cases() -> Iterator[Case]:
    rows = _demand_rows()
    for n in (1, 17, 48):
        for label, text, reject in _CELL_TEXT:
            mutated = copy.deepcopy(rows)
            mutated[n][1] = text
            line = f"line {n + 1}"
            yield _demand_csv_case(f"demand-csv:{line}={label}", mutated, (line,), reject)
        for label, text, reject in _HOUR_TEXT:
            mutated = copy.deepcopy(rows)
            mutated[n][0] = text
            yield _demand_csv_case(
                f"demand-csv:line {n + 1} hour={label}", mutated, ("column hour",), reject
            )
    structural = {
        "duplicate-hour": lambda r: [*r[:10], r[9], *r[10:]],
        "gap": lambda r: r[:10] + r[11:],
        "reversed": lambda r: r[:1] + r[1:][::-1],
        "no-header": lambda r: r[1:],
        "extra-field": lambda r: [*r[:5], [*r[5], "7"], *r[6:]],
        "unknown-workload": lambda r: [["hour", "nosuch"], *r[1:]],
        "header-only": lambda r: r[:1],
        "empty": lambda r: [],
    }
    for label, fn in structural.items():
        yield _demand_csv_case(f"demand-csv:{label}", fn(copy.deepcopy(rows)), (), True)


_DEMAND_YAML_BASE: dict[str, object] = {
    "start": "2026-01-05T00:00:00Z",
    "hours": 24,
    "workloads": {"chat-api": [30.0 + i for i in range(24)]},
}
_DEMAND_SHAPE_BASE: dict[str, object] = {
    "start": "2026-01-05T00:00:00Z",
    "hours": 48,
    "workloads": {"chat-api": {"base_units": 32, "peak_units": 64, "weekend_factor": 0.5}},
}


def _load_demand_yaml(path: Path) -> object:
    return load_demand(path, default_workloads())


def _demand_yaml_cases() -> Iterator[Case]:
    yield from _file_cases(
        "demand-yaml",
        _DEMAND_YAML_BASE,
        "demand.yaml",
        _load_demand_yaml,
        # every hour is the same kind of value: three of them stand for all
        skip=lambda p: isinstance(p[-1], int) and p[-1] not in (0, 11, 23),
    )
    yield from _file_cases("demand-shape", _DEMAND_SHAPE_BASE, "shape.yaml", _load_demand_yaml)
    for label, start, reject in (
        ("year-9999", "9999-01-01T00:00:00Z", True),
        ("year-1", "0001-01-01T00:00:00Z", True),
        ("half-hour", "2026-01-05T00:30:00Z", True),
        ("text", "soon", True),
        ("1e308", 1e308, True),
        ("list", [1], True),
    ):
        data = {**_DEMAND_YAML_BASE, "start": start}

        def make(tmp: Path, data: dict[str, object] = data) -> Any:
            target = tmp / "demand.yaml"
            target.write_text(_dump_yaml(data), encoding="utf-8")
            return lambda: _load_demand_yaml(target)

        yield Case(
            f"demand-yaml:start={label}",
            make,
            ("start",),
            reject,
            file_names=lambda tmp: (str(tmp / "demand.yaml"),),
        )


# -- market files ----------------------------------------------------------------

_TRACE_DIR = "traces/availability/1-node/aws-03-01-2023"
_TRACE_BASE: dict[str, object] = {
    "metadata": {"gap_seconds": 60},
    "data": [1, 1, 0, 1, 0, 1, 1, 1],
    "prices": [0.9, 0.9, 0.95, 0.95, 1.0, 1.0, 0.9, 0.9],
}


def _trace_cases() -> Iterator[Case]:
    name = "us-west-2a_v100_1.json"
    yield from _file_cases(
        "trace",
        _TRACE_BASE,
        name,
        lambda p: load_spot_trace(p),
        dump=_dump_json,
        subdir=_TRACE_DIR,
        skip=lambda p: p[0] == "prices" and p[-1] not in (0, 7),
    )
    # a tick that is not 0 or 1 (1 node)
    for label, value in (("2", 2), ("0.5", 0.5)):
        data = set_path(_TRACE_BASE, ("data", 3), value)

        def make(tmp: Path, data: object = data) -> Any:
            target = tmp / _TRACE_DIR / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(data), encoding="utf-8")
            return lambda: load_spot_trace(target)

        yield Case(
            f"trace:data[3]={label}",
            make,
            ("data[3]",),
            True,
            file_names=lambda tmp: (str(tmp / _TRACE_DIR / name),),
        )


_PRICE_HEADER = ["Timestamp", "AvailabilityZone", "InstanceType", "SpotPrice", "ProductDescription"]


def _price_rows() -> list[list[str]]:
    return [
        [f"2024-01-{d:02d}T00:00:00Z", zone, "p3.2xlarge", f"{0.9 + d / 100:.4f}", "Linux/UNIX"]
        for d in range(1, 11)
        for zone in ("us-east-1a", "us-east-1b")
    ]


def _price_cases() -> Iterator[Case]:
    cells = {
        0: (
            ("year-9999", "9999-01-01T00:00:00Z"),
            ("year-1", "0001-01-01T00:00:00Z"),
            ("text", "abc"),
            ("empty", ""),
            ("month-13", "2024-13-01T00:00:00Z"),
        ),
        1: (("text", "moon-1a"), ("empty", "")),
        2: (("text", "not a type"),),
        3: (
            ("nan", "nan"),
            ("inf", "inf"),
            ("-1", "-1"),
            ("0", "0"),
            ("1e308", "1e308"),
            ("text", "abc"),
            ("true", "true"),
        ),
    }
    for col, values in cells.items():
        for label, text in values:
            rows = _price_rows()
            rows[7][col] = text

            def make(tmp: Path, rows: list[list[str]] = rows) -> Any:
                target = tmp / "prices.csv"
                body = [_PRICE_HEADER, *rows]
                target.write_text("\n".join(",".join(r) for r in body) + "\n", encoding="utf-8")
                return lambda: load_aws_spot_prices(target)

            yield Case(
                f"prices:{_PRICE_HEADER[col]}={label}",
                make,
                ("line 9",),
                True,
                file_names=lambda tmp: (str(tmp / "prices.csv"),),
            )


# -- command-line options --------------------------------------------------------

_COST_RUN = ["--units", "8", "--hours", "100", "--on-demand", "3", "--spot", "1"]
# command line, number options to vary, whether accepted values may run (else
# only values every range refuses: nan, inf, text, -1... so nothing is solved)
_COMMANDS: tuple[tuple[list[str], tuple[str, ...], bool], ...] = (
    (
        ["cost", "effective", *_COST_RUN],
        (
            "--units",
            "--hours",
            "--on-demand",
            "--spot",
            "--interruptions",
            "--restart-hours",
            "--notice-seconds",
            "--checkpoint-write-hours",
            "--lost-work-hours",
        ),
        True,
    ),
    (
        ["cost", "breakeven", *_COST_RUN],
        (
            "--units",
            "--hours",
            "--on-demand",
            "--spot",
            "--interruptions",
            "--restart-hours",
            "--checkpoint-overhead",
        ),
        True,
    ),
    (
        ["cost", "checkpoint", "--checkpoint-write-hours", "0.1", "--interruptions", "0.01"],
        (
            "--checkpoint-write-hours",
            "--checkpoint-interval-hours",
            "--interruptions",
            "--restart-hours",
            "--notice-seconds",
        ),
        True,
    ),
    (
        ["cost", "reserve", "--demand", "3,4,5,6", "--on-demand", "2"],
        ("--on-demand", "--committed", "--discount", "--alternative"),
        True,
    ),
    (
        ["plan"],
        (
            "--days",
            "--interruption-multiplier",
            "--checkpoint-minutes",
            "--period-hours",
            "--gap",
            "--time-limit",
            "--availability-multiplier",
        ),
        False,
    ),
    (["whatif"], ("--seed", "--replan-hours", "--days", "--workers"), False),
    (["bench"], ("--windows", "--seed", "--workers"), False),
    (["simulate", "--setting", "deadline"], ("--windows", "--seed", "--workers"), False),
    (["daemon", "--provider", "sim"], ("--hours", "--seed"), False),
    (["market", "show"], ("--limit",), False),
    (
        [
            "market",
            "fetch",
            "aws",
            "--regions",
            "us-east-1",
            "--instance-types",
            "p3.2xlarge",
            "--out",
            "x.csv",
        ],
        ("--days",),
        False,
    ),
)
_OPTION_TEXT = (
    ("nan", "nan", True),
    ("inf", "inf", True),
    ("-inf", "-inf", True),
    ("1e308", "1e308", True),
    ("-1e308", "-1e308", True),
    ("text", "abc", True),
    ("empty", "", True),
    ("true", "true", True),
    ("-1", "-1", True),
    ("0", "0", False),
    ("1e9", "1e9", False),
    ("0.5", "0.5", False),
)


def _cli_cases() -> Iterator[Case]:
    for base, options, may_run in _COMMANDS:
        for option in options:
            # every option here is >= 0 (or >= 1): -1 is refused everywhere
            for label, text, reject in _OPTION_TEXT:
                if not may_run and not reject:
                    continue  # an accepted plan or bench would run for minutes
                argv = [*base, option, text]
                # cost reserve takes exactly one of --committed and --discount
                if base[:2] == ["cost", "reserve"] and option not in ("--committed", "--discount"):
                    argv += ["--discount", "0.3"]
                yield Case(
                    f"cli:{' '.join(base[:2])} {option}={label}",
                    lambda _tmp, argv=argv: list(argv),  # type: ignore[misc]
                    (option,),
                    reject,
                    allow_explain=may_run,
                )


def all_cases() -> list[Case]:
    """Every deterministic case, in a stable order."""
    return [
        *_workload_cases(),
        *_daemon_cases(),
        *_demand_csv_cases(),
        *_demand_yaml_cases(),
        *_trace_cases(),
        *_price_cases(),
        *_cli_cases(),
    ]


# -- an operator's inputs: names, paths, keys and times, not numbers -------------
#
# Each is outside what its field documents, so exit 0 on it is a silent
# accept: a store that is no database, a market or file that is not there, a
# reservation group no catalog pool has, an epoch of year 9999, a hook header
# that would inject another header, a state file that cannot be written, a
# workload of unknown types. All of them are refused when the file is read.

_OPERATOR_BASE: dict[str, object] = {"owner": "hostile", "store_url": "sqlite:///state.db"}
_HOOK_URL = "http://127.0.0.1:9/drain"


def _daemon_case(cid: str, settings: Callable[[Path], dict[str, object]], *names: str) -> Case:
    def make(tmp: Path) -> Any:
        target = tmp / "daemon.yaml"
        target.write_text(_dump_yaml({**_OPERATOR_BASE, **settings(tmp)}), encoding="utf-8")
        return lambda: load_daemon_config(target)

    return Case(cid, make, names, True, file_names=lambda tmp: (str(tmp / "daemon.yaml"),))


def _setting(key: str, value: object) -> Callable[[Path], dict[str, object]]:
    return lambda _tmp: {key: value}


def _hook(**hook: object) -> Callable[[Path], dict[str, object]]:
    return lambda _tmp: {"checkpoint_hooks": {"chat-api": hook}}


def _daemon_operator_cases() -> Iterator[Case]:
    for label, url in (
        ("garbage", "garbage"),
        ("no-suffix", "state"),
        ("space-around", " sqlite:///state.db"),
        ("newline", "sqlite:///state.db\n"),
        ("mysql", "mysql://db.internal/spotfolio"),
        ("http", "http://db.internal/spotfolio"),
        ("postgres-no-database", "postgresql+psycopg://db.internal"),
        ("missing-directory", "sqlite:///no/such/dir/state.db"),
        ("plain-path-missing-directory", "no/such/dir/state.db"),
    ):
        yield _daemon_case(
            f"operator:daemon:store_url={label}", _setting("store_url", url), "store_url"
        )
    yield _daemon_case(
        "operator:daemon:store_url=a-directory",
        lambda tmp: {"store_url": f"sqlite:///{tmp}"},
        "store_url",
    )
    for label, market in (
        ("empty", ""),
        ("space", " "),
        ("unknown", "nosuch"),
        ("missing-path", "no/such/history.csv"),
        ("newline", "default\n"),
    ):
        yield _daemon_case(f"operator:daemon:market={label}", _setting("market", market), "market")
    for key in ("demand", "workloads"):
        yield _daemon_case(f"operator:daemon:{key}=missing", _setting(key, "nope.yaml"), key)
        yield _daemon_case(f"operator:daemon:{key}=a-directory", _setting(key, "."), key)
    for label, group in (
        ("unknown-type", "aws/us-east-1/g9.nosuch"),
        ("type-of-the-other-cloud", "gcp/us-east-1/g5.xlarge"),
        ("unknown-region", "aws/mars-1/g5.xlarge"),
        ("one-part", "g5.xlarge"),
        ("pool-key", "aws/us-east-1/us-east-1a/g5.xlarge"),
        ("5000-chars", "aws/us-east-1/" + "g" * 5000),
    ):
        yield _daemon_case(
            f"operator:daemon:committed={label}", _setting("committed", {group: 2}), "committed"
        )
    for key, where in (("horizon_start", "horizon_start"), ("sim.start", "sim.start")):
        for label, when in (
            ("year-9999", "9999-01-01T00:00:00Z"),
            ("year-1", "0001-01-01T00:00:00Z"),
            ("5", 5),
            ("5.5", 5.5),
            ("true", True),
            ("no-zone", "2026-03-01T00:00:00"),
            ("text", "soon"),
        ):
            settings = (
                _setting("sim", {"start": when}) if key == "sim.start" else _setting(key, when)
            )
            yield _daemon_case(f"operator:daemon:{key}={label}", settings, where)
    hooks: tuple[tuple[str, Callable[[Path], dict[str, object]], str], ...] = (
        ("header-name-crlf", _hook(url=_HOOK_URL, headers={"X-A\r\nX-B": "v"}), "headers"),
        ("header-name-lf", _hook(url=_HOOK_URL, headers={"X-A\nB": "v"}), "headers"),
        ("header-name-space", _hook(url=_HOOK_URL, headers={"X A": "v"}), "headers"),
        ("header-name-colon", _hook(url=_HOOK_URL, headers={"X-A:": "v"}), "headers"),
        ("header-name-empty", _hook(url=_HOOK_URL, headers={"": "v"}), "headers"),
        ("header-name-non-ascii", _hook(url=_HOOK_URL, headers={"X-Ä": "v"}), "headers"),
        (
            "header-own-content-type",
            _hook(url=_HOOK_URL, headers={"Content-Type": "x"}),
            "headers.Content-Type",
        ),
        (
            "header-own-signature",
            _hook(url=_HOOK_URL, headers={"X-Spotfolio-Signature": "x"}),
            "headers.X-Spotfolio-Signature",
        ),
        (
            "header-value-crlf",
            _hook(url=_HOOK_URL, headers={"X-A": "v\r\nSet-Cookie: a=b"}),
            "headers.X-A",
        ),
        ("header-value-lf", _hook(url=_HOOK_URL, headers={"X-A": "v\nX-B: c"}), "headers.X-A"),
        ("header-value-cr", _hook(url=_HOOK_URL, headers={"X-A": "v\rX-B: c"}), "headers.X-A"),
        ("header-value-nul", _hook(url=_HOOK_URL, headers={"X-A": "v\0"}), "headers.X-A"),
        ("header-value-escape", _hook(url=_HOOK_URL, headers={"X-A": "v\x1b[2J"}), "headers.X-A"),
        ("header-value-leading-space", _hook(url=_HOOK_URL, headers={"X-A": " v"}), "headers.X-A"),
        (
            "header-value-not-latin-1",
            _hook(url=_HOOK_URL, headers={"X-A": "v\u2028"}),
            "headers.X-A",
        ),
        ("env-value-nul", _hook(command=["/bin/true"], env={"A": "x\0y"}), "env.A"),
        ("env-name-equals", _hook(command=["/bin/true"], env={"A=B": "x"}), "env"),
        ("env-name-nul", _hook(command=["/bin/true"], env={"A\0B": "x"}), "env"),
        ("env-name-empty", _hook(command=["/bin/true"], env={"": "x"}), "env"),
        (
            "env-name-notice",
            _hook(command=["/bin/true"], env={"SPOTFOLIO_NOTICE_ID": "x"}),
            "env.SPOTFOLIO_NOTICE_ID",
        ),
        ("command-nul", _hook(command=["/bin/true", "a\0b"]), "command[1]"),
        ("command-empty-program", _hook(command=[""]), "command[0]"),
        ("url-crlf", _hook(url=_HOOK_URL + "\r\nX-B: c"), "url"),
        ("url-space", _hook(url="http://127.0.0.1:9/a b"), "url"),
    )
    for label, settings, where in hooks:
        yield _daemon_case(
            f"operator:daemon:hook:{label}", settings, f"checkpoint_hooks.chat-api.{where}"
        )
    yield _daemon_case(
        "operator:daemon:sim.state_file=missing-directory",
        _setting("sim", {"state_file": "no/such/dir/account.json"}),
        "sim.state_file",
    )
    yield _daemon_case(
        "operator:daemon:sim.state_file=a-directory",
        lambda tmp: {"sim": {"state_file": str(tmp)}},
        "sim.state_file",
    )


def _workloads_with(types: list[str], index: int) -> Callable[[Path], Any]:
    base = yaml.safe_load(WORKLOADS_YAML.read_text(encoding="utf-8"))
    data = copy.deepcopy(base)
    data["workloads"][index]["instance_types"] = types
    data["workloads"][index].pop("throughput", None)

    def make(tmp: Path) -> Any:
        target = tmp / "workloads.yaml"
        target.write_text(_dump_yaml(data), encoding="utf-8")
        return lambda: load_workloads(target)

    return make


def _workloads_operator_cases() -> Iterator[Case]:
    for label, types in (
        ("only-unknown", ["g9.nosuch", "zz9.huge"]),
        ("one-typo", ["g5.xlarge", "g5.xlarg"]),
        ("5000-chars", ["g" * 5000]),
        ("newline", ["g5.xlarge\n"]),
    ):
        yield Case(
            f"operator:workloads:instance_types={label}",
            _workloads_with(types, 0),
            ("workloads[0].instance_types",),
            True,
            file_names=lambda tmp: (str(tmp / "workloads.yaml"),),
        )


def _price_history(tmp: Path) -> Path:
    rows = [
        [
            f"2024-01-{d:02d}T{h:02d}:00:00Z",
            zone,
            itype,
            f"{0.3 + d / 100 + h / 1000:.4f}",
            "Linux/UNIX",
        ]
        for d in range(1, 4)
        for h in range(0, 24, 6)
        for zone in ("us-east-1a", "us-east-1b")
        for itype in ("g4dn.xlarge", "g5.xlarge", "p3.2xlarge", "p3.8xlarge")
    ]
    target = tmp / "prices.csv"
    body = [_PRICE_HEADER, *rows]
    target.write_text("\n".join(",".join(r) for r in body) + "\n", encoding="utf-8")
    return target


def _argv(*argv: str) -> Callable[[Path], list[str]]:
    return lambda _tmp: list(argv)


def _cli_operator_cases() -> Iterator[Case]:
    for command in (["plan"], ["whatif"], ["market", "show"]):
        for label, market in (("empty", ""), ("space", " ")):
            yield Case(
                f"operator:cli:{command[0]} --market={label}",
                _argv(*command, "--market", market),
                ("--market",),
                True,
            )
    yield Case(
        "operator:cli:daemon --market=empty",
        lambda _tmp: ["daemon", "--provider", "sim", "--hours", "1", "--market", ""],
        ("--market",),
        True,
    )
    reserve = ["cost", "reserve", "--demand", "3,4,5,6", "--on-demand", "2", "--discount", "0.3"]
    for label, levels in (
        ("200%", "200%"),
        ("100.5%", "100.5%"),
        ("40%,200%", "40%,200%"),
        ("empty", ""),
        ("1e9-units", "1000000000"),
        ("nan%", "nan%"),
    ):
        yield Case(
            f"operator:cli:cost reserve --levels={label}",
            _argv(*reserve, "--levels", levels),
            ("--levels",),
            True,
        )
    # A spot price history has no on-demand price for some hours: the chart
    # of a what-if on it draws what is known (exit 0), never a traceback.
    yield Case(
        "operator:cli:whatif --plot on a price history",
        lambda tmp: [
            "whatif",
            "--market",
            str(_price_history(tmp)),
            "--days",
            "1",
            "--plot",
            str(tmp / "whatif.png"),
            "--out",
            str(tmp / "whatif.json"),
        ],
        timeout_s=240.0,
    )


def operator_cases() -> list[Case]:
    """The operator's inputs (every one runs in the default suite)."""
    return [*_daemon_operator_cases(), *_workloads_operator_cases(), *_cli_operator_cases()]
