"""Store queries of the fleet (the instances the daemon knows) and the plans.

Owns: ``FleetRow`` and ``FleetTx``: instances inserted or updated in bulk
statements, marked, listed; plan summaries stored under each owner's next
generation number. Part of ``broker.daemon.store.store.Tx``.

Must not: call a provider, decide, or read the clock (callers pass ``now``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, func, insert, select, update

from broker.daemon.store.schema import fleet_t, plans_t
from broker.daemon.store.tx import Json, TxBase, jsonable
from markets.cloud_fleet import Instance, InstanceState

__all__ = ["FleetRow", "FleetTx"]


@dataclass(frozen=True)
class FleetRow:
    instance_id: str
    owner: str
    workload: str
    pool_key: str
    tier: str
    units: int
    state: str
    launched_at: datetime
    action_key: str | None


class FleetTx(TxBase):
    """The fleet and the plans inside one transaction."""

    # --- fleet -------------------------------------------------------------
    def upsert_instances(
        self,
        owner: str,
        instances: Sequence[Instance],
        now: datetime,
        action_key: str | None = None,
    ) -> None:
        """Insert new instances, update the state of known ones (bulk statements)."""
        if not instances:
            return
        ids = [i.instance_id for i in instances]
        known = dict(
            self.conn.execute(
                select(fleet_t.c.instance_id, fleet_t.c.state).where(fleet_t.c.instance_id.in_(ids))
            ).all()
        )
        fresh = [
            {
                "instance_id": i.instance_id,
                "owner": owner,
                "workload": i.workload,
                "pool_key": i.pool_key,
                "tier": i.tier.value,
                "units": i.units,
                "state": i.state.value,
                "launched_at": i.launched_at,
                "action_key": action_key,
                "updated_at": now,
            }
            for i in instances
            if i.instance_id not in known
        ]
        self._insert_many_ignore(fleet_t, fresh, "instance_id")
        changed = [
            {"b_id": i.instance_id, "b_state": i.state.value, "b_now": now}
            for i in instances
            if i.instance_id in known and known[i.instance_id] != i.state.value
        ]
        if changed:
            self.conn.execute(
                update(fleet_t)
                .where(fleet_t.c.instance_id == bindparam("b_id"))
                .values(state=bindparam("b_state"), updated_at=bindparam("b_now")),
                changed,
            )

    def mark_instances(self, ids: Sequence[str], state: InstanceState, now: datetime) -> None:
        if ids:
            self.conn.execute(
                update(fleet_t)
                .where(fleet_t.c.instance_id.in_(list(ids)))
                .values(state=state.value, updated_at=now)
            )

    def fleet(self, owner: str, *, alive_only: bool = True) -> list[FleetRow]:
        q = select(fleet_t).where(fleet_t.c.owner == owner)
        if alive_only:
            q = q.where(fleet_t.c.state != InstanceState.TERMINATED.value)
        rows = self.conn.execute(q.order_by(fleet_t.c.instance_id)).all()
        return [FleetRow(**{c: r._mapping[c] for c in FleetRow.__dataclass_fields__}) for r in rows]

    def known_instance_ids(self, owner: str) -> set[str]:
        q = select(fleet_t.c.instance_id).where(fleet_t.c.owner == owner)
        return {r[0] for r in self.conn.execute(q)}

    # --- plans -------------------------------------------------------------
    def record_plan(self, owner: str, summary: Mapping[str, object], now: datetime) -> int:
        """Store a plan summary under the owner's next generation number."""
        last = self.conn.execute(
            select(func.max(plans_t.c.generation)).where(plans_t.c.owner == owner)
        ).scalar_one()
        gen = 1 if last is None else int(last) + 1
        self.conn.execute(
            insert(plans_t).values(
                owner=owner,
                generation=gen,
                created_at=now,
                summary=jsonable(summary),
                lease_epoch=self.lease_epoch,
            )
        )
        return gen

    def latest_plan(self, owner: str) -> tuple[int, datetime, Json] | None:
        r = self.conn.execute(
            select(plans_t.c.generation, plans_t.c.created_at, plans_t.c.summary)
            .where(plans_t.c.owner == owner)
            .order_by(plans_t.c.generation.desc())
            .limit(1)
        ).first()
        return None if r is None else (int(r[0]), r[1], r[2])
