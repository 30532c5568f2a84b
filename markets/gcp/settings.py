"""The GCP provider's settings and the ``instances.insert`` request they yield.

Owns: ``GcpProviderSettings`` (validated provider options; YAML example
below), ``settings_from_options`` (options -> settings, or one
``InputError`` naming the option) and ``insert_request``.

Why ``instanceTerminationAction = DELETE`` by default (``STOP`` allowed):
a stopped Spot VM keeps its boot disk (billed) and its name, and comes back
only if someone starts it; the broker decides replacements itself (another
pool, a shrink, break-glass to on-demand), so a preempted VM should simply
end, as an AWS one-time spot instance does. ``STOP`` suits a fleet that
restarts VMs in place from their disks; the provider then lists stopped VMs
(state ``stopping``) so that the broker deletes the ones it no longer wants.

Every VM gets ``onHostMaintenance = TERMINATE``: VMs with GPUs cannot live
migrate (Compute Engine docs, "GPU restrictions"), and Spot VMs must
terminate. Committed-use discounts apply to STANDARD VMs of the region
automatically (resource-based CUDs), so committed and on-demand launch alike;
the ``spotfolio-tier`` label tells them apart.

With ``instance_template`` the request body's fields replace the template's
(labels, scheduling); metadata is then left to the template (replacing it
would drop its startup script, which installs ``markets.gcp.watcher``) and
the exact tags are read from labels only.

YAML example::

    provider:
      project: my-gpu-project
      owner: team-ml-prod
      zones: [us-central1-a, us-central1-c]
      instance_template: global/instanceTemplates/spotfolio-gpu
      termination_action: DELETE

Must not: call Compute Engine.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from markets.cloud_fleet import LaunchRequest
from markets.errors import InputError
from markets.gcp.labels import (
    TAGS_METADATA_KEY,
    instance_name,
    is_label_value,
    launch_labels,
    launch_tags,
)
from markets.model import Pool, Tier

__all__ = ["GcpProviderSettings", "insert_request", "settings_from_options"]

_ZONE = r"^[a-z]+-[a-z]+\d+-[a-z]$"


class GcpProviderSettings(BaseModel):
    """Where and from what the provider launches, and how it waits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    owner: str = Field(min_length=1, max_length=63)
    zones: tuple[str, ...] = Field(min_length=1)
    source_image: str | None = None  # projects/debian-cloud/global/images/family/debian-12
    instance_template: str | None = None  # global/instanceTemplates/NAME or a full URL
    subnetwork: str | None = None  # regions/REGION/subnetworks/NAME (source_image only)
    service_account: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+$")
    boot_disk_gb: int = Field(default=100, ge=10, le=65536)
    termination_action: Literal["DELETE", "STOP"] = "DELETE"
    extra_labels: dict[str, str] = Field(default_factory=dict)
    # Capacity units per machine type, for types the catalog lacks.
    units: dict[str, int] = Field(default_factory=dict)
    # How long a launch waits for its insert operations (capacity errors
    # arrive there); past it the launch reports the VMs as pending.
    operation_wait_s: float = Field(default=90.0, gt=0, le=600)
    # How far back the first notice poll looks for preemptions.
    notice_lookback_s: float = Field(default=600.0, ge=0, le=7 * 86400)
    retry_timeout_s: float = Field(default=30.0, gt=0, le=600)

    @field_validator("owner")
    @classmethod
    def _owner(cls, v: str) -> str:
        if not is_label_value(v):
            raise ValueError("the owner is a GCP label value: lowercase letters, digits, _ and -")
        return v

    @field_validator("zones")
    @classmethod
    def _zones(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [z for z in v if not re.match(_ZONE, z)]
        if bad:
            raise ValueError(f"zone names look like us-central1-a, got {bad}")
        return tuple(sorted(set(v)))

    @field_validator("extra_labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        bad = sorted(k for k, x in v.items() if not (k[:1].isalpha() and is_label_value(k)))
        bad += sorted(k for k, x in v.items() if not is_label_value(x))
        if bad or any(k.startswith("spotfolio-") for k in v):
            raise ValueError(
                f"labels: [a-z0-9_-], a key starting with a letter, not spotfolio-*: {bad}"
            )
        return v

    @model_validator(mode="after")
    def _one_source(self) -> GcpProviderSettings:
        if (self.source_image is None) == (self.instance_template is None):
            raise ValueError("exactly one of source_image or instance_template")
        return self


def settings_from_options(options: Mapping[str, object]) -> GcpProviderSettings:
    """Validate provider options; the first problem becomes an ``InputError``
    naming the option (``provider options: zones.0``)."""
    try:
        return GcpProviderSettings.model_validate(dict(options))
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise InputError(
            "provider options", field, str(first["msg"]), got=first.get("input")
        ) from e


def insert_request(
    settings: GcpProviderSettings,
    request: LaunchRequest,
    pool: Pool,
    index: int,
    units: int,
    request_id: str,
) -> dict[str, object]:
    """The ``InsertInstanceRequest`` (as the dict of its fields that the client
    takes) of instance ``index`` of ``request``."""
    tags = launch_tags(request, units)
    labels = {**settings.extra_labels, **launch_labels(tags)}
    spot = request.tier is Tier.SPOT
    scheduling: dict[str, object] = {
        "provisioning_model": "SPOT" if spot else "STANDARD",
        "on_host_maintenance": "TERMINATE",
        "automatic_restart": not spot,
    }
    if spot:
        scheduling["instance_termination_action"] = settings.termination_action
    body: dict[str, object] = {
        "name": instance_name(request.owner, request.idempotency_key, index),
        "machine_type": f"zones/{pool.zone}/machineTypes/{pool.instance_type}",
        "labels": labels,
        "scheduling": scheduling,
    }
    out: dict[str, object] = {
        "project": settings.project,
        "zone": pool.zone,
        "request_id": request_id,
        "instance_resource": body,
    }
    if settings.instance_template is not None:
        out["source_instance_template"] = settings.instance_template
        return out
    body["metadata"] = {
        "items": [{"key": TAGS_METADATA_KEY, "value": json.dumps(tags, sort_keys=True)}]
    }
    body["disks"] = [
        {
            "boot": True,
            "auto_delete": True,
            "initialize_params": {
                "source_image": settings.source_image,
                "disk_size_gb": settings.boot_disk_gb,
            },
        }
    ]
    nic: dict[str, str] = (
        {"subnetwork": settings.subnetwork}
        if settings.subnetwork
        else {"network": "global/networks/default"}
    )
    body["network_interfaces"] = [nic]
    if settings.service_account:
        body["service_accounts"] = [
            {
                "email": settings.service_account,
                "scopes": ["https://www.googleapis.com/auth/cloud-platform"],
            }
        ]
    return out
