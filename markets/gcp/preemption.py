"""GCP preemptions as notices: zone operations ``compute.instances.preempted``.

Owns: ``PreemptionReader`` (polls the zone operations of the provider's
zones and turns each new preemption of one of our VMs into a
``Notice(kind=PREEMPTED)``), ``notice_from_operation``, ``parse_time`` and
``PREEMPTION_NOTICE_S``.

How GCP preempts (Compute Engine docs, "Spot VMs" / "Preemption process"):
the VM gets an ACPI G2 soft-off, then 30 s later it is stopped hard and its
termination action runs (DELETE or STOP). Compute Engine records a zone
operation of type ``compute.instances.preempted`` whose ``targetLink`` names
the VM; its ``startTime`` is when the preemption began. So a notice's ``at``
is that time and its ``deadline`` ``at + 30 s``; ``notice_id`` is the
operation id (unique per project), the key the store deduplicates on.

Two paths, and which one is in the window: on the VM, the metadata server's
``instance/preempted`` flips to TRUE at once (``markets.gcp.watcher`` runs the
checkpoint hook there); the broker only sees the operation when it next
lists them, so with a poll every few seconds its notice arrives inside the
window, but its decision (replace, shrink, break-glass) matters even after
the VM is gone. The lifecycle manager takes the window from the notice
(``deadline - at``), else from ``policies.checkpoint.NOTICE_SECONDS["gcp"]``.

Polling: operations are listed newest first (``orderBy=creationTimestamp
desc``) with a filter on the type, and reading stops at the first one older
than the cursor; the cursor trails the clock by ``OVERLAP_S`` because an
operation can show up in the list a little after its start time, and ids seen
are remembered so that the overlap yields nothing twice. Operations are not a
queue: acknowledging is a no-op and nothing is lost by not acknowledging.

Must not: decide anything, or touch instances.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from markets.clock import Clock, ensure_utc
from markets.cloud_fleet import Notice, NoticeKind
from markets.errors import TransientError
from markets.gcp.errors import gcp_call
from markets.gcp.labels import instance_id
from markets.gcp.sdk import CallPolicy, ZoneOperationsApi

if TYPE_CHECKING:
    from google.cloud.compute_v1 import Operation

__all__ = [
    "OVERLAP_S",
    "PREEMPTED_OPERATION",
    "PREEMPTION_NOTICE_S",
    "PreemptionReader",
    "notice_from_operation",
    "parse_time",
]

log = logging.getLogger(__name__)

PREEMPTED_OPERATION = "compute.instances.preempted"
# Soft-off to hard stop (Compute Engine docs, "Preemption process"); the same
# figure as policies.checkpoint.NOTICE_SECONDS["gcp"], which markets may not import.
PREEMPTION_NOTICE_S = 30.0
# How far the cursor trails the clock: operations may be listed a little after
# they start; ids already seen are skipped.
OVERLAP_S = 300.0
_SEEN_MAX = 20_000


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as Compute Engine writes it (``2024-06-26T11:42:22.006-07:00``)."""
    return ensure_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


def _last(url: str) -> str:
    return str(url).rstrip("/").rsplit("/", 1)[-1]


def notice_from_operation(op: Operation, zone: str, pool_key: str | None = None) -> Notice:
    """The notice for one ``compute.instances.preempted`` operation."""
    at = parse_time(str(op.start_time or op.insert_time))
    return Notice(
        notice_id=str(op.id or op.name),
        kind=NoticeKind.PREEMPTED,
        instance_id=instance_id(zone, _last(op.target_link)),
        at=at,
        deadline=at + timedelta(seconds=PREEMPTION_NOTICE_S),
        pool_key=pool_key,
    )


class PreemptionReader:
    """New preemptions of our VMs in ``zones``, oldest first.

    ``is_ours(name)`` says whether an instance name is one of ours (the
    provider's name prefix: the VM may already be deleted, so labels cannot
    be read); ``pool_of(instance_id)`` fills ``pool_key`` where known.
    """

    def __init__(
        self,
        client: ZoneOperationsApi,
        project: str,
        zones: Sequence[str],
        *,
        clock: Clock,
        is_ours: Callable[[str], bool],
        pool_of: Callable[[str], str | None] = lambda _: None,
        lookback_s: float = 600.0,
        policy: CallPolicy | None = None,
    ) -> None:
        self.client = client
        self.project = project
        self.zones = tuple(zones)
        self._clock = clock
        self._is_ours = is_ours
        self._pool_of = pool_of
        self._policy = policy or CallPolicy()
        self._since = clock.now() - timedelta(seconds=lookback_s)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._pending: list[Notice] = []
        self.foreign = 0  # preemptions of VMs not ours, skipped

    def _remember(self, op_id: str) -> bool:
        """False if ``op_id`` was seen before."""
        if op_id in self._seen:
            return False
        self._seen[op_id] = None
        while len(self._seen) > _SEEN_MAX:
            self._seen.popitem(last=False)
        return True

    def _read_zone(self, zone: str) -> list[Notice]:
        request: dict[str, str] = {
            "project": self.project,
            "zone": zone,
            "filter": f'operationType = "{PREEMPTED_OPERATION}"',
            "order_by": "creationTimestamp desc",
        }
        out: list[Notice] = []
        with gcp_call("compute.zoneOperations.list"):
            for op in self.client.list(request=request, **self._policy.kwargs()):
                if str(op.operation_type) != PREEMPTED_OPERATION:
                    continue
                started = parse_time(str(op.start_time or op.insert_time))
                if started < self._since:
                    break  # newest first: everything after is older still
                if not self._remember(str(op.id or op.name)):
                    continue
                name = _last(op.target_link)
                if not self._is_ours(name):
                    self.foreign += 1
                    continue
                out.append(notice_from_operation(op, zone, self._pool_of(instance_id(zone, name))))
        return out

    def poll(self, max_notices: int = 10) -> list[Notice]:
        """Up to ``max_notices`` new notices; the rest wait for the next poll."""
        if len(self._pending) < max_notices:
            started = self._clock.now()
            complete = True
            for zone in self.zones:
                try:
                    self._pending.extend(self._read_zone(zone))
                except TransientError as e:
                    # The other zones' notices still go out; the cursor stays
                    # put so that this zone is read again from the same point.
                    log.warning("preemptions in %s not read: %s", zone, e)
                    complete = False
            if complete:
                self._since = max(self._since, started - timedelta(seconds=OVERLAP_S))
            self._pending.sort(key=lambda n: (n.at, n.notice_id))
        out, self._pending = self._pending[:max_notices], self._pending[max_notices:]
        return out
