"""The default market's calibration: every figure of its spot model, with its source.

Owns: the constants the seeded spot model (``markets.default.spot_model``)
draws from (spot discount band and price walk, zone capacity regimes, pool
participation, advisor-like hazard buckets, revocation bursts, the model
hazard's confidence) and ``bucket_hazard_band``. Each figure cites where it
comes from (docs/concepts/market.md, the public spot datasets) or says it is an assumption;
tests check the generated market against them.

Must not: draw random numbers, hold state, read files or call clouds.
"""

from __future__ import annotations

from markets.hazard.clustering import CLUSTER_WINDOW_S
from markets.hazard.prior import monthly_share_to_rate

__all__ = [
    "BUCKET0_FLOOR_SHARE",
    "BUCKET_LABELS",
    "BUCKET_SHARE_EDGES",
    "BUCKET_WEIGHTS",
    "BURST_GAP_MEAN_S",
    "BURST_MEAN_EVENTS",
    "CLUSTER_WINDOW_S",
    "CRUNCH_MEAN_HOURS_RANGE",
    "CRUNCH_REVOCATION_INTENSITY",
    "GCP_PRICE_HOLD_HOURS",
    "MODEL_HAZARD_CONFIDENCE",
    "PARTICIPATION_BETA",
    "PARTICIPATION_FLOOR",
    "PRICE_HALF_LIFE_HOURS",
    "PRICE_WEEKLY_SD",
    "SPOT_DISCOUNT_BETA",
    "SPOT_DISCOUNT_MAX",
    "SPOT_DISCOUNT_MIN",
    "TOP_BUCKET_MAX_PER_HOUR",
    "ZONE_SHARE_MAX",
    "ZONE_SHARE_MIN",
    "bucket_hazard_band",
]

# docs/concepts/market.md: "Spot discounts 60-90 % off".
SPOT_DISCOUNT_MIN, SPOT_DISCOUNT_MAX = 0.60, 0.90
# A pool's mean discount is MIN + (MAX - MIN) * Beta(2, 3) (mean 72 %): skewed to
# the small end because GPU spot is scarce; the AWS Spot Instance Advisor
# snapshot of 2025-06-28 (alexei-led/spotinfo) gives a median saving of 58 % for this
# catalog's AWS types in us-east-1/us-west-2/eu-west-1.
SPOT_DISCOUNT_BETA = (2.0, 3.0)
# "Since late 2017 AWS spot prices move slowly (a few % a week)"
# (docs/concepts/market.md): sd of the weekly log change; mean reversion keeps months bounded.
PRICE_WEEKLY_SD = 0.025
PRICE_HALF_LIFE_HOURS = 720.0  # assumption: a month; gives a stationary sd of 4.6 %
# GCP Spot VM pricing docs: Spot prices "can change up to once every 30 days",
# and are set per region, not per zone.
GCP_PRICE_HOLD_HOURS = 720

# docs/concepts/market.md: "the share of time spot could be held ranged from 0.17
# to 0.91 across nine zones" (45-day V100 trace). Zones draw their calm share
# stratified over this range, so every market spans it.
ZONE_SHARE_MIN, ZONE_SHARE_MAX = 0.17, 0.91
# Mean crunch spell, log-uniform (hours). Assumption loosely fitted to the
# 1-node V100/K80 availability traces of skypilot-org/spot-traces (2022-10, 2023-02): 2-30
# losses per available day, outages of minutes to hours.
CRUNCH_MEAN_HOURS_RANGE = (1.0, 6.0)
# Share of a zone's crunches that also starve a pool: 0.7 + 0.3 * Beta(3, 1)
# (mean 0.93): pools of a zone move together (>94 % "all or none" for 4- and
# 16-node clusters, docs/concepts/market.md).
PARTICIPATION_FLOOR, PARTICIPATION_BETA = 0.7, (3.0, 1.0)

# AWS Spot Instance Advisor buckets (docs/concepts/market.md; the advisor's
# "ranges"): share of instances reclaimed over a month, <5 %, 5-10 %,
# 10-15 %, 15-20 %, >20 %, read as a constant hazard -ln(1 - share) / 730 h as
# markets.hazard.prior does. The top bucket is open: its hazard is drawn
# log-uniform up to one a day (assumption; the public 1-node GPU traces
# lose spot 2-9 times per available day, counting capacity loss, which this
# model keeps in ``spot_available``).
BUCKET_SHARE_EDGES = (0.0, 0.05, 0.10, 0.15, 0.20)
BUCKET_LABELS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")
TOP_BUCKET_MAX_PER_HOUR = 1.0 / 24.0
BUCKET0_FLOOR_SHARE = 0.005  # assumption: no pool is revocation-free
# Advisor snapshot 2025-06-28, this catalog's AWS types in us-east-1, us-west-2
# and eu-west-1: 3, 2, 7, 3 and 45 of 60 (type, region) pairs per bucket.
BUCKET_WEIGHTS = (0.05, 0.05, 0.10, 0.05, 0.75)
# "83-97 % [of preemptions] are followed by another in the same zone within 5
# minutes" (SkyServe, EuroSys 2025; docs/concepts/market.md). A burst of
# Geometric(mean 10) events leaves 1 in 10 without a follower: ~90 %. The
# 5-minute window is ``markets.hazard.clustering``'s (CLUSTER_WINDOW_S, re-exported
# here): the model is calibrated against the statistic that measures it.
BURST_MEAN_EVENTS = 10.0
BURST_GAP_MEAN_S = 40.0  # exponential gaps: P(gap > 300 s) = e^-7.5, negligible
# Assumption: bursts are 4x as likely while the zone is short of capacity
# (revocations and unavailability come from the same shortage).
CRUNCH_REVOCATION_INTENSITY = 4.0
# The hazard is the model's own parameter, not an observation: a mid confidence.
MODEL_HAZARD_CONFIDENCE = 0.5


def bucket_hazard_band(bucket: int) -> tuple[float, float]:
    """Hazard per hour held at the edges of an advisor-like bucket (0-4)."""
    rates = [monthly_share_to_rate(s) for s in BUCKET_SHARE_EDGES] + [TOP_BUCKET_MAX_PER_HOUR]
    return rates[bucket], rates[bucket + 1]
