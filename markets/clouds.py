"""Several clouds acted in as one account: a ``Provider`` made of providers.

Owns: ``Clouds`` (a ``markets.protocols.Provider`` over one provider per
cloud name). A launch goes to the provider of its pool's cloud (the pool
key's first part); a terminate to the provider whose fleet holds each
instance (what ``list_fleet`` and ``launch`` showed last, listed again for
an id not seen, and by the id's form for one no listing shows yet); notices
are polled from every provider, each acknowledged by the one it came from.
Idempotency stays each provider's own (EC2 client tokens, GCP request ids):
a request reaches one provider only, with its key unchanged.

Must not: decide anything, retry, or send a request to a cloud it does not
name (a pool of an unconfigured cloud is an ``INPUT`` refusal).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import TypeVar

from markets.cloud_fleet import (
    ActionResult,
    ErrorKind,
    Instance,
    LaunchRequest,
    Notice,
    TerminateRequest,
)
from markets.keys import PoolKey
from markets.protocols import Provider

__all__ = ["Clouds"]

K = TypeVar("K")

# Instance id forms, for an instance no listing shows yet (EC2's listing is
# eventually consistent): EC2 ids are ``i-`` and 8 or 17 hex digits (EC2
# User Guide, "Resource IDs"); the GCP provider names a VM ``<zone>/<name>``
# (``markets.gcp.labels``). The simulated cloud serves every cloud itself.
_ID_FORMS = {
    "aws": re.compile(r"^i-[0-9a-f]{8,17}$"),
    "gcp": re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"),
}


class Clouds:
    """One provider per cloud (``{"aws": ..., "gcp": ...}``), acted in as one."""

    def __init__(self, providers: Mapping[str, Provider]) -> None:
        if not providers:
            raise ValueError("Clouds needs one provider at least")
        self.providers = dict(providers)
        self.name = "+".join(sorted(self.providers))
        self._lock = threading.Lock()
        self._where: dict[str, str] = {}  # instance id -> cloud, as last listed
        self._launched: dict[str, str] = {}  # launched, not yet listed
        self._notice_from: dict[tuple[str, str | None], str] = {}  # (id, receipt) -> cloud

    # --- the fleet --------------------------------------------------------------
    def list_fleet(self, owner: str) -> Sequence[Instance]:
        out: list[Instance] = []
        for cloud, provider in self.providers.items():
            fleet = provider.list_fleet(owner)
            with self._lock:  # what the cloud lists now: ended instances drop out
                self._where = {i: c for i, c in self._where.items() if c != cloud}
                for inst in fleet:
                    self._where[inst.instance_id] = cloud
                    self._launched.pop(inst.instance_id, None)
            out.extend(fleet)
        return out

    def launch(self, request: LaunchRequest) -> ActionResult:
        cloud = PoolKey.parse(request.pool_key).provider
        provider = self.providers.get(cloud)
        if provider is None:
            return ActionResult(
                idempotency_key=request.idempotency_key,
                ok=False,
                error=f"no settings for cloud {cloud!r} (configured: {self.name})",
                error_kind=ErrorKind.INPUT,
            )
        result = provider.launch(request)
        with self._lock:
            for iid in result.instance_ids:
                self._launched[iid] = cloud
            _keep_last(self._launched)
        return result

    def terminate(self, request: TerminateRequest) -> ActionResult:
        by_cloud = self._route(request.instance_ids, request.owner)
        results = [
            self.providers[cloud].terminate(request.model_copy(update={"instance_ids": ids}))
            for cloud, ids in sorted(by_cloud.items())
        ]
        ended = tuple(i for r in results for i in r.instance_ids)
        failed = [r for r in results if not r.ok]
        if not failed:
            replayed = bool(results) and all(r.replayed for r in results)
            return ActionResult(
                idempotency_key=request.idempotency_key,
                ok=True,
                instance_ids=ended,
                replayed=replayed,
            )
        # The first refusal speaks for the request; what the others ended is kept.
        return ActionResult(
            idempotency_key=request.idempotency_key,
            ok=False,
            instance_ids=ended,
            error="; ".join(r.error or "refused" for r in failed),
            error_kind=failed[0].error_kind,
        )

    def _route(self, ids: Sequence[str], owner: str) -> dict[str, tuple[str, ...]]:
        """Cloud -> the ids of ``ids`` it holds (listing again when one is
        unknown; an id no listing shows goes by its form)."""
        with self._lock:
            unknown = [i for i in ids if i not in self._where and i not in self._launched]
        if unknown:
            self.list_fleet(owner)
        out: dict[str, list[str]] = {}
        with self._lock:
            for iid in ids:
                cloud = self._where.get(iid) or self._launched.get(iid) or self._by_form(iid)
                out.setdefault(cloud, []).append(iid)
        return {cloud: tuple(v) for cloud, v in out.items()}

    def _by_form(self, instance_id: str) -> str:
        matches = [c for c in self.providers if (f := _ID_FORMS.get(c)) and f.match(instance_id)]
        # An id of no configured cloud's form: the first provider refuses it
        # (every provider refuses ids that are not its own).
        return matches[0] if matches else sorted(self.providers)[0]

    # --- notices ----------------------------------------------------------------
    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        """Up to ``max_notices`` from each cloud, every cloud asked each time
        (a storm in one does not starve the other's queue)."""
        out: list[Notice] = []
        for cloud, provider in self.providers.items():
            got = provider.poll_notices(max_notices)
            with self._lock:
                for n in got:
                    self._notice_from[(n.notice_id, n.receipt)] = cloud
                _keep_last(self._notice_from)
            out.extend(got)
        return out

    def ack_notice(self, notice: Notice) -> None:
        with self._lock:
            cloud = self._notice_from.pop((notice.notice_id, notice.receipt), None)
        if cloud is None and notice.pool_key is not None:
            cloud = PoolKey.parse(notice.pool_key).provider
        if cloud is None or cloud not in self.providers:
            raise ValueError(f"notice {notice.notice_id!r} came from no configured cloud")
        self.providers[cloud].ack_notice(notice)

    def dropped_notices(self) -> Mapping[str, int]:
        """The queue messages each cloud's provider did not hand over, summed
        by reason (``broker.daemon.notices.DropCounts``)."""
        total: dict[str, int] = {}
        for provider in self.providers.values():
            counts = getattr(provider, "dropped_notices", None)
            if counts is None:
                continue
            for reason, n in counts().items():
                total[reason] = total.get(reason, 0) + n
        return total


# Launched ids not yet listed, and notices not yet acknowledged, kept at most
# this many (oldest first out): far beyond a listing's lag or a poll's batch,
# and a bound on what a daemon running for months holds.
_KEEP = 10_000


def _keep_last(d: dict[K, str]) -> None:
    while len(d) > _KEEP:
        del d[next(iter(d))]
