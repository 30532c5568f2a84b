"""The one redaction rule (markets.redaction): URL passwords and values of
secret-named keys, in messages, log records and exceptions."""

from __future__ import annotations

import io
import logging

import pytest

from markets.redaction import MASK, RedactingFilter, redact, secret_named


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param(
            "got 'postgresql+psycopg://spot:hunter2@db:5432/x'",
            "got 'postgresql+psycopg://spot:***@db:5432/x'",
            id="url-password",
        ),
        pytest.param("redis://:hunter2@cache:6379", "redis://:***@cache:6379", id="url-no-user"),
        pytest.param("Authorization: Bearer abc.def", "Authorization: ***", id="bearer-header"),
        pytest.param("X-Api-Key: k-123", "X-Api-Key: ***", id="api-key-header"),
        pytest.param("Cookie: sid=1; x=2", "Cookie: ***; x=2", id="cookie"),
        pytest.param(
            "{'X-Token': 't0k', 'Accept': 'json'}",
            "{'X-Token': '***', 'Accept': 'json'}",
            id="python-repr",
        ),
        pytest.param('{"password": "p w", "n": 1}', '{"password": "***", "n": 1}', id="json"),
        pytest.param(
            "PGPASSWORD=pw AWS_SECRET_ACCESS_KEY=a/b+c AWS_SESSION_TOKEN=z",
            "PGPASSWORD=*** AWS_SECRET_ACCESS_KEY=*** AWS_SESSION_TOKEN=***",
            id="environment",
        ),
        pytest.param("https://h/x?api_key=123&y=1", "https://h/x?api_key=***&y=1", id="query"),
        pytest.param(
            'detail="client_secret=abc rest"',
            'detail="client_secret=*** rest"',
            id="inside-a-kv-field",
        ),
    ],
)
def test_secrets_are_masked_and_their_names_kept(text: str, want: str) -> None:
    assert redact(text) == want


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("pool_key=aws/us-east-1/g5.xlarge idempotency_key=abc123", id="ids"),
        pytest.param(
            "checkpoint_hooks.api.headers.X-Token: expected a string, got 5",
            id="a-field-path-in-an-error",
        ),
        pytest.param("http://host:8080/path@x", id="port-then-path"),
        pytest.param("a reference {secretsmanager: prod/drain}", id="a-reference-names-a-secret"),
        pytest.param("launch 2 x aws/us-east-1/g5.xlarge spot for chat-api", id="prose"),
    ],
)
def test_what_is_not_a_secret_is_left_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("X-Token", True),
        ("PGPASSWORD", True),
        ("x-api-key", True),
        ("Set-Cookie", True),
        ("GOOGLE_CREDENTIALS", True),
        ("pool_key", False),
        ("Content-Type", False),
    ],
)
def test_secret_named(name: str, secret: bool) -> None:
    assert secret_named(name) is secret


def test_a_log_record_with_a_secret_header_argument_and_exception_is_redacted() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("markets.tests.redaction")
    log.handlers[:], log.propagate = [handler], False
    try:
        log.warning("webhook headers %s", {"Authorization": "Bearer s3cret-1"})
        try:
            raise ValueError("connect to postgresql://u:s3cret-2@db/x failed")
        except ValueError:
            log.exception("store down token=s3cret-3")
    finally:
        log.handlers[:] = []
    text = out.getvalue()
    assert "s3cret" not in text
    assert "'Authorization': '***'" in text and "postgresql://u:***@db/x" in text
    assert f"token={MASK}" in text and "ValueError" in text  # the traceback is kept
