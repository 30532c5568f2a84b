"""CloudWatch as a ``MetricSource``: ``GetMetricData`` of one expression.

Owns: ``CloudWatchReader`` (a metric math or Metrics Insights expression
over a window, every page of the reply read, its values checked) and
``CloudWatchApi``, the one SDK call it makes. SDK errors are translated by
``markets.aws.errors.aws_call`` (throttling and 5xx already retried by
botocore's retry configuration, ``markets.aws.sdk.client_config``).

A demand metric here is one ``Expression`` (``SUM(METRICS())``, ``SELECT
SUM(RequestCount) FROM SCHEMA("AWS/ApplicationELB", LoadBalancer)``...), so
the workload's ``demand_metric.query`` is a single string for either system.
The ``Period`` is the window's step rounded up to CloudWatch's grain (60 s
for standard resolution, any multiple of 60).

Reference: https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricData.html
(``MetricDataQueries``, ``ScanBy``, ``NextToken``; ``StatusCode`` of each
result is ``Complete`` or ``PartialData``).

Needs the ``aws`` extra: ``markets.signals`` does not import this module.

Must not: retry, cache, or decide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from markets.aws.errors import aws_call
from markets.aws.sdk import cloudwatch_client
from markets.clock import ensure_utc
from markets.signals.samples import BadReplyError, checked_value

__all__ = ["MAX_PAGES", "CloudWatchApi", "CloudWatchReader"]

MAX_PAGES = 20  # 100,800 data points per page: 20 pages is years of minutes
_QUERY_ID = "demand"
_GRAIN_S = 60  # standard-resolution metrics: periods are multiples of 60 s


class CloudWatchApi(Protocol):
    """The one CloudWatch call used (boto3's client has it)."""

    # boto3's reply is a TypedDict of nested shapes: Any is its type here.
    def get_metric_data(self, **kwargs: Any) -> Mapping[str, Any]: ...


class CloudWatchReader:
    """Range reads of one CloudWatch expression (module docstring)."""

    name = "cloudwatch"

    def __init__(self, client: CloudWatchApi) -> None:
        self._client = client

    @classmethod
    def from_settings(cls, region: str) -> CloudWatchReader:
        """A reader on a boto3 client for ``region`` (default credentials chain)."""
        client: CloudWatchApi = cloudwatch_client(region)
        return cls(client)

    def series(
        self, query: str, start: datetime, end: datetime, step_s: float
    ) -> Sequence[tuple[datetime, float]]:
        """Samples of ``query`` in ``[start, end]``, oldest first."""
        if not step_s > 0 or end < start:
            raise ValueError(f"a window with end >= start and step > 0 (step {step_s})")
        period = max(_GRAIN_S, _GRAIN_S * math.ceil(step_s / _GRAIN_S))
        args: dict[str, Any] = {
            "MetricDataQueries": [
                {"Id": _QUERY_ID, "Expression": query, "Period": period, "ReturnData": True}
            ],
            "StartTime": start,
            "EndTime": end,
            "ScanBy": "TimestampAscending",
        }
        where = "cloudwatch GetMetricData"
        out: list[tuple[datetime, float]] = []
        for _ in range(MAX_PAGES):
            with aws_call("cloudwatch:GetMetricData"):
                reply = self._client.get_metric_data(**args)
            for result in reply.get("MetricDataResults", []):
                if result.get("Id") != _QUERY_ID:
                    continue
                times, values = result.get("Timestamps", []), result.get("Values", [])
                if len(times) != len(values):
                    raise BadReplyError(f"{where}: as many timestamps as values")
                for t, v in zip(times, values, strict=True):
                    value = checked_value(v, source=where, query=query)
                    if not isinstance(t, datetime):
                        raise BadReplyError(f"{where}: timestamps")
                    if value is not None:
                        out.append((ensure_utc(t), value))
            token = reply.get("NextToken")
            if not token:
                return sorted(out)
            args["NextToken"] = token
        raise BadReplyError(f"{where}: a reply in at most {MAX_PAGES} pages")
