"""The simulated cloud's options and account state, and its fault injection.

Owns: ``SimOptions``, the records the account is made of (``_Inst``: an
instance and its billing rate and end; ``_Queued``: a copy of a notice in the
queue; ``_Intent``: what a fresh launch saw, for the duplicate count),
``SimCounters``, and ``SimCore``: every piece of account state (set up in one
``__init__``; ``markets.sim.codec`` saves and restores each of them, so a new
piece of state goes there too) and the injected faults (``inject``, ``exhaust``, random throttling).
The behaviour over that state lives in ``markets.sim.queue``,
``markets.sim.events`` and ``markets.sim.account``; ``SimCloud``
(``markets.sim.cloud``) is all of them.

Must not: decide anything, or use the wall clock.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from markets.clock import Clock
from markets.cloud_fleet import Instance, LaunchRequest, Notice, TerminateRequest
from markets.errors import InputError, SpotfolioError, ThrottledError
from markets.model import Tier
from markets.protocols import HistorySource, PriceSource

__all__ = ["AWS_NOTICE_S", "IntentKey", "SimCore", "SimCounters", "SimOptions", "SlotKey"]

AWS_NOTICE_S = 120.0  # EC2 spot interruption warning: two minutes before


@dataclass(frozen=True)
class SimOptions:
    notice_seconds: float = AWS_NOTICE_S
    seed: int = 0
    duplicate_rate: float = 0.0  # share of notices delivered a second time
    reorder: bool = False  # shuffle every polled batch
    visibility_timeout_s: float = 30.0  # SQS default
    listing_lag_s: float = 0.0  # a new instance shows in list_fleet this late
    throttle_rate: float = 0.0  # share of mutating calls throttled
    state_change_notices: bool = True
    providers: tuple[str, ...] | None = None  # clouds it launches in (None: any pool)
    # Rebalance recommendations (markets.sim.events): the share of revocations
    # preceded by one, up to rebalance_lead_s before the interruption notice
    # (0: off), and the share of all recommendations that precede a
    # revocation (the rest are false alarms in the same pool).
    rebalance_coverage: float = 0.0
    rebalance_precision: float = 0.5
    rebalance_lead_s: float = 1800.0


# (owner, workload, pool, tier): the instances a launch adds to, indexed.
SlotKey = tuple[str, str, str, Tier]
# (owner, workload, pool, tier, plan generation, count): one fresh launch's intent.
IntentKey = tuple[str, str, str, Tier, int, int]


@dataclass
class _Inst:
    inst: Instance
    usd_per_hour: float  # 0 for spot: billed at the hour's price
    ended_at: datetime | None = None
    revoke_at: datetime | None = None
    terminated: bool = False  # ended by the caller's TerminateRequest, not revoked
    rebalanced_at: list[datetime] = field(default_factory=list)  # recommendations sent


@dataclass
class _Queued:
    notice: Notice
    visible_at: datetime
    deleted: bool = False


@dataclass
class _Intent:
    visible: int
    ids: tuple[str, ...]


@dataclass
class SimCounters:
    launch_requests: int = 0
    launches: int = 0  # fresh requests that created instances
    instances_launched: int = 0
    replays: int = 0
    duplicate_launches: int = 0
    revocations: int = 0
    notices_sent: int = 0
    throttled: int = 0
    capacity_refusals: int = 0
    terminations: int = 0
    by_tier: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class SimCore:
    """The account's state and fault injection (see the module docstring)."""

    def __init__(
        self, market: PriceSource, clock: Clock, options: SimOptions | None = None
    ) -> None:
        if not isinstance(market, HistorySource):
            raise InputError(
                "market",
                None,
                "a market with an hourly history (default, replay) for the simulated cloud",
                got=market.name,
            )
        self.market: HistorySource = market
        self.clock = clock
        self.options = options or SimOptions()
        self.rng = random.Random(self.options.seed)
        self.counters = SimCounters()
        self._static = {p.pool.key: p for p in market.snapshot(clock.now()).pools}
        self._instances: dict[str, _Inst] = {}
        self._by_key: dict[str, tuple[LaunchRequest | TerminateRequest, tuple[str, ...]]] = {}
        self._intents: dict[IntentKey, _Intent] = {}
        self._queue: list[_Queued] = []
        self._by_receipt: dict[str | None, _Queued] = {}
        self._deleted = 0  # deleted messages still in _queue
        self._by_slot: dict[SlotKey, list[_Inst]] = {}
        # Indexes that keep every call from scanning the whole account: live
        # spot instances not yet doomed, per pool; doomed ones by revocation
        # time (a heap); launch order (what the account's listing follows).
        self._spot_held: dict[str, dict[str, _Inst]] = {}
        self._due: list[tuple[datetime, int, str]] = []
        self._order: dict[str, int] = {}
        self._next_event: dict[str, tuple[datetime, datetime | None]] = {}
        self._acked: set[str] = set()
        self._scanned: dict[str, datetime] = {}
        self._faults: dict[str, list[SpotfolioError]] = defaultdict(list)
        self._exhausted: dict[str, datetime] = {}
        self._hourly: dict[datetime, dict[str, tuple[float, float, int]]] = {}
        self._seq = 0

    # --- fault injection -------------------------------------------------------
    def inject(self, op: str, error: SpotfolioError, times: int = 1) -> None:
        """The next ``times`` calls of ``op`` (launch, terminate, list_fleet,
        poll_notices) raise ``error``."""
        self._faults[op].extend([error] * times)

    def exhaust(self, pool_key: str, until: datetime) -> None:
        """No capacity of any tier in ``pool_key`` before ``until``."""
        self._exhausted[pool_key] = until

    def _fault(self, op: str, mutating: bool) -> None:
        if self._faults[op]:
            err = self._faults[op].pop(0)
            if isinstance(err, ThrottledError):
                self.counters.throttled += 1
            raise err
        if (
            mutating
            and self.options.throttle_rate
            and self.rng.random() < self.options.throttle_rate
        ):
            self.counters.throttled += 1
            raise ThrottledError(f"sim: {op} throttled (RequestLimitExceeded)")

    def _advance(self) -> None:
        """Catch the account up to the clock (``markets.sim.events``):
        every call does this first."""
        raise NotImplementedError
