"""The provisioning daemon: keeps one account's fleet at the plan.

``daemon`` (``Daemon``: the lease, the lock, the job boundary and the values
between jobs), one module per job (``plan``, ``reconcile``, ``notices``,
``stretches``, ``launch``, ``checkpoints``), ``lifecycle`` (the protocol the
jobs use the lifecycle manager through), ``keys`` (idempotency keys),
``book`` (what the jobs know between calls), ``executor`` (write-ahead,
idempotent actions), ``hooks`` (running one checkpoint hook), ``store/``
(durable state), ``config``, ``metrics``, ``schedule`` (APScheduler),
``wiring`` (the production lifecycle manager) and ``accelerated`` (the same
daemon over the simulated cloud in simulated time).
"""
