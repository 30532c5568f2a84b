"""The replay market: recorded spot histories and traces as one ``HistorySource``.

Owns: ``open_replay_market`` (registered as ``replay``; ``open_market(path)``
opens it for an existing file or directory) and ``ReplayMarket``. Modules:
``series`` (change points and traces on int64 ns), ``build`` (the join),
``resolve`` (the fallback chains, vectorised over times), ``market`` (snapshot,
hourly, aligned views). Must not: read files itself (``markets.files.datadir``
discovers and loads them), call a cloud, or use the wall clock.

Sources
-------
A directory of the public spot and price datasets (any subset, any other traces or
price files of the same formats: ``markets.files.datadir.discover`` recognises files
by content), or one file written by ``spotfolio market fetch`` (a price
history, CSV or Parquet).

Which pools exist
-----------------
A pool is (provider, region, zone, instance type); candidates come from:

* every availability/preemption trace (its zone and type);
* every (zone, type) of the AWS spot price histories whose type is in the
  embedded catalog (``markets.catalog``): the data has no on-demand price or
  GPU count for other AWS types, so they are left out (``left_out``);
* every (region, machine type) of the GCP price list, expanded to the zones
  the catalog lists for that type, else for its price family
  (``a2-ultragpu-2g`` -> the ``a2-ultragpu`` zones), else the zones its traces
  were recorded in; with none of these it is left out (we do not invent zones).

Each pool needs an ``InstanceType``: the catalog's, else (GCP) one built from
``machine_type_attributes.csv`` (units = GPUs, or vCPUs for a CPU-only type
such as the traces' ``c3-highcpu-88``: 88 units); shared-core types are left
out. Every pool found this way is exposed: GPU pools plus the trace pools (the
CPU trace pools are the only CPU pools the data both prices and places);
``gpu_only=True`` keeps GPU pools only. ``left_out`` lists the rest per reason.

What a pool gets, per input (joined on the pool key), and when it is missing
-----------------------------------------------------------------------------
Each tier is a chain; the first link that knows answers, and the snapshot's
``PoolDetail`` names it (``spot_source`` ...):

* spot: (1) the pool's own change points, merged by time: AWS price history
  rows, a preemption trace's per-tick ``prices``, the GCP list's ``hour_spot``;
  (2) else the median discount (own spot / on-demand) of the same type in the
  market's other pools at that time, times this pool's on-demand ("same-type
  discount"); (3) else on-demand x (1 - the advisor's savings) for the region
  (or the median over the regions listing the type); (4) else none. A spot
  price above on-demand is dropped (AWS caps spot at on-demand).
* on-demand: GCP list as of ``at``, else (before its first row) its earliest
  row, backfilled; else the catalog's dated list price in the region (for a
  region the catalog does not price: its reference region's, labelled so).
* committed 1y/3y: the same chain as on-demand (GCP CUD monthly / 730 h;
  AWS: catalog list x (1 - committed discount)).
* availability (``available_share``, ``spot_available``, hourly
  ``spot_available`` and ``revocations``): traces only. A 16-node trace counts
  as the share of its nodes held.
* hazard: ``markets.hazard.posterior.estimate_hazard`` with the advisor bucket's
  prior for (region, type) (AWS; else the assumed prior), updated with every
  trace's revocations and node-hours held *before* ``at``.
* spot price movement (``spot_risk``): ``markets.price_analytics.price_risk``
  over the pool's own spot change points up to ``at`` (None where spot comes
  from a fallback link).
* placement score: AWS's score is not in any recorded dataset; while a trace
  covers ``at`` it is derived from fulfilment as the default market does,
  1 + round(9 x (0.5 x last day's held share + 0.5 x held now)); else None.
* static facts (catalog prices and discounts, the advisor snapshot of
  2025-06-28) apply at every ``at``: they are dated facts, not time series.

Time
----
The datasets cover different spans (AWS prices 2021-03/04, traces 2022-10 to
2023-09, GCP prices 2022-02 to 2025-06); ``span()`` is their union.
``snapshot(at)`` gives what is in force at ``at`` (as-of): a change point holds
until the next one of its key and, for recorded spot prices, at most until the
end of the recording it came from (AWS history: the last timestamp in the
price files; trace prices: the trace's end); GCP list rows hold until replaced.
Traces give nothing outside their ticks: ``available_share`` is the share over
the last 7 days observed by ``at`` (after a trace ends, its last week, with
``observed_at`` saying how old). ``snapshot()`` is at the end of the span.

``hourly(start, hours)`` is absolute. To replay the traces *together*
(benchmarks replaying every zone at once although they were recorded in
different years), ``aligned(origin)`` returns a view where each pool's chosen
trace starts at ``origin`` and all that pool's series (its prices too) are
shifted by the same offset, so the pool shows what was in force while its trace
was recorded; one trace per pool (the longest by default, or ``traces=[ids]``).
``hourly(start, hours, align="relative")`` is ``aligned(start).hourly(start,
hours)``.
"""

from __future__ import annotations

from markets.replay.market import Align, PoolDetail, ReplayMarket, open_replay_market

__all__ = ["Align", "PoolDetail", "ReplayMarket", "open_replay_market"]
