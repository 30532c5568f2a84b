"""The deadline bench's spotfolio: the lifecycle manager on hand-made traces,
the adapter translating only (the same schedule as the manager's rule asked
directly), and the bench naming the daemon's code as the decider."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from broker.bench.deadline import evaluate, summarize
from broker.bench.product.deadline import DECIDED_BY, ProductDeadline
from broker.bench.rules import deadline_policy
from broker.lifecycle.deadline import DeadlineTier, Prior
from broker.simulate.deadline import DeadlineSetting, DeadlineWindow, held_array, simulate_deadline
from policies.online.deadline import JobSpec, Mode, TickView

SETTING = DeadlineSetting(compute_hours=1.0, changeover_hours=0.2, price_ratio=3.0)


def _window(held: list[bool], past: list[bool] | None = None) -> DeadlineWindow:
    p = held_array(past or [])
    return DeadlineWindow("fixed", 0, 360, 0.5, held_array(held), past=p)


def _schedule(modes: tuple[int, ...]) -> str:
    return "".join(".SO"[m] for m in modes)


class _RuleAlone:
    """The lifecycle's tier rule asked directly each tick (no manager)."""

    name = "rule"

    def start(self, job: JobSpec) -> Any:
        p = job.prior
        prior = None
        if p is not None:
            prior = Prior(
                p.held_share,
                p.losses_per_held_hour,
                p.hours,
                p.up_spells_hours,
                p.down_spells_hours,
            )
        return DeadlineTier.start(prior)

    def decide(self, job: JobSpec, view: TickView, memory: Any) -> tuple[Mode, Any]:
        rule = DeadlineTier()
        return rule.decide(job, view, rule.observe(memory, view.spot_available, job.tick_hours))


def test_with_spot_throughout_the_job_runs_on_spot_only() -> None:
    out = simulate_deadline(SETTING, _window([True] * 20), ProductDeadline(), record=True)
    # 2 ticks of changeover, 10 of work, all on spot
    assert _schedule(out.schedule) == "S" * 12
    assert out.finished and out.cost_usd == pytest.approx(1.2)


def test_without_spot_the_manager_opens_on_demand_once_behind_and_keeps_it() -> None:
    policy = ProductDeadline()
    job_run: list[Any] = []

    class Keep(ProductDeadline):
        def start(self, job: JobSpec) -> Any:
            run = super().start(job)
            job_run.append(run)
            return run

    out = simulate_deadline(SETTING, _window([False] * 20), Keep(), record=True)
    # tick 0 is on Uniform Progress's line (nothing due yet): wait; from tick 1
    # behind it: on-demand, kept to the end (no restart through the outage)
    assert _schedule(out.schedule) == "." + "O" * 12
    assert out.finished and out.cost_usd == pytest.approx(12 * 0.1 * 3.0)
    # one stretch, committed for 1 h and extended once before it ran out
    assert job_run[0].decisions == ["open_on_demand", "extend"]
    assert policy.name == "spotfolio"


@pytest.mark.parametrize("seed", range(4))
def test_the_adapter_only_translates_the_managers_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    held: list[bool] = []
    state = True
    while len(held) < 20:
        held += [state] * int(rng.integers(1, 5))
        state = not state
    past = [bool(x) for x in rng.random(60) < 0.6]
    w = _window(held[:20], past)
    product = simulate_deadline(SETTING, w, ProductDeadline(), record=True)
    alone = simulate_deadline(SETTING, w, _RuleAlone(), record=True)
    product.check(SETTING)
    assert product.finished
    assert product.schedule == alone.schedule


def test_the_bench_names_the_daemons_code_for_spotfolio() -> None:
    assert deadline_policy("spotfolio").name == "spotfolio"
    results = evaluate(SETTING, [_window([True] * 6 + [False] * 6 + [True] * 8)])
    pol = summarize(results)["policies"]
    assert pol["spotfolio"]["decided_by"] == DECIDED_BY
    assert DECIDED_BY.startswith("broker.lifecycle.manager:")
    assert pol["uniform_progress"]["decided_by"] == "policies.online.deadline:UniformProgress"
    assert pol["omniscient"]["decided_by"] == "broker.simulate.omniscient:omniscient_deadline"
