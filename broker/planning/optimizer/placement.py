r"""Gang placement in the MILP: one placement per training gang per block.

Owns: the candidate placements of a gang (``gang_options``), the rows that
keep a gang inside one of them (``GangRows``), and the rounding steps that
fix the choice (``fix_placements``) and make its instances whole
(``whole_instances``). The contract itself (which pools share a placement)
is ``policies.workloads.placement``'s.

Formulation (disjunctive: each placement's rows are homogenised by its own
indicator, so the LP relaxation of a block is the convex hull of the
single-placement gangs, not one gang smeared over every pool). For gang w
with candidate placements k (a zone and type, a region and type, a provider
and type; ``*`` for the type under ``mixed_types``) and gang block b (the
gang's size is decided once per block, ``model``):

  R_{w,k,b}  binary       the gang runs in k in block b
  N_{w,k,b}  integer      its extra steps there;  N_{w,k,b} <= steps * R_{w,k,b}
  R_{w,b} = sum_k R_{w,k,b} (<= 1),  N_{w,b} = sum_k N_{w,k,b}  (what the
                          gang-block rounding reads and fixes)

  per period t in b, per k (only k's own allocation variables x, integer:
  whole instances):
    sum_x u_x x = m R_{w,k,b} + q N_{w,k,b}            gang size, inside k
    sum_{x nonrev} u_x x >= m R_{w,k,b}                 gang minimum (if asked)
    sum_{x spot} u_x x <= sigma * sum_x u_x x           spot share
    S_{w,p,t} <= cap_{p,t} R_{w,k,b}                    each spot pool of k: its
                                                        capacity only while the
                                                        gang runs there

Every coefficient is a real capacity (the gang's own size, a pool's spot
capacity), no big-M. A gang may change placement between blocks: a move
launches every instance in the new placement, and each launch pays the
churn and the restart hours billed (``model``'s D rows, per placement).
Growth and shrink inside a block stay in its placement.

A gang running now (a rolling re-plan's ``previous_instances``, in the
placements P0) that is moved loses, beside every new instance's restart,
the work since its last checkpoint (``policies.moving``): half a checkpoint
interval of the whole running gang, redone, at what the running gang costs
an hour (L_w, dollars). One variable per gang prices it, however and
whenever in the horizon the gang leaves:

  M_w  in [0, 1]     M_w >= sum_{k not in P0} R_{w,k,b}   (every block b)
  objective          + L_w M_w

so the gang moves only when the saving over its run in the horizon exceeds
the churn, every new instance's restart and the lost work. A pause is not
a move (a scale-down, as ``broker.planning.moves`` holds), but a pause
that ends in another placement inside the horizon is. Not priced: a pause
whose gang a *later* re-plan starts elsewhere (nothing runs then, so
nothing is pinned); pricing every pause before the job could be done at
L_w took the 30-day bench's seed 1 from 9 gang restarts to 3, but at a
higher bill (1.068 x hindsight against 1.028: the gang waited out spot
outages on on-demand), since the what-if bills no restart or lost work of
a plan's own ends. A workload whose own disruption budget is 0
(``Disruption.max_share``: the broker never moves it) may not run outside
P0 at all.

A gang whose minimum must be non-revocable runs that minimum whether its
spot is held or not: spot lost shrinks the gang to it (the lifecycle does
not replace a gang's spot elsewhere). So the share of time a pool's spot is
held (its recorded ``available_share``, a) is a price for such a gang: in a
pool held a = 0.3 of the time its gang-hours do little more than the
on-demand minimum's work, at the minimum's price. The model counts each of
its spot instance-hours at a of a held one's work and dollars
(``policies.held.gang_held_share``; plan rows still say what a held
instance does, and the replay and the bill apply the share that really
happened), and ranks its spot candidates by what an hour of the whole gang
is expected to cost per unit of work there (``policies.held.gang_hour_usd``).
On the 30-day portfolio bench, seed 1, the loop ran the fine-tune on H100
pools held 30-74 % of the time (the cheapest spot per work-hour) while the
hindsight ran it on an A100 pool held 86 %: 450 more A100-hours of
on-demand minimum. What is known
now counts too: a pool whose spot is held at the re-plan keeps it for a
while (outages last hours), so its first hours count nearly whole and later
ones at a. A pool with no recorded share is counted as held (a = 1):
nothing is known against it.

Candidates: the zones/regions of the workload's spot candidate pools
(``model._spot_candidates``), the cheapest on-demand pool of each type, and
where the gang runs now (a rolling re-plan's ``previous_instances``: staying
costs no launch). The bound is the model's as built: placements outside
these candidates are not in it, as spot pools beyond ``max_spot_pools`` are
not.

A gang's zone, pool, failure-domain and region caps are the contract's:
under ``zone`` none applies (the gang is one zone by contract), under
``region`` the region cap does not, under ``any`` all apply.

Must not: solve, read plans or explain (``solve``); state the contract
(``policies.workloads.placement``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pulp

from broker.planning.optimizer.backend import LpExpression, LpProblem, LpVariable, Outcome
from broker.planning.optimizer.mps import restore, solution
from markets.model import Tier
from policies.cost_table import CostEntry
from policies.workloads.spec import Workload

__all__ = [
    "GangOption",
    "GangRows",
    "caps_apply",
    "cheapest_per_type",
    "fix_placements",
    "gang_options",
    "narrow_placements",
    "place_of",
    "whole_instances",
]

Terms = list[tuple[LpVariable, float]]
_EPS = 1e-6


def place_of(w: Workload, e: CostEntry) -> str:
    """The placement of pool ``e`` under ``w``'s contract."""
    k = e.key
    key = w.gang_placement_key(provider=k.provider, region=k.region, zone=k.zone,
                               instance_type=e.instance_type)  # fmt: skip
    assert key is not None, "placements are for training gangs"
    return key


@dataclass(frozen=True)
class GangOption:
    """One candidate placement and the options inside it: spot pools,
    the cheapest on-demand entry per type, commitment entries per type."""

    key: str
    spot: tuple[CostEntry, ...]
    on_demand: tuple[CostEntry, ...]
    committed: tuple[CostEntry, ...]


def cheapest_per_type(
    entries: Sequence[CostEntry], tier: Tier, split: Callable[[CostEntry], object] | None = None
) -> list[CostEntry]:
    """The cheapest entry per instance type on ``tier`` (its $/work-hour),
    in preference order; entries without a price there are left out.
    ``split``: the cheapest per type and value of it (the account quotas an
    entry counts against, ``quotas.split_key``: regions they tell apart)."""
    best: dict[tuple[str, object], CostEntry] = {}
    for e in entries:
        price = e.usd_per_work_hour[tier]
        if price is None:
            continue
        k = (e.instance_type, None if split is None else split(e))
        cur = best.get(k)
        if cur is None or price < (cur.usd_per_work_hour[tier] or math.inf):
            best[k] = e
    return sorted(best.values(), key=lambda e: e.preference_rank)


def gang_options(
    w: Workload,
    entries: Sequence[CostEntry],
    spot: Sequence[CostEntry],
    *,
    committed: bool,
    keep_groups: set[str],
    running_pools: set[str],
    usable_spot: Sequence[CostEntry] = (),
    per_place: int = 8,
    split: Callable[[CostEntry, Tier], object] | None = None,
) -> list[GangOption]:
    """The candidate placements of gang ``w`` (module docstring), cheapest
    spot first. ``keep_groups``: commitment groups bought or owned already
    (usable wherever they are); ``running_pools``: where the gang runs now;
    ``usable_spot``: every spot pool it may use, cheapest first: a
    placement also gets its own (up to ``per_place``) beside ``spot``'s.
    ``split``: ``cheapest_per_type``'s, per tier."""

    def by(tier: Tier) -> Callable[[CostEntry], object] | None:
        return None if split is None else (lambda e: split(e, tier))

    keys: dict[str, None] = {}
    for e in spot:
        keys[place_of(w, e)] = None
    for e in cheapest_per_type(entries, Tier.ON_DEMAND, by(Tier.ON_DEMAND)):
        keys[place_of(w, e)] = None
    for e in entries:
        if e.pool_key in running_pools:
            keys[place_of(w, e)] = None
    out = []
    for key in keys:
        inside = [e for e in entries if place_of(w, e) == key]
        # On-demand and commitments may be launched in any zone of their
        # region: a zone placement's entries carry its region's prices.
        od = cheapest_per_type(inside, Tier.ON_DEMAND, by(Tier.ON_DEMAND))
        com = cheapest_per_type(inside, Tier.COMMITTED, by(Tier.COMMITTED)) if committed else []
        have = {str(e.key.group) for e in com}
        for e in inside:
            g = str(e.key.group)
            if g in keep_groups and g not in have and e.usd_per_work_hour[Tier.COMMITTED]:
                com.append(e)
                have.add(g)
        for e in inside:  # a running pool's own on-demand stays its own (no launch)
            if e.pool_key in running_pools and e not in od and e.usd_per_work_hour[Tier.ON_DEMAND]:
                od.append(e)
        own = [e for e in spot if place_of(w, e) == key]
        seen = {e.pool_key for e in own}
        for e in usable_spot:
            if len(own) >= per_place:
                break
            if e.pool_key not in seen and place_of(w, e) == key:
                own.append(e)
                seen.add(e.pool_key)
        out.append(GangOption(key, tuple(own), tuple(od), tuple(com)))
    return out


def _lin(terms: Terms) -> LpExpression:
    acc: dict[LpVariable, float] = {}
    for v, c in terms:
        acc[v] = acc.get(v, 0.0) + c
    return pulp.LpAffineExpression(list(acc.items()))


@dataclass
class GangRows:
    """The placement variables and rows of one gang (module docstring)."""

    workload: Workload
    keys: list[str]
    blocks: dict[tuple[int, str], tuple[LpVariable, LpVariable]] = field(default_factory=dict)
    instances: list[LpVariable] = field(default_factory=list)  # its allocation variables
    running: frozenset[str] = frozenset()  # placements it runs in now (P0)
    move_usd: float = 0.0  # L_w: the work a move of the running gang loses, in dollars

    def add_move(self, prob: LpProblem, name: Callable[[str], str]) -> Terms:
        """M_w's rows (module docstring); its objective term, ``[]`` for a
        gang that runs nowhere now or has nowhere else to go."""
        away = [k for k in self.keys if k not in self.running]
        if not self.running or not away or not self.blocks:
            return []
        never = self.workload.disruption.max_share == 0  # the broker never moves it
        m = pulp.LpVariable(name("MV"), lowBound=0, upBound=0 if never else 1)
        for block in sorted({b for b, _k in self.blocks}):
            prob += _lin([(m, 1.0), *[(self.blocks[(block, k)][0], -1.0) for k in away]]) >= 0
        return [(m, self.move_usd)] if self.move_usd > 0 else []

    def add_block(
        self, prob: LpProblem, name: Callable[[str], str], block: int, r: LpVariable, n: LpVariable
    ) -> None:
        """R_b and N_b as the sums of their per-placement parts."""
        w = self.workload
        steps = ((w.max_units or w.min_units) - w.min_units) // w.step_units
        rs: Terms = []
        ns: Terms = []
        for k in self.keys:
            rk = pulp.LpVariable(name("Rk"), cat=pulp.LpBinary)
            nk = pulp.LpVariable(name("Nk"), lowBound=0, upBound=steps, cat=pulp.LpInteger)
            prob += _lin([(nk, 1.0), (rk, -float(steps))]) <= 0
            self.blocks[(block, k)] = (rk, nk)
            rs.append((rk, 1.0))
            ns.append((nk, 1.0))
        # Not described: an equality always "binds"; the explanation says
        # where the gang lives instead (``policies.workloads.placement.where``).
        prob += _lin([*rs, (r, -1.0)]) == 0, name("place")
        prob += _lin([*ns, (n, -1.0)]) == 0

    def add_period(
        self,
        prob: LpProblem,
        name: Callable[[str], str],
        described: dict[str, str],
        block: int,
        allocs: Sequence[tuple[str, Tier, LpVariable, float, float]],
    ) -> None:
        """Rows of one period; ``allocs``: (placement, tier, variable, units per
        instance, spot capacity in instances)."""
        w = self.workload
        for k in self.keys:
            rk, nk = self.blocks[(block, k)]
            mine = [a for a in allocs if a[0] == k]
            units = [(v, u) for _k, _t, v, u, _c in mine]
            cname = name("gang")
            prob += (_lin([*units, (rk, -float(w.min_units)), (nk, -float(w.step_units))]) == 0,
                     cname)  # fmt: skip
            described[cname] = (  # the text of an unplaced gang: one line, whichever k binds
                f"{w.name}: gang of {w.min_units}..{w.max_units} units in steps of {w.step_units}"
            )
            if w.non_revocable_min_units > 0:
                nonrev = [(v, u) for _k, t, v, u, _c in mine if t is not Tier.SPOT]
                cname = name("gangmin")
                prob += _lin([*nonrev, (rk, -float(w.min_units))]) >= 0, cname
                described[cname] = f"{w.name}: gang minimum {w.min_units} on non-revocable tiers"
            spot = [(v, u) for _k, t, v, u, _c in mine if t is Tier.SPOT]
            if w.max_spot_share < 1.0 and spot:
                prob += _lin([*spot, *[(v, -w.max_spot_share * u) for v, u in units]]) <= 0
            for _k, t, v, _u, cap in mine:
                if t is Tier.SPOT:
                    prob += _lin([(v, 1.0), (rk, -cap)]) <= 0
            self.instances.extend(v for _k, _t, v, _u, _c in mine)

    def placement_vars(self) -> list[LpVariable]:
        """Every R_{w,k,b} (rounding fixes them; the integer completion keeps them)."""
        return [rk for rk, _nk in self.blocks.values()]


def caps_apply(w: Workload) -> tuple[bool, bool]:
    """(zone and pool caps, region cap) apply to ``w``'s spot under its contract."""
    return w.spot_caps_apply()


def narrow_placements(
    gangs: Sequence[GangRows],
    resolve: Callable[[], Outcome],
    tries: int = 2,
    *,
    prob: LpProblem | None = None,
) -> None:
    """Relax-and-fix's first step for gangs: the relaxation may run a
    fraction of a gang in each of several placements at once (a convex
    combination, which the bound may use), and then every block looks fully
    "on" to the gang-block rounding. So, per gang, the placements are
    narrowed to one per block first, leaving whether and how big the gang
    runs to the LP and the rounding after: each of the ``tries`` placements
    the relaxation used most, for the whole horizon, or in each block the
    one it used most there; the cheapest LP is kept (loaded: with ``prob``,
    the model ``resolve`` solves, its solution as solved is put back, else
    it is solved once more unless it is the one solved last)."""
    loaded = True
    kept: list[float | None] = []
    for g in gangs:
        blocks = sorted({b for b, _k in g.blocks})
        mass = {k: sum(g.blocks[(b, k)][0].value() or 0.0 for b in blocks) for k in g.keys}
        per_block = {b: _most_used(g, b) for b in blocks}
        ways = [dict.fromkeys(blocks, k) for k in sorted(g.keys, key=lambda k: -mass[k])[:tries]
                if mass[k] > _EPS]  # fmt: skip
        ways.append(per_block)
        best: tuple[float, int] | None = None
        for i, way in enumerate(ways):
            _allow(g, way)
            res = resolve()
            obj = res.objective if res.sol_status == pulp.LpSolutionOptimal else None
            if obj is not None and (best is None or obj < best[0] - 1e-9):
                best = (obj, i)
                kept = solution(prob) if prob is not None else []
        _allow(g, ways[best[1]] if best is not None else per_block)
        # the last gang's kept way is loaded if it is the LP solved last
        loaded = best is None or best[1] == len(ways) - 1
    if not loaded and prob is not None:
        restore(prob, kept)  # the same LP's solution, kept rather than solved again
    elif not loaded:
        resolve()


def _most_used(g: GangRows, block: int) -> str:
    return max(g.keys, key=lambda k: (g.blocks[(block, k)][0].value() or 0.0, k))


def _allow(g: GangRows, way: dict[int, str]) -> None:
    for (b, k), (r, _n) in g.blocks.items():
        r.lowBound = 0.0
        r.upBound = 1.0 if way.get(b) == k else 0.0


def fix_placements(gangs: Sequence[GangRows], resolve: Callable[[], Outcome]) -> None:
    """The rounding step after whole gang blocks (R_b fixed): in each block
    a gang runs, the placement the relaxation used most (ties: the previous
    block's, a move costs churn); none in a block it does not run. Then the
    LP is solved again, its solution left loaded."""
    for g in gangs:
        before: str | None = None
        for block in sorted({b for b, _k in g.blocks}):
            parts = {k: g.blocks[(block, k)][0] for k in g.keys}
            value = {k: r.value() or 0.0 for k, r in parts.items()}
            running = sum(value.values()) > 0.5
            best = max(g.keys, key=lambda k: (value[k] + (_EPS if k == before else 0.0), k))
            for k, r in parts.items():
                r.lowBound = r.upBound = 1.0 if running and k == best else 0.0
            before = best if running else before
    if gangs:
        resolve()


def whole_instances(
    gangs: Sequence[GangRows], resolve: Callable[[], Outcome], objective: float | None
) -> float | None:
    """Quick rounding's last step: when a placed gang's instance counts are
    fractional, they are made integer (the rest as fixed or continuous as it
    is) and solved once more. The rounded plan's ``objective``, the new one,
    or ``None`` if no whole-instance plan fits."""
    if objective is None or all(
        abs((v.value() or 0.0) - round(v.value() or 0.0)) <= _EPS
        for g in gangs
        for v in g.instances
    ):
        return objective
    for g in gangs:
        for v in g.instances:
            v.cat = pulp.LpInteger
    return _objective(resolve())


def _objective(res: Outcome) -> float | None:
    ok = res.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    return res.objective if ok else None
