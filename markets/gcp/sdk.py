"""The narrow Google Compute Engine surface the GCP adapters use, and how
clients are built.

Owns: the manifest of every Compute Engine REST method called
(``GCP_MARKET_API_CALLS``, ``GCP_PROVIDER_API_CALLS``, ``GCP_API_CALLS``; the
fake server in ``tests/fakes/gcp.py`` records the methods really called and a
test keeps the two equal), the IAM permissions those calls need
(``GCP_IAM_PERMISSIONS``, for a least-privilege custom role), the protocols
naming only the client methods used, ``CallPolicy`` (retry and timeout of
every call), ``build_compute_clients`` and ``credentials_from_file`` (a
credentials file named in the daemon's config, with the Compute scope).

Retries are google-api-core's (``Retry`` with jittered exponential backoff on
429 and 5xx), bounded by ``CallPolicy.retry_timeout_s``, never a loop of ours.
Mutating calls (insert, delete) are retried too: they carry a ``requestId``,
so Compute Engine answers a repeat with the first operation instead of acting
twice.

Must not: parse responses or hold market logic. ``google.cloud.compute_v1``
is imported only inside ``build_compute_clients`` and ``CallPolicy.retry``
(and named, for the type checker only, in the protocols below).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypedDict

from markets.errors import InputError

if TYPE_CHECKING:
    from google.api_core.extended_operation import ExtendedOperation
    from google.api_core.retry import Retry
    from google.auth.credentials import Credentials
    from google.cloud.compute_v1 import Instance, Operation, Project, Region
    from google.cloud.compute_v1.services.accelerator_types import (
        pagers as accelerator_types_pagers,
    )
    from google.cloud.compute_v1.services.future_reservations import (
        pagers as future_reservations_pagers,
    )
    from google.cloud.compute_v1.services.instances import pagers as instances_pagers
    from google.cloud.compute_v1.services.machine_types import pagers as machine_types_pagers
    from google.cloud.compute_v1.services.region_commitments import (
        pagers as region_commitments_pagers,
    )
    from google.cloud.compute_v1.services.zone_operations import (
        pagers as zone_operations_pagers,
    )
    from google.cloud.compute_v1.services.zones import pagers as zones_pagers

__all__ = [
    "GCP_API_CALLS",
    "GCP_COMMITMENT_API_CALLS",
    "GCP_IAM_PERMISSIONS",
    "GCP_MARKET_API_CALLS",
    "GCP_PROVIDER_API_CALLS",
    "GCP_QUOTA_API_CALLS",
    "AcceleratorTypesApi",
    "CallOptions",
    "CallPolicy",
    "ComputeClients",
    "FutureReservationsApi",
    "InstancesApi",
    "MachineTypesApi",
    "ProjectsApi",
    "RegionCommitmentsApi",
    "RegionsApi",
    "RequestDict",
    "ZoneOperationsApi",
    "ZonesApi",
    "build_compute_clients",
    "credentials_from_file",
]

# Compute Engine REST methods, as the API's discovery document names them.
GCP_MARKET_API_CALLS: frozenset[str] = frozenset(
    {
        "compute.zones.list",
        "compute.machineTypes.aggregatedList",
        "compute.acceleratorTypes.aggregatedList",
    }
)
GCP_PROVIDER_API_CALLS: frozenset[str] = frozenset(
    {
        "compute.instances.insert",
        "compute.instances.get",
        "compute.instances.list",
        "compute.instances.aggregatedList",
        "compute.instances.delete",
        "compute.zoneOperations.list",
        "compute.zoneOperations.wait",
    }
)
# What the project already owns (``markets.gcp.commitments``): read-only.
GCP_COMMITMENT_API_CALLS: frozenset[str] = frozenset({"compute.regionCommitments.aggregatedList"})
# The GPU quotas a plan keeps to (``markets.gcp.quotas``): read-only.
GCP_QUOTA_API_CALLS: frozenset[str] = frozenset({"compute.regions.get", "compute.projects.get"})
GCP_API_CALLS: frozenset[str] = (
    GCP_MARKET_API_CALLS | GCP_PROVIDER_API_CALLS | GCP_COMMITMENT_API_CALLS | GCP_QUOTA_API_CALLS
)

# IAM permissions for a custom role. aggregatedList and wait are authorised
# by the list/get permission of their resource. Creating a VM the way the
# provider does also checks (Compute Engine docs, "Create a VM instance",
# required permissions): setLabels and setMetadata (labels and metadata in
# the insert body), disks.create (a boot disk), subnetworks.use (its NIC),
# images.useReadOnly or instanceTemplates.useReadOnly (its source), and
# iam.serviceAccounts.actAs when a service account is attached.
GCP_IAM_PERMISSIONS: frozenset[str] = frozenset(
    {
        "compute.zones.list",
        "compute.machineTypes.list",
        "compute.acceleratorTypes.list",
        "compute.instances.create",
        "compute.instances.get",
        "compute.instances.list",
        "compute.instances.delete",
        "compute.instances.setLabels",
        "compute.instances.setMetadata",
        "compute.disks.create",
        "compute.subnetworks.use",
        "compute.images.useReadOnly",
        "compute.instanceTemplates.useReadOnly",
        "compute.zoneOperations.list",
        "compute.zoneOperations.get",
        "compute.commitments.list",
        "compute.regions.get",
        "compute.projects.get",
    }
)


# A request message as a dict of its fields, as every generated method takes
# it (``request: Message | dict``); the union lets callers pass a literal of
# strings as well as a nested body (dict is invariant in its values).
RequestDict = dict[str, str] | dict[str, object]


class CallOptions(TypedDict):
    """``retry=`` and ``timeout=`` of one generated client method."""

    retry: Retry
    timeout: float


class ZonesApi(Protocol):
    """``compute_v1.ZonesClient``: ``list`` only."""

    def list(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> zones_pagers.ListPager: ...


class MachineTypesApi(Protocol):
    """``compute_v1.MachineTypesClient``: ``aggregated_list`` only."""

    def aggregated_list(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> machine_types_pagers.AggregatedListPager: ...


class AcceleratorTypesApi(Protocol):
    """``compute_v1.AcceleratorTypesClient``: ``aggregated_list`` only."""

    def aggregated_list(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> accelerator_types_pagers.AggregatedListPager: ...


class RegionCommitmentsApi(Protocol):
    """``compute_v1.RegionCommitmentsClient``: ``aggregated_list`` only."""

    def aggregated_list(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> region_commitments_pagers.AggregatedListPager: ...


class FutureReservationsApi(Protocol):
    """``compute_v1.FutureReservationsClient``: ``aggregated_list`` only."""

    def aggregated_list(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> future_reservations_pagers.AggregatedListPager: ...


class RegionsApi(Protocol):
    """``compute_v1.RegionsClient``: ``get`` only (a region's quotas)."""

    def get(self, *, request: RequestDict, retry: Retry, timeout: float) -> Region: ...


class ProjectsApi(Protocol):
    """``compute_v1.ProjectsClient``: ``get`` only (the project-wide quotas)."""

    def get(self, *, request: RequestDict, retry: Retry, timeout: float) -> Project: ...


class InstancesApi(Protocol):
    """``compute_v1.InstancesClient``: the five methods the provider calls."""

    def insert(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> ExtendedOperation: ...

    def get(self, *, request: RequestDict, retry: Retry, timeout: float) -> Instance: ...

    def list(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> instances_pagers.ListPager: ...

    def aggregated_list(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> instances_pagers.AggregatedListPager: ...

    def delete(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> ExtendedOperation: ...


class ZoneOperationsApi(Protocol):
    """``compute_v1.ZoneOperationsClient``: ``list`` (preemptions) and
    ``wait`` (an insert's outcome; the server holds the call up to 2 min)."""

    def list(
        self, *, request: RequestDict, retry: Retry, timeout: float
    ) -> zone_operations_pagers.ListPager: ...

    def wait(self, *, request: RequestDict, retry: Retry, timeout: float) -> Operation: ...


@dataclass(frozen=True)
class CallPolicy:
    """Retry and timeout applied to every Compute Engine call.

    ``retry_timeout_s`` bounds all retries of one call (api-core's
    ``Retry(timeout=...)``); sleeps start at ``initial_s`` and grow by 2 up to
    ``maximum_s`` with jitter. ``request_s`` is one HTTP request's timeout;
    ``zoneOperations.wait`` gets ``wait_s`` more (the server may hold it 2 min).
    The generated clients' own defaults would retry list calls for 600 s:
    far longer than a planning tick or a 30 s preemption window.
    """

    retry_timeout_s: float = 30.0
    initial_s: float = 1.0
    maximum_s: float = 16.0
    request_s: float = 60.0
    wait_s: float = 120.0

    def retry(self) -> Retry:
        """A ``google.api_core.retry.Retry`` for 429, 500, 502, 503, 504."""
        from google.api_core import exceptions as gexc
        from google.api_core import retry as gretry

        return gretry.Retry(
            predicate=gretry.if_exception_type(
                gexc.TooManyRequests,
                gexc.InternalServerError,
                gexc.BadGateway,
                gexc.ServiceUnavailable,
                gexc.GatewayTimeout,
            ),
            initial=self.initial_s,
            maximum=self.maximum_s,
            multiplier=2.0,
            timeout=self.retry_timeout_s,
        )

    def kwargs(self) -> CallOptions:
        """``retry=`` and ``timeout=`` for a generated client method."""
        return {"retry": self.retry(), "timeout": self.request_s}


@dataclass(frozen=True)
class ComputeClients:
    """The Compute Engine clients the market and the provider use. ``None``
    where a side does not need one (the market has no instances client)."""

    zones: ZonesApi | None = None
    machine_types: MachineTypesApi | None = None
    accelerator_types: AcceleratorTypesApi | None = None
    instances: InstancesApi | None = None
    zone_operations: ZoneOperationsApi | None = None
    region_commitments: RegionCommitmentsApi | None = None
    future_reservations: FutureReservationsApi | None = None
    regions: RegionsApi | None = None
    projects: ProjectsApi | None = None


# Compute Engine's scope: the provider reads and writes instances only.
COMPUTE_SCOPES = ("https://www.googleapis.com/auth/compute",)


def credentials_from_file(path: str) -> Credentials:
    """Google credentials from a service-account key or a workload-identity
    (``external_account``) JSON file, each read by its own type's loader
    (google-auth's advice: a generic loader accepts any configuration it is
    handed); ``InputError`` naming the file when they cannot be read from it."""
    import json

    from google.auth import identity_pool
    from google.auth.exceptions import GoogleAuthError
    from google.oauth2 import service_account

    def refuse(why: str) -> InputError:
        return InputError("gcp", "credentials_file", f"a Google credentials JSON file ({why})",
                          got=path)  # fmt: skip

    try:
        with open(path, encoding="utf-8") as f:
            info = json.loads(f.read(_MAX_CREDENTIALS_BYTES + 1)[:_MAX_CREDENTIALS_BYTES])
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise refuse(f"unreadable: {type(e).__name__}") from e
    kind = info.get("type") if isinstance(info, dict) else None
    try:
        if kind == "service_account":
            sa: Callable[..., Credentials] = service_account.Credentials.from_service_account_info
            return sa(info, scopes=COMPUTE_SCOPES)
        if kind == "external_account":
            wif: Callable[..., Credentials] = identity_pool.Credentials.from_info
            return wif(info, scopes=COMPUTE_SCOPES)
    except (GoogleAuthError, ValueError, KeyError) as e:
        raise refuse(f"a {kind} file google-auth cannot read: {type(e).__name__}") from e
    raise refuse(f"type service_account or external_account, not {str(kind)[:40]!r}")


# A credentials file is a few KB; more is not one.
_MAX_CREDENTIALS_BYTES = 64 * 1024


def build_compute_clients(
    *,
    endpoint: str | None = None,
    credentials: Credentials | None = None,
    anonymous: bool = False,
    client_options: Mapping[str, object] | None = None,
) -> ComputeClients:
    """REST clients for every service; credentials from Application Default
    Credentials unless given. ``endpoint`` (``http://127.0.0.1:8080`` for a
    local fake) replaces ``compute.googleapis.com``; ``anonymous`` sends no
    credentials (only a fake accepts that)."""
    from google.cloud import compute_v1

    options: dict[str, object] = dict(client_options or {})
    if endpoint:
        options["api_endpoint"] = endpoint
    if anonymous and credentials is None:
        from google.auth.credentials import AnonymousCredentials

        # google-auth leaves AnonymousCredentials.__init__ unannotated: name
        # its type here so the call below is a typed one.
        anonymous_credentials: Callable[[], Credentials] = AnonymousCredentials
        credentials = anonymous_credentials()
    # credentials=None is each client's default: Application Default Credentials.
    opts = options or None
    return ComputeClients(
        zones=compute_v1.ZonesClient(
            transport="rest", client_options=opts, credentials=credentials
        ),
        machine_types=compute_v1.MachineTypesClient(
            transport="rest", client_options=opts, credentials=credentials
        ),
        accelerator_types=compute_v1.AcceleratorTypesClient(
            transport="rest", client_options=opts, credentials=credentials
        ),
        instances=compute_v1.InstancesClient(
            transport="rest", client_options=opts, credentials=credentials
        ),
        zone_operations=compute_v1.ZoneOperationsClient(
            transport="rest", client_options=opts, credentials=credentials
        ),
        region_commitments=compute_v1.RegionCommitmentsClient(
            transport="rest", client_options=opts, credentials=credentials
        ),
        future_reservations=compute_v1.FutureReservationsClient(
            transport="rest", client_options=opts, credentials=credentials
        ),
        regions=compute_v1.RegionsClient(
            transport="rest", client_options=opts, credentials=credentials
        ),
        projects=compute_v1.ProjectsClient(
            transport="rest", client_options=opts, credentials=credentials
        ),
    )
