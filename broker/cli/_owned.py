"""What is owned, from every source the what-if has: the bill, the account, ``--owned``.

Owns: ``merge_owned`` (the commitments a bill names, those an account reader
returns and those ``--owned`` lists, as one tuple of ``OwnedCommitment``, one
per commitment: ids compared by their last part, so the bill's ARN and the
account's id are one commitment) with ``OwnedSource`` (where each one's scope
and expiry came from, for the output), and ``account_owned`` (``--account``:
the account readers, ``markets.aws.commitments`` / ``markets.gcp.commitments``).

Precedence: ``--owned`` is the user's word and wins whole; else the bill's
scope, rate and usage, with the term and expiry from the bill where it says,
else from the account, else unknown: then assumed to run ``UNKNOWN_END_DAYS``
past the bill's last hour, and said so.

Must not: read bills (``markets.usage``), plan or price.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from markets.commitments import OwnedCommitment
from markets.errors import InputError
from markets.usage.commitments import commitment_key, to_owned
from markets.usage.model import BillCommitment

__all__ = ["UNKNOWN_END_DAYS", "OwnedSource", "account_owned", "merge_owned"]

# A commitment whose expiry neither the bill nor the account states is taken
# to outlast the what-if by a 1-year term (the shortest there is).
UNKNOWN_END_DAYS = 365


@dataclass(frozen=True)
class OwnedSource:
    """Where one owned commitment came from: ``scope_from`` and
    ``expiry_from`` are ``bill``, ``account``, ``--owned`` or (expiry only)
    ``unknown``; ``bill`` is what the bill said of it (``None``: not in the
    bill); ``planned``: the planner takes it as sunk (a kind it models)."""

    id: str
    scope_from: str
    expiry_from: str
    bill: BillCommitment | None
    planned: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "scope_from": self.scope_from,
            "expiry_from": self.expiry_from,
            "planned": self.planned,
            "bill": None if self.bill is None else self.bill.to_dict(),
        }


def merge_owned(
    bill: Sequence[BillCommitment],
    account: Sequence[OwnedCommitment],
    given: Sequence[OwnedCommitment],
    bill_end: datetime | None,
) -> tuple[tuple[OwnedCommitment, ...], tuple[OwnedSource, ...]]:
    """One owned commitment per id, ``given`` over the bill over ``account``
    (see the module docstring), and where each came from."""
    out: dict[str, OwnedCommitment] = {}
    sources: dict[str, OwnedSource] = {}
    from_account = {commitment_key(c.id): c for c in account}
    billed = {commitment_key(c.id): c for c in bill}
    unknown_end = (bill_end or datetime.now().astimezone()) + timedelta(days=UNKNOWN_END_DAYS)
    for key, b in billed.items():
        acc = from_account.get(key)
        if b.end is not None:
            expiry = "bill"
            filled = b
        elif acc is not None:
            expiry = "account"
            filled = replace(
                b, start=b.start or acc.start, end=acc.end, payment=b.payment or acc.payment.value
            )
        else:
            expiry, filled = "unknown", b
        owned = to_owned(filled, unknown_end)
        if owned is None and acc is not None:
            owned, scope = acc, "account"
        else:
            scope = "bill"
        if owned is not None:
            out[key] = owned
        sources[key] = OwnedSource(b.id, scope, expiry, b, owned is not None)
    for key, acc in from_account.items():
        if key not in billed:
            out[key] = acc
            sources[key] = OwnedSource(acc.id, "account", "account", None, True)
    for c in given:
        key = commitment_key(c.id)
        out[key] = c
        prior = sources.get(key)
        sources[key] = OwnedSource(
            c.id, "--owned", "--owned", None if prior is None else prior.bill, True
        )
    return tuple(out.values()), tuple(sources.values())


ACCOUNTS = ("aws", "gcp:PROJECT")


def account_owned(spec: str, regions: Sequence[str]) -> list[OwnedCommitment]:
    """``--account``: ``aws`` (reserved instances in ``regions`` and Savings
    Plans; credentials from the default chain) or ``gcp:PROJECT`` (the
    project's committed-use discounts; Application Default Credentials)."""
    if spec == "aws":
        from markets.aws.commitments import AwsCommitments
        from markets.aws.sdk import commitment_clients

        ec2, sp = commitment_clients(regions)
        return AwsCommitments(ec2, sp).owned_with_rates()
    if spec.startswith("gcp:") and len(spec) > 4:
        from markets.gcp.commitments import GcpCommitments
        from markets.gcp.sdk import build_compute_clients

        client = build_compute_clients().region_commitments
        assert client is not None
        return GcpCommitments(client, spec[4:]).owned()
    raise InputError("--account", None, "aws or gcp:PROJECT", got=spec)
