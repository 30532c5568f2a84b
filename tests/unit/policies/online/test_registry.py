"""The online rules by name: every rule once, in the benchmarks' order,
fresh on each lookup, hyphenated spellings accepted, typos named."""

from __future__ import annotations

import pytest

from markets.errors import InputError
from policies.online.registry import (
    DEADLINE_POLICIES,
    FLEET_POLICIES,
    deadline_policy,
    fleet_policy,
)


def test_each_rule_is_registered_under_its_own_name_in_order() -> None:
    # the published baselines; the product's deadline entry is the bench's
    # (broker.bench.rules), as policies cannot import the broker
    assert list(DEADLINE_POLICIES) == ["on_demand", "greedy", "uniform_progress"]
    assert list(FLEET_POLICIES) == [
        "on_demand",
        "static_mix",
        "even_spread",
        "spothedge",
        "spotfolio",
    ]
    assert all(deadline_policy(n).name == n for n in DEADLINE_POLICIES)
    assert all(fleet_policy(n).name == n for n in FLEET_POLICIES)


def test_a_lookup_gives_a_fresh_rule_and_accepts_the_hyphenated_spelling() -> None:
    assert deadline_policy("greedy") is not deadline_policy("greedy")
    assert deadline_policy("uniform-progress").name == "uniform_progress"
    assert FLEET_POLICIES.canonical("Static-Mix") == "static_mix"


def test_an_unknown_fleet_rule_names_the_option_and_the_rules() -> None:
    with pytest.raises(InputError) as info:
        fleet_policy("skyserve")
    assert str(info.value).startswith("--policy: expected one of even_spread, on_demand, ")
