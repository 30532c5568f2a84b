"""The narrow interfaces the rest of Spotfolio depends on.

Owns: ``PriceSource`` (anything that answers "what did the market look like at
``at``?"), ``HistorySource`` (sources that also have an hourly time axis) and
``Provider`` (a cloud account we act in: launch, terminate, list, notices)
and ``MetricSource`` (a monitoring system asked for a metric's recent values:
``markets.signals``).
Adapters (default market, replay, AWS, GCP) implement these; ``broker`` names
only these protocols, never a concrete adapter, outside its composition roots.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    # Named in annotations only: checking an object against a protocol
    # (isinstance, as a CLI does at start-up) then loads neither pandas nor
    # pydantic.
    import pandas as pd

    from markets.cloud_fleet import ActionResult, Instance, LaunchRequest, Notice, TerminateRequest
    from markets.model import InstanceType, MarketSnapshot, Pool

__all__ = ["HistorySource", "MetricSource", "PriceSource", "Provider", "RevocationSource"]


@runtime_checkable
class PriceSource(Protocol):
    """A market that can be asked for a snapshot."""

    name: str

    def pools(self) -> Sequence[Pool]:
        """Every pool this source knows."""
        ...

    def instance_types(self) -> Sequence[InstanceType]:
        """The instance types of those pools."""
        ...

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        """Prices, placement, hazard and availability in force at ``at``
        (as-of semantics; ``None`` = latest known)."""
        ...


@runtime_checkable
class HistorySource(PriceSource, Protocol):
    """A market with an hourly time axis (replay, default market)."""

    def span(self) -> tuple[datetime, datetime]:
        """First and last time with data."""
        ...

    def hourly(self, start: datetime, hours: int) -> pd.DataFrame:
        """One row per (hour, pool): columns ``hour`` (UTC), ``pool_key``,
        ``spot_usd_per_hour``, ``on_demand_usd_per_hour``, ``spot_available``
        (share of the hour spot could be held, 0-1) and ``revocations``
        (count in the hour). Vectorised: no Python loop per row."""
        ...


@runtime_checkable
class RevocationSource(HistorySource, Protocol):
    """A history that also knows when each revocation landed (the default
    and replay markets): what a simulated cloud replays exactly."""

    def revocation_events(self, pool_key: str, start: datetime, end: datetime) -> pd.DatetimeIndex:
        """Revocation times in ``pool_key`` within ``[start, end)``."""
        ...


@runtime_checkable
class Provider(Protocol):
    """A cloud account Spotfolio acts in. Implementations: AWS (EC2 + SQS
    notices), GCP, and the simulated cloud. Every mutating call is idempotent
    on the request's key; ``terminate`` refuses instances without our
    ownership tag; errors are the project's tree (transient / capacity /
    quota / auth)."""

    name: str

    def list_fleet(self, owner: str) -> Sequence[Instance]:
        """Every non-terminated instance carrying ``OWNER_TAG == owner``."""
        ...

    def launch(self, request: LaunchRequest) -> ActionResult: ...

    def terminate(self, request: TerminateRequest) -> ActionResult: ...

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        """Notices received since the last poll (at-least-once: duplicates and
        reordering are possible; callers deduplicate on ``notice_id``)."""
        ...

    def ack_notice(self, notice: Notice) -> None:
        """Delete a notice from its queue once its handling is durable."""
        ...


@runtime_checkable
class MetricSource(Protocol):
    """A monitoring system asked for one metric's values over a window
    (Prometheus' range query, CloudWatch ``GetMetricData``). Implementations:
    ``markets.signals``. Values are validated (finite, >= 0); errors are the
    project's tree (transient: keep the last good value; input: the query)."""

    name: str

    def series(
        self, query: str, start: datetime, end: datetime, step_s: float
    ) -> Sequence[tuple[datetime, float]]:
        """``(time, value)`` samples in ``[start, end]`` every ``step_s``,
        oldest first (gaps where the metric had no value)."""
        ...
