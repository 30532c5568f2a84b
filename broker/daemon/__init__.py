"""The provisioning daemon: keeps one account's fleet at the plan.

``daemon`` (``Daemon``: the lease, the lock and the jobs), one module per job
(``plan``, ``notices``, ``launch``, ``stretches``, ``hooks``), ``book`` (what
it knows between jobs), ``executor`` (write-ahead, idempotent actions),
``store/`` (durable state), ``config``, ``metrics``, ``schedule`` (APScheduler)
and ``accelerated`` (the same daemon over the simulated cloud in simulated
time).
"""
