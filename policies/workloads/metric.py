"""A serving workload's live demand: the ``demand_metric`` block.

Owns: ``DemandMetric``, the validated settings of a demand read from a
monitoring system instead of a file or shape: where (``source``, ``url`` or
``region``), what (``query``, one series), what one replica serves
(``value_per_replica`` in the metric's unit, ``units_per_replica`` in
reference units), and how replicas follow it (``margin``,
``lookahead_minutes``, ``cooldown_minutes``, ``season_hours``,
``min_replicas`` / ``max_replicas``). The rule itself is
``broker.planning.autoscale``'s.

In a workloads file::

    - name: chat-api
      class: serving
      instance_types: [g5.12xlarge]
      restart_minutes: 3            # replica readiness
      demand_metric:
        source: prometheus
        url: http://prometheus:9090
        query: sum(rate(http_requests_total{job="chat"}[2m]))
        value_per_replica: 40       # requests/s one replica serves
        units_per_replica: 4        # GPUs of one replica

Must not: read a metric, or know a reader (``markets.signals``).
"""

from __future__ import annotations

import urllib.parse
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from markets.numbers import MAX_UNITS, Bounded
from markets.validation import FieldError, StrictModel

__all__ = ["DEFAULT_COOLDOWN_MINUTES", "DemandMetric"]

# Scale down only after the demand stayed lower this long (15 min;
# Kubernetes' HPA scale-down stabilization window is the same rule, 300 s by
# default, short for GPU replicas that take minutes to come back).
DEFAULT_COOLDOWN_MINUTES = 15.0
# How far ahead replicas are ordered beyond their readiness: "3 min
# readiness -> order >= 4 min ahead" (the fleet chapter).
LOOKAHEAD_BEYOND_READINESS_MINUTES = 1.0


class DemandMetric(StrictModel):
    """Where a serving workload's demand is read, and how replicas follow it."""

    source: Literal["prometheus", "cloudwatch"]
    # One series: PromQL, or a CloudWatch metric math / Metrics Insights expression.
    query: str = Field(min_length=1, max_length=4096)
    url: str | None = Field(default=None, max_length=2048, description="prometheus only")
    region: str | None = Field(default=None, max_length=64, description="cloudwatch only")
    value_per_replica: Annotated[float, Bounded(gt=0.0, le=1e15)]
    units_per_replica: Annotated[float, Bounded(gt=0.0, le=MAX_UNITS)] = 1.0
    min_replicas: Annotated[int, Bounded(ge=1, le=1_000_000, integer=True)] = 1
    max_replicas: Annotated[int, Bounded(ge=1, le=1_000_000, integer=True)] | None = None
    # Forecast x (1 + margin): the headroom for a forecast that falls short.
    margin: Annotated[float, Bounded(ge=0.0, le=10.0)] = 0.2
    # None: the workload's restart_minutes (readiness) + 1 min.
    lookahead_minutes: Annotated[float, Bounded(ge=0.0, le=1440.0, unit="minutes")] | None = None
    cooldown_minutes: Annotated[float, Bounded(ge=0.0, le=1440.0, unit="minutes")] = (
        DEFAULT_COOLDOWN_MINUTES
    )
    # The forecast also reads the metric one season ago (0: the current value only).
    season_hours: Annotated[float, Bounded(ge=0.0, le=24.0 * 7 * 5, unit="hours")] = 24.0
    step_seconds: Annotated[float, Bounded(ge=1.0, le=3600.0, unit="seconds")] = 60.0

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = urllib.parse.urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("an http(s) URL of a Prometheus server")
        if parts.username or parts.password:
            # A password in a workloads file would end up in plans and logs.
            raise ValueError("a URL without user:password@ (put the server behind a proxy)")
        return v

    @model_validator(mode="after")
    def _per_source(self) -> Self:
        if self.source == "prometheus":
            if self.url is None:
                raise FieldError("url", "the Prometheus server's URL for source: prometheus")
            if self.region is not None:
                raise FieldError("region", "no region for source: prometheus (cloudwatch only)")
        else:
            if self.region is None:
                raise FieldError("region", "the AWS region for source: cloudwatch")
            if self.url is not None:
                raise FieldError("url", "no url for source: cloudwatch (prometheus only)")
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise FieldError(
                "max_replicas",
                f"max_replicas >= min_replicas ({self.min_replicas})",
                self.max_replicas,
            )
        return self

    def lookahead_for(self, readiness_minutes: float) -> float:
        """Minutes ahead replicas are ordered: the stated lookahead, else
        readiness + 1 min."""
        if self.lookahead_minutes is not None:
            return self.lookahead_minutes
        return readiness_minutes + LOOKAHEAD_BEYOND_READINESS_MINUTES
