"""Store queries of notices, the decisions taken on them and their checkpoint
hooks' results.

Owns: ``DecisionRecord`` and ``NoticesTx``. A notice is recorded once by
``notice_id`` (alone or a batch in two statements); a decision at most once
per notice (``decisions.notice_id`` is UNIQUE; the daemon's own decisions
have none); the sum of ``decisions.break_glass_usd`` is the break-glass
total; a hook result at most once per notice. Part of ``broker.daemon.store.store.Tx``.

Must not: call a provider, decide, or read the clock (callers pass ``now``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, or_, select, update

from broker.daemon.store.schema import actions_t, decisions_t, hook_results_t, notices_t
from broker.daemon.store.tx import Json, TxBase, jsonable

__all__ = ["DecisionRecord", "NoticesTx"]


@dataclass(frozen=True)
class DecisionRecord:
    notice_id: str | None
    kind: str
    workload: str | None
    reason: str
    latency_s: float
    break_glass_usd: float
    payload: Json
    created_at: datetime


class NoticesTx(TxBase):
    """Notices, decisions and hook results inside one transaction."""

    # --- notices ------------------------------------------------------------
    def record_notice(
        self,
        notice_id: str,
        kind: str,
        instance_id: str,
        at: datetime,
        now: datetime,
        deadline: datetime | None = None,
    ) -> bool:
        """True when the notice is new (first delivery)."""
        values = {
            "notice_id": notice_id,
            "kind": kind,
            "instance_id": instance_id,
            "at": at,
            "received_at": now,
            "handled_at": None,
            "deadline": deadline,
        }
        return self._insert_ignore(notices_t, values, "notice_id")

    def notice_handled(self, notice_id: str) -> bool:
        r = self.conn.execute(
            select(notices_t.c.handled_at).where(notices_t.c.notice_id == notice_id)
        ).first()
        return r is not None and r[0] is not None

    def mark_notice_handled(self, notice_id: str, now: datetime) -> None:
        self.conn.execute(
            update(notices_t)
            .where(notices_t.c.notice_id == notice_id, notices_t.c.handled_at.is_(None))
            .values(handled_at=now)
        )

    def record_notices(
        self, notices: Sequence[tuple[str, str, str, datetime, datetime | None]], now: datetime
    ) -> set[str]:
        """Record each ``(notice_id, kind, instance_id, at, deadline)`` once (a
        batch in two statements); returns the ids that were new (first delivery)."""
        ids = list(dict.fromkeys(n[0] for n in notices))
        if not ids:
            return set()
        q = select(notices_t.c.notice_id).where(notices_t.c.notice_id.in_(ids))
        known = {str(r[0]) for r in self.conn.execute(q)}
        rows: dict[str, Json] = {}
        for nid, kind, iid, at, deadline in notices:
            if nid not in known and nid not in rows:
                rows[nid] = {
                    "notice_id": nid,
                    "kind": kind,
                    "instance_id": iid,
                    "at": at,
                    "received_at": now,
                    "handled_at": None,
                    "deadline": deadline,
                }
        # One writer holds the lease (and SQLite's BEGIN IMMEDIATE lock), so
        # nothing can insert between the SELECT and this.
        self._insert_many_ignore(notices_t, list(rows.values()), "notice_id")
        return set(rows)

    def handled_notices(self, notice_ids: Sequence[str]) -> set[str]:
        """Which of ``notice_ids`` are handled (one query for a batch)."""
        if not notice_ids:
            return set()
        q = select(notices_t.c.notice_id).where(
            notices_t.c.notice_id.in_(list(notice_ids)), notices_t.c.handled_at.is_not(None)
        )
        return {str(r[0]) for r in self.conn.execute(q)}

    def mark_notices_handled(self, notice_ids: Sequence[str], now: datetime) -> None:
        if notice_ids:
            self.conn.execute(
                update(notices_t)
                .where(
                    notices_t.c.notice_id.in_(list(notice_ids)), notices_t.c.handled_at.is_(None)
                )
                .values(handled_at=now)
            )

    def revocations(
        self, kinds: Sequence[str], since: datetime, now: datetime | None = None
    ) -> list[tuple[str, datetime, datetime | None]]:
        """``(instance_id, at, deadline)`` of the notices of ``kinds`` dated
        ``since`` or later, or whose deadline is not past ``now`` (a scheduled
        change weeks ahead): the instances a restart must still count as doomed."""
        recent = notices_t.c.at >= since
        cond = recent if now is None else or_(recent, notices_t.c.deadline >= now)
        q = select(notices_t.c.instance_id, notices_t.c.at, notices_t.c.deadline).where(
            notices_t.c.kind.in_(list(kinds)), cond
        )
        return [(str(r[0]), r[1], r[2]) for r in self.conn.execute(q.order_by(notices_t.c.at))]

    def notice_launches(self, owner: str, since: datetime) -> list[tuple[str, list[str]]]:
        """``(noticed instance id, instance ids launched for it)`` of the
        launches done for notices since ``since`` (a merged launch is listed
        under each instance it served)."""
        rows = self.conn.execute(
            select(actions_t.c.payload, actions_t.c.result).where(
                actions_t.c.owner == owner,
                actions_t.c.kind == "launch",
                actions_t.c.status == "done",
                actions_t.c.created_at >= since,
            )
        ).all()
        served = [
            ((payload or {}).get("notice_ids") or [], (result or {}).get("instance_ids") or [])
            for payload, result in rows
            if (payload or {}).get("source") == "notice"
        ]
        nids = sorted({n for ns, _ in served for n in ns})
        if not nids:
            return []
        q = select(notices_t.c.notice_id, notices_t.c.instance_id).where(
            notices_t.c.notice_id.in_(nids)
        )
        noticed = {str(n): str(i) for n, i in self.conn.execute(q)}
        return [
            (noticed[n], [str(i) for i in ids]) for ns, ids in served for n in ns if n in noticed
        ]

    def count_notices(self, *, unhandled: bool = False) -> int:
        q = select(func.count()).select_from(notices_t)
        if unhandled:
            q = q.where(notices_t.c.handled_at.is_(None))
        return int(self.conn.execute(q).scalar_one())

    # --- decisions ----------------------------------------------------------
    def record_decision(self, owner: str, d: DecisionRecord) -> bool:
        """Store a decision; False if the notice already has one."""
        values = {**_decision_row(owner, d), "lease_epoch": self.lease_epoch}
        if d.notice_id is None:
            self.conn.execute(insert(decisions_t).values(**values))
            return True
        return self._insert_ignore(decisions_t, values, "notice_id")

    def record_decisions(self, owner: str, records: Sequence[DecisionRecord]) -> None:
        """Store a batch of decisions; a notice that already has one keeps it."""
        rows = [{**_decision_row(owner, d), "lease_epoch": self.lease_epoch} for d in records]
        own = [r for r in rows if r["notice_id"] is None]
        if own:
            self.conn.execute(insert(decisions_t), own)
        self._insert_many_ignore(
            decisions_t, [r for r in rows if r["notice_id"] is not None], "notice_id"
        )

    def decisions(
        self,
        owner: str,
        *,
        since: datetime | None = None,
        notice_id: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[DecisionRecord]:
        q = select(decisions_t).where(decisions_t.c.owner == owner)
        if since is not None:
            q = q.where(decisions_t.c.created_at >= since)
        if notice_id is not None:
            q = q.where(decisions_t.c.notice_id == notice_id)
        if kinds is not None:
            q = q.where(decisions_t.c.kind.in_(list(kinds)))
        rows = self.conn.execute(q.order_by(decisions_t.c.id)).all()
        return [
            DecisionRecord(**{c: r._mapping[c] for c in DecisionRecord.__dataclass_fields__})
            for r in rows
        ]

    def decisions_for_notices(
        self, owner: str, notice_ids: Sequence[str]
    ) -> dict[str, DecisionRecord]:
        """The stored decisions of ``notice_ids`` (one query for a batch)."""
        if not notice_ids:
            return {}
        q = select(decisions_t).where(
            decisions_t.c.owner == owner, decisions_t.c.notice_id.in_(list(notice_ids))
        )
        out: dict[str, DecisionRecord] = {}
        for r in self.conn.execute(q):
            rec = DecisionRecord(**{c: r._mapping[c] for c in DecisionRecord.__dataclass_fields__})
            if rec.notice_id is not None:
                out[rec.notice_id] = rec
        return out

    def decision_counts(self, owner: str) -> dict[str, int]:
        q = (
            select(decisions_t.c.kind, func.count())
            .where(decisions_t.c.owner == owner)
            .group_by(decisions_t.c.kind)
        )
        return {str(k): int(n) for k, n in self.conn.execute(q)}

    def break_glass_usd(self, owner: str) -> float:
        q = select(func.coalesce(func.sum(decisions_t.c.break_glass_usd), 0.0)).where(
            decisions_t.c.owner == owner
        )
        return float(self.conn.execute(q).scalar_one())

    # --- checkpoint-hook results --------------------------------------------
    def record_hook_result(
        self,
        owner: str,
        notice_id: str,
        workload: str,
        record: Mapping[str, object],
        now: datetime,
    ) -> bool:
        """What a notice's checkpoint hook did (once per notice); True if new."""
        values = {
            "notice_id": notice_id,
            "owner": owner,
            "workload": workload,
            "ok": bool(record.get("ok")),
            "record": jsonable(record),
            "created_at": now,
        }
        return self._insert_ignore(hook_results_t, values, "notice_id")

    def hook_results(self, owner: str) -> dict[str, Json]:
        """Notice id -> its hook's record."""
        q = select(hook_results_t.c.notice_id, hook_results_t.c.record).where(
            hook_results_t.c.owner == owner
        )
        return {str(n): dict(r) for n, r in self.conn.execute(q)}


def _decision_row(owner: str, d: DecisionRecord) -> Json:
    """A ``decisions`` row (the reason cut to the column's 1,000 characters)."""
    return {
        "notice_id": d.notice_id,
        "owner": owner,
        "kind": d.kind,
        "workload": d.workload,
        "reason": d.reason[:1000],
        "latency_s": d.latency_s,
        "break_glass_usd": d.break_glass_usd,
        "payload": jsonable(d.payload),
        "created_at": d.created_at,
    }
