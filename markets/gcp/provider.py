"""The GCP provider: launch, delete and list our Compute Engine VMs; read preemptions.

Owns: ``GcpProvider`` (a ``markets.protocols.Provider``) and the factory
``open_gcp_provider`` that ``markets.registry.PROVIDERS`` names.

A launch of ``count`` VMs is ``count`` ``instances.insert`` calls (one VM
each), sent together and then awaited (``zoneOperations.wait``), because
Compute Engine reports a stockout in the *operation*, not in the HTTP reply.
Spot VMs get ``scheduling.provisioningModel = SPOT`` and
``instanceTerminationAction`` (DELETE by default: see ``markets.gcp.settings``).

Idempotency, in three layers (``labels`` explains names and request ids):
(1) before inserting, the VMs carrying the request's launch-key label are
listed, and only missing ones are inserted (all present: ``replayed=True``);
(2) each VM's name derives from (owner, key, index), so Compute Engine itself
refuses a second VM of that name (409, taken as "already launched");
(3) each insert carries a ``requestId`` derived from the same, so api-core's
retry of an insert whose reply was lost returns the first operation.

Partial launches: inserts are per VM, so a stockout can hit after some VMs of
a gang were created. They are kept (they carry our labels and show in
``list_fleet``; the reconciler uses or ends them) and the launch raises
``CapacityUnavailableError``; a retry of the same key inserts only what is
missing. A rollback here would race with request-id replays (a deleted VM's
request id still answers "created").

Ownership: ``terminate`` reads each VM first and deletes only VMs whose
``spotfolio-owner`` label is ours; ids not of our form are refused.

Must not: decide what to launch or where, retry by itself (api-core does),
or touch a VM without our label.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from google.api_core import exceptions as gexc

from markets.clock import Clock, SystemClock
from markets.cloud_fleet import (
    ActionResult,
    ErrorKind,
    Instance,
    LaunchRequest,
    Notice,
    TerminateRequest,
)
from markets.errors import InputError
from markets.gcp.errors import gcp_call
from markets.gcp.labels import (
    LABEL_OF_TAG,
    LAUNCH_KEY_TAG,
    OWNER_LABEL,
    instance_from_gcp,
    instance_id,
    instance_name,
    launch_key_digest,
    owner_prefix,
    parse_instance_id,
    request_id,
    units_from_catalog,
)
from markets.gcp.operations import await_operations
from markets.gcp.preemption import PreemptionReader, parse_time
from markets.gcp.sdk import (
    CallPolicy,
    ComputeClients,
    InstancesApi,
    ZoneOperationsApi,
    build_compute_clients,
    credentials_from_file,
)
from markets.gcp.settings import GcpProviderSettings, insert_request, settings_from_options
from markets.model import Pool, Provider

if TYPE_CHECKING:  # types only: the Google clients load when a provider is built
    from google.api_core.extended_operation import ExtendedOperation
    from google.auth.credentials import Credentials
    from google.cloud.compute_v1 import Instance as GcpInstance

__all__ = ["GcpProvider", "open_gcp_provider"]

log = logging.getLogger(__name__)

_POOL_CACHE_SIZE = 10_000


class GcpProvider:
    """Compute Engine VMs labelled ``spotfolio-owner = owner`` in
    ``settings.project``, launched in ``settings.zones``; preemption notices
    from those zones' operations.

    Clients are injected (tests pass clients pointed at a local fake);
    ``from_settings`` and ``open_gcp_provider`` build real ones.
    """

    name = "gcp"

    def __init__(
        self,
        *,
        settings: GcpProviderSettings,
        instances: InstancesApi,
        zone_operations: ZoneOperationsApi,
        clock: Clock | None = None,
        policy: CallPolicy | None = None,
    ) -> None:
        self.settings = settings
        self.owner = settings.owner
        self.project = settings.project
        self.instances = instances
        self.zone_operations = zone_operations
        self._clock: Clock = clock or SystemClock()
        self._policy = policy or CallPolicy(retry_timeout_s=settings.retry_timeout_s)
        self._prefix = owner_prefix(settings.owner)
        self._pools: dict[str, str] = {}
        self._attempts: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()
        self.notices = PreemptionReader(
            zone_operations,
            settings.project,
            settings.zones,
            clock=self._clock,
            is_ours=lambda name: name.startswith(self._prefix),
            pool_of=self._pools.get,
            lookback_s=settings.notice_lookback_s,
            policy=self._policy,
        )

    @classmethod
    def from_clients(
        cls,
        settings: GcpProviderSettings,
        clients: ComputeClients,
        *,
        clock: Clock | None = None,
        policy: CallPolicy | None = None,
    ) -> GcpProvider:
        if clients.instances is None or clients.zone_operations is None:
            raise ValueError("the provider needs instances and zone operations clients")
        return cls(
            settings=settings,
            instances=clients.instances,
            zone_operations=clients.zone_operations,
            clock=clock,
            policy=policy,
        )

    @classmethod
    def from_settings(
        cls,
        settings: GcpProviderSettings,
        *,
        endpoint: str | None = None,
        credentials: Credentials | None = None,
        anonymous: bool = False,
        clock: Clock | None = None,
        policy: CallPolicy | None = None,
    ) -> GcpProvider:
        """Real REST clients (Application Default Credentials unless given)."""
        with gcp_call("credentials"):
            clients = build_compute_clients(
                endpoint=endpoint, credentials=credentials, anonymous=anonymous
            )
        return cls.from_clients(settings, clients, clock=clock, policy=policy)

    # -- helpers ---------------------------------------------------------------

    def _check_owner(self, owner: str) -> None:
        if owner != self.owner:
            raise InputError("owner", None, f"this provider's owner {self.owner!r}", got=owner)

    def _pool(self, pool_key: str) -> Pool:
        try:
            pool = Pool.from_key(pool_key)
        except ValueError as e:
            raise InputError("pool_key", None, "gcp/<region>/<zone>/<type>", got=pool_key) from e
        if pool.provider is not Provider.GCP or pool.zone not in self.settings.zones:
            raise InputError(
                "pool_key",
                None,
                f"a gcp pool in a configured zone ({', '.join(self.settings.zones)})",
                got=pool_key,
            )
        return pool

    def units_for(self, machine_type: str) -> int | None:
        return self.settings.units.get(machine_type) or units_from_catalog(machine_type)

    def _remember(self, iid: str, pool_key: str) -> None:
        with self._lock:
            self._pools.pop(iid, None)
            self._pools[iid] = pool_key
            while len(self._pools) > _POOL_CACHE_SIZE:
                self._pools.pop(next(iter(self._pools)))

    def _owner_filter(self) -> str:
        return f'(labels.{OWNER_LABEL} = "{self.owner}")'

    def _fleet(self) -> Iterator[tuple[str, GcpInstance]]:
        request = {"project": self.project, "filter": self._owner_filter()}
        with gcp_call("compute.instances.aggregatedList"):
            for scope, scoped in self.instances.aggregated_list(
                request=request, **self._policy.kwargs()
            ):
                zone = str(scope).rsplit("/", 1)[-1]
                for inst in scoped.instances:
                    yield zone, inst

    def launched_by(self, zone: str, key: str) -> dict[str, GcpInstance]:
        """Our VMs in ``zone`` labelled with launch key ``key``, by name."""
        label = LABEL_OF_TAG[LAUNCH_KEY_TAG]
        request = {
            "project": self.project,
            "zone": zone,
            "filter": f'{self._owner_filter()} AND (labels.{label} = "{launch_key_digest(key)}")',
        }
        with gcp_call("compute.instances.list"):
            found = self.instances.list(request=request, **self._policy.kwargs())
            return {str(i.name): i for i in found if i.labels.get(OWNER_LABEL) == self.owner}

    # -- Provider --------------------------------------------------------------

    def list_fleet(self, owner: str) -> Sequence[Instance]:
        self._check_owner(owner)
        fleet: list[Instance] = []
        for zone, inst in self._fleet():
            if inst.labels.get(OWNER_LABEL) != owner:
                continue  # the filter said so; the label decides
            instance = instance_from_gcp(inst, parse_time, zone)
            if instance is not None:
                fleet.append(instance)
                self._remember(instance.instance_id, instance.pool_key)
        return sorted(fleet, key=lambda i: i.instance_id)

    def launch(self, request: LaunchRequest) -> ActionResult:
        self._check_owner(request.owner)
        pool = self._pool(request.pool_key)
        units = self.units_for(pool.instance_type)
        if units is None:
            raise InputError(
                "provider options",
                f"units.{pool.instance_type}",
                "capacity units for a machine type the catalog does not know",
            )
        key = request.idempotency_key
        names = [instance_name(self.owner, key, i) for i in range(request.count)]
        existing = self.launched_by(pool.zone, key)
        missing = [i for i, n in enumerate(names) if n not in existing]
        for name in existing:
            self._remember(instance_id(pool.zone, name), pool.key)
        ids = tuple(instance_id(pool.zone, n) for n in names)
        if not missing:
            log.info("launch replayed: key=%s instances=%s", key, ",".join(ids))
            return ActionResult(idempotency_key=key, ok=True, instance_ids=ids, replayed=True)
        ops: dict[int, ExtendedOperation] = {}
        for i in missing:
            rid = request_id(self.owner, key, i, self._attempts[(key, i)])
            params = insert_request(self.settings, request, pool, i, units, rid)
            with gcp_call("compute.instances.insert", pool_key=pool.key):
                try:
                    ops[i] = self.instances.insert(request=params, **self._policy.kwargs())
                except gexc.Conflict:
                    # The name is taken: an earlier call created it and the
                    # label lookup above missed it (list is eventually consistent).
                    log.info("launch: %s already exists (key=%s)", names[i], key)
        errors = await_operations(
            self.zone_operations,
            self.project,
            pool.zone,
            ops,
            wait_s=self.settings.operation_wait_s,
            clock=self._clock,
            policy=self._policy,
            operation="compute.instances.insert",
            pool_key=pool.key,
        )
        for i in errors:
            self._attempts[(key, i)] += 1  # a failed request id answers "failed" forever
        kept = tuple(instance_id(pool.zone, n) for i, n in enumerate(names) if i not in errors)
        for iid in kept:
            self._remember(iid, pool.key)
        if errors:
            first = errors[min(errors)]
            log.warning(
                "launch: key=%s pool=%s: %d of %d VMs failed (%s); %d kept",
                key,
                pool.key,
                len(errors),
                len(names),
                first,
                len(kept),
            )
            raise first
        log.info(
            "launched: key=%s pool=%s tier=%s workload=%s instances=%s",
            key,
            pool.key,
            request.tier.value,
            request.workload,
            ",".join(ids),
        )
        return ActionResult(idempotency_key=key, ok=True, instance_ids=ids)

    def terminate(self, request: TerminateRequest) -> ActionResult:
        """Delete the requested VMs that carry our owner label.

        VMs without it, and ids not of the ``<zone>/<name>`` form, are refused
        (``ok=False``, ``ErrorKind.INPUT``) while the rest are deleted. VMs
        already gone (404) count as ended; when all were, ``replayed`` is true.
        """
        self._check_owner(request.owner)
        ids = list(dict.fromkeys(request.instance_ids))
        refused: list[str] = []
        deleted = 0
        for iid in ids:
            parsed = parse_instance_id(iid)
            if parsed is None:
                refused.append(iid)
                continue
            zone, name = parsed
            base = {"project": self.project, "zone": zone, "instance": name}
            with gcp_call("compute.instances.get"):
                try:
                    inst = self.instances.get(request=base, **self._policy.kwargs())
                except gexc.NotFound:
                    log.info("terminate: %s not found: already gone", iid)
                    continue
            if inst.labels.get(OWNER_LABEL) != request.owner:
                refused.append(iid)
                continue
            rid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{request.idempotency_key}/{iid}"))
            with gcp_call("compute.instances.delete"):
                try:
                    self.instances.delete(
                        request={**base, "request_id": rid}, **self._policy.kwargs()
                    )
                    deleted += 1
                except gexc.NotFound:
                    log.info("terminate: %s went away meanwhile", iid)
        ended = tuple(i for i in ids if i not in refused)
        error = None
        if refused:
            error = (
                f"refused {len(refused)} instance(s) without label {OWNER_LABEL}={request.owner}: "
            )
            error += ", ".join(refused)
            log.warning("terminate: %s", error)
        log.info(
            "terminate: key=%s deleted=%d already_ended=%d refused=%d reason=%s",
            request.idempotency_key,
            deleted,
            len(ended) - deleted,
            len(refused),
            request.reason,
        )
        return ActionResult(
            idempotency_key=request.idempotency_key,
            ok=not refused,
            instance_ids=ended,
            replayed=deleted == 0 and not refused,
            error=error,
            error_kind=ErrorKind.INPUT if refused else None,
        )

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        """New preemptions of our VMs (see ``markets.gcp.preemption``)."""
        return self.notices.poll(max_notices)

    def ack_notice(self, notice: Notice) -> None:
        """Nothing to do: zone operations are a log, not a queue; the store
        deduplicates on ``notice_id`` (the operation id)."""


def open_gcp_provider(
    *,
    clients: ComputeClients | None = None,
    endpoint: str | None = None,
    credentials: Credentials | None = None,
    anonymous: bool = False,
    clock: Clock | None = None,
    policy: CallPolicy | None = None,
    credentials_file: str | None = None,
    **settings_options: object,
) -> GcpProvider:
    """The registry's factory: ``open_provider("gcp", project=..., owner=...,
    zones=[...], instance_template=...)``. ``settings_options`` are
    ``GcpProviderSettings`` fields (validated there); ``endpoint`` /
    ``credentials`` / ``anonymous`` say how to build clients, or ``clients``
    (a ``ComputeClients``) are used as they are; ``clock`` and ``policy``;
    ``credentials_file``: credentials read from that file
    (``markets.gcp.sdk.credentials_from_file``) instead of the defaults."""
    settings = settings_from_options({k: v for k, v in settings_options.items() if v is not None})
    if credentials_file is not None and credentials is None:
        credentials = credentials_from_file(credentials_file)
    if clients is not None:
        return GcpProvider.from_clients(settings, clients, clock=clock, policy=policy)
    return GcpProvider.from_settings(
        settings,
        endpoint=endpoint,
        credentials=credentials,
        anonymous=anonymous,
        clock=clock,
        policy=policy,
    )
