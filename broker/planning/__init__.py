"""Planning: what to hold, on which tier, in which pool, each hour.

``demand`` and ``forecast`` (the curves planned against), ``plan`` (the
``Plan`` value), ``optimizer/`` (the MILP and the fast path), ``rolling`` (the
rolling horizon) and ``reconcile`` (plan versus fleet: the actions that close
the gap). Pure: no provider, no store, no wall clock.
"""
