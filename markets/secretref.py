"""Secrets in configuration files by reference, resolved at use time.

Owns: ``SecretRef`` (where a secret lives: an environment variable, an SSM
parameter or a Secrets Manager secret; exactly one), ``Secret`` (what a
secret field accepts: a literal string or a reference), the
``SecretResolver`` protocol (a reference to its value), ``EnvSecrets`` (the
resolver of ``env`` references, with no cloud behind it) and
``SecretUnavailableError``.

In YAML a secret field takes a literal or a one-key mapping::

    headers:
      X-Token: {env: DRAIN_TOKEN}                  # the daemon's environment
      Authorization: {secretsmanager: prod/drain}  # SecretString of that secret
    signing_key: {ssm: /spotfolio/hook-key}        # SecureString, decrypted

A reference is resolved when the secret is used (a hook's call), never at
load: a rotated secret takes effect at the next call, and the value is held
only for that call. ``describe`` names a reference (``ssm:/spotfolio/hook-key``)
for messages; a resolved value is never logged, stored or put in a message.
The cloud resolvers (``markets.aws.secrets``) live with their SDK.

Must not: cache values, log them, or import an SDK.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Protocol, Self

from pydantic import BeforeValidator, Field, ValidationError, model_validator

from markets.errors import FatalError
from markets.validation import StrictModel

__all__ = [
    "EnvSecrets",
    "Secret",
    "SecretRef",
    "SecretResolver",
    "SecretUnavailableError",
    "resolve_secret",
]


class SecretUnavailableError(FatalError):
    """A referenced secret could not be read (unset variable, missing
    parameter, access denied). The message names the reference, never a value."""


class SecretRef(StrictModel):
    """Where a secret lives: exactly one of ``env``, ``ssm``, ``secretsmanager``."""

    env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)
    # A parameter name (``/a/b``, ``name``) or ARN: no whitespace.
    ssm: str | None = Field(default=None, pattern=r"^\S+$", max_length=2048)
    # A secret name or ARN.
    secretsmanager: str | None = Field(default=None, pattern=r"^\S+$", max_length=2048)

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if sum(v is not None for v in (self.env, self.ssm, self.secretsmanager)) != 1:
            raise ValueError("exactly one of 'env', 'ssm' or 'secretsmanager'")
        return self

    @property
    def kind(self) -> str:
        if self.env is not None:
            return "env"
        return "ssm" if self.ssm is not None else "secretsmanager"

    @property
    def name(self) -> str:
        name = self.env or self.ssm or self.secretsmanager
        assert name is not None  # _exactly_one
        return name

    def describe(self) -> str:
        return f"{self.kind}:{self.name}"


_FORMS = "{env: NAME}, {ssm: /parameter} or {secretsmanager: name}"


def _secret(value: object) -> str | SecretRef:
    """A literal or a reference, with one message for either mistake (a
    plain union would report its first branch: "expected a valid string")."""
    if isinstance(value, str | SecretRef):
        return value
    if isinstance(value, dict):
        try:
            return SecretRef.model_validate(value)
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            why = "unknown key" if first["type"] == "extra_forbidden" else str(first["msg"])
            why = why.removeprefix("Value error, ")
            raise ValueError(
                f"a reference {_FORMS} ({why}{f': {where}' if where else ''})"
            ) from None
    raise ValueError(f"a string, or a reference {_FORMS}")


# A secret field: the value itself (kept for local setups and tests) or a reference.
Secret = Annotated[str | SecretRef, BeforeValidator(_secret)]


class SecretResolver(Protocol):
    """Reads a referenced secret; raises ``SecretUnavailableError``."""

    def resolve(self, ref: SecretRef) -> str: ...


class EnvSecrets:
    """Resolves ``env`` references from an environment (default: the process's).

    Other kinds raise: they need a cloud resolver (``markets.aws.secrets``),
    which the daemon's wiring provides when its config names one.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ

    def resolve(self, ref: SecretRef) -> str:
        if ref.env is None:
            raise SecretUnavailableError(
                f"{ref.describe()} (no resolver for {ref.kind} references is configured)"
            )
        value = self._environ.get(ref.env)
        if value is None:
            raise SecretUnavailableError(f"{ref.describe()} (the variable is not set)")
        return value


def resolve_secret(value: Secret, resolver: SecretResolver) -> str:
    """A literal as is; a reference through ``resolver``."""
    return value if isinstance(value, str) else resolver.resolve(value)
