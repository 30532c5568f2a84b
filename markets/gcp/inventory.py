"""What Compute Engine offers where: zones, machine types, accelerator types.

Owns: ``fetch_zones`` (zones.list), ``fetch_machine_types``
(machineTypes.aggregatedList: which zone offers which type, with vCPUs,
memory and bundled GPUs), ``fetch_accelerators`` (acceleratorTypes
.aggregatedList: a readable name for every GPU model the types carry),
``GPU_MODELS`` and ``instance_type`` (a ``MachineTypeSpec`` as the shared
``InstanceType``).

The GPU count of an A2/A3/G2 type is in its machine type's ``accelerators``
(``guestAcceleratorType`` / ``guestAcceleratorCount``); an instance reports
the same GPUs as ``guestAccelerators``. Types are requested by name with an
OR filter, so an aggregated list of thousands of types in every zone shrinks
to the few asked for.

Must not: price anything (``markets.gcp.prices``) or cache (``market``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from markets import catalog
from markets.gcp.errors import gcp_call
from markets.gcp.sdk import AcceleratorTypesApi, CallPolicy, MachineTypesApi, ZonesApi
from markets.model import InstanceType, Provider

if TYPE_CHECKING:
    from google.cloud.compute_v1 import MachineType

__all__ = [
    "GPU_MODELS",
    "AcceleratorSpec",
    "GcpZone",
    "MachineTypeSpec",
    "fetch_accelerators",
    "fetch_machine_types",
    "fetch_zones",
    "gpu_model",
    "instance_type",
    "name_filter",
]

log = logging.getLogger(__name__)

# Accelerator type -> the catalog's GPU model names (the keys of
# markets.catalog.GPU_THROUGHPUT_VS_V100); GCP "GPU platforms" docs for the
# memory sizes. Others are named from their acceleratorTypes description.
GPU_MODELS: Mapping[str, str] = {
    "nvidia-tesla-k80": "K80",
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100",
    "nvidia-l4": "L4",
    "nvidia-tesla-a100": "A100-40GB",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-h100-80gb": "H100",
    "nvidia-h100-mega-80gb": "H100",
}
_MIB_PER_GIB = 1024.0


@dataclass(frozen=True)
class GcpZone:
    name: str
    region: str


@dataclass(frozen=True)
class MachineTypeSpec:
    name: str
    vcpus: int
    memory_gib: float
    accelerator: str | None
    gpus: int


@dataclass(frozen=True)
class AcceleratorSpec:
    name: str
    description: str
    max_cards: int


def _last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def name_filter(names: Iterable[str]) -> str:
    """A Compute Engine list filter matching any of ``names`` exactly."""
    return " OR ".join(f'(name = "{n}")' for n in sorted(set(names)))


def fetch_zones(
    client: ZonesApi, project: str, regions: Sequence[str], policy: CallPolicy
) -> tuple[GcpZone, ...]:
    """The zones of ``regions`` that are UP (a DOWN zone takes no launches)."""
    wanted = set(regions)
    out: list[GcpZone] = []
    with gcp_call("compute.zones.list"):
        for z in client.list(request={"project": project}, **policy.kwargs()):
            region = _last(str(z.region))
            if region in wanted and str(z.status) == "UP":
                out.append(GcpZone(name=str(z.name), region=region))
    return tuple(sorted(out, key=lambda z: z.name))


def _spec(mt: MachineType, skipped: Counter[str]) -> MachineTypeSpec | None:
    if mt.is_shared_cpu or mt.guest_cpus < 1 or mt.memory_mb <= 0:
        skipped["shared-core or empty machine type"] += 1
        return None
    accelerators = [a for a in mt.accelerators if a.guest_accelerator_count > 0]
    if len(accelerators) > 1:
        skipped["machine type with two accelerator kinds"] += 1
        return None
    acc = accelerators[0] if accelerators else None
    return MachineTypeSpec(
        name=str(mt.name),
        vcpus=int(mt.guest_cpus),
        memory_gib=float(mt.memory_mb) / _MIB_PER_GIB,
        accelerator=str(acc.guest_accelerator_type) if acc else None,
        gpus=int(acc.guest_accelerator_count) if acc else 0,
    )


def fetch_machine_types(
    client: MachineTypesApi,
    project: str,
    names: Sequence[str],
    zones: Iterable[str],
    policy: CallPolicy,
    skipped: Counter[str],
) -> dict[str, dict[str, MachineTypeSpec]]:
    """zone -> machine type -> spec, for the types in ``names`` offered in ``zones``."""
    wanted_zones = set(zones)
    out: dict[str, dict[str, MachineTypeSpec]] = {z: {} for z in sorted(wanted_zones)}
    request = {"project": project, "filter": name_filter(names)}
    with gcp_call("compute.machineTypes.aggregatedList"):
        for scope, scoped in client.aggregated_list(request=request, **policy.kwargs()):
            zone = _last(str(scope))
            if zone not in wanted_zones:
                continue
            for mt in scoped.machine_types:
                spec = _spec(mt, skipped)
                if spec is not None and spec.name in names:
                    out[zone][spec.name] = spec
    return out


def fetch_accelerators(
    client: AcceleratorTypesApi, project: str, names: Iterable[str], policy: CallPolicy
) -> dict[str, AcceleratorSpec]:
    """Accelerator type name -> spec, for ``names`` (any zone offering them)."""
    wanted = set(names)
    if not wanted:
        return {}
    out: dict[str, AcceleratorSpec] = {}
    request = {"project": project, "filter": name_filter(wanted)}
    with gcp_call("compute.acceleratorTypes.aggregatedList"):
        for _scope, scoped in client.aggregated_list(request=request, **policy.kwargs()):
            for acc in scoped.accelerator_types:
                out.setdefault(
                    str(acc.name),
                    AcceleratorSpec(
                        name=str(acc.name),
                        description=str(acc.description),
                        max_cards=int(acc.maximum_cards_per_instance),
                    ),
                )
    return out


def gpu_model(accelerator: str, specs: Mapping[str, AcceleratorSpec]) -> str:
    """The catalog's GPU model name for an accelerator type; for one the
    table lacks, its description without the vendor (``NVIDIA H200 141GB``
    -> ``H200-141GB``), else the type name upper-cased."""
    if accelerator in GPU_MODELS:
        return GPU_MODELS[accelerator]
    spec = specs.get(accelerator)
    if spec is not None and spec.description.strip():
        words = spec.description.split()
        if words[0].upper() == "NVIDIA" and len(words) > 1:
            words = words[1:]
        return "-".join(words).upper()
    return accelerator.upper()


def instance_type(
    spec: MachineTypeSpec, accelerators: Mapping[str, AcceleratorSpec]
) -> InstanceType:
    """The shared ``InstanceType``: units are GPUs, or vCPUs without GPUs.
    GPU memory comes from the catalog where it knows the type."""
    known = catalog.CATALOG.get(spec.name)
    gpu_memory = (
        known.instance.gpu_memory_gib
        if known is not None and known.provider is Provider.GCP
        else None
    )
    return InstanceType(
        provider=Provider.GCP,
        name=spec.name,
        family=spec.name.split("-")[0],
        units=spec.gpus if spec.gpus > 0 else spec.vcpus,
        gpu_model=gpu_model(spec.accelerator, accelerators) if spec.accelerator else None,
        gpus=spec.gpus,
        vcpus=spec.vcpus,
        memory_gib=spec.memory_gib,
        gpu_memory_gib=gpu_memory,
    )
