"""The daemon's production wiring: the pieces the CLI and the simulated
account compose the same way.

Owns: ``default_lifecycle`` (the project's ``LifecycleManager``, configured
from the daemon's config) and ``LifecycleFactory`` (its signature, for a run
that brings its own). This is the one place the daemon names the concrete
lifecycle manager: the daemon and its jobs are typed against
``broker.daemon.lifecycle.Lifecycle``, and the annotated assignment in
``default_lifecycle`` is what makes mypy check that the manager satisfies it.

Must not: run anything (no clock read, no I/O beyond validating settings).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError

from broker.daemon.config import DaemonConfig
from broker.daemon.lifecycle import Lifecycle
from broker.lifecycle import LifecycleConfig, LifecycleManager
from markets.clock import Clock
from markets.validation import input_error_from
from policies.workloads.spec import WorkloadSet

__all__ = ["LifecycleFactory", "default_lifecycle"]

LifecycleFactory = Callable[[WorkloadSet, Clock, DaemonConfig], Lifecycle]


def default_lifecycle(workloads: WorkloadSet, clock: Clock, config: DaemonConfig) -> Lifecycle:
    """The project's lifecycle manager, configured from the daemon's config:
    its ``lifecycle:`` settings, plus what the daemon knows better, unless
    set there: the clouds it launches in (``launch_providers``), the plan
    epoch (``horizon_start``; else the daemon passes its first plan's start)
    and the stale-market hazard multiplier."""
    # The config's free-form ``lifecycle:`` mapping, validated here.
    settings: dict[str, object] = {
        "providers": config.launch_providers,
        "horizon_start": config.horizon_start,
        "stale_hazard_multiplier": config.stale_hazard_multiplier,
        **config.lifecycle,
    }
    try:
        cfg = LifecycleConfig.model_validate(settings)
    except ValidationError as e:
        raise input_error_from("config", e, prefix="lifecycle") from e
    manager: Lifecycle = LifecycleManager(workloads, clock, cfg)  # mypy: it satisfies the protocol
    return manager
