"""Committed-use discounts the GCP project already owns.

Owns: ``GcpCommitments`` (reads Compute Engine ``regionCommitments.aggregatedList``)
and the translation of a region commitment into ``markets.commitments``'
``OwnedCommitment``.

Must not: price, plan or buy; retry (``CallPolicy`` does); build clients
(``markets.gcp.sdk.build_compute_clients`` does).

A resource-based commitment commits amounts of vCPU, memory and GPUs in a
region, not machines. Spotfolio counts GPU fleets in machines, so a GPU
commitment is read as whole machines of the type ``machine_types`` names for
its accelerator (default ``MACHINE_FOR_ACCELERATOR``: the catalog's one-GPU
size of each family, or the only size); a commitment without GPUs (vCPU and
memory only) is skipped, since no GPU workload uses it. Only ``ACTIVE``
commitments are returned. Times are RFC 3339 strings in US Pacific.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType

from markets.catalog import instance_type
from markets.clock import ensure_utc
from markets.commitments import CommitmentKind, OwnedCommitment, PaymentOption
from markets.errors import InputError
from markets.gcp.errors import gcp_call
from markets.gcp.sdk import CallPolicy, RegionCommitmentsApi
from markets.model import Provider

__all__ = ["MACHINE_FOR_ACCELERATOR", "GcpCommitments"]

# Accelerator type -> the machine type a committed GPU is counted in.
MACHINE_FOR_ACCELERATOR: Mapping[str, str] = MappingProxyType(
    {
        "nvidia-l4": "g2-standard-4",
        "nvidia-tesla-a100": "a2-highgpu-1g",
        "nvidia-a100-80gb": "a2-ultragpu-1g",
        "nvidia-h100-80gb": "a3-highgpu-8g",
    }
)
_SOURCE = "gcp compute.regionCommitments.aggregatedList"


def _time(text: str, field: str) -> datetime:
    try:
        return ensure_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        raise InputError(_SOURCE, field, "an RFC 3339 time", got=text) from None


class GcpCommitments:
    """Reads the active GPU commitments of ``project`` in every region."""

    def __init__(
        self,
        client: RegionCommitmentsApi,
        project: str,
        *,
        policy: CallPolicy | None = None,
        machine_types: Mapping[str, str] = MACHINE_FOR_ACCELERATOR,
    ) -> None:
        self._client = client
        self._project = project
        self._policy = policy or CallPolicy()
        self._machines = machine_types

    def owned(self) -> list[OwnedCommitment]:
        out: list[OwnedCommitment] = []
        request = {"project": self._project}
        with gcp_call("compute.regionCommitments.aggregatedList"):
            pages = list(self._client.aggregated_list(request=request, **self._policy.kwargs()))
        for scope, scoped in pages:
            region = str(scope).rsplit("/", 1)[-1]
            for c in scoped.commitments:
                if str(c.status) != "ACTIVE":
                    continue
                field = f"{region}/{c.name}"
                for r in c.resources:
                    if str(r.type_) != "ACCELERATOR":
                        continue
                    accel = str(r.accelerator_type).rsplit("/", 1)[-1]
                    machine = self._machines.get(accel)
                    if machine is None:
                        raise InputError(
                            _SOURCE,
                            f"{field}.resources.acceleratorType",
                            "an accelerator with a machine type to count it in: "
                            + ", ".join(sorted(self._machines)),
                            got=accel,
                        )
                    gpus = max(1, instance_type(machine).gpus)
                    out.append(
                        OwnedCommitment(
                            id=str(c.name),
                            provider=Provider.GCP,
                            kind=CommitmentKind.CUD,
                            start=_time(str(c.start_timestamp), f"{field}.startTimestamp"),
                            end=_time(str(c.end_timestamp), f"{field}.endTimestamp"),
                            payment=PaymentOption.NO_UPFRONT,  # CUDs bill monthly
                            region=region,
                            instance_type=machine,
                            count=int(r.amount) // gpus,
                        )
                    )
        return out
