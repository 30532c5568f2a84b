"""The product's decision code driven over a replayed trace.

Owns: one module per bench setting (``deadline``, ``fleet``) that runs the
objects the daemon composes (``broker.lifecycle.LifecycleManager`` and the
planning loop) on a trace, behind the per-tick policy protocol the engines of
``broker.simulate`` replay. Each names the code that decides
(``DECIDED_BY``), which the bench JSON reports as ``decided_by``.

Must not: decide anything itself (it only translates ticks into the notices,
fleets and clocks the daemon's objects take, and their decisions into modes).
"""
