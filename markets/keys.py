"""Identity: every key the project derives, parsed once into values.

Owns: ``PoolKey`` (provider, region, zone, instance type: the unit of a spot
market), ``CommitmentKey`` (provider, region, instance type: where a
commitment is bought and usable), the zone key the breakers count by, and the
idempotency-key digests (``idempotency_key`` and the named derivations built
on it). The string forms are the ones stored, printed and sent to clouds;
they are byte-for-byte what the project wrote before these values existed:

- pool key ``aws/us-east-1/us-east-1a/p3.2xlarge`` (``PoolKey.__str__``);
- commitment group ``aws/us-east-1/p3.2xlarge`` (``CommitmentKey.__str__``);
- zone key ``aws/us-east-1a`` (``PoolKey.zone_key``);
- idempotency key ``sf-`` + the first 40 hex digits of SHA-256 of a text
  (43 characters: fits AWS's 64-character ``ClientToken``). Each derivation
  below fixes its text; changing one would make a restarted daemon launch
  again what it already launched.

Parsing is structural (four non-empty parts for a pool, three for a group);
whether a provider or a zone exists is for ``markets.model.Pool`` and the
adapters to say. A malformed key is an ``InputError`` naming what was expected.

Must not: import another project module than ``markets.errors`` (``markets.model``
derives its keys here), do I/O, or know a cloud's naming rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from markets.errors import InputError

__all__ = [
    "IDEMPOTENCY_PREFIX",
    "CommitmentKey",
    "PoolKey",
    "alternate_pool_key",
    "idempotency_key",
    "launch_key",
    "merged_notice_key",
    "next_attempt_key",
    "notice_key",
    "terminate_key",
]

_SEP = "/"
IDEMPOTENCY_PREFIX = "sf-"
_DIGEST_HEX_CHARS = 40  # 3 + 40 = 43 characters; AWS ClientToken allows 64
# Separators inside a digested text: ASCII unit/record/group separators, which
# no id, key or name the project handles contains.
_UNIT = "\x1f"
_RECORD = "\x1e"
_GROUP = "\x1d"
# Pool keys are a bounded set (the pools of the markets in use), parsed on hot
# paths (every notice, every plan row): remember the parsed values.
_PARSED_KEYS_KEPT = 65536
_POOL_EXPECTED = "provider/region/zone/instance_type, e.g. aws/us-east-1/us-east-1a/p3.2xlarge"
_GROUP_EXPECTED = "provider/region/instance_type, e.g. aws/us-east-1/p3.2xlarge"


def _parts(text: object, n: int, source: str, expected: str) -> list[str]:
    if not isinstance(text, str):
        raise InputError(source, None, expected, got=text)
    parts = text.split(_SEP)
    if len(parts) != n or not all(parts):
        raise InputError(source, None, expected, got=text)
    return parts


@dataclass(frozen=True, slots=True, order=True)
class CommitmentKey:
    """(provider, region, instance type): a commitment bought here serves any
    zone of the region. ``str()`` is the group key plans and configs carry."""

    provider: str
    region: str
    instance_type: str

    @classmethod
    def parse(cls, text: str) -> CommitmentKey:
        """``aws/us-east-1/p3.2xlarge`` -> ``CommitmentKey``; ``InputError``
        if it is not three non-empty parts."""
        provider, region, itype = _parts(text, 3, "commitment group", _GROUP_EXPECTED)
        return cls(provider, region, itype)

    def __str__(self) -> str:
        return f"{self.provider}{_SEP}{self.region}{_SEP}{self.instance_type}"


@dataclass(frozen=True, slots=True, order=True)
class PoolKey:
    """(provider, region, zone, instance type). ``str()`` is the pool key
    every table, store row and cloud tag carries."""

    provider: str
    region: str
    zone: str
    instance_type: str

    @classmethod
    def parse(cls, text: str) -> PoolKey:
        """``aws/us-east-1/us-east-1a/p3.2xlarge`` -> ``PoolKey``; ``InputError``
        if it is not four non-empty parts."""
        if not isinstance(text, str):  # checked before the cache, which hashes it
            raise InputError("pool key", None, _POOL_EXPECTED, got=text)
        return _parse_pool_key(text)

    def __str__(self) -> str:
        return f"{self.provider}{_SEP}{self.region}{_SEP}{self.zone}{_SEP}{self.instance_type}"

    @property
    def group(self) -> CommitmentKey:
        """The commitment group this pool belongs to."""
        return CommitmentKey(self.provider, self.region, self.instance_type)

    @property
    def zone_key(self) -> str:
        """``aws/us-east-1a``: a zone named apart from its instance types (the
        zone breakers and the zone shares count by it)."""
        return f"{self.provider}{_SEP}{self.zone}"


@lru_cache(maxsize=_PARSED_KEYS_KEPT)
def _parse_pool_key(text: str) -> PoolKey:
    provider, region, zone, itype = _parts(text, 4, "pool key", _POOL_EXPECTED)
    return PoolKey(provider, region, zone, itype)


# --- idempotency keys ----------------------------------------------------------


def idempotency_key(text: str) -> str:
    """``sf-`` + the first 40 hex digits of SHA-256(``text``): deterministic,
    43 characters. Every idempotency key of the project is one of these."""
    return IDEMPOTENCY_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_HEX_CHARS]


def _of_parts(*parts: object) -> str:
    return idempotency_key(_UNIT.join(str(p) for p in parts))


def launch_key(
    owner: str, generation: int, workload: str, pool_key: str, tier: str, slot: int
) -> str:
    """One launch intent of a plan: (owner, plan generation, workload, pool,
    tier, slot), ``slot`` the live instances the group already had."""
    return _of_parts("launch", owner, generation, workload, pool_key, tier, slot)


def terminate_key(owner: str, instance_ids: Iterable[str]) -> str:
    """One termination: the owner and the sorted instance ids."""
    return _of_parts("terminate", owner, *sorted(instance_ids))


def notice_key(notice_id: str, index: int) -> str:
    """The ``index``-th launch a notice's decision asks for."""
    return _of_parts("notice", notice_id, index)


def merged_notice_key(parts: Sequence[tuple[str, int]]) -> str:
    """One request carrying several decisions' launches ((notice id, launch
    index) each, in any order); a single part keeps its own ``notice_key``."""
    if len(parts) == 1:
        return notice_key(*parts[0])
    text = _RECORD.join(f"{nid}{_UNIT}{i}" for nid, i in sorted(parts))
    return idempotency_key(f"notices{_GROUP}{text}")


def next_attempt_key(key: str, attempt: int) -> str:
    """A launch key made unique to the ``attempt``-th state it was sent in."""
    return idempotency_key(f"{key}#{attempt}")


def alternate_pool_key(key: str, pool_key: str) -> str:
    """The key of a launch moved from its pool to ``pool_key`` (insufficient
    capacity there)."""
    return idempotency_key(f"{key}@{pool_key}")
