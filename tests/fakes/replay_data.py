"""Small synthetic datasets laid out like the public datasets, for the replay tests.

Every figure is chosen by hand so that tests can state the expected answer:
``write_mini(root)`` writes

* AWS spot price history (CSV): p3.2xlarge in us-east-1a changes at T0 - 10 d
  ($1.00), T0 ($0.80: a change point in the middle) and T0 + 10 d ($0.90, the
  last row: the end of the recording); us-east-1b $1.20 from T0 - 10 d;
  c5.large (not in the catalog) in us-east-1a.
* a 2023 1-node availability trace, us-west-2a p3.2xlarge (v100_1), hourly
  ticks from T0, ``AVAIL_2A`` (2023 files: 1 = held);
* a 2023 1-node preemption trace with per-tick prices, us-west-2b p3.2xlarge,
  hourly from T0, ``PREEMPT_2B`` and ``PRICES_2B``;
* GCP prices: g2-standard-4 in us-central1 from 2022-12-01 ($0.70, no spot)
  and 2023-01-15 ($0.75, spot $0.25), g2-standard-16 (not in the catalog,
  family g2-standard) from 2023-01-05, one c2-standard-4 row (CPU, no zones)
  and a last g2-standard-4 row on 2023-02-01 (list unchanged);
* machine_type_attributes.csv for those types;
* an advisor snapshot: p3.2xlarge bucket 4 / 70 % in us-west-2, bucket 3 /
  65 % in us-east-1.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

T0 = datetime(2023, 1, 10, tzinfo=UTC)
AVAIL_2A = [1, 1, 0, 0, 1, 1, 1, 0, 1, 1]
PREEMPT_2B = [0, 1, 1, 1, 1, 0, 1, 1, 1, 1]
PRICES_2B = [0.90] * 5 + [0.95] * 5
GCP_HEADER = (
    "snapshot_date,generated,machine_type,region,hour,hour_spot,month,month_1y,month_3y,month_spot"
)


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S+00:00")


def write_trace(
    root: Path,
    kind: str,
    nodes: int,
    folder: str,
    name: str,
    data: list[int],
    gap_s: int = 3600,
    prices: list[float] | None = None,
) -> Path:
    path = root / "spot-availability-traces" / kind / f"{nodes}-node" / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, object] = {"metadata": {"gap_seconds": gap_s}, "data": data}
    if prices is not None:
        doc["prices"] = prices
    path.write_text(json.dumps(doc))
    return path


def gcp_row(day: str, mtype: str, region: str, hour: float, spot: float | None) -> str:
    month = hour * 730
    spot_text = "" if spot is None else f"{spot}"
    month_spot = "" if spot is None else f"{spot * 730}"
    return (
        f"{day},{day}T00:00:00Z,{mtype},{region},{hour},{spot_text},{month},"
        f"{month * 0.63},{month * 0.45},{month_spot}"
    )


def write_mini(root: Path, *, traces: bool = True, gcp: bool = True) -> Path:
    prices = root / "aws-spot-price-history"
    prices.mkdir(parents=True)
    rows = [
        (T0 - timedelta(days=10), "us-east-1a", "p3.2xlarge", "1.000000"),
        (T0, "us-east-1a", "p3.2xlarge", "0.800000"),
        (T0 + timedelta(days=10), "us-east-1a", "p3.2xlarge", "0.900000"),
        (T0 - timedelta(days=10), "us-east-1b", "p3.2xlarge", "1.200000"),
        (T0 - timedelta(days=5), "us-east-1a", "c5.large", "0.030000"),
    ]
    lines = ["Timestamp,AvailabilityZone,InstanceType,SpotPrice"]
    lines += [f"{iso(t)},{z},{it},{p}" for t, z, it, p in rows]
    (prices / "history.csv").write_text("\n".join(lines) + "\n")
    if traces:
        folder = "aws-01-10-2023"
        write_trace(root, "availability", 1, folder, "us-west-2a_v100_1.json", AVAIL_2A)
        write_trace(
            root, "preemption", 1, folder, "us-west-2b_v100_1.json", PREEMPT_2B, prices=PRICES_2B
        )
    if gcp:
        g = root / "gcp-prices"
        g.mkdir()
        rows_g = [
            gcp_row("2022-12-01", "g2-standard-4", "us-central1", 0.70, None),
            gcp_row("2023-01-05", "g2-standard-16", "us-central1", 1.20, 0.40),
            gcp_row("2023-01-15", "g2-standard-4", "us-central1", 0.75, 0.25),
            gcp_row("2023-01-15", "c2-standard-4", "us-central1", 0.20, 0.05),
            gcp_row("2023-02-01", "g2-standard-4", "us-central1", 0.75, 0.25),
        ]
        (g / "prices.csv").write_text("\n".join([GCP_HEADER, *rows_g]) + "\n")
        (g / "machine_type_attributes.csv").write_text(
            "machine_type,cpu,ram,l4\n"
            "g2-standard-4,4,16,1\n"
            "g2-standard-16,16,64,1\n"
            "c2-standard-4,4,16,\n"
        )
    adv = root / "aws-spot-advisor"
    adv.mkdir()
    doc = {
        "spot_advisor": {
            "us-west-2": {"Linux": {"p3.2xlarge": {"r": 4, "s": 70}}},
            "us-east-1": {"Linux": {"p3.2xlarge": {"r": 3, "s": 65}}},
        },
        "instance_types": {"p3.2xlarge": {"cores": 8, "ram_gb": 61, "emr": False}},
    }
    (adv / "advisor.json").write_text(json.dumps(doc))
    return root
