"""The simulated cloud's notice queue, with SQS semantics.

Owns: ``NoticeQueue`` (part of ``SimCloud``): sending a notice (each copy
visible from its time; ``duplicate_rate`` of them delivered twice, the second
up to 20 s later), polling a batch (the earliest visible first, optionally
shuffled; each polled copy is in flight for ``visibility_timeout_s``, then
comes back unless acknowledged), acknowledging by receipt, and counting the
due notices no copy of was acknowledged.

Must not: decide when a notice is due (``markets.sim.events`` sends
them), touch instances, or use the wall clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from datetime import datetime, timedelta

from markets.cloud_fleet import Instance, InstanceState, Notice, NoticeKind
from markets.sim.core import SimCore, _Queued

__all__ = ["NoticeQueue"]


class NoticeQueue(SimCore):
    """The account's notice queue (see the module docstring)."""

    def _send(
        self,
        kind: NoticeKind,
        inst: Instance,
        at: datetime,
        *,
        deadline: datetime | None = None,
        state: InstanceState | None = None,
    ) -> None:
        self._seq += 1
        nid = f"sim-{kind.value}-{self._seq:08d}"
        n = Notice(
            notice_id=nid,
            kind=kind,
            instance_id=inst.instance_id,
            at=at,
            deadline=deadline,
            pool_key=inst.pool_key,
            state=state,
        )
        self.counters.notices_sent += 1
        copies = 2 if self.rng.random() < self.options.duplicate_rate else 1
        for c in range(copies):
            delay = timedelta(seconds=self.rng.uniform(0, 20) if c else 0.0)
            receipt = f"{nid}#{c}"
            q = _Queued(n.model_copy(update={"receipt": receipt}), at + delay)
            self._queue.append(q)
            self._by_receipt[receipt] = q

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        self._advance()
        self._fault("poll_notices", False)
        now = self.clock.now()
        if len(self._queue) > 256 and self._deleted * 2 > len(self._queue):
            # Acknowledged messages are gone for good (their ids stay in _acked).
            self._queue = [q for q in self._queue if not q.deleted]
            self._deleted = 0
        # == sorted(...)[:max_notices], without sorting the whole queue
        ready = heapq.nsmallest(
            max_notices,
            (q for q in self._queue if not q.deleted and q.visible_at <= now),
            key=lambda q: q.visible_at,
        )
        for q in ready:  # in flight until acknowledged or the timeout passes
            q.visible_at = now + timedelta(seconds=self.options.visibility_timeout_s)
        batch = [q.notice for q in ready]
        if self.options.reorder:
            self.rng.shuffle(batch)
        return batch

    def ack_notice(self, notice: Notice) -> None:
        self._acked.add(notice.notice_id)
        q = self._by_receipt.pop(notice.receipt, None)
        if q is not None and not q.deleted:
            q.deleted = True
            self._deleted += 1

    def unacked(self, kinds: Sequence[NoticeKind] = tuple(NoticeKind)) -> int:
        """Notices of ``kinds`` already due that no copy of was acknowledged."""
        now = self.clock.now()
        due = {
            q.notice.notice_id for q in self._queue if q.notice.kind in kinds and q.notice.at <= now
        }
        return len(due - self._acked)
