"""The idempotency keys the daemon derives for the launches it is asked for.

Owns: ``notice_key`` (the ``index``-th launch one decision asks for; a
lifecycle return's decisions are keyed ``tick:<action id>``),
``merged_key`` (one request carrying several decisions' launches) and
``fallback_key`` (the same work sent to the next pool after a refusal).

Each key is a pure function of what it stands for, so a retry, a
redelivered notice or a restart derives the same key again and the provider
sees the launch once (the executor's write-ahead record does the rest;
``Executor.resolve_launch_key`` moves a used-up key along its sequence).

Must not: read the store, the clock or anything random.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["fallback_key", "merged_key", "notice_key"]


def _digest(text: str) -> str:
    return "sf-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def notice_key(notice_id: str, index: int) -> str:
    """Key of the ``index``-th launch a notice's decision asks for."""
    return _digest(f"notice\x1f{notice_id}\x1f{index}")


def merged_key(parts: Sequence[tuple[str, int]]) -> str:
    """Key of one request carrying several decisions' launches ((notice id,
    launch index) each); a single part keeps its own ``notice_key``."""
    if len(parts) == 1:
        return notice_key(*parts[0])
    text = "\x1e".join(f"{nid}\x1f{i}" for nid, i in sorted(parts))
    return _digest(f"notices\x1d{text}")


def fallback_key(key: str, pool_key: str) -> str:
    """Key of the request ``key`` moved to ``pool_key`` (capacity refused)."""
    return _digest(f"{key}@{pool_key}")
