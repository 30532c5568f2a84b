"""Which instances an account quota counts, how much each takes, and quota files.

Owns: the AWS instance-family groups of EC2's vCPU limits with their Service
Quotas codes (``AWS_GROUPS``), the GCP GPU quota metrics (``gcp_gpu_metric``),
``quota_use`` (what one instance of a pool on a tier takes of a ``Quota``: 0
when it does not count), ``quota_use_of`` (a fleet's use, per quota) and
``load_quotas`` (a ``--quota FILE``: YAML or JSON, validated, one line on bad
input) and ``with_quotas`` (a market whose snapshots carry given quotas).

Must not: call a cloud (``markets.aws.quotas`` and ``markets.gcp.quotas`` read
the limits) or decide anything (the planner keeps to the limits,
``broker.planning.optimizer.quotas``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import Field, ValidationError

from markets.errors import InputError
from markets.model import InstanceType, MarketSnapshot, Pool, Provider, Quota, QuotaUnit, Tier
from markets.protocols import HistorySource, PriceSource, RevocationSource
from markets.validation import StrictModel, input_error_from, read_json, read_yaml
from markets.wrapped import AdjustedHistory, AdjustedRevocations, AdjustedSnapshots

__all__ = [
    "AWS_GROUPS",
    "GCP_GLOBAL_GPUS",
    "MAX_QUOTA_FILE_BYTES",
    "aws_group",
    "gcp_gpu_metric",
    "load_quotas",
    "parse_quotas",
    "quota_use",
    "quota_use_of",
    "with_quotas",
]

# EC2's running-instance limits count vCPUs per group of instance families,
# one limit for on-demand and one for spot, per region; their Service Quotas
# codes (service code ``ec2``), from "Amazon EC2 instance type quotas"
# (https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html)
# and "Spot Instance quotas"
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html).
# group -> (family prefixes, on-demand code, spot code)
AWS_GROUPS: Mapping[str, tuple[tuple[str, ...], str, str]] = {
    "P": (("p",), "L-417A185B", "L-7212CCBC"),
    "G": (("g", "vt"), "L-DB2E81BA", "L-3819A6DF"),
    "Inf": (("inf",), "L-1945791B", "L-B5D1601B"),
    "Trn": (("trn",), "L-2C3B7624", "L-5480EFD2"),
    "DL": (("dl",), "L-6E869C2A", "L-85EED4F7"),
    "F": (("f",), "L-74FC7D96", "L-88CF9481"),
    "X": (("x",), "L-7295265B", "L-E3A00192"),
    # A, C, D, H, I, M, R, T, Z: every family no other group names.
    "Standard": ((), "L-1216C47A", "L-34B43A08"),
}
# GCP's project-wide GPU quota, over every region and GPU model
# (https://cloud.google.com/compute/resource-usage#gpu_quota).
GCP_GLOBAL_GPUS = "GPUS_ALL_REGIONS"
# GCP's regional GPU quota metric per GPU model our catalog names; a
# preemptible (spot) instance takes the ``PREEMPTIBLE_`` metric of its model.
_GCP_GPU_METRICS: Mapping[str, str] = {
    "A100-40GB": "NVIDIA_A100_GPUS",
    "A100-80GB": "NVIDIA_A100_80GB_GPUS",
    "H100": "NVIDIA_H100_GPUS",
    "L4": "NVIDIA_L4_GPUS",
    "T4": "NVIDIA_T4_GPUS",
    "V100": "NVIDIA_V100_GPUS",
    "K80": "NVIDIA_K80_GPUS",
    "P100": "NVIDIA_P100_GPUS",
}
MAX_QUOTA_FILE_BYTES = 1_000_000


def aws_group(family: str) -> str:
    """The EC2 vCPU-limit group of an instance family (``p4d`` -> ``P``).
    The longest prefix wins (``inf2`` is Inf, not Standard)."""
    fam = family.lower()
    best, best_len = "Standard", 0
    for group, (prefixes, _od, _spot) in AWS_GROUPS.items():
        for p in prefixes:
            if fam.startswith(p) and len(p) > best_len and fam[len(p) :][:1].isdigit():
                best, best_len = group, len(p)
    return best


def gcp_gpu_metric(gpu_model: str | None) -> str | None:
    """The regional GPU quota metric of a GPU model (``None``: no GPU, or one
    the table does not name)."""
    return None if gpu_model is None else _GCP_GPU_METRICS.get(gpu_model)


def quota_use(quota: Quota, pool: Pool, instance: InstanceType, tier: Tier) -> float:
    """What one instance of ``pool`` on ``tier`` takes of ``quota`` (0: not counted)."""
    if pool.provider is not quota.provider or not quota.counts_tier(tier):
        return 0.0
    if quota.region is not None and pool.region != quota.region:
        return 0.0
    if quota.provider is Provider.AWS:
        if aws_group(instance.family) != quota.group:
            return 0.0
    elif quota.group != GCP_GLOBAL_GPUS and gcp_gpu_metric(instance.gpu_model) != quota.group:
        return 0.0
    return float(instance.vcpus if quota.unit is QuotaUnit.VCPUS else instance.gpus)


def quota_use_of(
    snapshot: MarketSnapshot, running: Iterable[tuple[str, Tier, float]]
) -> dict[str, float]:
    """Each of the snapshot's quotas' use by ``running`` (pool key, tier,
    instances; pools the snapshot does not know take nothing), by quota key."""
    pools = snapshot.by_key()
    out = {q.key: 0.0 for q in snapshot.quotas}
    for key, tier, n in running:
        snap = pools.get(key)
        if snap is None:
            continue
        for q in snapshot.quotas:
            out[q.key] += n * quota_use(q, snap.pool, snap.instance, tier)
    return out


class _QuotaRow(StrictModel):
    provider: Provider
    region: str | None = Field(default=None, min_length=1)
    group: str = Field(min_length=1, max_length=64)
    tier: Tier | None = None
    limit: float = Field(ge=0.0, allow_inf_nan=False)
    unit: QuotaUnit | None = None
    code: str = Field(default="", max_length=64)


class _QuotaFile(StrictModel):
    quotas: list[_QuotaRow] = Field(max_length=10_000)


def _checked(row: _QuotaRow, source: str, i: int) -> Quota:
    where = f"quotas[{i}]"
    if row.provider is Provider.AWS:
        if row.group not in AWS_GROUPS:
            raise InputError(
                source, f"{where}.group", f"one of {', '.join(AWS_GROUPS)}", got=row.group
            )
        if row.region is None:
            raise InputError(source, f"{where}.region", "the region (EC2's limits are regional)")
        if row.tier is None:
            raise InputError(source, f"{where}.tier", "on_demand or spot")
    else:
        known = {GCP_GLOBAL_GPUS, *_GCP_GPU_METRICS.values()}
        if row.group not in known:
            raise InputError(
                source, f"{where}.group", f"one of {', '.join(sorted(known))}", got=row.group
            )
        if (row.group == GCP_GLOBAL_GPUS) != (row.region is None):
            raise InputError(
                source,
                f"{where}.region",
                f"no region for {GCP_GLOBAL_GPUS}, a region for the others",
                got=row.region,
            )
    default_unit = QuotaUnit.VCPUS if row.provider is Provider.AWS else QuotaUnit.GPUS
    unit = row.unit or default_unit
    if unit is not default_unit:
        raise InputError(source, f"{where}.unit", default_unit.value, got=unit.value)
    code = row.code
    if not code and row.provider is Provider.AWS:
        _p, od, spot = AWS_GROUPS[row.group]
        code = spot if row.tier is Tier.SPOT else od
    elif not code:
        code = f"PREEMPTIBLE_{row.group}" if row.tier is Tier.SPOT else row.group
    try:
        return Quota(
            provider=row.provider,
            region=row.region,
            group=row.group,
            tier=row.tier,
            limit=row.limit,
            unit=unit,
            code=code,
        )
    except ValidationError as e:
        raise input_error_from(source, e, prefix=where) from e


def parse_quotas(data: object, source: str) -> tuple[Quota, ...]:
    """Quotas from parsed data: a mapping with a ``quotas`` list (or the list)."""
    if isinstance(data, list):
        data = {"quotas": data}
    try:
        doc = _QuotaFile.model_validate(data)
    except ValidationError as e:
        raise input_error_from(source, e) from e
    out = tuple(_checked(r, source, i) for i, r in enumerate(doc.quotas))
    seen: set[str] = set()
    for i, q in enumerate(out):
        if q.key in seen:
            raise InputError(source, f"quotas[{i}]", "each quota listed once", got=q.key)
        seen.add(q.key)
    return out


def load_quotas(path: str | Path) -> tuple[Quota, ...]:
    """Read a quota file (``.json``: JSON, else YAML)::

    quotas:
      - {provider: aws, region: us-east-1, group: P, tier: on_demand, limit: 96}
      - {provider: gcp, region: us-central1, group: NVIDIA_H100_GPUS,
         tier: spot, limit: 16}
      - {provider: gcp, group: GPUS_ALL_REGIONS, limit: 32}
    """
    p = Path(path)
    source = str(path)
    try:
        if p.stat().st_size > MAX_QUOTA_FILE_BYTES:
            raise InputError(source, None, f"a file under {MAX_QUOTA_FILE_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(source, None, "a readable UTF-8 file", got=type(e).__name__) from e
    data = read_json(text, source) if p.suffix.lower() == ".json" else read_yaml(text, source)
    return parse_quotas(data, source)


class _WithQuotas(AdjustedSnapshots):
    """A market whose every snapshot keeps to ``quotas`` (beside its own);
    everything else is the market's (time-free models by ``__getattr__``)."""

    quotas: tuple[Quota, ...] = ()

    def adjust(self, snapshot: MarketSnapshot) -> MarketSnapshot:
        return snapshot.with_quotas(self.quotas)

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name == "_market":  # unpickling: not set yet
            raise AttributeError(name)
        return getattr(self._market, name)


class _HistoryWithQuotas(_WithQuotas, AdjustedHistory):
    """``_WithQuotas`` over a ``HistorySource`` (span and hourly are its)."""


class _RevocationsWithQuotas(_WithQuotas, AdjustedRevocations):
    """``_WithQuotas`` over a ``RevocationSource`` (its revocation times too)."""


def with_quotas(market: PriceSource, quotas: tuple[Quota, ...]) -> PriceSource:
    """``market`` keeping to ``quotas`` (the market itself when there are none):
    a ``HistorySource`` or ``RevocationSource`` exactly when ``market`` is."""
    if not quotas:
        return market
    bound: _WithQuotas
    if isinstance(market, RevocationSource):
        bound = _RevocationsWithQuotas(market)
    elif isinstance(market, HistorySource):
        bound = _HistoryWithQuotas(market)
    else:
        bound = _WithQuotas(market)
    bound.quotas = quotas
    return bound
