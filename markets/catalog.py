"""The embedded catalog of GPU instance types: specs, list prices, discounts.

Owns: ``CATALOG`` (name -> ``CatalogEntry``), the reference on-demand list
prices, per-region price multipliers, 1- and 3-year committed discounts, the
zones where each type is offered, per-GPU-model throughput factors and the
aliases the public spot traces use for instance types.

Must not: do I/O, call a cloud API, or model spot prices (that is
``markets.default.market``). Every figure below is a fact stated with its
source and date; refresh it by hand, never by generating from a data file.

Prices are US dollars per instance-hour, Linux, in the reference region
(AWS us-east-1, GCP us-central1). Committed prices are the effective hourly
price of the term (upfront amortised): ``list * (1 - discount)``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from markets.commitments import CommitmentKind, PaymentOption
from markets.errors import InputError
from markets.model import InstanceType, Provider

__all__ = [
    "CATALOG",
    "GPU_THROUGHPUT_VS_V100",
    "REFERENCE_REGION",
    "SAVINGS_PLAN_STEP_USD_PER_HOUR",
    "TRACE_ALIASES",
    "UPFRONT_SHARE",
    "CatalogEntry",
    "UnknownInstanceTypeError",
    "committed_price",
    "instance_type",
    "list_price",
    "payment_ratio",
    "regions",
    "savings_plan_discount",
    "savings_plan_share",
    "throughput_factor",
    "trace_instance_type",
    "zones_for",
]

AWS, GCP = Provider.AWS, Provider.GCP

REFERENCE_REGION: Mapping[Provider, str] = MappingProxyType({AWS: "us-east-1", GCP: "us-central1"})

# (provider, name, gpu model, gpus, vcpus, memory GiB, total GPU memory GiB,
#  on-demand USD/hour in the reference region).
# AWS: EC2 On-Demand pricing page (aws.amazon.com/ec2/pricing/on-demand),
#   us-east-1, Linux, as listed in 2024. NB: AWS cut P4d/P4de/P5 on-demand
#   prices in June 2025 (up to ~45 %); the pre-cut list prices are kept here so
#   that the catalog is one consistent dated snapshot. Specs: EC2 instance
#   type pages (accelerated computing).
# GCP: Compute Engine GPU / VM pricing page (cloud.google.com/compute/
#   vm-instance-pricing), us-central1; cross-checked against the public price
#   list Cyclenerd/google-cloud-pricing-cost-calculator (a2-highgpu-1g
#   $3.673385 on 2025-03-13, g2-standard-4
#   $0.706832 on 2025-03-13, a2-ultragpu-8g $40.550383 and a3-highgpu-8g
#   $88.49 on 2025-06-05). Specs: GCP accelerator-optimized machine docs.
_ROWS: tuple[tuple[Provider, str, str, int, int, float, float, float], ...] = (
    (AWS, "p2.xlarge", "K80", 1, 4, 61, 12, 0.90),
    (AWS, "p2.8xlarge", "K80", 8, 32, 488, 96, 7.20),
    (AWS, "p2.16xlarge", "K80", 16, 64, 732, 192, 14.40),
    (AWS, "p3.2xlarge", "V100", 1, 8, 61, 16, 3.06),
    (AWS, "p3.8xlarge", "V100", 4, 32, 244, 64, 12.24),
    (AWS, "p3.16xlarge", "V100", 8, 64, 488, 128, 24.48),
    (AWS, "p3dn.24xlarge", "V100-32GB", 8, 96, 768, 256, 31.212),
    (AWS, "p4d.24xlarge", "A100-40GB", 8, 96, 1152, 320, 32.7726),
    (AWS, "p4de.24xlarge", "A100-80GB", 8, 96, 1152, 640, 40.9657),
    (AWS, "p5.48xlarge", "H100", 8, 192, 2048, 640, 98.32),
    (AWS, "g4dn.xlarge", "T4", 1, 4, 16, 16, 0.526),
    (AWS, "g4dn.2xlarge", "T4", 1, 8, 32, 16, 0.752),
    (AWS, "g4dn.12xlarge", "T4", 4, 48, 192, 64, 3.912),
    (AWS, "g4dn.metal", "T4", 8, 96, 384, 128, 7.824),
    (AWS, "g5.xlarge", "A10G", 1, 4, 16, 24, 1.006),
    (AWS, "g5.2xlarge", "A10G", 1, 8, 32, 24, 1.212),
    (AWS, "g5.12xlarge", "A10G", 4, 48, 192, 96, 5.672),
    (AWS, "g5.48xlarge", "A10G", 8, 192, 768, 192, 16.288),
    (AWS, "g6.xlarge", "L4", 1, 4, 16, 24, 0.8048),
    (AWS, "g6.2xlarge", "L4", 1, 8, 32, 24, 0.9776),
    (AWS, "g6.12xlarge", "L4", 4, 48, 192, 96, 4.6016),
    (AWS, "g6.48xlarge", "L4", 8, 192, 768, 192, 13.3504),
    (GCP, "a2-highgpu-1g", "A100-40GB", 1, 12, 85, 40, 3.673385),
    (GCP, "a2-highgpu-2g", "A100-40GB", 2, 24, 170, 80, 7.34677),
    (GCP, "a2-highgpu-4g", "A100-40GB", 4, 48, 340, 160, 14.69354),
    (GCP, "a2-highgpu-8g", "A100-40GB", 8, 96, 680, 320, 29.38708),
    (GCP, "a2-megagpu-16g", "A100-40GB", 16, 96, 1360, 640, 55.739504),
    (GCP, "a2-ultragpu-1g", "A100-80GB", 1, 12, 170, 80, 5.068798),
    (GCP, "a2-ultragpu-8g", "A100-80GB", 8, 96, 1360, 640, 40.550383),
    (GCP, "a3-highgpu-8g", "H100", 8, 208, 1872, 640, 88.49),
    (GCP, "g2-standard-4", "L4", 1, 4, 16, 24, 0.706832),
    (GCP, "g2-standard-8", "L4", 1, 8, 32, 24, 0.853624),
    (GCP, "g2-standard-12", "L4", 1, 12, 48, 24, 1.000416),
    (GCP, "g2-standard-24", "L4", 2, 24, 96, 48, 2.000833),
    (GCP, "g2-standard-48", "L4", 4, 48, 192, 96, 4.001665),
    (GCP, "g2-standard-96", "L4", 8, 96, 384, 192, 8.00333),
)

# Committed discounts by family, (1-year, 3-year), fraction off on-demand.
# AWS: EC2 Reserved Instances / EC2 Instance Savings Plans pricing pages, as
#   listed in 2024, rounded to whole percent: 1-year no-upfront and 3-year
#   all-upfront (amortised) Standard RIs. Family-level approximations, not the
#   exact per-type figure; the AWS adapter reads the exact offerings.
# GCP: resource-based committed use discounts (CUD docs: 37 % 1-year, 55 %
#   3-year for g2/L4); effective per-machine figures cross-checked against the
#   Cyclenerd price list's monthly 1y/3y columns of 2025-03/2025-06
#   (a2-highgpu: 37.0 % / 65.0 %; g2: 37.0 % / 55.0 %; a3-highgpu: 30.6 % /
#   56.1 %). a2-ultragpu: no CUD price was listed there (None = not offered).
_COMMITTED_DISCOUNT: Mapping[str, tuple[float, float] | None] = MappingProxyType(
    {
        "p2": (0.34, 0.58),
        "p3": (0.35, 0.60),
        "p3dn": (0.35, 0.60),
        "p4d": (0.40, 0.60),
        "p4de": (0.40, 0.60),
        "p5": (0.40, 0.60),
        "g4dn": (0.37, 0.58),
        "g5": (0.37, 0.57),
        "g6": (0.37, 0.56),
        "a2-highgpu": (0.37, 0.65),
        "a2-megagpu": (0.37, 0.65),
        "a2-ultragpu": None,
        "a3-highgpu": (0.306, 0.561),
        "g2-standard": (0.37, 0.55),
    }
)

# Payment options: the effective hourly price (upfront amortised over the
# term) of each option against the option the discounts above are quoted for
# (1-year: no upfront; 3-year: all upfront). AWS Standard RIs and Savings
# Plans are sold no/partial/all upfront, a little cheaper the more is paid
# upfront: on the EC2 RI pricing page (p3.2xlarge, us-east-1, Linux, as listed
# in 2024) 1-year Standard no upfront $1.989/h (35 % off $3.06), partial
# upfront ~$1.703/h effective (44 %), all upfront ~$1.669/h (45 %); 3-year no
# upfront ~$1.369/h (55 %), partial ~$1.173/h (62 %), all upfront ~$1.102/h
# (64 %). The ratios below are those, rounded; family-level approximations
# like the discounts (the AWS adapter reads exact offerings). GCP bills
# resource-based CUDs monthly (CUD docs: "you pay the monthly fee for the
# term"): no upfront option is sold, so a CUD keeps its monthly price.
_PAYMENT_RATIO: Mapping[tuple[Provider, int, PaymentOption], float] = MappingProxyType(
    {
        (AWS, 1, PaymentOption.NO_UPFRONT): 1.0,
        (AWS, 1, PaymentOption.PARTIAL_UPFRONT): 1.703 / 1.989,
        (AWS, 1, PaymentOption.ALL_UPFRONT): 1.669 / 1.989,
        (AWS, 3, PaymentOption.NO_UPFRONT): 1.369 / 1.102,
        (AWS, 3, PaymentOption.PARTIAL_UPFRONT): 1.173 / 1.102,
        (AWS, 3, PaymentOption.ALL_UPFRONT): 1.0,
    }
)
# AWS Savings Plans: a $/h commitment, its usage billed at the plan's rate
# per type (Savings Plans user guide, "Understanding how Savings Plans apply":
# EC2 Instance SPs apply before Compute SPs; the rest of the usage is
# on-demand). Published maxima (aws.amazon.com/savingsplans/compute-pricing,
# as listed 2024-2025): Compute Savings Plans "up to 66 %" off on-demand (any
# family, size, region, OS, tenancy; the Convertible RI figure), EC2 Instance
# Savings Plans "up to 72 %" (one family in one region; the Standard RI
# figure), both for 3-year all upfront. No per-type GPU table was found, so
# the rule used here: an EC2 Instance SP's discount on a type is the
# family's Standard RI discount above (_COMMITTED_DISCOUNT, which already
# cites the EC2 Instance SP page), and a Compute SP's is that times 66/72
# (the ratio of the published maxima): p4d 3-year 60 % -> 55 %, 1-year
# 40 % -> 36.7 %. Payment options scale the rate as for RIs
# (_PAYMENT_RATIO). Commitments are bought in steps of $0.001/h (the
# smallest hourly commitment the purchase page accepts).
_SAVINGS_PLAN_SHARE: Mapping[CommitmentKind, float] = MappingProxyType(
    {
        CommitmentKind.SAVINGS_PLAN_EC2: 1.0,
        CommitmentKind.SAVINGS_PLAN_COMPUTE: 66.0 / 72.0,
    }
)
SAVINGS_PLAN_STEP_USD_PER_HOUR = 0.001

# The upfront share of the term's obligation per option (AWS: all upfront
# pays it all at purchase; partial upfront about half, RI pricing page).
UPFRONT_SHARE: Mapping[PaymentOption, float] = MappingProxyType(
    {
        PaymentOption.NO_UPFRONT: 0.0,
        PaymentOption.PARTIAL_UPFRONT: 0.5,
        PaymentOption.ALL_UPFRONT: 1.0,
    }
)

# Regions and zone letters per family: where each type is offered here. A
# realistic subset of each provider's region/zone tables (EC2 "instance type
# offerings" for these regions; GCP "GPU regions and zones" page, 2025), not the
# full list: not every type is everywhere, and big GPUs live in fewer zones.
_AWS_ALL = {"us-east-1": "abcdf", "us-west-2": "abc", "eu-west-1": "abc"}
_ZONE_LETTERS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "p2": {"us-east-1": "abcd", "us-west-2": "abc", "eu-west-1": "abc"},
        "p3": _AWS_ALL,
        "p3dn": {"us-east-1": "abdf", "us-west-2": "bc"},
        "p4d": {"us-east-1": "abcd", "us-west-2": "bc", "eu-west-1": "ab"},
        "p4de": {"us-east-1": "ab", "us-west-2": "b"},
        "p5": {"us-east-1": "acf", "us-west-2": "ab"},
        "g4dn": _AWS_ALL,
        "g5": _AWS_ALL,
        "g6": {"us-east-1": "abcdf", "us-west-2": "abc"},  # no g6 in eu-west-1 (advisor 2025-06)
        "a2-highgpu": {"us-central1": "abcf", "us-east1": "b", "europe-west4": "ab"},
        "a2-megagpu": {"us-central1": "acf", "europe-west4": "a"},
        "a2-ultragpu": {"us-central1": "ac", "europe-west4": "a"},
        "a3-highgpu": {"us-central1": "ac", "us-east1": "d", "europe-west4": "bc"},
        "g2-standard": {"us-central1": "abc", "us-east1": "bcd", "europe-west4": "abc"},
    }
)

# Price multipliers against the reference region, by (provider, region), with
# family overrides. AWS: the on-demand page lists the same GPU prices in
# us-west-2 as in us-east-1; eu-west-1 is p3.2xlarge $3.305 (x1.08),
# p2.xlarge $0.972 (x1.08), p4d $35.39 (x1.08), g4dn.xlarge $0.587 and
# g5.xlarge $1.123 (x1.116). GCP: us-east1 equals us-central1; europe-west4 per
# the 2025-03-13 list: a2 x1.0203, g2 x1.0515, a3-highgpu-8g $112.54 (x1.272).
_REGION_MULTIPLIER: Mapping[tuple[Provider, str], float] = MappingProxyType(
    {
        (AWS, "us-east-1"): 1.0,
        (AWS, "us-west-2"): 1.0,
        (AWS, "eu-west-1"): 1.116,
        (GCP, "us-central1"): 1.0,
        (GCP, "us-east1"): 1.0,
        (GCP, "europe-west4"): 1.0515,
    }
)
_FAMILY_REGION_MULTIPLIER: Mapping[tuple[str, str], float] = MappingProxyType(
    {
        ("eu-west-1", "p2"): 1.08,
        ("eu-west-1", "p3"): 1.08,
        ("eu-west-1", "p3dn"): 1.08,
        ("eu-west-1", "p4d"): 1.08,
        ("europe-west4", "a2-highgpu"): 1.0203,
        ("europe-west4", "a2-megagpu"): 1.0203,
        ("europe-west4", "a2-ultragpu"): 1.0203,
        ("europe-west4", "a3-highgpu"): 1.272,
    }
)

# Training throughput per GPU relative to one V100 (the default throughput
# factor of a type = this value for its GPU model; workloads may override).
# Rounded, and workload-dependent by a wide margin; sources:
# - K80 0.25: FP32 peak per GPU 4.4 vs 15.7 TFLOPS (NVIDIA K80 and V100
#   datasheets), no tensor cores.
# - T4 0.35: FP16 tensor 65 vs 125 TFLOPS, memory bandwidth 320 vs 900 GB/s
#   (NVIDIA T4 / V100 datasheets); training is mostly bandwidth-bound.
# - L4 0.5: FP16 tensor ~121 TFLOPS dense but 300 GB/s (NVIDIA L4 datasheet).
# - A10G 0.6: 600 GB/s, ~70 TFLOPS FP16 tensor (AWS G5 docs, NVIDIA A10).
# - V100-32GB 1.05: same chip as V100, larger batches fit.
# - A100-40GB 2.2: Lambda Labs GPU benchmarks (A100 vs V100, FP16 training,
#   ~2.2x); NVIDIA A100 whitepaper claims up to 3x on BERT.
# - A100-80GB 2.5: 2.0 vs 1.55 TB/s bandwidth over the 40 GB part.
# - H100 6.6: ~3x A100 per GPU for training (NVIDIA H100 datasheet "up to 4x
#   on GPT-3 175B"; MLPerf Training v3.0 per-GPU results ~2.5-3x), the
#   3x figure docs/concepts/tiers.md uses.
GPU_THROUGHPUT_VS_V100: Mapping[str, float] = MappingProxyType(
    {
        "K80": 0.25,
        "T4": 0.35,
        "L4": 0.5,
        "A10G": 0.6,
        "V100": 1.0,
        "V100-32GB": 1.05,
        "A100-40GB": 2.2,
        "A100-80GB": 2.5,
        "H100": 6.6,
    }
)

# Instance types of the public spot availability traces (skypilot-org/spot-
# traces), whose file names give (zone, GPU, GPUs per node): us-west-2a_v100_1
# is a p3.2xlarge, _v100_8 a p3.16xlarge, _k80_1 a p2.xlarge, _k80_8 a
# p2.8xlarge (the "Can't Be Late" paper, NSDI 2024, section 2).
TRACE_ALIASES: Mapping[tuple[str, str, int], str] = MappingProxyType(
    {
        ("aws", "v100", 1): "p3.2xlarge",
        ("aws", "v100", 4): "p3.8xlarge",
        ("aws", "v100", 8): "p3.16xlarge",
        ("aws", "k80", 1): "p2.xlarge",
        ("aws", "k80", 8): "p2.8xlarge",
        ("aws", "k80", 16): "p2.16xlarge",
    }
)


@dataclass(frozen=True)
class CatalogEntry:
    """One instance type, its reference price, discounts and offerings."""

    instance: InstanceType
    list_usd_per_hour: float  # on-demand, in REFERENCE_REGION[provider]
    committed_discount_1y: float | None
    committed_discount_3y: float | None
    zones: tuple[tuple[str, str], ...]  # (region, zone)

    @property
    def provider(self) -> Provider:
        return self.instance.provider

    @property
    def discount_family(self) -> str:
        return _price_family(self.instance.name, self.instance.provider)


class UnknownInstanceTypeError(InputError, KeyError):
    """An instance type name the catalog does not know (also a ``KeyError``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _price_family(name: str, provider: Provider) -> str:
    if provider is AWS:
        return name.split(".")[0]
    return "-".join(name.split("-")[:2])


def _zone_name(provider: Provider, region: str, letter: str) -> str:
    return f"{region}{letter}" if provider is AWS else f"{region}-{letter}"


def _build() -> Mapping[str, CatalogEntry]:
    out: dict[str, CatalogEntry] = {}
    for provider, name, gpu, gpus, vcpus, mem, gpu_mem, usd in _ROWS:
        fam = _price_family(name, provider)
        inst = InstanceType(
            provider=provider,
            name=name,
            family=fam.split("-")[0],
            units=gpus,
            gpu_model=gpu,
            gpus=gpus,
            vcpus=vcpus,
            memory_gib=mem,
            gpu_memory_gib=gpu_mem,
        )
        disc = _COMMITTED_DISCOUNT[fam]
        zones = tuple(
            (region, _zone_name(provider, region, letter))
            for region, letters in _ZONE_LETTERS[fam].items()
            for letter in letters
        )
        out[name] = CatalogEntry(
            instance=inst,
            list_usd_per_hour=usd,
            committed_discount_1y=disc[0] if disc else None,
            committed_discount_3y=disc[1] if disc else None,
            zones=zones,
        )
    return MappingProxyType(out)


CATALOG: Mapping[str, CatalogEntry] = _build()


def _entry(name: str) -> CatalogEntry:
    try:
        return CATALOG[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(CATALOG), n=3, cutoff=0.5)
        hint = (
            f"a catalog instance type (did you mean {', '.join(close)}?)"
            if close
            else (f"one of {', '.join(sorted(CATALOG))}")
        )
        raise UnknownInstanceTypeError("instance type", None, hint, got=name) from None


def instance_type(name: str) -> InstanceType:
    """The catalog's ``InstanceType`` for ``name``; ``UnknownInstanceTypeError``
    (an ``InputError`` and a ``KeyError``) naming close matches otherwise."""
    return _entry(name).instance


def regions(provider: Provider | str) -> list[str]:
    """Regions the catalog prices for ``provider``."""
    p = Provider(provider)
    return sorted(r for (q, r) in _REGION_MULTIPLIER if q is p)


def _multiplier(entry: CatalogEntry, region: str) -> float:
    p = entry.provider
    zones_regions = {r for r, _ in entry.zones}
    if (p, region) not in _REGION_MULTIPLIER or region not in zones_regions:
        raise InputError(
            "region",
            entry.instance.name,
            f"a region offering it: {', '.join(sorted(zones_regions))}",
            got=region,
        )
    fam = entry.discount_family
    return _FAMILY_REGION_MULTIPLIER.get((region, fam), _REGION_MULTIPLIER[(p, region)])


def _check_provider(entry: CatalogEntry, provider: Provider | str) -> None:
    if Provider(provider) is not entry.provider:
        raise InputError(
            "provider", entry.instance.name, entry.provider.value, got=Provider(provider).value
        )


def list_price(provider: Provider | str, region: str, name: str) -> float:
    """On-demand USD per instance-hour of ``name`` in ``region``."""
    e = _entry(name)
    _check_provider(e, provider)
    return e.list_usd_per_hour * _multiplier(e, region)


def committed_price(
    provider: Provider | str, region: str, name: str, term_years: int
) -> float | None:
    """Effective USD per instance-hour of a ``term_years`` (1 or 3) commitment,
    upfront amortised; ``None`` where the catalog knows no commitment."""
    if term_years not in (1, 3):
        raise InputError("term_years", None, "1 or 3", got=term_years)
    e = _entry(name)
    disc = e.committed_discount_1y if term_years == 1 else e.committed_discount_3y
    od = list_price(provider, region, name)
    return None if disc is None else od * (1.0 - disc)


def payment_ratio(provider: Provider | str, term_years: int, payment: PaymentOption | str) -> float:
    """The effective hourly price of ``payment`` against the catalog's quoted
    option for ``term_years`` (1.0 where the provider sells one option only:
    GCP CUDs are monthly)."""
    p, option = Provider(provider), PaymentOption(payment)
    if term_years not in (1, 3):
        raise InputError("term_years", None, "1 or 3", got=term_years)
    return _PAYMENT_RATIO.get((p, term_years, option), 1.0)


def zones_for(name: str) -> list[tuple[Provider, str, str]]:
    """Every (provider, region, zone) offering ``name``."""
    e = _entry(name)
    return [(e.provider, region, zone) for region, zone in e.zones]


def throughput_factor(name: str) -> float:
    """Default throughput per capacity unit (per GPU) of ``name``, relative to
    one V100 GPU (1.0 for a type without GPUs)."""
    inst = instance_type(name)
    if inst.gpu_model is None:
        return 1.0
    return GPU_THROUGHPUT_VS_V100[inst.gpu_model]


def trace_instance_type(provider: str, gpu: str, gpus_per_node: int) -> str | None:
    """The catalog type a trace file's (provider, GPU, count) names, if known."""
    return TRACE_ALIASES.get((provider.lower(), gpu.lower(), gpus_per_node))


def savings_plan_share(kind: CommitmentKind | str) -> float:
    """The share of a type's reserved-instance discount a Savings Plan of
    ``kind`` gives (``_SAVINGS_PLAN_SHARE``'s rule); ``InputError`` for a
    kind that is not an AWS Savings Plan."""
    k = CommitmentKind(kind)
    if k not in _SAVINGS_PLAN_SHARE:
        raise InputError("kind", None, "savings_plan_compute or savings_plan_ec2", got=k.value)
    return _SAVINGS_PLAN_SHARE[k]


def savings_plan_discount(kind: CommitmentKind | str, name: str, term_years: int) -> float | None:
    """Fraction off on-demand a Savings Plan of ``kind`` gives ``name`` over
    ``term_years`` (quoted as the RI discounts: 1-year no upfront, 3-year all
    upfront); ``None`` where none is sold (GCP types, no RI price)."""
    if term_years not in (1, 3):
        raise InputError("term_years", None, "1 or 3", got=term_years)
    e = _entry(name)
    share = savings_plan_share(kind)
    disc = e.committed_discount_1y if term_years == 1 else e.committed_discount_3y
    if e.provider is not AWS or disc is None:
        return None
    return disc * share
