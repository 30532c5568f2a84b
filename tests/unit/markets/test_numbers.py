"""markets.numbers.Bounded and the bounded YAML/JSON readers (markets.validation)."""

from __future__ import annotations

import math
import time
from typing import Annotated

import pytest
from pydantic import BaseModel, ValidationError

from markets.errors import InputError
from markets.numbers import Bounded, NumberError
from markets.validation import MAX_DEPTH, read_json, read_yaml

SECONDS = Bounded(gt=0, le=3600, unit="seconds")
COUNT = Bounded(ge=1, le=20, integer=True)


@pytest.mark.parametrize(
    "value",
    [True, False, math.nan, math.inf, -math.inf, 0, 3600.5, 1e308, "nan", "inf", "abc", None, [1]],
    ids=repr,
)
def test_refuses_booleans_non_finite_and_out_of_range(value: object) -> None:
    with pytest.raises(NumberError) as info:
        SECONDS.check(value)
    assert "> 0 and <= 3,600 (seconds)" in str(info.value)


@pytest.mark.parametrize(("value", "want"), [(1, 1.0), (3600, 3600.0), ("1e3", 1000.0), (0.5, 0.5)])
def test_accepts_numbers_and_numeric_text_in_range(value: object, want: float) -> None:
    assert SECONDS.check(value) == want


def test_a_count_is_a_whole_number() -> None:
    assert COUNT.check(4.0) == 4 and isinstance(COUNT.check("7"), int)
    for bad in (2.5, 0, 21, 10**30, True):
        with pytest.raises(NumberError):
            COUNT.check(bad)


def test_every_bound_needs_an_upper_edge() -> None:
    with pytest.raises(TypeError):
        Bounded(ge=0)


class _Model(BaseModel):
    interval_s: Annotated[float, SECONDS] = 5.0
    attempts: Annotated[int, Bounded(ge=1, le=20)] = 4


def test_as_a_pydantic_field_the_error_says_the_range() -> None:
    for field, value in (("interval_s", math.inf), ("interval_s", True), ("attempts", 1e9)):
        with pytest.raises(ValidationError) as info:
            _Model.model_validate({field: value})
        assert info.value.errors()[0]["loc"] == (field,)
    assert _Model.model_validate({"attempts": 3.0}).attempts == 3


def test_deep_yaml_is_one_error_not_a_recursion_error() -> None:
    t0 = time.perf_counter()
    with pytest.raises(InputError) as info:
        read_yaml("a: " + "[" * 5000 + "]" * 5000, "deep.yaml")
    assert f"nesting at most {MAX_DEPTH} deep" in str(info.value)
    assert str(info.value).startswith("deep.yaml: line 1")
    assert time.perf_counter() - t0 < 30  # generous: shared CI cores


def test_yaml_aliases_that_expand_to_millions_of_values_are_refused() -> None:
    lines = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for prev, name in zip("abcdef", "bcdefg", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    with pytest.raises(InputError, match="once aliases are expanded"):
        read_yaml("\n".join(lines), "laughs.yaml")


def test_yaml_and_json_integers_of_thousands_of_digits_are_refused() -> None:
    with pytest.raises(InputError, match="at most 40 digits"):
        read_yaml("n: " + "9" * 5000, "big.yaml")
    with pytest.raises(InputError, match="at most 40 digits"):
        read_json('{"n": ' + "9" * 5000 + "}", "big.json")


def test_json_depth_and_non_finite_constants_are_refused() -> None:
    with pytest.raises(InputError, match="nesting"):
        read_json("[" * 60_000 + "]" * 60_000, "deep.json")
    with pytest.raises(InputError, match="finite number, not NaN"):
        read_json('{"gap_seconds": NaN}', "nan.json")
    with pytest.raises(InputError, match="line 1, column"):
        read_json("{", "cut.json")
    assert read_json('{"a": [1, 2.5]}', "ok.json") == {"a": [1, 2.5]}
