"""The simulated cloud: a ``markets.protocols.Provider`` in accelerated time.

A provider beside ``markets.aws`` and ``markets.gcp``: ``cloud`` (``SimCloud``),
``core`` (options, account state, fault injection), ``account`` (launch, list,
terminate), ``events`` (capacity, prices and revocations over time), ``queue``
(the notice queue, SQS semantics) and ``persist`` (an account kept in a file
across processes). Must not: import ``policies`` or ``broker``.
"""
