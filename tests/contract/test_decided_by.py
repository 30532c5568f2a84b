"""Every ``spotfolio`` entry of the bench names the daemon's own decision code.

Each bench setting's ``decided_by`` is ``module:qualname`` (``+`` joins
several names of one module). These tests resolve each name and check that
the daemon really runs it: the planning loop's functions are what the plan
job calls at a re-plan (spied on a real ``PlanJob``).
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from broker.bench import portfolio
from broker.daemon import plan as plan_module
from broker.daemon.plan import PlanState, Progress
from broker.whatif import replay
from tests.fakes.lifecycle import QuietLifecycle
from tests.fakes.tiny_market import T0, TinyMarket
from tests.unit.broker.daemon.test_jobs import _plan_job


def resolve(decided_by: str) -> list[object]:
    """The objects ``module:a+b`` names (``AttributeError`` if one is missing)."""
    module, _, names = decided_by.partition(":")
    mod = importlib.import_module(module)
    out: list[object] = []
    for name in names.split("+"):
        obj: object = mod
        for part in name.split("."):
            obj = getattr(obj, part)
        out.append(obj)
    return out


def test_every_portfolio_entry_names_code_that_exists() -> None:
    for name, who in portfolio.DECIDED_BY.items():
        assert resolve(who), name


def test_resolve_fails_on_a_name_that_is_not_there() -> None:
    with pytest.raises(AttributeError):
        resolve("broker.planning.rolling:no_such_function")


def test_the_portfolio_spotfolio_entry_is_what_the_daemon_calls_at_a_re_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert portfolio.DECIDED_BY["spotfolio"] == replay.DECIDED_BY
    named = resolve(replay.DECIDED_BY)
    called: list[str] = []
    for fn in named:
        name = getattr(fn, "__name__", "")
        assert getattr(plan_module, name) is fn  # the plan job imports this very function

        def spy(*args: Any, _fn: Any = fn, _name: str = name, **kw: Any) -> Any:
            called.append(_name)
            return _fn(*args, **kw)

        monkeypatch.setattr(plan_module, name, spy)
    job, _book = _plan_job(TinyMarket(), QuietLifecycle())
    snap = job.refresh_market(None, force=True)
    assert job.propose(snap, PlanState(), Progress(), {}, T0) is not None
    assert called == [getattr(f, "__name__", "") for f in named]
