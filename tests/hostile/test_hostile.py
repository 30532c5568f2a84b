"""The hostile-input harness: shipped examples
mutated into >= 1,000 inputs, plus hypothesis-generated ones.

Every case ends in exit 0, or exit 2 with one stderr line naming the file
and the field or option; never a traceback, a hang (``harness.TIMEOUT_S``)
or a silent accept of a value outside its documented range
(``tests.hostile.harness.verdict``). The default run takes a fixed sample
(every ``SAMPLE_EVERY``-th case and a few hypothesis examples); the whole
set is marked ``slow`` (``pytest -m slow tests/hostile``);
``python -m tests.hostile.report`` prints the tally over all of it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.daemon.config import load_daemon_config
from policies.workloads.spec import load_workloads
from tests.hostile.cases import (
    DAEMON_BASE,
    WORKLOADS_YAML,
    all_cases,
    leaves,
    must_reject_value,
    operator_cases,
    set_path,
)
from tests.hostile.harness import Case, run_case, verdict

CASES = all_cases()
SAMPLE_EVERY = 20
SAMPLE = CASES[::SAMPLE_EVERY]
FAST_EXAMPLES = 6  # per hypothesis test in the default run
FULL_EXAMPLES = 60  # per hypothesis test in the slow run


def _check(case: Case, tmp_path: Path) -> None:
    out = run_case(case, tmp_path)
    problem = verdict(case, out, tmp_path)
    assert problem is None, f"{case.id}: {problem}"


def test_the_harness_has_at_least_a_thousand_cases() -> None:
    hypothesis_cases = 5 * FULL_EXAMPLES
    assert len(CASES) + hypothesis_cases >= 1000, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES)  # ids name one case each


@pytest.mark.parametrize("case", SAMPLE, ids=[c.id for c in SAMPLE])
def test_hostile_sample(case: Case, tmp_path: Path) -> None:
    _check(case, tmp_path)


OPERATOR = operator_cases()


@pytest.mark.parametrize("case", OPERATOR, ids=[c.id for c in OPERATOR])
def test_operator_inputs(case: Case, tmp_path: Path) -> None:
    """Every one, in the default run: names, paths, keys, times and hooks."""
    _check(case, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_full(case: Case, tmp_path: Path) -> None:
    _check(case, tmp_path)


# -- hypothesis: random values at random places ---------------------------------

_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
)
_WORKLOADS = yaml.safe_load(WORKLOADS_YAML.read_text(encoding="utf-8"))
_WORKLOAD_LEAVES = list(leaves(_WORKLOADS))
_DAEMON_LEAVES = list(leaves(DAEMON_BASE))


def _field(path: tuple[int | str, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _file_case(
    kind: str, base: object, leaf: tuple[int | str, ...], value: object, load: object
) -> Case:
    reject = must_reject_value(value)
    names = (_field(leaf),) if reject else ()

    def make(tmp: Path) -> object:
        target = tmp / f"{kind}.yaml"
        target.write_text(yaml.safe_dump(set_path(base, leaf, value)), encoding="utf-8")
        return lambda: load(target)  # type: ignore[operator]

    return Case(
        f"{kind}:{_field(leaf)}={value!r}",
        make,  # type: ignore[arg-type]
        names,
        reject,
        file_names=lambda tmp: (str(tmp / f"{kind}.yaml"),),
    )


def _hypothesis(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def _workloads_value(tmp_path: Path, leaf: tuple[int | str, ...], value: object) -> None:
    _check(_file_case("workloads", _WORKLOADS, leaf, value, load_workloads), tmp_path)


def _daemon_value(tmp_path: Path, leaf: tuple[int | str, ...], value: object) -> None:
    _check(_file_case("daemon", DAEMON_BASE, leaf, value, load_daemon_config), tmp_path)


def _damaged(tmp_path: Path, cut: int, junk: str) -> None:
    """The workloads file cut short at ``cut`` with ``junk`` appended."""
    text = WORKLOADS_YAML.read_text(encoding="utf-8")
    damaged = text[: cut % (len(text) + 1)] + junk

    def make(tmp: Path) -> object:
        target = tmp / "damaged.yaml"
        target.write_text(damaged, encoding="utf-8")
        return lambda: load_workloads(target)

    case = Case(
        "damaged",
        make,  # type: ignore[arg-type]
        (),
        False,
        file_names=lambda tmp: (str(tmp / "damaged.yaml"),),
    )
    _check(case, tmp_path)


def _cost_option(option: str, text: str) -> None:
    argv = [
        "cost",
        "effective",
        "--units",
        "8",
        "--hours",
        "100",
        "--on-demand",
        "3",
        "--spot",
        "1",
        option,
        text,
    ]
    try:
        x = float(text)
        reject = not math.isfinite(x)
    except ValueError:
        reject = True
    case = Case(f"cli:{option}={text!r}", lambda _t: argv, (option,), reject, allow_explain=True)
    _check(case, Path("."))


_COST_OPTIONS = st.sampled_from(
    ["--units", "--hours", "--on-demand", "--spot", "--interruptions", "--restart-hours"]
)
_OPTION_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.text(alphabet="0123456789.eE+-naifINF ", max_size=10),
)


def _parts(examples: int, marks: tuple[pytest.MarkDecorator, ...]) -> list[object]:
    return [pytest.param(examples, marks=marks, id=f"{examples}-examples")]


_RUNS = [
    pytest.param(FAST_EXAMPLES, id="sample"),
    pytest.param(FULL_EXAMPLES, marks=pytest.mark.slow, id="full"),
]


@pytest.mark.parametrize("examples", _RUNS)
def test_workloads_random_values(examples: int, tmp_path: Path) -> None:
    @_hypothesis(examples)
    @given(st.sampled_from(_WORKLOAD_LEAVES), _VALUES)
    def run(leaf: tuple[int | str, ...], value: object) -> None:
        _workloads_value(tmp_path, leaf, value)

    run()


@pytest.mark.parametrize("examples", _RUNS)
def test_daemon_config_random_values(examples: int, tmp_path: Path) -> None:
    @_hypothesis(examples)
    @given(st.sampled_from(_DAEMON_LEAVES), _VALUES)
    def run(leaf: tuple[int | str, ...], value: object) -> None:
        _daemon_value(tmp_path, leaf, value)

    run()


@pytest.mark.parametrize("examples", _RUNS)
def test_workloads_file_cut_and_garbled(examples: int, tmp_path: Path) -> None:
    @_hypothesis(examples)
    @given(st.integers(min_value=0, max_value=10**6), st.text(max_size=40))
    def run(cut: int, junk: str) -> None:
        _damaged(tmp_path, cut, junk)

    run()


@pytest.mark.parametrize("examples", _RUNS)
def test_cost_options_random_text(examples: int) -> None:
    @_hypothesis(examples)
    @given(_COST_OPTIONS, _OPTION_TEXT)
    def run(option: str, text: str) -> None:
        _cost_option(option, text)

    run()


@pytest.mark.parametrize("examples", _RUNS)
def test_deep_and_wide_yaml(examples: int, tmp_path: Path) -> None:
    """Nesting and aliases: exit 2 fast, never a RecursionError or a blow-up."""

    @_hypothesis(examples)
    @given(st.integers(min_value=65, max_value=6_000), st.sampled_from(["[", "{a: "]))
    def run(depth: int, opener: str) -> None:
        closer = "]" if opener == "[" else "}"
        text = "workloads: " + opener * depth + "1" + closer * depth + "\n"

        def make(tmp: Path) -> object:
            target = tmp / "deep.yaml"
            target.write_text(text, encoding="utf-8")
            return lambda: load_workloads(target)

        case = Case(
            "deep",
            make,  # type: ignore[arg-type]
            ("nesting",),
            True,
            file_names=lambda tmp: (str(tmp / "deep.yaml"),),
        )
        _check(case, tmp_path)

    run()
