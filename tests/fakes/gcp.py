"""A local fake of the Compute Engine REST API, for the GCP adapter tests.

``FakeCompute`` is an ``http.server`` on 127.0.0.1 (a free port) that answers
the google-cloud-compute REST clients (``client_options={"api_endpoint":
fake.url}``, ``AnonymousCredentials()``, ``transport="rest"``) with the JSON
shapes Compute Engine documents: zones.list, machineTypes.list /
aggregatedList (``accelerators`` per type), acceleratorTypes.list /
aggregatedList, regionCommitments.aggregatedList (``add_commitment``),
futureReservations.aggregatedList (``add_future_reservation``),
instances.insert / get / list / aggregatedList / delete
(labels, metadata, ``scheduling.provisioningModel``,
``instanceTerminationAction``, ``guestAccelerators``), zoneOperations.list /
get / wait (``compute.instances.preempted``), regions.get and projects.get
with their ``quotas`` (``set_quota``: a metric's limit and usage, per region
or project-wide; an insert past a region's GPU quota, counting the fake's own
VMs, fails with 403 ``QUOTA_EXCEEDED`` as Compute Engine answers). Lists paginate with
``maxResults`` / ``nextPageToken`` (``page_size`` items per page by default,
to exercise paging); ``filter`` accepts ``field = "v"`` / ``field != "v"``
terms joined by AND or OR (anything else is a 400, as the real API answers a
bad filter); ``orderBy="creationTimestamp desc"`` sorts operations.

Behaviour worth testing: a repeated ``requestId`` returns the first operation
and does nothing; a taken instance name is 409 ``alreadyExists``; an unknown
project, zone or instance is 404; ``quota()`` makes inserts fail with 403
``QUOTA_EXCEEDED`` (or as an operation error); ``stockout()`` makes insert
operations finish with ``ZONE_RESOURCE_POOL_EXHAUSTED``; ``fail_next()``
injects HTTP errors (before or after the request takes effect);
``preempt()`` records a preemption operation and deletes (or stops) the VM.

Bounded: the server stops itself after ``lifetime_s`` or ``max_requests``.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

API = "https://www.googleapis.com/compute/v1"
PACIFIC = timezone(timedelta(hours=-7))  # Compute Engine stamps times in US Pacific
# name -> (vCPUs, memory MB, accelerator, count); shapes from the GCP machine docs.
MACHINE_TYPES: dict[str, tuple[int, int, str | None, int]] = {
    "a2-highgpu-1g": (12, 87040, "nvidia-tesla-a100", 1),
    "a3-highgpu-8g": (208, 1916928, "nvidia-h100-80gb", 8),
    "g2-standard-4": (4, 16384, "nvidia-l4", 1),
    "n2-standard-8": (8, 32768, None, 0),
}
ACCELERATORS = {
    "nvidia-tesla-a100": ("NVIDIA A100 40GB", 16),
    "nvidia-h100-80gb": ("NVIDIA H100 80GB", 8),
    "nvidia-l4": ("NVIDIA L4", 8),
}
# accelerator -> its regional GPU quota metric (Compute Engine's names).
_GPU_METRICS = {
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
    "nvidia-l4": "NVIDIA_L4_GPUS",
}
# zone -> machine types offered there.
OFFERINGS: dict[str, tuple[str, ...]] = {
    "us-central1-a": ("a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4", "n2-standard-8"),
    "us-central1-b": ("a2-highgpu-1g", "g2-standard-4", "n2-standard-8"),
    "us-central1-c": ("a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4"),
    "us-east1-b": ("a2-highgpu-1g", "g2-standard-4"),
    "europe-west4-a": ("a2-highgpu-1g", "g2-standard-4"),
}
_TERM = re.compile(r'^\(?\s*([\w.\-]+)\s*(=|!=)\s*"?([^")]*)"?\s*\)?$')


def stamp(at: datetime) -> str:
    return at.astimezone(PACIFIC).isoformat(timespec="milliseconds")


def _error(status: int, message: str, reason: str, info: str | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {
        "code": status,
        "message": message,
        "errors": [{"message": message, "domain": "global", "reason": reason}],
    }
    if info:
        err["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": info,
                "domain": "compute.googleapis.com",
            }
        ]
    return {"error": err}


def _field(obj: Any, path: str) -> str:
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return "" if obj is None else str(obj)


def matches(item: dict[str, Any], expr: str) -> bool:
    """Compute Engine list filter, the subset the adapters use."""
    expr = expr.strip()
    if not expr:
        return True
    for op in (" OR ", " AND "):
        if op in expr:
            parts = [p.strip() for p in expr.split(op)]
            if any(" OR " in p or " AND " in p for p in parts):
                raise ValueError("mixed AND/OR")
            results = [matches(item, p) for p in parts]
            return any(results) if op == " OR " else all(results)
    m = _TERM.match(expr)
    if not m:
        raise ValueError(expr)
    got = _field(item, m.group(1))
    return (got == m.group(3)) if m.group(2) == "=" else (got != m.group(3))


@dataclass
class Injected:
    status: int
    reason: str
    info: str | None = None
    after: bool = False  # True: act first, then answer the error (a lost reply)


class FakeCompute:
    """State of one fake project and the HTTP server in front of it."""

    def __init__(
        self,
        *,
        project: str = "spotfolio-test",
        offerings: dict[str, tuple[str, ...]] | None = None,
        page_size: int = 2,
        now: Callable[[], datetime] | None = None,
        lifetime_s: float = 300.0,
        max_requests: int = 20_000,
    ) -> None:
        self.project = project
        self.offerings = dict(offerings or OFFERINGS)
        self.page_size = page_size
        self.now = now or (lambda: datetime.now(UTC))
        self.calls: Counter[str] = Counter()
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # method id, path, query
        self.instances: dict[tuple[str, str], dict[str, Any]] = {}
        self.operations: dict[tuple[str, str], dict[str, Any]] = {}
        self.by_request_id: dict[str, tuple[str, str]] = {}
        self.commitments: dict[str, list[dict[str, Any]]] = {}  # region -> commitments
        self.future_reservations: dict[str, list[dict[str, Any]]] = {}  # zone -> reservations
        self._inject: dict[str, list[Injected]] = {}
        self._quota: dict[str, str] = {}  # machine type -> "http" | "operation"
        # region (None: the project) -> metric -> (limit, usage outside the fake's VMs)
        self.quotas: dict[str | None, dict[str, tuple[float, float]]] = {}
        self._stockout: dict[tuple[str, str], int] = {}  # -> spare inserts left
        self._ids = itertools.count(7_000_000_000_000_000_001)
        self._lock = threading.RLock()
        self._max_requests = max_requests
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> FakeCompute:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeCompute:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scenario controls -------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int,
        reason: str,
        *,
        info: str | None = None,
        after: bool = False,
        times: int = 1,
    ) -> None:
        """The next ``times`` ``method`` calls answer ``status`` (after acting, if ``after``)."""
        with self._lock:
            faults = self._inject.setdefault(method, [])
            faults += [Injected(status, reason, info, after) for _ in range(times)]

    def quota(self, machine_type: str, *, mode: str = "http") -> None:
        self._quota[machine_type] = mode

    def set_quota(
        self, metric: str, limit: float, *, region: str | None = None, usage: float = 0.0
    ) -> None:
        """A quota regions.get (or, without ``region``, projects.get) lists."""
        with self._lock:
            self.quotas.setdefault(region, {})[metric] = (limit, usage)

    def _gpu_use(self, region: str | None, metric: str) -> float:
        """GPUs of the fake's VMs a metric counts: its region's (or all, for
        ``GPUS_ALL_REGIONS``); a Spot VM takes the ``PREEMPTIBLE_`` metric
        where its region lists one, else the standard one."""
        used = 0.0
        for (zone, _n), inst in self.instances.items():
            r = zone.rsplit("-", 1)[0]
            if region is not None and r != region:
                continue
            mt = inst["machineType"].rsplit("/", 1)[-1]
            _cpu, _mem, acc, count = MACHINE_TYPES.get(mt, (0, 0, None, 0))
            if acc is None or acc not in _GPU_METRICS:
                continue
            if metric == "GPUS_ALL_REGIONS":
                used += count
                continue
            spot = inst.get("scheduling", {}).get("provisioningModel") == "SPOT"
            takes = _GPU_METRICS[acc]
            if spot and "PREEMPTIBLE_" + takes in self.quotas.get(r, {}):
                takes = "PREEMPTIBLE_" + takes
            if takes == metric:
                used += count
        return used

    def _over_quota(
        self, zone: str, mt: str, body: dict[str, Any]
    ) -> tuple[str, float, str] | None:
        """The quota (metric, limit, where) a new VM would exceed, if any."""
        _cpu, _mem, acc, count = MACHINE_TYPES.get(mt, (0, 0, None, 0))
        if acc is None or acc not in _GPU_METRICS:
            return None
        region = zone.rsplit("-", 1)[0]
        spot = body.get("scheduling", {}).get("provisioningModel") == "SPOT"
        metric = _GPU_METRICS[acc]
        regional = self.quotas.get(region, {})
        if spot and "PREEMPTIBLE_" + metric in regional:
            metric = "PREEMPTIBLE_" + metric
        checks = [(region, metric), (None, "GPUS_ALL_REGIONS")]
        for where, m in checks:
            got = self.quotas.get(where, {}).get(m)
            if got is None:
                continue
            limit, usage = got
            if usage + self._gpu_use(where, m) + count > limit:
                return m, limit, f"region {where}" if where else "the project"
        return None

    def _quota_items(self, region: str | None) -> list[dict[str, Any]]:
        return [{"metric": m, "limit": lim, "usage": use + self._gpu_use(region, m)}
                for m, (lim, use) in sorted(self.quotas.get(region, {}).items())]  # fmt: skip

    def stockout(self, zone: str, machine_type: str, *, spare: int = 0) -> None:
        """Inserts of ``machine_type`` in ``zone`` fail (in their operation)
        once ``spare`` more have succeeded; ``spare=-1`` ends the stockout."""
        if spare < 0:
            self._stockout.pop((zone, machine_type), None)
        else:
            self._stockout[(zone, machine_type)] = spare

    def add_instance(
        self, zone: str, name: str, machine_type: str, **fields: Any
    ) -> dict[str, Any]:
        """An instance created by someone else (no requestId)."""
        with self._lock:
            inst = self._new_instance(zone, {"name": name, "machineType": machine_type, **fields})
            inst["status"] = "RUNNING"
            return inst

    def add_commitment(
        self,
        region: str,
        name: str,
        *,
        accelerator: str | None,
        amount: int,
        start: datetime,
        end: datetime,
        plan: str = "TWELVE_MONTH",
        status: str = "ACTIVE",
    ) -> dict[str, Any]:
        """A region commitment as ``regionCommitments`` lists it: GPUs of one
        accelerator type (or vCPUs with ``accelerator=None``)."""
        resources = (
            [{"type": "ACCELERATOR", "amount": str(amount), "acceleratorType": accelerator}]
            if accelerator
            else [{"type": "VCPU", "amount": str(amount)}]
        )
        item = {
            "kind": "compute#commitment",
            "id": str(next(self._ids)),
            "name": name,
            "region": f"{API}/projects/{self.project}/regions/{region}",
            "status": status,
            "plan": plan,
            "startTimestamp": stamp(start),
            "endTimestamp": stamp(end),
            "resources": resources,
        }
        self.commitments.setdefault(region, []).append(item)
        return item

    def add_future_reservation(
        self,
        zone: str,
        name: str,
        *,
        machine_type: str,
        count: int,
        start: datetime,
        end: datetime,
        procurement: str = "FULFILLED",
    ) -> dict[str, Any]:
        """A future reservation as ``futureReservations`` lists it: ``count``
        VMs of ``machine_type`` in ``zone`` from ``start`` to ``end``."""
        item = {
            "kind": "compute#futureReservation",
            "id": str(next(self._ids)),
            "name": name,
            "zone": self._zone_url(zone),
            "specificSkuProperties": {
                "instanceProperties": {"machineType": machine_type},
                "totalCount": str(count),
            },
            "timeWindow": {"startTime": stamp(start), "endTime": stamp(end)},
            "status": {"procurementStatus": procurement},
            "planningStatus": "SUBMITTED",
        }
        self.future_reservations.setdefault(zone, []).append(item)
        return item

    def preempt(self, zone: str, name: str, *, at: datetime | None = None) -> dict[str, Any]:
        """Preempt a VM: a ``compute.instances.preempted`` operation, then the
        VM's termination action (DELETE removes it; STOP leaves TERMINATED)."""
        with self._lock:
            inst = self.instances[(zone, name)]
            when = at or self.now()
            op = self._operation(zone, "compute.instances.preempted", inst, when, user="system")
            op.update(status="DONE", progress=100, statusMessage="Instance was preempted.")
            op["endTime"] = stamp(when + timedelta(seconds=30))
            if inst.get("scheduling", {}).get("instanceTerminationAction") == "STOP":
                inst["status"] = "TERMINATED"
            else:
                del self.instances[(zone, name)]
            return op

    # -- resources ---------------------------------------------------------------

    def _zone_url(self, zone: str) -> str:
        return f"{API}/projects/{self.project}/zones/{zone}"

    def _machine_type(self, zone: str, name: str) -> dict[str, Any]:
        vcpus, mem_mb, acc, count = MACHINE_TYPES[name]
        item: dict[str, Any] = {
            "kind": "compute#machineType",
            "id": str(zlib.crc32(name.encode())),
            "name": name,
            "description": f"{vcpus} vCPUs, {mem_mb // 1024} GB RAM",
            "guestCpus": vcpus,
            "memoryMb": mem_mb,
            "isSharedCpu": False,
            "zone": zone,
            "selfLink": f"{self._zone_url(zone)}/machineTypes/{name}",
        }
        if acc:
            item["accelerators"] = [{"guestAcceleratorType": acc, "guestAcceleratorCount": count}]
        return item

    def _accelerators(self, zone: str) -> list[dict[str, Any]]:
        names = sorted({MACHINE_TYPES[t][2] or "" for t in self.offerings[zone]} - {""})
        return [
            {
                "kind": "compute#acceleratorType",
                "name": n,
                "description": ACCELERATORS[n][0],
                "maximumCardsPerInstance": ACCELERATORS[n][1],
                "zone": self._zone_url(zone),
                "selfLink": f"{self._zone_url(zone)}/acceleratorTypes/{n}",
            }
            for n in names
        ]

    def _new_instance(self, zone: str, body: dict[str, Any]) -> dict[str, Any]:
        mt = str(body.get("machineType", "")).rsplit("/", 1)[-1]
        name = str(body["name"])
        inst = {
            **body,
            "kind": "compute#instance",
            "id": str(next(self._ids)),
            "zone": self._zone_url(zone),
            "machineType": f"{self._zone_url(zone)}/machineTypes/{mt}",
            "status": "PROVISIONING",
            "creationTimestamp": stamp(self.now()),
            "selfLink": f"{self._zone_url(zone)}/instances/{name}",
        }
        acc, count = MACHINE_TYPES[mt][2], MACHINE_TYPES[mt][3]
        if acc:
            url = f"{self._zone_url(zone)}/acceleratorTypes/{acc}"
            inst["guestAccelerators"] = [{"acceleratorType": url, "acceleratorCount": count}]
        self.instances[(zone, name)] = inst
        return inst

    def _operation(
        self, zone: str, kind: str, inst: dict[str, Any], at: datetime, user: str = "test@example"
    ) -> dict[str, Any]:
        op_id = str(next(self._ids))
        name = f"operation-{int(at.timestamp() * 1000)}-{op_id[-6:]}"
        op = {
            "kind": "compute#operation",
            "id": op_id,
            "name": name,
            "zone": self._zone_url(zone),
            "operationType": kind,
            "targetLink": inst["selfLink"],
            "targetId": inst["id"],
            "status": "RUNNING",
            "user": user,
            "progress": 0,
            "insertTime": stamp(at),
            "startTime": stamp(at),
            "creationTimestamp": stamp(at),
            "selfLink": f"{self._zone_url(zone)}/operations/{name}",
        }
        self.operations[(zone, name)] = op
        return op

    def _finish(self, op: dict[str, Any]) -> dict[str, Any]:
        if op["status"] != "DONE":
            op.update(status="DONE", progress=100, endTime=stamp(self.now()))
            zone = op["zone"].rsplit("/", 1)[-1]
            inst = self.instances.get((zone, op["targetLink"].rsplit("/", 1)[-1]))
            if op["operationType"] == "insert" and inst is not None:
                inst["status"] = "RUNNING"
        return op

    # -- request handling --------------------------------------------------------

    def handle(
        self, verb: str, path: str, query: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, Any]:
        with self._lock:
            if len(self.requests) >= self._max_requests:
                return 503, _error(503, "fake request budget spent", "backendError")
            method, args = _route(verb, path)
            self.calls[method] += 1
            self.requests.append((method, path, dict(query)))
            if args.get("project") != self.project or method == "unknown":
                return 404, _error(404, f"The resource '{path}' was not found", "notFound")
            zone = args.get("zone")
            if zone is not None and zone not in self.offerings:
                return 404, _error(404, f"The resource 'zones/{zone}' was not found", "notFound")
            injected = self._inject.get(method)
            fault = injected.pop(0) if injected else None
            if fault and not fault.after:
                return fault.status, _error(fault.status, "injected", fault.reason, fault.info)
            try:
                status, reply = self._dispatch(method, args, query, body)
            except ValueError as e:
                return 400, _error(400, f"Invalid value for field 'filter': {e}", "invalid")
            if fault:
                return fault.status, _error(fault.status, "injected", fault.reason, fault.info)
            return status, reply

    def _dispatch(
        self, method: str, a: dict[str, str], q: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, Any]:
        zone, flt = a.get("zone", ""), q.get("filter", "")
        if method == "compute.zones.list":
            items = [
                {
                    "kind": "compute#zone",
                    "id": str(2000 + i),
                    "name": z,
                    "region": f"{API}/projects/{self.project}/regions/{z.rsplit('-', 1)[0]}",
                    "status": "UP",
                    "selfLink": self._zone_url(z),
                }
                for i, z in enumerate(sorted(self.offerings))
            ]
            return self._page(items, q, flt)
        if method == "compute.machineTypes.aggregatedList":
            scoped = {z: [self._machine_type(z, t) for t in ts] for z, ts in self.offerings.items()}
            return self._aggregated(scoped, "machineTypes", q, flt)
        if method == "compute.machineTypes.list":
            return self._page([self._machine_type(zone, t) for t in self.offerings[zone]], q, flt)
        if method == "compute.acceleratorTypes.aggregatedList":
            scoped = {z: self._accelerators(z) for z in self.offerings}
            return self._aggregated(scoped, "acceleratorTypes", q, flt)
        if method == "compute.acceleratorTypes.list":
            return self._page(self._accelerators(zone), q, flt)
        if method == "compute.instances.insert":
            return self._insert(zone, q, body)
        if method == "compute.instances.list":
            items = [i for (z, _), i in sorted(self.instances.items()) if z == zone]
            return self._page(items, q, flt)
        if method == "compute.instances.aggregatedList":
            scoped = {
                z: [i for (iz, _), i in sorted(self.instances.items()) if iz == z]
                for z in self.offerings
            }
            return self._aggregated(scoped, "instances", q, flt)
        if method in ("compute.instances.get", "compute.instances.delete"):
            inst = self.instances.get((zone, a["name"]))
            if inst is None:
                msg = f"The resource 'projects/{self.project}/zones/{zone}/instances/{a['name']}'"
                return 404, _error(404, f"{msg} was not found", "notFound")
            if method == "compute.instances.get":
                return 200, inst
            rid = q.get("requestId")
            if rid and rid in self.by_request_id:
                return 200, self.operations[self.by_request_id[rid]]
            op = self._operation(zone, "delete", inst, self.now())
            del self.instances[(zone, a["name"])]
            if rid:
                self.by_request_id[rid] = (zone, op["name"])
            return 200, op
        if method == "compute.regions.get":
            known = {z.rsplit("-", 1)[0] for z in self.offerings}
            if a["region"] not in known:
                return 404, _error(404, f"The resource 'regions/{a['region']}' was not found",
                                   "notFound")  # fmt: skip
            return 200, {"kind": "compute#region", "id": "1000", "name": a["region"],
                         "status": "UP", "quotas": self._quota_items(a["region"])}  # fmt: skip
        if method == "compute.projects.get":
            return 200, {"kind": "compute#project", "id": "1", "name": self.project,
                         "quotas": self._quota_items(None)}  # fmt: skip
        if method == "compute.regionCommitments.aggregatedList":
            regions = sorted({z.rsplit("-", 1)[0] for z in self.offerings} | set(self.commitments))
            return self._aggregated(
                {r: self.commitments.get(r, []) for r in regions}, "commitments", q, flt,
                scope="regions",
            )  # fmt: skip
        if method == "compute.futureReservations.aggregatedList":
            zones = sorted(set(self.offerings) | set(self.future_reservations))
            return self._aggregated(
                {z: self.future_reservations.get(z, []) for z in zones}, "futureReservations", q,
                flt,
            )  # fmt: skip
        if method == "compute.zoneOperations.list":
            ops = [o for (z, _), o in self.operations.items() if z == zone]
            ops.sort(key=lambda o: (o["insertTime"], o["id"]))
            if q.get("orderBy") == "creationTimestamp desc":
                ops.reverse()
            elif q.get("orderBy"):
                raise ValueError(f"orderBy {q['orderBy']!r}")
            return self._page(ops, q, flt)
        if method in ("compute.zoneOperations.get", "compute.zoneOperations.wait"):
            found = self.operations.get((zone, a["name"]))
            if found is None:
                return 404, _error(
                    404, f"The resource 'operations/{a['name']}' not found", "notFound"
                )
            return 200, self._finish(found) if method.endswith("wait") else found
        return 404, _error(404, "not found", "notFound")

    def _insert(self, zone: str, q: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        rid = q.get("requestId")
        if rid and rid in self.by_request_id:
            return 200, self.operations[self.by_request_id[rid]]
        name = str(body.get("name", ""))
        mt = str(body.get("machineType", "")).rsplit("/", 1)[-1]
        if mt not in self.offerings[zone]:
            msg = f"Invalid value for field 'resource.machineType': '{mt}' in zone '{zone}'"
            return 400, _error(400, msg, "invalid")
        if (zone, name) in self.instances:
            where = f"projects/{self.project}/zones/{zone}/instances/{name}"
            msg = f"The resource '{where}' already exists"
            return 409, _error(409, msg, "alreadyExists")
        mode = self._quota.get(mt)
        if mode == "http":
            msg = f"Quota 'PREEMPTIBLE_GPUS' exceeded.  Limit: 0.0 in region {zone[:-2]}."
            return 403, _error(403, msg, "quotaExceeded", "QUOTA_EXCEEDED")
        over = self._over_quota(zone, mt, body)
        if over is not None:
            metric, limit, where = over
            msg = f"Quota '{metric}' exceeded.  Limit: {limit} in {where}."
            return 403, _error(403, msg, "quotaExceeded", "QUOTA_EXCEEDED")
        inst = self._new_instance(zone, body)
        op = self._operation(zone, "insert", inst, self.now())
        failure = "QUOTA_EXCEEDED" if mode == "operation" else None
        spare = self._stockout.get((zone, mt))
        if spare is not None and spare > 0:
            self._stockout[(zone, mt)] = spare - 1
        elif spare is not None:
            failure = "ZONE_RESOURCE_POOL_EXHAUSTED"
        if failure:
            del self.instances[(zone, name)]
            text = (
                f"The zone 'projects/{self.project}/zones/{zone}' does not have enough resources "
                "available to fulfill the request.  Try a different zone, or try again later."
                if failure.startswith("ZONE")
                else "Quota 'PREEMPTIBLE_NVIDIA_GPUS' exceeded.  Limit: 0.0 in region."
            )
            op.update(status="DONE", progress=100, endTime=stamp(self.now()))
            op["error"] = {"errors": [{"code": failure, "message": text}]}
        if rid:
            self.by_request_id[rid] = (zone, op["name"])
        return 200, op

    def _page(self, items: list[dict[str, Any]], q: dict[str, str], flt: str) -> tuple[int, Any]:
        items = [i for i in items if matches(i, flt)]
        start = int(base64.urlsafe_b64decode(q["pageToken"]).decode()) if q.get("pageToken") else 0
        size = int(q.get("maxResults") or self.page_size)
        reply: dict[str, Any] = {"kind": "compute#list", "items": items[start : start + size]}
        if start + size < len(items):
            reply["nextPageToken"] = base64.urlsafe_b64encode(str(start + size).encode()).decode()
        return 200, reply

    def _aggregated(
        self,
        scoped: dict[str, list[dict[str, Any]]],
        key: str,
        q: dict[str, str],
        flt: str,
        *,
        scope: str = "zones",
    ) -> tuple[int, Any]:
        flat = [{"_scope": z, **i} for z in sorted(scoped) for i in scoped[z]]
        status, page = self._page(flat, q, flt)
        grouped: dict[str, Any] = {f"{scope}/{z}": {} for z in sorted(scoped)}
        for item in page["items"]:
            where = item.pop("_scope")
            grouped[f"{scope}/{where}"].setdefault(key, []).append(item)
        for value in grouped.values():
            if key not in value:
                value["warning"] = {
                    "code": "NO_RESULTS_ON_PAGE",
                    "message": "There are no results for scope on this page.",
                }
        page["items"] = grouped
        return status, page


_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (v, re.compile(f"^/compute/v1/projects/(?P<project>[^/]+){p}$"), m)
    for v, p, m in [
        ("GET", "", "compute.projects.get"),
        ("GET", "/regions/(?P<region>[^/]+)", "compute.regions.get"),
        ("GET", "/zones", "compute.zones.list"),
        ("GET", "/aggregated/machineTypes", "compute.machineTypes.aggregatedList"),
        ("GET", "/zones/(?P<zone>[^/]+)/machineTypes", "compute.machineTypes.list"),
        ("GET", "/aggregated/acceleratorTypes", "compute.acceleratorTypes.aggregatedList"),
        ("GET", "/zones/(?P<zone>[^/]+)/acceleratorTypes", "compute.acceleratorTypes.list"),
        ("POST", "/zones/(?P<zone>[^/]+)/instances", "compute.instances.insert"),
        ("GET", "/zones/(?P<zone>[^/]+)/instances", "compute.instances.list"),
        ("GET", "/aggregated/instances", "compute.instances.aggregatedList"),
        ("GET", "/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)", "compute.instances.get"),
        ("DELETE", "/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)", "compute.instances.delete"),
        ("GET", "/aggregated/commitments", "compute.regionCommitments.aggregatedList"),
        ("GET", "/aggregated/futureReservations", "compute.futureReservations.aggregatedList"),
        ("GET", "/zones/(?P<zone>[^/]+)/operations", "compute.zoneOperations.list"),
        ("GET", "/zones/(?P<zone>[^/]+)/operations/(?P<name>[^/]+)", "compute.zoneOperations.get"),
        (
            "POST",
            "/zones/(?P<zone>[^/]+)/operations/(?P<name>[^/]+)/wait",
            "compute.zoneOperations.wait",
        ),
    ]
]


def _route(verb: str, path: str) -> tuple[str, dict[str, str]]:
    for v, pattern, method in _ROUTES:
        m = pattern.match(path)
        if v == verb and m:
            return method, m.groupdict()
    m = re.match(r"^/compute/v1/projects/(?P<project>[^/]+)", path)
    return "unknown", (m.groupdict() if m else {})


def _handler(fake: FakeCompute) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            status, reply = fake.handle(self.command, parts.path, query, body)
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: pytest shows failures, not access logs

    return Handler
