"""What Spotfolio writes on the VMs it launches, and how it reads them back.

Owns: the mapping of fleet tags to GCP labels, instance names, request ids
and ``instance_from_gcp`` (a Compute Engine instance as an ``Instance``).

Labels. GCP label keys and values allow only lowercase letters, digits, ``_``
and ``-``, at most 63 characters, and a key starts with a letter (Compute
Engine docs, "Labels: requirements"). The fleet's tag names hold a colon, so
each maps to a label key; values are kept verbatim when already valid:

=========================  ==========================  =========================
fleet tag                  GCP label key               label value
=========================  ==========================  =========================
``spotfolio:owner``        ``spotfolio-owner``         the owner id (must be a
                                                       valid label value)
``spotfolio:workload``     ``spotfolio-workload``      ``label_value(workload)``
``spotfolio:pool``         ``spotfolio-pool``          ``label_value(pool key)``
``spotfolio:plan-gen...``  ``spotfolio-plan-gen...``   the generation number
launch key                 ``spotfolio-launch-key``    sha256 of the key, 32 hex
tier                       ``spotfolio-tier``          committed|on_demand|spot
units                      ``spotfolio-units``         the capacity units
=========================  ==========================  =========================

``label_value`` lowercases and replaces other characters with ``_`` (and
shortens with a hash past 63 characters), so a workload name may lose its
case there; the exact tags travel in the instance metadata item
``spotfolio-tags`` (JSON) and are read from it. Ownership is decided by the
*label* alone (metadata is not filterable and the VM's own agent may write
it).

Names and request ids. Instance ``k`` of a launch is named
``sf-<owner hash 8>-<key hash 12>-<k>``: unique per (owner, key), so a second
insert of the same instance is refused by Compute Engine (409, names are
unique in a zone) and a preemption notice about ``sf-<owner hash>-*`` is known
to be ours even after the VM is gone. Each insert carries
``requestId = uuid5(owner, key, k, attempt)``: a retry of a call whose reply
was lost returns the first operation instead of creating again. ``attempt``
moves on only after Compute Engine reported the insert *failed*, because it
answers a reused request id with the old (failed) operation.

Our ``instance_id`` is ``<zone>/<name>``: Compute Engine addresses a VM by zone
and name, and names are only unique within a zone.

Must not: call Compute Engine or decide what to launch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from markets import catalog
from markets.cloud_fleet import (
    GENERATION_TAG,
    OWNER_TAG,
    POOL_TAG,
    WORKLOAD_TAG,
    Instance,
    InstanceState,
    LaunchRequest,
)
from markets.model import Pool, Provider, Tier

if TYPE_CHECKING:
    from google.cloud.compute_v1 import Instance as GcpInstance

__all__ = [
    "LABEL_OF_TAG",
    "LAUNCH_KEY_TAG",
    "LIVE_STATES",
    "NAME_PATTERN",
    "OWNER_LABEL",
    "TAGS_METADATA_KEY",
    "TIER_TAG",
    "UNITS_TAG",
    "instance_from_gcp",
    "instance_id",
    "instance_name",
    "is_label_value",
    "label_value",
    "launch_key_digest",
    "launch_labels",
    "launch_tags",
    "owner_prefix",
    "parse_instance_id",
    "request_id",
    "units_from_catalog",
]

log = logging.getLogger(__name__)

LAUNCH_KEY_TAG = "spotfolio:launch-key"
TIER_TAG = "spotfolio:tier"
UNITS_TAG = "spotfolio:units"
LABEL_OF_TAG: Mapping[str, str] = {
    OWNER_TAG: "spotfolio-owner",
    WORKLOAD_TAG: "spotfolio-workload",
    POOL_TAG: "spotfolio-pool",
    GENERATION_TAG: "spotfolio-plan-generation",
    LAUNCH_KEY_TAG: "spotfolio-launch-key",
    TIER_TAG: "spotfolio-tier",
    UNITS_TAG: "spotfolio-units",
}
OWNER_LABEL = LABEL_OF_TAG[OWNER_TAG]
TAGS_METADATA_KEY = "spotfolio-tags"
_LABEL_MAX = 63
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # RFC 1035, Compute Engine names
# uuid5 namespace of Spotfolio's request ids (a fixed random UUID).
_REQUEST_NS = uuid.UUID("5b0f4c1e-3d1a-4f59-9c55-6a0f2f0e9b7d")

# Compute Engine instance status -> our state. TERMINATED is a *stopped* VM
# (it still exists and its disks cost money): listed as STOPPING so that the
# broker ends it. Deleted VMs are simply absent.
LIVE_STATES: Mapping[str, InstanceState] = {
    "PROVISIONING": InstanceState.PENDING,
    "STAGING": InstanceState.PENDING,
    "REPAIRING": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "PENDING_STOP": InstanceState.STOPPING,
    "STOPPING": InstanceState.STOPPING,
    "SUSPENDING": InstanceState.STOPPING,
    "SUSPENDED": InstanceState.STOPPING,
    "STOPPED": InstanceState.STOPPING,
    "TERMINATED": InstanceState.STOPPING,
}


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def is_label_value(text: str) -> bool:
    return bool(_LABEL_VALUE.match(text))


def label_value(text: str) -> str:
    """``text`` as a valid label value (lowercase, ``[a-z0-9_-]``, <= 63)."""
    value = re.sub(r"[^a-z0-9_-]", "_", text.lower())
    if len(value) > _LABEL_MAX:
        value = f"{value[:50]}-{_digest(text)[:12]}"
    return value


def launch_key_digest(key: str) -> str:
    return _digest("launch-key", key)[:32]


def owner_prefix(owner: str) -> str:
    """The name prefix of every instance ``owner`` launches."""
    return f"sf-{_digest('owner', owner)[:8]}-"


def instance_name(owner: str, key: str, index: int) -> str:
    return f"{owner_prefix(owner)}{_digest('key', key)[:12]}-{index}"


def request_id(owner: str, key: str, index: int, attempt: int = 0) -> str:
    return str(uuid.uuid5(_REQUEST_NS, f"{owner}\x1f{key}\x1f{index}\x1f{attempt}"))


def instance_id(zone: str, name: str) -> str:
    return f"{zone}/{name}"


def parse_instance_id(text: str) -> tuple[str, str] | None:
    """``(zone, name)`` of ``<zone>/<name>``, or ``None`` if malformed."""
    zone, sep, name = text.partition("/")
    if not sep or not re.match(r"^[a-z]+-[a-z]+\d+-[a-z]$", zone) or not NAME_PATTERN.match(name):
        return None
    return zone, name


def units_from_catalog(machine_type: str) -> int | None:
    entry = catalog.CATALOG.get(machine_type)
    return entry.instance.units if entry is not None and entry.provider is Provider.GCP else None


def launch_tags(request: LaunchRequest, units: int) -> dict[str, str]:
    """The exact fleet tags of what ``request`` launches."""
    return {
        OWNER_TAG: request.owner,
        WORKLOAD_TAG: request.workload,
        POOL_TAG: request.pool_key,
        GENERATION_TAG: str(request.plan_generation),
        LAUNCH_KEY_TAG: request.idempotency_key,
        TIER_TAG: request.tier.value,
        UNITS_TAG: str(units),
    }


def launch_labels(tags: Mapping[str, str]) -> dict[str, str]:
    """GCP labels for fleet ``tags`` (see the table in the module doc)."""
    out: dict[str, str] = {}
    for tag, value in tags.items():
        key = LABEL_OF_TAG.get(tag)
        if key is None:
            continue
        out[key] = launch_key_digest(value) if tag == LAUNCH_KEY_TAG else label_value(value)
    return out


def _last(url: str) -> str:
    return str(url).rstrip("/").rsplit("/", 1)[-1]


def _tags(inst: GcpInstance) -> dict[str, str]:
    """Exact tags from metadata when readable, else what the labels say."""
    labels = {str(k): str(v) for k, v in dict(inst.labels).items()}
    tags = {tag: labels[key] for tag, key in LABEL_OF_TAG.items() if key in labels}
    for item in inst.metadata.items:
        if item.key == TAGS_METADATA_KEY:
            try:
                exact: object = json.loads(item.value)
            except ValueError:
                break
            if isinstance(exact, dict):
                tags.update({str(k): str(v) for k, v in exact.items() if k != OWNER_TAG})
    # Ownership from the label only.
    tags[OWNER_TAG] = labels.get(OWNER_LABEL, "")
    return tags


def _units(inst: GcpInstance, machine_type: str, tags: Mapping[str, str]) -> int:
    text = tags.get(UNITS_TAG, "")
    if text.isdigit() and int(text) > 0:
        return int(text)
    gpus = sum(int(a.accelerator_count) for a in inst.guest_accelerators)
    units = gpus or units_from_catalog(machine_type)
    if not units:
        log.warning("instance %s: no units label, no GPUs: counted as 1 unit", inst.name)
        return 1
    return units


def instance_from_gcp(
    inst: GcpInstance, parse_time: Callable[[str], datetime], zone: str | None = None
) -> Instance | None:
    """The ``Instance`` for one Compute Engine instance, or ``None`` when it
    no longer holds capacity (being deleted). The client gives enum fields
    (status, provisioning model) as their names."""
    state = LIVE_STATES.get(str(inst.status))
    if state is None:
        return None
    zone = zone or _last(inst.zone)
    machine_type = _last(inst.machine_type)
    tags = _tags(inst)
    if inst.scheduling.provisioning_model == "SPOT" or inst.scheduling.preemptible:
        tier = Tier.SPOT  # Compute Engine's own word wins over our label
    else:
        tier = Tier.COMMITTED if tags.get(TIER_TAG) == Tier.COMMITTED.value else Tier.ON_DEMAND
    region = zone.rsplit("-", 1)[0]
    pool = Pool(provider=Provider.GCP, region=region, zone=zone, instance_type=machine_type)
    return Instance(
        instance_id=instance_id(zone, str(inst.name)),
        pool_key=pool.key,
        tier=tier,
        workload=tags.get(WORKLOAD_TAG, ""),
        state=state,
        units=_units(inst, machine_type, tags),
        launched_at=parse_time(str(inst.creation_timestamp)),
        tags=tags,
    )
