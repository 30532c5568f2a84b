"""Spot availability and preemption traces (the "Can't Be Late" format).

Owns: ``SpotTrace`` and the loaders ``load_spot_trace`` / ``load_spot_traces``
for JSON files ``{"metadata": {"gap_seconds": N}, "data": [...], "prices"?: [...]}``
laid out as ``<kind>/<N>-node/<provider>-<MM>-<DD>-<YYYY>/<zone>_<name>.json``
(skypilot-org/spot-traces, released with "Can't Be Late", NSDI 2024).

Must not: estimate hazards (``markets.hazard.posterior`` does) or join traces with
prices (the replay market does).

What the numbers mean
---------------------
The raw value is *not* uniform across trace shapes; we normalise it:

* 1-node traces collected in **2022** (``aws-10-26-2022``): ``1`` means spot
  could **not** be held in that tick (a launch probe failed, or the running
  instance had been preempted and not yet relaunched), ``0`` means it was held.
  Source: the authors' simulator ``TraceEnv.spot_available()`` returns
  ``not trace[tick]``, and their converter writes the collected ``preempted``
  column as ``data``.
* 1-node traces collected from **2023** on (``aws-02-15-2023``,
  ``aws-04-22-2023``, ``gcp-04-30-2023``): ``1`` means spot **was** held, as
  the repository README says of every trace ("the number of available
  instances"). Decided on the evidence below (the default ``one_node_raw=None``
  picks the reading by the folder's start date, ``HELD_READING_FROM``).
* multi-node traces (``16-node``): the raw value is the **count of nodes that
  could be held** (0..N); the simulator's gang mode treats ``count >= k`` as
  "k nodes available".

``SpotTrace.frame`` schema (one row per tick, ``len == len(data)``):

========== ======================= ==============================================
column     dtype                   meaning
========== ======================= ==============================================
t          datetime64[ns, UTC]     tick start: ``start + i * gap_seconds``
raw        int64                   the value as stored in the file
available  int64                   nodes spot could be held for in this tick:
                                   0/1 for 1-node (``1 - raw`` or ``raw``, as read
                                   above), 0..N multi-node
price      float64 (optional)      spot $/instance-hour per tick, when the file
                                   carries ``prices`` (NaN where null)
========== ======================= ==============================================

Why the 2023 files read the other way: (1) the "0.17-0.91 held across nine
zones" figure quoted for the 45-day V100 trace (skypilot-org/spot-traces,
docs/concepts/market.md) fits our three us-west-2 zones only when read as held:
0.883 / 0.905 / 0.891 (us-west-2b is the 0.91 top end); read as preempted they
give 0.095-0.117, below the stated minimum. The upstream us-east-1a file of the
same collection (skypilot-org/spot-traces, read through the search tool) is
mostly ``0``: held, it is a low-availability zone, the figure's other end.
(2) The 2023 preemption traces start with one ``0`` and then ``1``s: GCP
us-central1-a is one ``0`` then 5,475 ``1`` ("launching, then held" for 45 h;
read as preempted, the collector would have watched a dead VM for 45 h while
it relaunched us-east1-b within minutes); us-east1-b holds 6.5 h and 16 h
with 2- and 16-minute gaps. (3) The April 2023 V100 preemption traces in
us-west-2b/c then hold 0.79 / 0.73, close to the same zones' 0.88-0.91 two
months earlier (read as preempted: 0.21 / 0.27). The 2022 files keep the
simulator's reading although, read so, p3.16xlarge/p2.8xlarge come out *more*
available than p3.2xlarge/p2.xlarge in three of four cases: nothing as firm
as the published figure contradicts the authors' code there.
``one_node_raw="preempted"`` or ``"held"`` forces one reading for every file.

``SpotTrace.held`` is the uniform boolean "spot could be held" series (all
``nodes`` nodes for multi-node traces); ``held_share`` its mean.

Trace names map to real instance types: AWS ``v100_1`` -> ``p3.2xlarge``,
``v100_8`` -> ``p3.16xlarge``, ``k80_1`` -> ``p2.xlarge``, ``k80_8`` ->
``p2.8xlarge`` (AWS P2/P3 instance pages: 1 and 8 GPUs; the upstream README's
"p2.2xlarge/p2.16xlarge" are not 1/8-GPU sizes), ``intel_64`` -> ``r5.16xlarge``
(upstream README); GCP ``c3-88`` -> ``c3-highcpu-88``. An unknown name is kept
as the instance type with ``gpus_per_node=None``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from markets.errors import InputError
from markets.files.parsing import read_text
from markets.numbers import DAY_S, MAX_USD_PER_HOUR, Bounded, NumberError
from markets.validation import read_json

__all__ = [
    "HELD_READING_FROM",
    "TRACE_INSTANCE_TYPES",
    "OneNodeRaw",
    "SpotTrace",
    "TraceKind",
    "load_spot_trace",
    "load_spot_traces",
    "zone_region",
]

TraceKind = Literal["availability", "preemption"]
# How a 1-node trace's raw value reads: "preempted" (1 = not held; the
# authors' simulator) or "held" (1 = held). See the module docstring.
OneNodeRaw = Literal["preempted", "held"]
# Collections started on or after this date read 1 as held (module docstring:
# the 2023 files match the published held shares only that way).
HELD_READING_FROM = datetime(2023, 1, 1, tzinfo=UTC)
# A tick lasts at most a day (the public traces tick every 1-16 minutes).
GAP_SECONDS = Bounded(gt=0, le=DAY_S, unit="seconds")
# Ticks in one file: a year at 1-second ticks is 31.5 M; the public ones hold
# a few thousand. Bounds the arrays built per tick.
MAX_TICKS = 50_000_000
# pandas' nanosecond clock ends in 2262; traces end well before.
_LAST_TICK = pd.Timestamp("2200-01-01", tz="UTC")

# (provider, trace name) -> (instance type, GPUs per node). Sources: AWS EC2
# P2/P3 instance type pages (p2.xlarge 1 K80, p2.8xlarge 8 K80, p3.2xlarge 1
# V100, p3.16xlarge 8 V100); r5.16xlarge and c3-highcpu-88 from the
# skypilot-org/spot-traces README (CPU-only: 0 GPUs).
TRACE_INSTANCE_TYPES: dict[tuple[str, str], tuple[str, int]] = {
    ("aws", "v100_1"): ("p3.2xlarge", 1),
    ("aws", "v100_8"): ("p3.16xlarge", 8),
    ("aws", "k80_1"): ("p2.xlarge", 1),
    ("aws", "k80_8"): ("p2.8xlarge", 8),
    ("aws", "intel_64"): ("r5.16xlarge", 0),
    ("gcp", "c3-88"): ("c3-highcpu-88", 0),
}

_FOLDER = re.compile(r"^(?P<provider>aws|gcp)-(?P<m>\d{2})-(?P<d>\d{2})-(?P<y>\d{4})$")
_NODES = re.compile(r"^(?P<n>\d+)-node$")
# AWS zone: us-west-2b (also local zones us-west-2-lax-1a); GCP zone: us-central1-a.
_AWS_ZONE = re.compile(r"^(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)(?:-[a-z0-9]+)*[a-z]$")
_GCP_ZONE = re.compile(r"^(?P<region>[a-z]+(?:-[a-z]+)*\d+)-[a-z]$")


def zone_region(provider: str, zone: str) -> str | None:
    """The region of ``zone`` (``us-west-2b`` -> ``us-west-2``,
    ``us-central1-a`` -> ``us-central1``), ``None`` if it is not a zone name."""
    m = (_AWS_ZONE if provider == "aws" else _GCP_ZONE).match(zone)
    return m.group("region") if m else None


@dataclass(frozen=True)
class SpotTrace:
    """One trace file, normalised (see the module docstring for ``frame``)."""

    provider: str
    region: str
    zone: str
    instance_type: str
    raw_name: str
    gpus_per_node: int | None
    kind: TraceKind
    nodes: int
    gap_seconds: float
    start: datetime
    frame: pd.DataFrame = field(repr=False, compare=False)
    path: str = ""

    @property
    def pool_key(self) -> str:
        return f"{self.provider}/{self.region}/{self.zone}/{self.instance_type}"

    @property
    def ticks(self) -> int:
        return len(self.frame)

    @property
    def end(self) -> datetime:
        """End of the last tick."""
        return self.start + pd.Timedelta(seconds=self.gap_seconds * self.ticks).to_pytimedelta()

    @property
    def hours(self) -> float:
        return self.gap_seconds * self.ticks / 3600.0

    @property
    def held(self) -> pd.Series[bool]:
        """Per tick: could spot be held for all ``nodes`` nodes? Indexed by ``t``."""
        return pd.Series(
            self.frame["available"].to_numpy() >= self.nodes,
            index=pd.DatetimeIndex(self.frame["t"]),
            name="held",
        )

    @property
    def held_share(self) -> float:
        """Share of ticks in which spot could be held (all nodes)."""
        return float(np.mean(self.frame["available"].to_numpy() >= self.nodes))

    @property
    def has_prices(self) -> bool:
        return "price" in self.frame.columns

    def losses(self) -> pd.DataFrame:
        """Ticks where held capacity dropped: ``t``, ``nodes_lost`` (> 0).

        For 1-node preemption traces these are the preemptions; for
        availability traces, the moments spot stopped being obtainable."""
        avail = self.frame["available"].to_numpy()
        drop = np.zeros(len(avail), dtype=np.int64)
        drop[1:] = avail[:-1] - avail[1:]
        keep = drop > 0
        return pd.DataFrame(
            {"t": self.frame["t"].to_numpy()[keep], "nodes_lost": drop[keep]}
        ).reset_index(drop=True)


def _parse_location(
    path: Path,
    provider: str | None,
    kind: str | None,
    nodes: int | None,
    start: datetime | None,
) -> tuple[str, TraceKind, int, datetime]:
    """Provider/start from ``<provider>-MM-DD-YYYY``, nodes from ``N-node``,
    kind from an ``availability``/``preemption`` ancestor; explicit arguments win."""
    parents = [p.name for p in path.parents]
    folder = path.parent.name
    m = _FOLDER.match(folder)
    if provider is None or start is None:
        if not m:
            raise InputError(
                str(path),
                "folder name",
                "a folder named <aws|gcp>-MM-DD-YYYY (trace start date)",
                got=folder,
            )
        provider = provider or m.group("provider")
        if start is None:
            try:
                start = datetime(int(m["y"]), int(m["m"]), int(m["d"]), tzinfo=UTC)
            except ValueError as e:
                raise InputError(str(path), "folder name", "a valid date", got=folder) from e
    if nodes is None:
        found = [int(x["n"]) for x in map(_NODES.match, parents) if x]
        if not found:
            raise InputError(str(path), "folder name", "an ancestor folder named <N>-node")
        nodes = found[0]
    if kind is None:
        kinds = [p for p in parents if p in ("availability", "preemption")]
        if not kinds:
            raise InputError(
                str(path), "folder name", "an ancestor folder 'availability' or 'preemption'"
            )
        kind = kinds[0]
    trace_kind = _trace_kind(path, kind)
    if nodes < 1:
        raise InputError(str(path), "nodes", "at least 1 node", got=nodes)
    return provider, trace_kind, nodes, start


def _trace_kind(path: Path, kind: str) -> TraceKind:
    if kind == "availability":
        return "availability"
    if kind == "preemption":
        return "preemption"
    raise InputError(str(path), "kind", "'availability' or 'preemption'", got=kind)


def _parse_name(path: Path, provider: str) -> tuple[str, str, str, int | None]:
    stem = path.name.removesuffix(".gz").removesuffix(".json")
    zone, sep, raw = stem.partition("_")
    region = zone_region(provider, zone)
    if not sep or not raw or region is None:
        raise InputError(
            str(path),
            "file name",
            f"<zone>_<instance>.json with a {provider} zone (e.g. us-west-2a_v100_1)",
            got=path.name,
        )
    itype, gpus = TRACE_INSTANCE_TYPES.get((provider, raw), (raw, None))
    return zone, region, itype, gpus


def load_spot_trace(
    path: str | Path,
    *,
    provider: str | None = None,
    kind: TraceKind | None = None,
    nodes: int | None = None,
    start: datetime | None = None,
    one_node_raw: OneNodeRaw | None = None,
) -> SpotTrace:
    """Load one trace file. Location facts (provider, start, nodes, kind) come
    from its folders unless given. Any bad value raises ``InputError`` naming
    the file and the field (``metadata.gap_seconds``, ``data[17]``, ...): a
    trace is a time series, so a dropped tick would shift every later one."""
    path = Path(path)
    provider, kind, nodes, start = _parse_location(path, provider, kind, nodes, start)
    zone, region, itype, gpus = _parse_name(path, provider)
    doc: object = read_json(read_text(path), str(path))
    if not isinstance(doc, dict):
        raise InputError(str(path), "(top level)", "an object with metadata and data")
    gap = _gap_seconds(path, doc)
    data = doc.get("data")
    if not isinstance(data, list) or not data:
        raise InputError(
            str(path), "data", "a non-empty list of tick values", got=type(data).__name__
        )
    if len(data) > MAX_TICKS:
        raise InputError(str(path), "data", f"at most {MAX_TICKS:,} ticks", got=len(data))
    raw = _int_array(path, data, "data", hi=1 if nodes == 1 else nodes)
    if pd.Timestamp(start) + pd.Timedelta(seconds=gap * len(raw)) > _LAST_TICK:
        raise InputError(str(path), "metadata.gap_seconds", "ticks that end before 2200", got=gap)
    if one_node_raw is None:  # by collection date, see HELD_READING_FROM
        one_node_raw = "held" if start >= HELD_READING_FROM else "preempted"
    available = (1 - raw) if nodes == 1 and one_node_raw == "preempted" else raw
    t = pd.Timestamp(start) + pd.to_timedelta(np.arange(len(raw)) * gap, unit="s")
    frame = pd.DataFrame({"t": t.as_unit("ns"), "raw": raw, "available": available})
    prices = doc.get("prices")
    if prices is not None:
        frame["price"] = _price_array(path, prices, len(raw))
    return SpotTrace(
        provider=provider,
        region=region,
        zone=zone,
        instance_type=itype,
        raw_name=path.name.removesuffix(".json").partition("_")[2],
        gpus_per_node=gpus,
        kind=kind,
        nodes=nodes,
        gap_seconds=gap,
        start=start,
        frame=frame,
        path=str(path),
    )


def _gap_seconds(path: Path, doc: Mapping[str, object]) -> float:
    meta = doc.get("metadata")
    gap = meta.get("gap_seconds") if isinstance(meta, dict) else None
    if not isinstance(gap, int | float):  # text is not a number in JSON
        raise InputError(str(path), "metadata.gap_seconds", GAP_SECONDS.expected, got=gap)
    try:
        return float(GAP_SECONDS.check(gap))
    except NumberError as e:
        raise InputError(str(path), "metadata.gap_seconds", str(e), got=gap) from e


def _int_array(path: Path, values: list[object], name: str, *, hi: int) -> NDArray[np.int64]:
    # One pass over the types: numpy would quietly turn True into 1 and mixed
    # lists into objects; a float or a string is a bad value at its index.
    if {type(v) for v in values} != {int}:
        bad = next(i for i, v in enumerate(values) if type(v) is not int)
        raise InputError(str(path), f"{name}[{bad}]", "an integer", got=values[bad])
    try:
        arr = np.asarray(values, dtype=np.int64)
    except OverflowError as e:
        big = next(i for i, v in enumerate(values) if not -(2**63) <= int(str(v)) < 2**63)
        raise InputError(
            str(path), f"{name}[{big}]", f"an integer in 0..{hi}", got=values[big]
        ) from e
    out = np.flatnonzero((arr < 0) | (arr > hi))
    if len(out):
        i = int(out[0])
        raise InputError(
            str(path),
            f"{name}[{i}]",
            f"an integer in 0..{hi} ({len(out)} values out of range)",
            got=int(arr[i]),
        )
    return arr


def _price_array(path: Path, values: object, n: int) -> NDArray[np.float64]:
    if not isinstance(values, list) or len(values) != n:
        got = len(values) if isinstance(values, list) else type(values).__name__
        raise InputError(str(path), "prices", f"a list of {n} prices (one per tick)", got=got)
    # One pass over the types (fast), then numpy for the values; null -> NaN.
    if {type(v) for v in values} <= {int, float, type(None)}:
        arr = np.asarray(values, dtype=np.float64)
        ok = np.isfinite(arr) & (arr >= 0) & (arr <= MAX_USD_PER_HOUR)
        out = np.flatnonzero(~(np.isnan(arr) | ok))
        if not len(out):
            return arr
        bad = int(out[0])
    else:
        bad = next(
            i
            for i, v in enumerate(values)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float))
        )
    expected = f"a price >= 0 and <= {MAX_USD_PER_HOUR:,.0f} or null"
    raise InputError(str(path), f"prices[{bad}]", expected, got=values[bad])


def load_spot_traces(
    root: str | Path, *, one_node_raw: OneNodeRaw | None = None
) -> list[SpotTrace]:
    """Every ``*.json`` trace under ``root`` (a directory of traces laid out
    like skypilot-org/spot-traces, or any part of it), sorted by
    path. A file that is not a valid trace raises ``InputError``."""
    root = Path(root)
    if root.is_file():
        return [load_spot_trace(root, one_node_raw=one_node_raw)]
    if not root.is_dir():
        raise InputError(str(root), None, "an existing trace directory or file")
    return [load_spot_trace(p, one_node_raw=one_node_raw) for p in sorted(root.rglob("*.json"))]
