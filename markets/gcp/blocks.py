"""GCP future reservations the project holds, read as reserved-ahead blocks.

Owns: ``fetch_future_reservations`` (Compute Engine
``futureReservations.aggregatedList``, every zone and page) and the
translation of one into a held ``markets.blocks.CapacityBlock``: ``count``
VMs of its machine type in its zone for its time window.

"Future reservations overview" (https://cloud.google.com/compute/docs/
instances/future-reservations-overview): a future reservation asks for a
count of VMs of one machine type in one zone for a time window; once GCP
approves it (``status.procurementStatus`` APPROVED, then PROVISIONING and
FULFILLED as the window opens) the capacity is the project's and is billed
for the window whether VMs run or not: sunk, so ``held``. Requests still
pending, declined, cancelled or failed hold nothing and are left out. The
window is ``startTime`` to ``endTime`` (or ``startTime`` plus ``duration``).

Must not: create or cancel reservations, decide (``policies.blocks``), retry
(``CallPolicy`` does) or build clients (``markets.gcp.sdk``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import ValidationError

from markets.blocks import BlockKind, CapacityBlock
from markets.clock import ensure_utc
from markets.errors import InputError
from markets.gcp.errors import gcp_call
from markets.gcp.sdk import CallPolicy, FutureReservationsApi
from markets.model import Provider
from markets.validation import input_error_from

__all__ = ["HELD_STATES", "fetch_future_reservations"]

HELD_STATES = frozenset({"APPROVED", "PROVISIONING", "FULFILLED"})
_SOURCE = "gcp compute.futureReservations.aggregatedList"


def _time(text: str, field: str) -> datetime:
    try:
        return ensure_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        raise InputError(_SOURCE, field, "an RFC 3339 time", got=text) from None


def _block(r: object, zone: str) -> CapacityBlock | None:
    name = str(getattr(r, "name", ""))
    where = f"{zone}/{name}"
    status = getattr(r, "status", None)
    if str(getattr(status, "procurement_status", "")) not in HELD_STATES:
        return None
    sku = getattr(r, "specific_sku_properties", None)
    machine = str(getattr(getattr(sku, "instance_properties", None), "machine_type", ""))
    window = getattr(r, "time_window", None)
    start = _time(str(getattr(window, "start_time", "")), f"{where}.timeWindow.startTime")
    end_text = str(getattr(window, "end_time", ""))
    if end_text:
        end = _time(end_text, f"{where}.timeWindow.endTime")
    else:
        seconds = getattr(getattr(window, "duration", None), "seconds", 0)
        end = start + timedelta(seconds=int(seconds or 0))
    try:
        return CapacityBlock(kind=BlockKind.GCP_FUTURE_RESERVATION, provider=Provider.GCP,
                             block_id=name, instance_type=machine.rsplit("/", 1)[-1],
                             region=zone.rsplit("-", 1)[0], zone=zone,
                             count=int(getattr(sku, "total_count", 0) or 0), start=start,
                             end=end, held=True)  # fmt: skip
    except ValidationError as e:
        raise input_error_from(_SOURCE, e, prefix=where) from e


def fetch_future_reservations(
    client: FutureReservationsApi, project: str, *, policy: CallPolicy | None = None
) -> tuple[CapacityBlock, ...]:
    """The project's approved future reservations, as held blocks, by zone and name."""
    policy = policy or CallPolicy()
    with gcp_call("compute.futureReservations.aggregatedList"):
        pages = list(client.aggregated_list(request={"project": project}, **policy.kwargs()))
    out: list[CapacityBlock] = []
    for scope, scoped in pages:
        zone = str(scope).rsplit("/", 1)[-1]
        for r in scoped.future_reservations:
            b = _block(r, zone)
            if b is not None:
                out.append(b)
    return tuple(sorted(out, key=lambda b: (b.zone, b.block_id)))
