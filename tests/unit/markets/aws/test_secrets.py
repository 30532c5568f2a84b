"""Secret references read from SSM and Secrets Manager (markets.aws.secrets),
with boto3 against moto's HTTP server; and a webhook whose header and
signing key come from them, end to end."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import boto3
import pytest

from broker.daemon.hooks import SIGNATURE_HEADER, CheckpointHook, run_checkpoint_hook
from markets.aws.secrets import AwsSecrets
from markets.errors import InputError
from markets.secretref import SecretRef, SecretUnavailableError

REGION = "us-east-1"


@pytest.fixture(autouse=True)
def _moto_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never reach real AWS from a test, whatever the environment holds."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def stored(moto_server: str) -> dict[str, str]:
    """A SecureString parameter and a secret of this test's own (moto's state
    is shared by the session)."""
    tag = uuid.uuid4().hex[:8]
    ssm = boto3.client("ssm", region_name=REGION, endpoint_url=moto_server)
    sm = boto3.client("secretsmanager", region_name=REGION, endpoint_url=moto_server)
    param, secret = f"/spotfolio/{tag}/hook-token", f"spotfolio/{tag}/signing-key"
    ssm.put_parameter(Name=param, Value=f"ssm-value-{tag}", Type="SecureString")
    sm.create_secret(Name=secret, SecretString=f"sm-value-{tag}")
    sm.create_secret(Name=f"{secret}-bin", SecretBinary=b"\x00\x01")
    return {"param": param, "secret": secret, "tag": tag}


def _secrets(moto_server: str) -> AwsSecrets:
    return AwsSecrets.from_env(region=REGION, endpoint_url=moto_server)


def test_reads_a_securestring_parameter_and_a_secret_string(
    moto_server: str, stored: dict[str, str]
) -> None:
    s = _secrets(moto_server)
    assert s.resolve(SecretRef(ssm=stored["param"])) == f"ssm-value-{stored['tag']}"
    assert s.resolve(SecretRef(secretsmanager=stored["secret"])) == f"sm-value-{stored['tag']}"


def test_env_references_still_come_from_the_environment(
    moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOTFOLIO_TEST_SECRET", "from-env")
    assert _secrets(moto_server).resolve(SecretRef(env="SPOTFOLIO_TEST_SECRET")) == "from-env"


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        pytest.param({"ssm": "/spotfolio/no/such"}, "ParameterNotFound", id="ssm-missing"),
        pytest.param({"secretsmanager": "no/such"}, "ResourceNotFoundException", id="sm-missing"),
    ],
)
def test_a_missing_secret_names_the_reference_and_the_code(
    moto_server: str, ref: dict[str, str], code: str
) -> None:
    with pytest.raises(SecretUnavailableError) as e:
        _secrets(moto_server).resolve(SecretRef.model_validate(ref))
    assert SecretRef.model_validate(ref).describe() in str(e.value) and code in str(e.value)


def test_a_binary_secret_is_refused(moto_server: str, stored: dict[str, str]) -> None:
    with pytest.raises(SecretUnavailableError, match="binary"):
        _secrets(moto_server).resolve(SecretRef(secretsmanager=stored["secret"] + "-bin"))


def test_an_unreachable_endpoint_is_a_named_failure_not_a_hang() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = AwsSecrets.from_env(region=REGION, endpoint_url=f"http://127.0.0.1:{port}")
    with pytest.raises(SecretUnavailableError, match=r"ssm:/x \(EndpointConnectionError\)"):
        s.resolve(SecretRef(ssm="/x"))


def test_no_region_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(InputError, match=r"checkpoint_hooks.*AWS_REGION"):
        AwsSecrets.from_env()


class _Sink(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        _Sink.seen.append((dict(self.headers.items()), raw))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def sink() -> Iterator[str]:
    _Sink.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join(5.0)


def test_a_webhook_with_its_token_in_ssm_and_its_key_in_secrets_manager(
    moto_server: str, stored: dict[str, str], sink: str
) -> None:
    hook = CheckpointHook.model_validate(
        {
            "url": f"{sink}/drain",
            "headers": {"Authorization": {"ssm": stored["param"]}},
            "signing_key": {"secretsmanager": stored["secret"]},
        }
    )
    r = run_checkpoint_hook(
        hook,
        notice_id="evt-1",
        workload="w",
        instance_id="i-1",
        deadline=datetime(2026, 3, 1, tzinfo=UTC),
        budget_s=10.0,
        secrets=_secrets(moto_server),
    )
    assert r.ok and r.http_status == 204, r.detail
    ((headers, raw),) = _Sink.seen
    tag = stored["tag"]
    assert headers["Authorization"] == f"ssm-value-{tag}"
    key = f"sm-value-{tag}".encode()
    assert headers[SIGNATURE_HEADER] == "sha256=" + hmac.new(key, raw, hashlib.sha256).hexdigest()
    # Neither value is in what the daemon keeps.
    assert tag not in json.dumps(r.as_record())


def test_the_daemon_loads_boto3_secrets_only_when_a_hook_names_an_aws_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from broker.daemon.config import DaemonConfig
    from broker.daemon.wiring import hook_secrets
    from markets.secretref import EnvSecrets

    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)

    def config(headers: dict[str, object]) -> DaemonConfig:
        hooks = {"api": {"url": "http://127.0.0.1:9/x", "headers": headers}}
        return DaemonConfig.model_validate({"owner": "me", "checkpoint_hooks": hooks})

    assert isinstance(hook_secrets(config({"X-Token": {"env": "T"}})), EnvSecrets)
    assert isinstance(hook_secrets(config({"X-Token": "literal"})), EnvSecrets)
    assert isinstance(hook_secrets(config({"X-Token": {"ssm": "/t"}})), AwsSecrets)
    # A config with references survives the CLI's dump-and-validate round trip.
    cfg = config({"X-Token": {"secretsmanager": "s/t"}})
    again = DaemonConfig.model_validate(cfg.model_dump())
    assert again.checkpoint_hooks == cfg.checkpoint_hooks
