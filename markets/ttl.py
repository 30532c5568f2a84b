"""Every cache lifetime in Spotfolio, in one place, each with the reason for it.

Owns: named durations in seconds (``*_TTL_S``). A cached value older than its
TTL is refreshed on next use; if the refresh fails transiently the old value is
kept and whatever is built from it is marked stale (``MarketSnapshot.stale``).

Must not: import anything or hold logic. Adapters and the daemon read these
constants; tests drive expiry with ``markets.clock.ManualClock``. Karpenter's
AWS provider is the reference for several figures (``pkg/cache/cache.go`` and
its pricing controller, which refreshes prices every 12 hours).
"""

from __future__ import annotations

__all__ = [
    "AVAILABILITY_ZONES_TTL_S",
    "GCP_PRICE_FILE_TTL_S",
    "INSTANCE_TYPES_TTL_S",
    "INSTANCE_TYPE_OFFERINGS_TTL_S",
    "ON_DEMAND_PRICE_TTL_S",
    "QUOTA_TTL_S",
    "RESERVED_PRICE_TTL_S",
    "SPOT_PLACEMENT_SCORE_TTL_S",
    "SPOT_PRICE_TTL_S",
    "UNAVAILABLE_OFFERING_TTL_S",
]

_MINUTE_S = 60.0
_HOUR_S = 60 * _MINUTE_S

# Spot prices: since late 2017 AWS spot prices move slowly (a few % a week,
# AWS's 2017 spot pricing change), so minutes of lag cost little, while
# DescribeSpotPriceHistory is a paginated call per region that we do not want
# on every planning tick.
SPOT_PRICE_TTL_S = 5 * _MINUTE_S

# Spot placement scores: a fulfilment signal that changes with capacity, so it
# should be fresher than list prices; but AWS may cap how many *new* request
# configurations an account asks for in 24 hours (EC2 User Guide, "Spot
# placement score", Limitations), so we repeat one configuration, at most every
# 15 minutes.
SPOT_PLACEMENT_SCORE_TTL_S = 15 * _MINUTE_S

# On-demand list prices: change a few times a year; Karpenter refreshes its
# on-demand and spot price tables every 12 hours. The Pricing API is a global
# endpoint with low request limits, which is another reason to ask rarely.
ON_DEMAND_PRICE_TTL_S = 12 * _HOUR_S

# Reserved-instance offerings (1y/3y effective prices): list prices like
# on-demand, refreshed on the same cadence.
RESERVED_PRICE_TTL_S = 12 * _HOUR_S

# Instance type specs (GPUs, vCPUs, memory): fixed for the life of a type;
# a day bounds how long a newly launched type stays unseen.
INSTANCE_TYPES_TTL_S = 24 * _HOUR_S

# Availability zones of a region: change only when AWS opens a zone or an
# account opts in; an hour is cheap and bounds the lag.
AVAILABILITY_ZONES_TTL_S = 1 * _HOUR_S

# Which instance types are offered in which zone: Karpenter refreshes instance
# types and zones every 5 minutes (InstanceTypesAndZonesTTL); we read them for
# planning, not launching, so an hour is enough.
INSTANCE_TYPE_OFFERINGS_TTL_S = 1 * _HOUR_S

# A pool (on one tier) that just answered InsufficientInstanceCapacity (or
# GCP's stockout) is skipped this long, by the daemon's launcher and reconcile
# and by the lifecycle alike: one book, one TTL (broker.lifecycle.fallback).
# Karpenter's unavailable-offerings cache keeps an offering out for 3 minutes
# (UnavailableOfferingsTTL) and we follow it: ICE is usually a short-lived
# shortage of one type in one zone, and a wrongly skipped cheap pool costs its
# discount for every minute of the skip, while a retry of an empty pool costs
# one refused API call. At the daemon's 60 s reconcile, 3 minutes retries an
# empty pool at most every third pass, and outlasts a notice window (120 s on
# AWS), so a storm's replacements do not pile into the pool that just refused.
# (The daemon used 15 minutes before: a quarter of an hour of a pool's
# discount lost on one refusal, which Karpenter's experience does not support.)
UNAVAILABLE_OFFERING_TTL_S = 3 * _MINUTE_S
# Account quotas (EC2 vCPU limits from Service Quotas, GCP GPU quotas from
# regions.get): they change only when a human's increase request is granted,
# which takes hours to days; a launch refused for quota is handled anyway.
QUOTA_TTL_S = 1 * _HOUR_S

# A GCP price file (markets.gcp.prices) is re-read at most this often: Google
# changes Spot VM prices at most once every 30 days (Spot VMs pricing docs) and
# list prices a few times a year, so a day of lag costs little; re-reading lets
# a cron job that refreshes the file take effect without a daemon restart.
GCP_PRICE_FILE_TTL_S = 24 * _HOUR_S
