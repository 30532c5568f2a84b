"""The soak (``machinery.soak``): the accelerated daemon for weeks of simulated time.

Owns: ``SoakSpec``, ``run(spec, pg) -> dict`` and ``check(result)``. The
production daemon (``simulate_daemon``: simulated cloud, simulated time) on
a real PostgreSQL store, over the default market with extra revocations
(``waves_per_pool_hour`` waves of ``wave_size`` in each pool the fleet holds), so
thousands of notices arrive. Each stretch runs in a child process that is
killed with SIGKILL at a stated simulated hour, inside a launch or terminate
call (before the cloud acts, or after it acted with the answer lost); the
next child resumes from the store and the cloud's account as the kill left
it, once the dead holder's lease has expired. The store server is
restarted (``pg_ctl restart``) once, mid-run, under the daemon's feet.

Per simulated day: the daemon process's RSS, the store's rows per table and
bytes, and the p99 of the daemon's own notice -> durable decision latency
(``decisions.latency_s``, wall clock). ``check`` holds their growth to the
limits below; at the end 0 duplicate launches and 0 orphaned instances.

Must not: edit the daemon's loop (it drives ``simulate_daemon`` as a caller
does), or touch anything outside its temporary directory and its server.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from markets.clock import ensure_utc

__all__ = ["LIMITS", "SCHEMA", "SoakSpec", "check", "run"]

SCHEMA = "spotfolio.bench.soak/1"

# The limits ``check`` holds the figures to, and why:
LIMITS: dict[str, float] = {
    # RSS slope over a process's days after its first (imports, the
    # market's caches, the solver's first plans): the Terraform modules give
    # the daemon 2,048 MiB; at 2 MiB a day a year adds < 730 MiB to a
    # baseline of a few hundred, so a leak this small still fits a year
    # between restarts, and any per-notice leak of ~200 bytes or more exceeds it.
    "rss_mib_per_day_after_warmup": 2.0,
    # The same slope per notice: the simulated cloud lives in the daemon's
    # process and keeps every instance and notice it made (for its report),
    # ~3 KiB a notice measured at a week's storm rate; a daemon that kept
    # another KiB or more of every notice breaks 4 KiB. At the 90-day rate
    # (~200 notices a day) this is ~0.6 MiB a day, inside the limit above.
    "rss_kib_per_notice_after_warmup": 4.0,
    # The store grows with what happened, not with time squared: a notice
    # writes its notice row, its decision, a launch action and a fleet row
    # (~1-2 KiB with indexes); 8 KiB a notice is the bound on all of it,
    # plans and reconciles included, and the second half of the run may not
    # cost more than 2x the first half's per notice (PostgreSQL grows its
    # files a page run at a time, lumpy over a few days; a store whose cost
    # a notice grew with the history would exceed 2x over weeks).
    "store_bytes_per_notice": 8192.0,
    "store_growth_second_half_vs_first": 2.0,
    # p99 decision latency, mean over the last 10 days / the first 10 (both
    # after the first day): a query that scans the whole history grows
    # with it and breaks this; load on a shared machine moves both ends alike.
    "p99_last10_vs_first10": 3.0,
}


@dataclass(frozen=True)
class SoakSpec:
    """What to run. ``kills``: (simulated hour, ``"before"`` | ``"after"``);
    ``store_restart_hour``: the hour the store server is restarted."""

    days: int = 90
    waves_per_pool_hour: float = 0.03
    wave_size: int = 4
    kills: tuple[tuple[float, str], ...] = ((24 * 20 + 7.3, "after"), (24 * 55 + 15.1, "before"))
    store_restart_hour: float = 24 * 37 + 11.6
    seed: int = 0
    serving_units: int = 48  # base; the peak is twice it
    batch_units: int = 32
    # The daemon's cadence (seconds of simulated time): the production
    # defaults but for reconcile; a longer one makes a simulated day cheaper
    # (a day's wall clock is mostly its plans and reconciles, not its notices).
    refresh_market_s: float = 3600.0
    replan_s: float = 3600.0
    reconcile_s: float = 1800.0


@dataclass(frozen=True)
class _Segment:
    """One child's stretch (pickled for the child process; our own file)."""

    spec: SoakSpec
    start: datetime  # the soak's first hour
    resume: datetime  # this child's first hour
    kill_at: datetime | None
    kill_mode: str
    restart_at: datetime | None
    restart_argv: tuple[str, ...]
    store_url: str
    workdir: str


# -- the market: the default one, with more revocations --------------------------


class _Stormy:
    """The default market with ``rate`` extra waves of ``size`` revocations
    per pool-hour (seeded per pool and hour, so every process sees the same
    ones: spot capacity is taken back in waves, a pool at a time). A
    pool's revocation times over the whole span are drawn once and kept
    (the simulated cloud asks for short windows tens of thousands of times
    a simulated day)."""

    def __init__(self, market: Any, rate: float, size: int, seed: int) -> None:
        self._m = market
        self._rate = rate
        self._size = size
        self._seed = seed
        self.name = market.name
        self._times: dict[str, np.ndarray] = {}  # pool -> sorted datetime64[ns] (UTC)
        self._index: dict[str, Any] = {}  # pool -> the same, as a UTC DatetimeIndex

    def span(self) -> Any:
        return self._m.span()

    def pools(self) -> Any:
        return self._m.pools()

    def instance_types(self) -> Any:
        return self._m.instance_types()

    def snapshot(self, at: datetime | None = None) -> Any:
        return self._m.snapshot(at)

    def hourly(self, start: datetime, hours: int) -> Any:
        return self._m.hourly(start, hours)

    def _pool_times(self, pool_key: str) -> np.ndarray:
        got = self._times.get(pool_key)
        if got is not None:
            return got
        import random
        import zlib

        lo, hi = self._m.span()
        base = self._m.revocation_events(pool_key, lo, hi)
        extra: list[np.datetime64] = []
        h = lo.replace(minute=0, second=0, microsecond=0)
        while h < hi:
            r = random.Random(zlib.crc32(f"{self._seed}|{pool_key}|{h.isoformat()}".encode()))
            for _ in range(_poisson(r, self._rate)):
                t = np.datetime64(h.replace(tzinfo=None), "ns") + np.timedelta64(
                    int(r.uniform(0, 3600) * 1e9), "ns"
                )
                # a wave: ``size`` instances of the pool taken back within a second
                extra += [t + np.timedelta64(i * 100, "ms") for i in range(self._size)]
            h += timedelta(hours=1)
        own = base.tz_convert(UTC).tz_localize(None).to_numpy(dtype="datetime64[ns]")
        times = np.sort(np.concatenate([own, np.array(extra, dtype="datetime64[ns]")]))
        self._times[pool_key] = times
        return times

    def revocation_events(self, pool_key: str, start: datetime, end: datetime) -> Any:
        import pandas as pd

        times = self._pool_times(pool_key)
        lo = np.datetime64(ensure_utc(start).replace(tzinfo=None), "ns")
        hi = np.datetime64(ensure_utc(end).replace(tzinfo=None), "ns")
        i, j = np.searchsorted(times, [lo, hi], side="left")
        if i == j:
            return _NONE
        index = self._index.get(pool_key)
        if index is None:  # made once: a slice of it costs no time-zone conversion
            index = self._index[pool_key] = pd.DatetimeIndex(times).tz_localize(UTC)
        return index[i:j]


def _no_events() -> Any:
    import pandas as pd

    return pd.DatetimeIndex([], dtype="datetime64[ns, UTC]")


_NONE = _no_events()


def _poisson(r: Any, lam: float) -> int:
    k, p, limit = 0, 1.0, math.exp(-lam)
    while True:
        p *= r.random()
        if p <= limit:
            return k
        k += 1


def _market(spec: SoakSpec) -> _Stormy:
    from markets.registry import open_market

    types = ("g5.xlarge", "g6.xlarge", "g4dn.xlarge", "p3.2xlarge", "p3.8xlarge")
    m = open_market("default", instance_types=types, days=spec.days + 5, seed=7 + spec.seed)
    return _Stormy(m, spec.waves_per_pool_hour, spec.wave_size, spec.seed)


def _workloads(spec: SoakSpec) -> Any:
    from policies.workloads.spec import parse_workloads

    s, b = spec.serving_units, spec.batch_units
    return parse_workloads(
        {
            "workloads": [
                {
                    "name": "api",
                    "class": "serving",
                    "instance_types": ["g5.xlarge", "g6.xlarge", "g4dn.xlarge"],
                    "throughput": {"g5.xlarge": 1.0, "g6.xlarge": 0.8, "g4dn.xlarge": 0.5},
                    "max_spot_share": 0.6,
                    "demand": {
                        "base_units": s,
                        "peak_units": 2 * s,
                        "peak_start_hour": 9,
                        "peak_end_hour": 21,
                    },
                },
                # Work enough for the whole run at half its units: it never finishes.
                {
                    "name": "sweeps",
                    "class": "batch",
                    "instance_types": ["p3.2xlarge", "p3.8xlarge"],
                    "unit_hours": b * 24 * spec.days,
                    "deadline_hours": 24 * (spec.days + 5),
                    "max_units": b,
                },
            ],
        }
    )


def _config(spec: SoakSpec, store_url: str) -> Any:
    from broker.daemon.config import DaemonConfig

    return DaemonConfig.model_validate(
        {
            "owner": "soak",
            "store_url": store_url,
            "planner": "fast",
            "metrics_port": 0,
            "intervals": {
                "refresh_market_s": spec.refresh_market_s,
                "replan_s": spec.replan_s,
                "reconcile_s": spec.reconcile_s,
            },
            "sim": {"seed": spec.seed, "rebalance_coverage": 0.5, "rebalance_precision": 0.5},
        }
    )


# -- the child: one stretch of the daemon's life ----------------------------------


def _rss_mib() -> float:
    """This process's resident set now (not its peak): /proc/self/statm."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _store_size(engine: Any) -> dict[str, Any]:
    from sqlalchemy import func, select, text

    from broker.daemon.store.schema import meta

    rows: dict[str, int] = {}
    size: dict[str, int] = {}
    with engine.connect() as c:
        for t in meta.sorted_tables:
            rows[t.name] = int(c.execute(select(func.count()).select_from(t)).scalar_one())
            size[t.name] = int(
                c.execute(text("SELECT pg_total_relation_size(:t)"), {"t": t.name}).scalar_one()
            )
        db = int(c.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
    return {"rows": rows, "table_bytes": size, "bytes": sum(size.values()), "database_bytes": db}


class _Watched:
    """The simulated cloud as the daemon sees it, plus the soak's hands: a
    sample at each simulated midnight, the kill, the store's restart."""

    def __init__(self, cloud: Any, seg: _Segment, engine: Any) -> None:
        self.inner = cloud
        self.name = cloud.name
        self._seg = seg
        self._engine = engine
        self._work = Path(seg.workdir)
        days = (self.clock.now() - seg.start).total_seconds() / 86400
        self._next_day = math.floor(days + 1e-9) + 1
        self._pid = os.getpid()

    @property
    def clock(self) -> Any:
        return self.inner.clock

    def __getattr__(self, name: str) -> Any:  # revoke, unacked, counters...
        return getattr(self.inner, name)

    def save(self) -> None:
        from markets.sim.codec import AccountFile, encode

        doc = AccountFile(offset_s=0.0, state=encode(self.inner))
        _write(self._work / "account.json", doc.model_dump_json())
        _write(self._work / "resume.json", json.dumps({"at": self.clock.now().isoformat()}))

    def _tick(self) -> None:
        now = self.clock.now()
        while now >= self._seg.start + timedelta(days=self._next_day):
            self._sample(self._next_day)
            self._next_day += 1

    def _sample(self, day: int) -> None:
        c = self.inner.counters
        rec = {
            "day": day,
            "pid": self._pid,
            "rss_mib": round(_rss_mib(), 2),
            "notices_sent": c.notices_sent,
            "revocations": c.revocations,
            "wall_s": time.time(),
            **_store_size(self._engine),
        }
        with open(self._work / "days.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")

    def _kill_due(self) -> bool:
        k = self._seg.kill_at
        return k is not None and self.clock.now() >= k

    def _mutating(self, call: Callable[[], Any]) -> Any:
        self._tick()
        if self._kill_due() and self._seg.kill_mode == "before":
            self.save()
            os.kill(self._pid, signal.SIGKILL)  # the request never reached the cloud
        out = call()
        if self._kill_due():
            self.save()
            os.kill(self._pid, signal.SIGKILL)  # the cloud acted; its answer is lost
        return out

    def launch(self, request: Any) -> Any:
        return self._mutating(lambda: self.inner.launch(request))

    def terminate(self, request: Any) -> Any:
        return self._mutating(lambda: self.inner.terminate(request))

    def list_fleet(self, owner: str) -> Any:
        self._tick()
        return self.inner.list_fleet(owner)

    def poll_notices(self, max_notices: int = 10) -> Any:
        self._tick()
        r = self._seg.restart_at
        done = self._work / "store_restarted"
        if r is not None and self.clock.now() >= r and not done.exists():
            subprocess.run(self._seg.restart_argv, check=True, capture_output=True, timeout=120)
            done.write_text(self.clock.now().isoformat())
        return self.inner.poll_notices(max_notices)

    def ack_notice(self, notice: Any) -> None:
        self._tick()
        self.inner.ack_notice(notice)


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _segment(seg: _Segment) -> None:
    """A child's body: resume the account (if any), run the daemon to the end."""
    from sqlalchemy import create_engine

    from broker.daemon.accelerated import simulate_daemon
    from markets.sim.codec import read_account, restore

    spec = seg.spec
    work = Path(seg.workdir)
    account = work / "account.json"
    state = read_account(account.read_bytes(), str(account)).state if account.exists() else None
    engine = create_engine(seg.store_url, pool_pre_ping=True)
    held: dict[str, _Watched] = {}

    def wrap(cloud: Any) -> Any:
        if state is not None:
            restore(cloud, state)
        held["w"] = _Watched(cloud, seg, engine)
        return held["w"]

    end = seg.start + timedelta(days=spec.days)
    hours = int((end - seg.resume).total_seconds() // 3600)
    report = simulate_daemon(
        _config(spec, seg.store_url),
        _market(spec),
        hours=hours,
        start=seg.resume,
        workloads=_workloads(spec),
        store_url=seg.store_url,
        wrap_provider=wrap,
    )
    held["w"]._tick()
    held["w"].save()
    _write(work / "report.json", json.dumps(report.to_dict()))
    engine.dispose()


# -- the parent -------------------------------------------------------------------


def _latency_by_day(url: str, start: datetime) -> dict[int, dict[str, float]]:
    from sqlalchemy import create_engine, select

    from broker.daemon.store.schema import decisions_t

    eng = create_engine(url)
    with eng.connect() as c:
        q = select(decisions_t.c.created_at, decisions_t.c.latency_s).where(
            decisions_t.c.notice_id.is_not(None)
        )
        got = c.execute(q).all()
    eng.dispose()
    by: dict[int, list[float]] = {}
    for at, lat in got:
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        by.setdefault(int((at - start).total_seconds() // 86400) + 1, []).append(float(lat))
    return {
        d: {"decisions": len(v), "p99_ms": round(float(np.percentile(v, 99)) * 1e3, 3)}
        for d, v in sorted(by.items())
    }


def run(spec: SoakSpec, pg: Any, *, timeout_s: float = 3600.0) -> dict[str, Any]:
    """The soak on ``pg`` (a started ``broker.bench.pgserver.TempPostgres``)."""
    t_wall = time.perf_counter()
    market = _market(spec)
    t0 = market.span()[0]
    whole = t0.replace(minute=0, second=0, microsecond=0)
    start = whole if whole == t0 else whole + timedelta(hours=1)
    ttl = timedelta(seconds=_config(spec, pg.url).lease_ttl_s)
    kills = sorted(spec.kills)
    segments: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="spotfolio-soak-") as work:
        resume = start
        restart_at = start + timedelta(hours=spec.store_restart_hour)
        while True:
            k = kills[len(segments)] if len(segments) < len(kills) else None
            seg = _Segment(
                spec=spec,
                start=start,
                resume=resume,
                kill_at=start + timedelta(hours=k[0]) if k else None,
                kill_mode=k[1] if k else "",
                restart_at=restart_at,
                restart_argv=tuple(pg.restart_argv()),
                store_url=pg.url,
                workdir=work,
            )
            t = time.perf_counter()
            seg_file = Path(work) / "segment.pickle"
            seg_file.write_bytes(pickle.dumps(seg))
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "broker.bench.soak", str(seg_file)],
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                )
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"soak: a stretch from {resume} ran past {timeout_s:g} s") from e
            killed = done.returncode == -signal.SIGKILL
            if killed != (k is not None) or (not killed and done.returncode != 0):
                tail = done.stderr.strip().splitlines()[-3:]
                raise RuntimeError(
                    f"soak: the stretch from {resume} exited {done.returncode}: {tail}"
                )
            at = datetime.fromisoformat(json.loads((Path(work) / "resume.json").read_text())["at"])
            segments.append(
                {
                    "from": resume.isoformat(),
                    "to": at.isoformat(),
                    "killed": killed,
                    "kill_mode": k[1] if k else None,
                    "seconds": round(time.perf_counter() - t, 2),
                }
            )
            if not killed:
                break
            # The restart waits out the dead holder's lease, up to the next hour.
            after = at + ttl + timedelta(seconds=1)
            resume = after.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        report = json.loads((Path(work) / "report.json").read_text())
        days = [json.loads(x) for x in (Path(work) / "days.jsonl").read_text().splitlines()]
        restarted = (Path(work) / "store_restarted").exists()
    latency = _latency_by_day(pg.url, start)
    per_day = []
    for d in days:
        lat = latency.get(d["day"], {})
        per_day.append({**d, "decisions": lat.get("decisions", 0), "p99_ms": lat.get("p99_ms")})
    return {
        "schema": SCHEMA,
        "spec": {**asdict(spec), "kills": [list(k) for k in spec.kills]},
        "start": start.isoformat(),
        "segments": segments,
        "store_restarted": restarted,
        "notices": per_day[-1]["rows"]["notices"] if per_day else 0,
        "decisions": report["decisions"],
        "revocations": report["revocations"],
        "duplicate_launches": report["duplicate_launches"],
        "orphaned_instances": report["orphaned_instances"],
        "unhandled_notices": report["unhandled_notices"],
        "days": per_day,
        "seconds": round(time.perf_counter() - t_wall, 2),
        "growth": _growth(per_day),
        "limits": LIMITS,
    }


def _slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    if len(x) < 3:
        return None
    return float(np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)[0])


def _growth(days: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures ``check`` compares with ``LIMITS``."""
    by_pid: dict[int, list[dict[str, Any]]] = {}
    for d in days:
        by_pid.setdefault(d["pid"], []).append(d)
    slopes, per_notice = [], []
    for rows in by_pid.values():
        later = rows[1:]  # warm-up: the process's first day
        s = _slope([r["day"] for r in later], [r["rss_mib"] for r in later])
        n = _slope([r["rows"]["notices"] for r in later], [r["rss_mib"] * 1024 for r in later])
        if s is not None and n is not None:
            slopes.append(s)
            per_notice.append(n)
    out: dict[str, Any] = {
        "rss_mib_per_day_after_warmup": round(max(slopes), 3) if slopes else None,
        "rss_mib_per_day_by_process": [round(s, 3) for s in slopes],
        "rss_kib_per_notice_after_warmup": round(max(per_notice), 3) if per_notice else None,
    }
    if days:
        last, notices = days[-1], days[-1]["rows"]["notices"]
        out["store_bytes"] = last["bytes"]
        out["store_bytes_per_notice"] = round(last["bytes"] / max(notices, 1), 1)
        mid = days[len(days) // 2]
        first_n, first_b = mid["rows"]["notices"], mid["bytes"] - days[0]["bytes"]
        second_n = notices - first_n
        second_b = last["bytes"] - mid["bytes"]
        if first_n > 0 and second_n > 0 and first_b > 0:
            out["store_growth_second_half_vs_first"] = round(
                (second_b / second_n) / (first_b / first_n), 3
            )
    p99 = [(d["day"], d["p99_ms"]) for d in days if d["p99_ms"] is not None and d["day"] > 1]
    if len(p99) >= 20:
        first = float(np.mean([v for _, v in p99[:10]]))
        last10 = float(np.mean([v for _, v in p99[-10:]]))
        out["p99_first10_ms"] = round(first, 3)
        out["p99_last10_ms"] = round(last10, 3)
        out["p99_last10_vs_first10"] = round(last10 / first, 3) if first > 0 else None
    return out


def check(result: dict[str, Any], *, leave_out: tuple[str, ...] = ()) -> list[str]:
    """What breaks a limit or the fault rules (empty: none), but the limits
    named in ``leave_out`` (a test leaves out the wall-clock ratio, which
    load moves, and the per-day RSS limit, stated for the 90-day rate)."""
    bad: list[str] = []
    g = result["growth"]
    for key, limit in LIMITS.items():
        if key in leave_out:
            continue
        v = g.get(key)
        if v is not None and v > limit:
            bad.append(f"{key} {v} > {limit}")
    for key in ("duplicate_launches", "orphaned_instances"):
        if result[key] != 0:
            bad.append(f"{key} {result[key]} != 0")
    return bad


if __name__ == "__main__":  # a stretch's child process: ``python -m broker.bench.soak FILE``
    _segment(pickle.loads(Path(sys.argv[1]).read_bytes()))
