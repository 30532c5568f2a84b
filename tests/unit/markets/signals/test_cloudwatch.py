"""CloudWatchReader over a real botocore client with a Stubber: the request
it sends, its pages, and how it degrades."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from markets.errors import AuthError, ThrottledError
from markets.protocols import MetricSource
from markets.signals import BadReplyError
from markets.signals.cloudwatch import CloudWatchReader

T = datetime(2026, 3, 2, 9, tzinfo=UTC)
QUERY = 'SUM(SEARCH(\'{AWS/ApplicationELB,LoadBalancer} MetricName="RequestCount"\', "Sum"))'


@pytest.fixture
def stubbed() -> Iterator[tuple[CloudWatchReader, Stubber]]:
    client = botocore.session.get_session().create_client(
        "cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    with Stubber(client) as stub:
        yield CloudWatchReader(client), stub  # type: ignore[arg-type]
        stub.assert_no_pending_responses()


def _expected(
    start: datetime, end: datetime, period: int, token: str | None = None
) -> dict[str, Any]:
    params = {
        "MetricDataQueries": [
            {"Id": "demand", "Expression": QUERY, "Period": period, "ReturnData": True}
        ],
        "StartTime": start,
        "EndTime": end,
        "ScanBy": "TimestampAscending",
    }
    if token:
        params["NextToken"] = token
    return params


def _page(times: list[datetime], values: list[float], token: str | None = None) -> dict[str, Any]:
    page: dict[str, Any] = {
        "MetricDataResults": [
            {
                "Id": "demand",
                "Label": "demand",
                "Timestamps": times,
                "Values": values,
                "StatusCode": "Complete",
            }
        ]
    }
    if token:
        page["NextToken"] = token
    return page


def test_reads_every_page_oldest_first_with_the_period_rounded_up_to_a_minute(
    stubbed: tuple[CloudWatchReader, Stubber],
) -> None:
    reader, stub = stubbed
    assert isinstance(reader, MetricSource)
    start, end = T - timedelta(minutes=4), T
    ts = [start + timedelta(minutes=i) for i in range(5)]
    stub.add_response(
        "get_metric_data", _page(ts[:3], [1.0, 2.0, 3.0], "p2"), _expected(start, end, 60)
    )
    stub.add_response("get_metric_data", _page(ts[3:], [4.0, 5.0]), _expected(start, end, 60, "p2"))
    got = reader.series(QUERY, start, end, 30)
    assert got == [(t, float(i + 1)) for i, t in enumerate(ts)]


def test_a_negative_value_is_a_bad_reply(stubbed: tuple[CloudWatchReader, Stubber]) -> None:
    reader, stub = stubbed
    stub.add_response("get_metric_data", _page([T], [-1.0]), _expected(T, T, 120))
    with pytest.raises(BadReplyError, match="a value in"):
        reader.series(QUERY, T, T, 120)


def test_throttling_after_botocores_retries_is_a_throttled_error(
    stubbed: tuple[CloudWatchReader, Stubber],
) -> None:
    reader, stub = stubbed
    stub.add_client_error("get_metric_data", "Throttling", "Rate exceeded", 400)
    with pytest.raises(ThrottledError):
        reader.series(QUERY, T, T, 60)


def test_a_denied_call_is_an_auth_error(stubbed: tuple[CloudWatchReader, Stubber]) -> None:
    reader, stub = stubbed
    stub.add_client_error("get_metric_data", "AccessDenied", "not allowed", 403)
    with pytest.raises(AuthError):
        reader.series(QUERY, T, T, 60)
