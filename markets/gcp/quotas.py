"""GCP's GPU quotas, read from Compute Engine: per region and project-wide.

Owns: ``fetch_gpu_quotas`` (``regions.get`` per region: the GPU model's
standard metric, such as ``NVIDIA_H100_GPUS``, counts on-demand and committed
VMs, its ``PREEMPTIBLE_`` metric Spot VMs; ``projects.get``: the project's
``GPUS_ALL_REGIONS``, which counts every GPU of every region and model).
GCP documents that Spot VMs without preemptible quota of their own take the
standard one (https://cloud.google.com/compute/resource-usage#preemptible_quota):
a region that lists no ``PREEMPTIBLE_`` metric for a model gets its standard
limit on any tier, not two. A metric not listed is left out: no limit known
is no limit kept to (a refused insert is still handled, ``ErrorKind.QUOTA``).

Must not: decide anything, cache (``GcpMarket`` caches with
``markets.ttl.QUOTA_TTL_S``) or retry (``CallPolicy`` does).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from markets.errors import InputError
from markets.gcp.errors import gcp_call
from markets.gcp.sdk import CallPolicy, ProjectsApi, RegionsApi
from markets.model import Provider, Quota, QuotaUnit, Tier
from markets.quotas import GCP_GLOBAL_GPUS

__all__ = ["PREEMPTIBLE", "fetch_gpu_quotas"]

PREEMPTIBLE = "PREEMPTIBLE_"


def _limits(quotas: Iterable[object], where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for q in quotas:
        metric, limit = str(getattr(q, "metric", "")), getattr(q, "limit", None)
        if not metric or limit is None:
            continue
        if not isinstance(limit, int | float) or limit < 0 or limit != limit:
            raise InputError(where, f"quotas.{metric}.limit", "a number >= 0", got=limit)
        out[metric] = float(limit)
    return out


def fetch_gpu_quotas(
    regions_client: RegionsApi,
    projects_client: ProjectsApi | None,
    project: str,
    regions: Sequence[str],
    metrics: Iterable[str],
    policy: CallPolicy,
) -> tuple[Quota, ...]:
    """The quotas of the GPU ``metrics`` (``markets.quotas.gcp_gpu_metric``
    names) in each of ``regions``, and the project's global GPU quota
    (``projects_client=None``: not read)."""
    wanted = sorted(set(metrics))
    out: list[Quota] = []
    for region in sorted(set(regions)):
        with gcp_call("compute.regions.get"):
            got = regions_client.get(
                request={"project": project, "region": region}, **policy.kwargs()
            )
        limits = _limits(got.quotas, f"compute.regions.get {region}")
        for metric in wanted:
            if metric not in limits:
                continue
            spot = limits.get(PREEMPTIBLE + metric)
            tier = None if spot is None else Tier.ON_DEMAND  # one limit on any tier
            out.append(
                Quota(
                    provider=Provider.GCP,
                    region=region,
                    group=metric,
                    tier=tier,
                    limit=limits[metric],
                    unit=QuotaUnit.GPUS,
                    code=metric,
                )
            )
            if spot is not None:
                out.append(
                    Quota(
                        provider=Provider.GCP,
                        region=region,
                        group=metric,
                        tier=Tier.SPOT,
                        limit=spot,
                        unit=QuotaUnit.GPUS,
                        code=PREEMPTIBLE + metric,
                    )
                )
    if projects_client is not None and wanted:
        with gcp_call("compute.projects.get"):
            got_p = projects_client.get(request={"project": project}, **policy.kwargs())
        glob = _limits(got_p.quotas, "compute.projects.get").get(GCP_GLOBAL_GPUS)
        if glob is not None:
            out.append(
                Quota(
                    provider=Provider.GCP,
                    group=GCP_GLOBAL_GPUS,
                    limit=glob,
                    unit=QuotaUnit.GPUS,
                    code=GCP_GLOBAL_GPUS,
                )
            )
    return tuple(out)
