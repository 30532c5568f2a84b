"""The one registry: names, aliases, a default, lazy entries, and the error a
typo gets (the option as the user wrote it, and the valid names)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from markets.errors import InputError
from markets.registry import MARKETS, PROVIDERS, Registry, open_market


def _registry() -> Registry[Callable[[], str]]:
    reg: Registry[Callable[[], str]] = Registry("widget", "--widget")
    reg.add("zeta", lambda: "z", aliases=("last",))
    reg.add("alpha", lambda: "a", default=True)
    reg.add_lazy("json-dumps", "json:dumps")
    return reg


def test_names_keep_registration_order_and_resolve_aliases_case_and_the_default() -> None:
    reg = _registry()
    assert list(reg) == reg.names() == ["zeta", "alpha", "json-dumps"]
    assert reg.get("LAST")() == "z" and reg.canonical("Last") == "zeta"
    assert reg.get()() == "a" and reg.canonical(None) == "alpha"
    assert "last" in reg and "alpha" in reg and "beta" not in reg and len(reg) == 3


def test_a_typo_names_the_option_and_lists_the_valid_names_sorted() -> None:
    with pytest.raises(InputError) as info:
        _registry().get("alpah")
    assert str(info.value) == "--widget: expected one of alpha, json-dumps, zeta, got 'alpah'"
    with pytest.raises(InputError, match=r"^--source: "):
        _registry().get("nope", option="--source")


def test_a_lazy_entry_is_imported_when_first_asked_for() -> None:
    import json

    reg = _registry()
    assert reg.target("json-dumps") == "json:dumps" and reg.target("zeta") is None
    assert reg.get("json-dumps") is json.dumps


def test_a_name_an_alias_or_a_default_registered_twice_is_a_bug() -> None:
    reg = _registry()
    with pytest.raises(ValueError, match="twice"):
        reg.add("ALPHA", lambda: "again")
    with pytest.raises(ValueError, match="twice"):
        reg.add("beta", lambda: "b", aliases=("last",))
    with pytest.raises(ValueError, match="default"):
        reg.add("gamma", lambda: "g", default=True)
    with pytest.raises(ValueError, match="module:attribute"):
        reg.add_lazy("delta", "no-colon")


def test_markets_and_providers_are_registered_with_their_defaults() -> None:
    assert (
        MARKETS.names() == ["default", "replay", "aws", "gcp", "store"]
        and MARKETS.default == "default"
    )
    assert set(PROVIDERS) == {"aws", "gcp", "sim"} and PROVIDERS.default == "sim"
    with pytest.raises(InputError, match=r"^--market: expected one of aws, default, gcp, replay"):
        open_market("defualt")


def test_naming_an_adapter_imports_no_sdk() -> None:
    code = (
        "import sys\n"
        "from markets.registry import MARKETS, PROVIDERS\n"
        "assert 'aws' in MARKETS and PROVIDERS.canonical('gcp') == 'gcp'\n"
        "assert PROVIDERS.target('aws') == 'markets.aws.provider:open_aws_provider'\n"
        "loaded = sorted(m for m in ('boto3', 'botocore', 'google.cloud') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
