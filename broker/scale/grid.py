"""The sweep grid: a YAML file of what-if axes, expanded into scenarios.

Owns: ``load_grid(path)`` -> ``Grid`` (validated) and ``Scenario``, each the
``spotfolio whatif`` options of one point of the grid, as an argument list
(``argv``): a scenario's result is that command's, run alone. Must not: run
anything, or know how a whatif option is parsed (``check`` is handed a
function that parses one option as ``whatif`` would, ``broker.cli.sweep``).

The file (every key optional; each axis a list, one value when absent)::

    markets:                 # --market (and --market-option)
      - default
      - {market: ./data, options: ["regions=us-east-1"]}
    demands: [null, demand.csv]       # --demand; null: the built-in shapes
    policies: [null, workloads.yaml]  # --policies; null: the built-in example
    committed: [null, 0.4, "0.4,0.6"] # --committed; null: no committed sweep
    stress:                           # --interruption-multiplier [--availability-...]
      - 1
      - {interruption: 2, availability: 0.8}
    options:                          # whatif options every scenario shares
      days: 7
      seed: 0
      replan-hours: 24
      usage: usage.csv                # any whatif option but the axes' and output's
      scenarios: 20
      strict: true

Scenarios are the product markets x demands x policies x committed x stress,
in that order (the last axis varies fastest). Relative paths are relative to
the grid file. A bad value fails the whole grid, before anything runs, with
the file, the field as written (``stress[1].interruption``) and what was
expected.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from markets.errors import InputError

__all__ = ["AXES", "MAX_SCENARIOS", "OPTIONS", "PATH_ARGS", "Grid", "Scenario", "load_grid"]

AXES = ("markets", "demands", "policies", "committed", "stress")
# whatif options a grid may set for every scenario (as the command spells them)
# (every one but the axes' and those of the output, which the sweep owns)
OPTIONS = (
    "days",
    "start",
    "seed",
    "replan-hours",
    "period-hours",
    "solver",
    "gap",
    "time-limit",
    "term",
    "payment",
    "checkpoint-minutes",
    "owned",
    "usage",
    "usage-rules",
    "scenarios",
    "workers",
    "strict",
)
_PATH_OPTIONS = ("owned", "usage", "usage-rules")
_FLAG_OPTIONS = ("strict",)
# The options whose value names a file (or, for --market, maybe a directory):
# a sweep ships their contents to the workers (broker.cli.sweep).
PATH_ARGS = ("--market", "--demand", "--policies", *(f"--{o}" for o in _PATH_OPTIONS))
# A grid this large is a typo more often than a plan (10 axes values each).
MAX_SCENARIOS = 100_000

# check(option, value) raises ValueError with what was expected, or returns
OptionCheck = Callable[[str, str], None]


@dataclass(frozen=True)
class Scenario:
    """One point of the grid: its axis values (for the table) and the whatif
    arguments that run it."""

    index: int
    market: str
    market_options: tuple[str, ...]
    demand: str | None
    policies: str | None
    committed: str | None
    interruption_multiplier: float
    availability_multiplier: float
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Grid:
    path: Path
    scenarios: tuple[Scenario, ...]


def _fail(path: Path, field: str, expected: str, got: object) -> InputError:
    return InputError(str(path), field, expected, got=got)


def _axis(doc: Mapping[str, object], key: str, path: Path) -> list[object]:
    if key not in doc or doc[key] is None:
        return [None]
    values = doc[key]
    if not isinstance(values, list) or not values:
        raise _fail(path, key, "a non-empty list", values)
    return values


def _file(path: Path, field: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _fail(path, field, "a file path or null", value)
    p = Path(value) if Path(value).is_absolute() else path.parent / value
    if not p.is_file():
        raise _fail(path, field, "an existing file (relative to the grid file)", value)
    return str(p)


def _market(path: Path, field: str, value: object) -> tuple[str, tuple[str, ...]]:
    if value is None:
        return "default", ()
    if isinstance(value, str) and value:
        return _market_name(path, field, value), ()
    if isinstance(value, Mapping):
        extra = set(value) - {"market", "options"}
        if extra or not isinstance(value.get("market"), str):
            raise _fail(path, field, "a market name or {market: NAME, options: [KEY=VALUE]}", value)
        opts = value.get("options") or []
        if not isinstance(opts, list) or not all(isinstance(o, str) and "=" in o for o in opts):
            raise _fail(path, f"{field}.options", "a list of KEY=VALUE strings", opts)
        return _market_name(path, f"{field}.market", value["market"]), tuple(opts)
    raise _fail(path, field, "a market name or {market: NAME, options: [KEY=VALUE]}", value)


def _market_name(path: Path, field: str, name: str) -> str:
    # a name the registry knows (default, aws, gcp) or a file / directory
    if "/" in name or name.startswith("."):
        p = Path(name) if Path(name).is_absolute() else path.parent / name
        if not p.exists():
            raise _fail(path, field, "an existing market file or directory", name)
        return str(p)
    return name


def _committed(path: Path, field: str, value: object, check: OptionCheck) -> str | None:
    if value is None:
        return None
    text = str(value) if isinstance(value, int | float | str) and value != "" else None
    if text is None or isinstance(value, bool):
        raise _fail(path, field, "a share of peak like 0.4, a list like '0.4,0.6', or null", value)
    _checked(path, field, "committed", text, check)
    return text


def _stress(path: Path, field: str, value: object, check: OptionCheck) -> tuple[float, float]:
    if value is None:
        return 1.0, 1.0
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = {"interruption": value}
    if not isinstance(value, Mapping) or set(value) - {"interruption", "availability"}:
        raise _fail(
            path, field, "a multiplier like 2 or {interruption: 2, availability: 0.8}", value
        )
    out = []
    for key, option in (
        ("interruption", "interruption-multiplier"),
        ("availability", "availability-multiplier"),
    ):
        v = value.get(key, 1.0)
        if not isinstance(v, int | float) or isinstance(v, bool):
            raise _fail(path, f"{field}.{key}", "a number", v)
        _checked(path, f"{field}.{key}", option, str(v), check)
        out.append(float(v))
    return out[0], out[1]


def _checked(path: Path, field: str, option: str, text: str, check: OptionCheck) -> None:
    try:
        check(option, text)
    except ValueError as e:
        raise _fail(path, field, str(e), text) from e


def _options(doc: Mapping[str, object], path: Path, check: OptionCheck) -> list[str]:
    raw = doc.get("options")
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise _fail(path, "options", "a mapping of whatif options, like {days: 7}", raw)
    argv: list[str] = []
    for key, value in raw.items():
        field = f"options.{key}"
        if key not in OPTIONS:
            raise _fail(path, field, "one of " + ", ".join(OPTIONS), key)
        if key in _FLAG_OPTIONS:
            if not isinstance(value, bool):
                raise _fail(path, field, "true or false", value)
            argv += [f"--{key}"] if value else []
            continue
        if value is None or isinstance(value, bool | list | Mapping):
            raise _fail(path, field, "a single value", value)
        text = str(value)
        if key in _PATH_OPTIONS:
            text = _file(path, field, text) or ""
        _checked(path, field, str(key), text, check)
        argv += [f"--{key}", text]
    return argv


def load_grid(path: Path, check: OptionCheck) -> Grid:
    """Read and validate ``path``; ``check(option, text)`` raises ``ValueError``
    (its message: what was expected) when whatif would refuse ``--option text``."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(str(path), None, f"a readable grid file ({e.strerror})") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        raise InputError(str(path), where, "valid YAML") from e
    if not isinstance(doc, Mapping):
        raise _fail(
            path,
            "",
            "a mapping with markets, demands, policies, committed, stress, options",
            type(doc).__name__,
        )
    unknown = [k for k in doc if k not in (*AXES, "options")]
    if unknown:
        raise _fail(path, str(unknown[0]), "one of " + ", ".join((*AXES, "options")), unknown[0])
    shared = _options(doc, path, check)
    markets = [_market(path, f"markets[{i}]", v) for i, v in enumerate(_axis(doc, "markets", path))]
    demands = [_file(path, f"demands[{i}]", v) for i, v in enumerate(_axis(doc, "demands", path))]
    policies = [
        _file(path, f"policies[{i}]", v) for i, v in enumerate(_axis(doc, "policies", path))
    ]
    committed = [
        _committed(path, f"committed[{i}]", v, check)
        for i, v in enumerate(_axis(doc, "committed", path))
    ]
    stress = [
        _stress(path, f"stress[{i}]", v, check) for i, v in enumerate(_axis(doc, "stress", path))
    ]
    n = len(markets) * len(demands) * len(policies) * len(committed) * len(stress)
    if n > MAX_SCENARIOS:
        raise _fail(path, "", f"at most {MAX_SCENARIOS:,} scenarios", n)
    out = []
    product = itertools.product(markets, demands, policies, committed, stress)
    for i, ((market, mopts), demand, pol, com, (im, am)) in enumerate(product):
        argv = ["--market", market, *_pairs("--market-option", mopts)]
        argv += _pairs("--demand", [demand] if demand else [])
        argv += _pairs("--policies", [pol] if pol else [])
        argv += _pairs("--committed", [com] if com else [])
        argv += ["--interruption-multiplier", repr(im), "--availability-multiplier", repr(am)]
        out.append(Scenario(i, market, mopts, demand, pol, com, im, am, (*argv, *shared)))
    return Grid(path, tuple(out))


def _pairs(option: str, values: Sequence[str]) -> list[str]:
    return [a for v in values for a in (option, v)]
