"""Every ``spotfolio`` entry of the bench names the daemon's own decision code.

Each bench entry's ``decided_by`` is ``module:qualname``, several joined by
`` + `` when more than one piece of code decides (the planning loop plans,
the lifecycle manager reacts to lost spot). These tests resolve each name
and check that the daemon really runs it: the planning loop's function is
what the plan job calls at a re-plan (spied on a real ``PlanJob``), the
lifecycle manager is the class the daemon's wiring builds.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from broker.bench import fleet as fleet_bench
from broker.bench import portfolio
from broker.bench import rules as bench_rules
from broker.daemon import plan_job as plan_module
from broker.daemon.config import DaemonConfig
from broker.daemon.plan_job import PlanState, Progress
from broker.daemon.wiring import default_lifecycle
from broker.whatif import reaction, replay
from markets.clock import SystemClock
from policies.workloads.spec import default_workloads
from tests.fakes.lifecycle import QuietLifecycle
from tests.fakes.tiny_market import T0, TinyMarket
from tests.unit.broker.daemon.test_jobs import _plan_job


def resolve(decided_by: str) -> list[object]:
    """The objects ``a:b + c:d`` names (``AttributeError`` if one is missing)."""
    out: list[object] = []
    for item in decided_by.split(" + "):
        module, sep, name = item.partition(":")
        assert sep and name, f"{item!r} is not module:qualname"
        obj: object = importlib.import_module(module)
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
    assert portfolio.DECIDED_BY["spotfolio"].split(" + ") == [
        replay.DECIDED_BY,
        reaction.DECIDED_BY,
    ]
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


def test_the_reaction_is_the_lifecycle_the_daemon_wires(tmp_path: Path) -> None:
    (cls,) = resolve(reaction.DECIDED_BY)
    assert isinstance(cls, type)
    config = DaemonConfig.model_validate(
        {"owner": "me", "store_url": f"sqlite:///{tmp_path / 's.db'}", "metrics_port": 0}
    )
    lc = default_lifecycle(default_workloads(), SystemClock(), config)
    assert type(lc) is cls


@pytest.mark.parametrize("setting", ["deadline", "fleet"])
def test_the_trace_benches_spotfolio_is_the_lifecycle_the_daemon_wires(
    setting: str, tmp_path: Path
) -> None:
    who = (
        bench_rules.decided_by("spotfolio")
        if setting == "deadline"
        else (fleet_bench.decided_by("spotfolio"))
    )
    (cls,) = resolve(who)
    config = DaemonConfig.model_validate(
        {"owner": "me", "store_url": f"sqlite:///{tmp_path / 's.db'}", "metrics_port": 0}
    )
    assert type(default_lifecycle(default_workloads(), SystemClock(), config)) is cls
    # and the baselines name their own published rules, not the daemon
    baseline = "uniform_progress" if setting == "deadline" else "spothedge"
    other = (
        bench_rules.decided_by(baseline)
        if setting == "deadline"
        else (fleet_bench.decided_by(baseline))
    )
    assert other.startswith("policies.online.") and resolve(other)
