"""Store queries of the write-ahead action log (launch/terminate).

Owns: ``ActionRecord`` and ``ActionsTx``: an action is recorded ``pending``
under its idempotency key before the provider is called (once: a key recorded
twice keeps its first record) and finished ``done``/``failed`` after; the
pending ones are what a restart re-sends. Part of ``broker.daemon.store.store.Tx``.

Must not: call a provider, decide what to launch, or read the clock (callers
pass ``now``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update

from broker.daemon.store.schema import actions_t
from broker.daemon.store.tx import Json, TxBase, jsonable

__all__ = ["ActionRecord", "ActionsTx"]


@dataclass(frozen=True)
class ActionRecord:
    idempotency_key: str
    owner: str
    kind: str
    payload: Json
    status: str
    result: Json | None
    created_at: datetime
    created: bool = False  # True when this call inserted it


class ActionsTx(TxBase):
    """The action log inside one transaction."""

    def record_action(
        self, key: str, owner: str, kind: str, payload: Mapping[str, object], now: datetime
    ) -> ActionRecord:
        """Record a pending action once; always returns the stored record."""
        values = {**_pending_row(key, owner, kind, payload, now), "lease_epoch": self.lease_epoch}
        created = self._insert_ignore(actions_t, values, "idempotency_key")
        rec = self.action(key)
        assert rec is not None
        return ActionRecord(**{**rec.__dict__, "created": created})

    def record_actions(
        self, owner: str, actions: Sequence[tuple[str, str, Mapping[str, object]]], now: datetime
    ) -> None:
        """Record ``(key, kind, payload)`` actions pending in one statement
        (a key already recorded keeps its record)."""
        rows = [
            {**_pending_row(key, owner, kind, payload, now), "lease_epoch": self.lease_epoch}
            for key, kind, payload in actions
        ]
        self._insert_many_ignore(actions_t, rows, "idempotency_key")

    def action(self, key: str) -> ActionRecord | None:
        r = self.conn.execute(select(actions_t).where(actions_t.c.idempotency_key == key)).first()
        if r is None:
            return None
        m = r._mapping
        return ActionRecord(
            m["idempotency_key"],
            m["owner"],
            m["kind"],
            m["payload"],
            m["status"],
            m["result"],
            m["created_at"],
        )

    def finish_action(
        self, key: str, status: str, result: Mapping[str, object], now: datetime
    ) -> None:
        if status not in ("done", "failed"):
            raise ValueError(f"an action finishes done or failed, not {status!r}")
        self.conn.execute(
            update(actions_t)
            .where(actions_t.c.idempotency_key == key)
            .values(status=status, result=jsonable(result), updated_at=now)
        )

    def pending_actions(self, owner: str) -> list[ActionRecord]:
        rows = self.conn.execute(
            select(actions_t.c.idempotency_key)
            .where(actions_t.c.owner == owner, actions_t.c.status == "pending")
            .order_by(actions_t.c.id)
        ).all()
        return [a for (k,) in rows if (a := self.action(k)) is not None]

    def capacity_failures(self, owner: str, since: datetime) -> list[tuple[str, str, datetime]]:
        """``(pool_key, tier, at)`` of launches refused for capacity ``since``
        then (the pools a restart must still avoid for their TTL)."""
        rows = self.conn.execute(
            select(actions_t.c.payload, actions_t.c.result, actions_t.c.updated_at).where(
                actions_t.c.owner == owner,
                actions_t.c.kind == "launch",
                actions_t.c.status == "failed",
                actions_t.c.updated_at >= since,
            )
        ).all()
        out = []
        for payload, result, at in rows:
            req = (payload or {}).get("request") or {}
            if (result or {}).get("error_kind") == "capacity" and "pool_key" in req:
                out.append((str(req["pool_key"]), str(req["tier"]), at))
        return out

    def count_actions(self, owner: str, status: str | None = None) -> int:
        q = select(func.count()).select_from(actions_t).where(actions_t.c.owner == owner)
        if status is not None:
            q = q.where(actions_t.c.status == status)
        return int(self.conn.execute(q).scalar_one())


def _pending_row(
    key: str, owner: str, kind: str, payload: Mapping[str, object], now: datetime
) -> Json:
    """An ``actions`` row for an action written ahead, not yet done."""
    return {
        "idempotency_key": key,
        "owner": owner,
        "kind": kind,
        "payload": jsonable(payload),
        "status": "pending",
        "result": None,
        "created_at": now,
        "updated_at": now,
    }
