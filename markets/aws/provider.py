"""The AWS provider: launch, terminate and list our EC2 instances; read notices.

Owns: ``AwsProvider`` (a ``markets.protocols.Provider``) and the factory
``open_aws_provider`` that ``markets.registry.PROVIDERS`` names.

Idempotency, in two layers. Every launch carries the request's
idempotency key twice: as EC2's ``ClientToken`` (EC2 itself answers a repeat
with the same reservation, for at least 24 hours after the instances end) and
as the ``LAUNCH_KEY_TAG`` tag. Before calling RunInstances the provider looks
the key up by tag; instances found are returned with ``replayed=True``, so a
daemon that crashed between the call and recording its result learns what
the key launched. (EC2's describe calls are eventually consistent: right
after a launch the tag lookup can miss, and then ClientToken answers.)

Ownership: every instance launched carries ``OWNER_TAG`` = the provider's
``owner``; ``terminate`` describes the ids first and never passes an id
without that tag to TerminateInstances (the IAM policy conditions on the same
tag). Notices about instances visibly not ours (the account-wide EventBridge
rule sees every instance) are acknowledged and dropped.

Reserved capacity: with ``use_reservations`` an on-demand launch targets a
held Capacity Block or ODCR of its pool, active now with room for the whole
request (the one ending first: its hours are lost when unused), through
``markets.aws.blocks.launch_target``; without one, an ordinary on-demand
launch. The provider never buys a block.

Errors leave as the project's tree (``markets.aws.errors``): capacity codes
of a launch -> ``CapacityUnavailableError(pool_key=...)`` at once (botocore
does not retry them, see ``markets.aws.settings``); throttling and 5xx after
botocore's retries -> ``ThrottledError`` / ``TransientError``; account limits
-> ``QuotaExceededError``; credentials and permissions -> ``AuthError``.

Must not: decide what to launch or where (the broker does), retry by itself,
or touch an instance without our tag.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from markets.aws.blocks import CapacityBlocksApi, fetch_held_blocks, launch_target
from markets.aws.errors import LAUNCH_CAPACITY_CODES, aws_call
from markets.aws.launch import (
    LAUNCH_KEY_TAG,
    LIVE_STATES,
    RegionLaunch,
    instance_from_ec2,
    run_instances_params,
    units_from_catalog,
)
from markets.aws.notices import NoticeOrigin, SqsApi, SqsNotices
from markets.aws.settings import (
    AwsProviderSettings,
    Ec2ProviderApi,
    build_provider_clients,
    queue_account,
    settings_from_options,
)
from markets.blocks import CapacityBlock
from markets.cloud_fleet import (
    OWNER_TAG,
    ActionResult,
    ErrorKind,
    Instance,
    LaunchRequest,
    Notice,
    TerminateRequest,
)
from markets.errors import InputError, TransientError
from markets.escape import log_safe
from markets.model import Pool, Provider, Tier

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_ec2.type_defs import FilterTypeDef, InstanceTypeDef

__all__ = ["AwsProvider", "open_aws_provider"]

log = logging.getLogger(__name__)

# DescribeInstances filter values and TerminateInstances ids per call: AWS
# caps filter values at 200 per filter, so one chunk size serves both.
_IDS_PER_CALL = 200
# Instance id -> pool key of instances we launched or listed, for notices.
_POOL_CACHE_SIZE = 10_000
_GONE = ("shutting-down", "terminated")


def _chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    for i in range(0, len(ids), _IDS_PER_CALL):
        yield list(ids[i : i + _IDS_PER_CALL])


class AwsProvider:
    """EC2 instances tagged ``OWNER_TAG = owner`` in the regions of
    ``launch``, and notices from an SQS queue (``notices=None``: none).

    Clients are injected (tests pass moto clients); ``from_settings`` and
    ``open_aws_provider`` build real ones.
    """

    name = "aws"

    def __init__(
        self,
        *,
        owner: str,
        ec2_clients: Mapping[str, Ec2ProviderApi],
        launch: Mapping[str, RegionLaunch],
        notices: SqsNotices | None = None,
        units: Mapping[str, int] | None = None,
        reservations: Mapping[str, CapacityBlocksApi] | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        missing = sorted(set(launch) - set(ec2_clients))
        if missing:
            raise ValueError(f"no EC2 client for launch regions {missing}")
        self.owner = owner
        self.ec2_clients = dict(ec2_clients)
        self.launch_settings = dict(launch)
        self.notices = notices
        self._units = dict(units or {})
        # region -> the client that reads held reservations (None: not used)
        self._reservations = dict(reservations or {})
        self._now = now
        self._pools: dict[str, str] = {}
        self._lock = threading.Lock()
        self.foreign_notices = 0  # acked and dropped: about instances not ours

    @classmethod
    def from_settings(
        cls,
        settings: AwsProviderSettings,
        *,
        profile: str | None = None,
        endpoint_url: str | None = None,
        session: boto3.Session | None = None,
    ) -> AwsProvider:
        """Real boto3 clients for ``settings`` (default credential chain or
        ``profile``; ``endpoint_url`` for a local moto server)."""
        clients = build_provider_clients(
            settings, session=session, profile=profile, endpoint_url=endpoint_url
        )
        return cls.from_clients(
            settings, ec2_clients=clients.ec2, sqs_client=clients.sqs, account_id=clients.account_id
        )

    @classmethod
    def from_clients(
        cls,
        settings: AwsProviderSettings,
        *,
        ec2_clients: Mapping[str, Ec2ProviderApi],
        sqs_client: SqsApi | None = None,
        account_id: str | None = None,
    ) -> AwsProvider:
        """A provider for ``settings`` over given clients. Notices must come
        from ``account_id``, else ``settings.account_id``, else the account
        in the queue URL, and from the launch regions."""
        notices = None
        if settings.queue_url:
            if sqs_client is None:
                raise InputError("provider options", "queue_url", "an SQS client for the queue")
            account = account_id or settings.account_id or queue_account(settings.queue_url)
            if account is None:
                raise InputError(
                    "provider options", "account_id", "the 12-digit AWS account notices come from"
                )
            notices = SqsNotices(
                sqs_client,
                settings.queue_url,
                origin=NoticeOrigin(account, frozenset(settings.regions)),
                wait_time_s=settings.notice_wait_s,
                visibility_timeout_s=settings.notice_visibility_timeout_s,
            )
        return cls(
            owner=settings.owner,
            ec2_clients=ec2_clients,
            launch=settings.launch,
            notices=notices,
            units=settings.units,
            reservations=(
                {r: cast("CapacityBlocksApi", c) for r, c in ec2_clients.items()}
                if settings.use_reservations
                else None
            ),
        )

    # -- helpers ---------------------------------------------------------------

    def _check_owner(self, owner: str) -> None:
        if owner != self.owner:
            raise InputError("owner", None, f"this provider's owner {self.owner!r}", got=owner)

    def _pool(self, pool_key: str) -> Pool:
        try:
            pool = Pool.from_key(pool_key)
        except ValueError as e:
            raise InputError("pool_key", None, "aws/<region>/<zone>/<type>", got=pool_key) from e
        if pool.provider is not Provider.AWS or pool.region not in self.launch_settings:
            raise InputError(
                "pool_key",
                None,
                f"an aws pool in a configured region ({', '.join(sorted(self.launch_settings))})",
                got=pool_key,
            )
        return pool

    def units_for(self, instance_type: str) -> int | None:
        """Capacity units of ``instance_type``: configured, else the catalog's."""
        return self._units.get(instance_type) or units_from_catalog(instance_type)

    def _remember(self, instance_id: str, pool_key: str) -> None:
        with self._lock:
            self._pools.pop(instance_id, None)
            self._pools[instance_id] = pool_key
            while len(self._pools) > _POOL_CACHE_SIZE:
                self._pools.pop(next(iter(self._pools)))

    def _describe(self, region: str, filters: list[FilterTypeDef]) -> Iterator[InstanceTypeDef]:
        """Every instance matching ``filters`` in ``region`` (paginated)."""
        pages = self.ec2_clients[region].get_paginator("describe_instances")
        with aws_call("ec2:DescribeInstances"):
            for page in pages.paginate(Filters=filters):
                for reservation in page.get("Reservations", []):
                    yield from reservation.get("Instances", [])

    def _by_ids(self, ids: Sequence[str]) -> dict[str, tuple[str, InstanceTypeDef]]:
        """id -> (region, description) for the ids found in any region."""
        found: dict[str, tuple[str, InstanceTypeDef]] = {}
        for region in sorted(self.ec2_clients):
            left = [i for i in ids if i not in found]
            for chunk in _chunks(left):
                for item in self._describe(region, [{"Name": "instance-id", "Values": chunk}]):
                    found[str(item["InstanceId"])] = (region, item)
        return found

    # -- Provider --------------------------------------------------------------

    def list_fleet(self, owner: str) -> Sequence[Instance]:
        self._check_owner(owner)
        fleet: list[Instance] = []
        filters: list[FilterTypeDef] = [
            {"Name": f"tag:{OWNER_TAG}", "Values": [owner]},
            {"Name": "instance-state-name", "Values": sorted(LIVE_STATES)},
        ]
        for region in sorted(self.ec2_clients):
            for item in self._describe(region, filters):
                instance = instance_from_ec2(item, region, self.units_for)
                if instance is not None and instance.tags.get(OWNER_TAG) == owner:
                    fleet.append(instance)
                    self._remember(instance.instance_id, instance.pool_key)
        return sorted(fleet, key=lambda i: i.instance_id)

    def launched_by(self, region: str, idempotency_key: str) -> tuple[str, ...]:
        """Ids of our instances (in any state) tagged with ``idempotency_key``."""
        filters: list[FilterTypeDef] = [
            {"Name": f"tag:{LAUNCH_KEY_TAG}", "Values": [idempotency_key]},
            {"Name": f"tag:{OWNER_TAG}", "Values": [self.owner]},
        ]
        return tuple(sorted(str(i["InstanceId"]) for i in self._describe(region, filters)))

    def launch(self, request: LaunchRequest) -> ActionResult:
        self._check_owner(request.owner)
        pool = self._pool(request.pool_key)
        units = self.units_for(pool.instance_type)
        if units is None:
            raise InputError(
                "provider options",
                f"units.{pool.instance_type}",
                "capacity units for a type the catalog does not know",
            )
        key = request.idempotency_key
        existing = self.launched_by(pool.region, key)
        if existing:
            for instance_id in existing:
                self._remember(instance_id, pool.key)
            log.info("launch replayed: key=%s instances=%s", key, ",".join(existing))
            return ActionResult(idempotency_key=key, ok=True, instance_ids=existing, replayed=True)
        settings = self.launch_settings[pool.region]
        try:
            params = run_instances_params(request, pool, settings, units)
        except KeyError as e:
            raise InputError(
                "provider options",
                f"launch.{pool.region}.subnets",
                "a subnet for every zone the plan may use",
                got=pool.zone,
            ) from e
        held = self.reservation_for(pool, request) if request.tier is Tier.ON_DEMAND else None
        if held is not None:
            extra: dict[str, Any] = launch_target(held)
            params.update(extra)  # type: ignore[typeddict-item]
        ec2 = self.ec2_clients[pool.region]
        with aws_call("ec2:RunInstances", capacity_codes=LAUNCH_CAPACITY_CODES, pool_key=pool.key):
            reply = ec2.run_instances(**params)
        ids = tuple(str(i["InstanceId"]) for i in reply.get("Instances", []))
        for instance_id in ids:
            self._remember(instance_id, pool.key)
        log.info(
            "launched: key=%s pool=%s tier=%s workload=%s instances=%s",
            key,
            pool.key,
            request.tier.value,
            request.workload,
            ",".join(ids),
        )
        return ActionResult(idempotency_key=key, ok=True, instance_ids=ids)

    def reservation_for(self, pool: Pool, request: LaunchRequest) -> CapacityBlock | None:
        """The held reservation an on-demand ``request`` in ``pool`` goes into:
        active now, its type and zone, room for every instance; the one
        ending first, then by id (``None``: none, or reservations not used)."""
        client = self._reservations.get(pool.region)
        if client is None:
            return None
        now = self._now()
        held = fetch_held_blocks(client, pool.region, now + timedelta(days=1))
        fits = [b for b in held if b.instance_type == pool.instance_type and b.zone == pool.zone
                and b.start <= now < b.end and b.count >= request.count]  # fmt: skip
        return min(fits, key=lambda b: (b.end, b.block_id), default=None)

    def terminate(self, request: TerminateRequest) -> ActionResult:
        """Terminate the requested instances that carry our ownership tag.

        Instances without it are refused (``ok=False``, ``ErrorKind.INPUT``)
        while the rest are still terminated. Ids that are already shutting
        down, terminated, or no longer described (EC2 forgets a terminated
        instance after about an hour) count as ended; when every id was
        already ended, nothing is called and ``replayed`` is true.
        """
        self._check_owner(request.owner)
        ids = list(dict.fromkeys(request.instance_ids))
        found = self._by_ids(ids)
        refused: list[str] = []
        live: dict[str, list[str]] = {}
        for instance_id in ids:
            if instance_id not in found:
                log.info("terminate: %s not found in any region: already gone", instance_id)
                continue
            region, item = found[instance_id]
            tags = {str(t["Key"]): str(t.get("Value", "")) for t in item.get("Tags", [])}
            if tags.get(OWNER_TAG) != request.owner:
                refused.append(instance_id)
            elif item.get("State", {}).get("Name") not in _GONE:
                live.setdefault(region, []).append(instance_id)
        for region, region_ids in sorted(live.items()):
            for chunk in _chunks(region_ids):
                with aws_call("ec2:TerminateInstances"):
                    self.ec2_clients[region].terminate_instances(InstanceIds=chunk)
        ended = tuple(i for i in ids if i not in refused)
        log.info(
            "terminate: key=%s terminated=%d already_ended=%d refused=%d reason=%s",
            request.idempotency_key,
            sum(len(v) for v in live.values()),
            len(ended) - sum(len(v) for v in live.values()),
            len(refused),
            request.reason,
        )
        error = None
        if refused:
            error = f"refused {len(refused)} instance(s) without {OWNER_TAG}={request.owner}: "
            error += ", ".join(refused)
            log.warning("terminate: %s", error)
        return ActionResult(
            idempotency_key=request.idempotency_key,
            ok=not refused,
            instance_ids=ended,
            replayed=not live and not refused,
            error=error,
            error_kind=ErrorKind.INPUT if refused else None,
        )

    def poll_notices(self, max_notices: int = 10) -> Sequence[Notice]:
        """Notices from the queue, with ``pool_key`` filled in for instances
        we know; notices about instances that exist without our tag are
        acknowledged and dropped."""
        if self.notices is None:
            return ()
        notices = self.notices.poll(max_notices)
        return self._with_pools(notices)

    def _with_pools(self, notices: Sequence[Notice]) -> list[Notice]:
        unknown = sorted({n.instance_id for n in notices} - set(self._pools))
        foreign: set[str] = set()
        if unknown:
            try:
                for instance_id, (region, item) in self._by_ids(unknown).items():
                    tags = {str(t["Key"]): str(t.get("Value", "")) for t in item.get("Tags", [])}
                    if tags.get(OWNER_TAG) != self.owner:
                        foreign.add(instance_id)
                        continue
                    zone = item.get("Placement", {}).get("AvailabilityZone", "")
                    self._remember(instance_id, f"aws/{region}/{zone}/{item['InstanceType']}")
            except TransientError as e:
                # The notices matter more than their pool keys: pass them on.
                log.warning("notice enrichment skipped (DescribeInstances failed): %s", log_safe(e))
        out: list[Notice] = []
        for notice in notices:
            if notice.instance_id in foreign:
                self.foreign_notices += 1
                try:
                    self.ack_notice(notice)
                except TransientError as e:
                    log.warning(
                        "could not ack a foreign notice (it will return): notice=%s %s",
                        log_safe(notice.notice_id),
                        log_safe(e),
                    )
                continue
            pool_key = self._pools.get(notice.instance_id)
            out.append(notice.model_copy(update={"pool_key": pool_key}) if pool_key else notice)
        return out

    def dropped_notices(self) -> Mapping[str, int]:
        """Queue messages not handed over as notices so far, by reason:
        ``malformed``, ``rejected`` (not from our account, region or
        instance), ``foreign`` (not a notice), ``not_ours`` (about an
        instance without our tag)."""
        stats = self.notices.stats if self.notices is not None else None
        return {
            "malformed": stats.malformed if stats else 0,
            "rejected": stats.rejected if stats else 0,
            "foreign": stats.foreign if stats else 0,
            "not_ours": self.foreign_notices,
        }

    def ack_notice(self, notice: Notice) -> None:
        if self.notices is None:
            raise ValueError("this provider has no notice queue (queue_url not set)")
        self.notices.ack(notice)


def open_aws_provider(
    *,
    profile: str | None = None,
    endpoint_url: str | None = None,
    session: boto3.Session | None = None,
    ec2_clients: Mapping[str, Ec2ProviderApi] | None = None,
    sqs_client: SqsApi | None = None,
    **settings_options: object,
) -> AwsProvider:
    """The registry's factory: ``open_provider("aws", owner=..., launch=...,
    queue_url=...)``. ``settings_options`` are ``AwsProviderSettings`` fields
    (validated there); ``profile`` / ``endpoint_url`` / ``session`` say how to
    build clients, or ``ec2_clients`` / ``sqs_client`` are used as they are."""
    settings = settings_from_options({k: v for k, v in settings_options.items() if v is not None})
    if ec2_clients is not None:
        missing = sorted(set(settings.regions) - set(ec2_clients))
        if missing:
            raise InputError("provider options", "launch", "regions with a client", got=missing)
        return AwsProvider.from_clients(settings, ec2_clients=ec2_clients, sqs_client=sqs_client)
    return AwsProvider.from_settings(
        settings, profile=profile, endpoint_url=endpoint_url, session=session
    )
