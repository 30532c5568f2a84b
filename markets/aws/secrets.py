"""Secret references resolved from AWS: SSM parameters and Secrets Manager.

Owns: ``AwsSecrets`` (a ``markets.secretref.SecretResolver``: ``ssm`` through
``ssm:GetParameter`` with decryption, ``secretsmanager`` through
``secretsmanager:GetSecretValue``, ``env`` through ``EnvSecrets``), the two
narrow client protocols it calls, and ``AWS_SECRET_API_CALLS`` (the IAM
actions a deployment grants on the parameters and secrets its config names;
they are not in ``markets.aws.sdk.AWS_API_CALLS``: a daemon without secret
references makes neither call).

Each call is bounded: a short connect/read timeout and one botocore retry, so
a hook's budget (30 s on GCP, 120 s on AWS) is not spent waiting for a
secret. A failure becomes ``SecretUnavailableError`` naming the reference and
the AWS error code, never the value or AWS's message.

Must not: cache values (a rotated secret takes effect at the next use), log,
or resolve anything at construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, cast

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from markets.errors import InputError
from markets.secretref import EnvSecrets, SecretRef, SecretResolver, SecretUnavailableError

__all__ = ["AWS_SECRET_API_CALLS", "AwsSecrets", "SecretsManagerApi", "SsmApi"]

AWS_SECRET_API_CALLS: frozenset[str] = frozenset(
    {"ssm:GetParameter", "secretsmanager:GetSecretValue", "kms:Decrypt"}
)

# A secret is read inside a notice window: seconds, not botocore's 60 s defaults.
_CONFIG = Config(connect_timeout=3, read_timeout=5, retries={"mode": "standard", "max_attempts": 1})


class SsmApi(Protocol):
    def get_parameter(self, *, Name: str, WithDecryption: bool) -> Mapping[str, object]: ...


class SecretsManagerApi(Protocol):
    def get_secret_value(self, *, SecretId: str) -> Mapping[str, object]: ...


class AwsSecrets:
    """Resolves ``ssm`` and ``secretsmanager`` references (and ``env`` ones)."""

    def __init__(
        self,
        ssm: SsmApi,
        secretsmanager: SecretsManagerApi,
        *,
        env: SecretResolver | None = None,
    ) -> None:
        self._ssm = ssm
        self._sm = secretsmanager
        self._env = env or EnvSecrets()

    @classmethod
    def from_env(cls, *, region: str | None = None, endpoint_url: str | None = None) -> AwsSecrets:
        """Clients from the default credential chain (the task role on ECS);
        ``endpoint_url`` points both at one endpoint (a local moto server)."""
        session = boto3.Session()
        if (region or session.region_name) is None:
            raise InputError(
                "checkpoint_hooks",
                None,
                "an AWS region (AWS_REGION or AWS_DEFAULT_REGION) to read ssm and "
                "secretsmanager references in",
            )
        # No boto3-stubs for these two services: the protocols name what is called.
        ssm = cast(
            SsmApi,
            session.client("ssm", region_name=region, config=_CONFIG, endpoint_url=endpoint_url),
        )
        sm = cast(
            SecretsManagerApi,
            session.client(
                "secretsmanager", region_name=region, config=_CONFIG, endpoint_url=endpoint_url
            ),
        )
        return cls(ssm, sm)

    def resolve(self, ref: SecretRef) -> str:
        if ref.ssm is not None:
            reply = self._call(
                ref, lambda: self._ssm.get_parameter(Name=ref.name, WithDecryption=True)
            )
            param = reply.get("Parameter")
            value = param.get("Value") if isinstance(param, Mapping) else None
        elif ref.secretsmanager is not None:
            reply = self._call(ref, lambda: self._sm.get_secret_value(SecretId=ref.name))
            value = reply.get("SecretString")
            if value is None and "SecretBinary" in reply:
                raise SecretUnavailableError(
                    f"{ref.describe()} (a binary secret; a SecretString is needed)"
                )
        else:
            return self._env.resolve(ref)
        if not isinstance(value, str):
            raise SecretUnavailableError(f"{ref.describe()} (the reply holds no value)")
        return value

    @staticmethod
    def _call(ref: SecretRef, fn: _Call) -> Mapping[str, object]:
        try:
            return fn()
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "ClientError")
            raise SecretUnavailableError(f"{ref.describe()} ({code})") from e
        except BotoCoreError as e:
            # The class names the fault (EndpointConnectionError, NoCredentialsError, ...).
            raise SecretUnavailableError(f"{ref.describe()} ({type(e).__name__})") from e


class _Call(Protocol):
    def __call__(self) -> Mapping[str, object]: ...
