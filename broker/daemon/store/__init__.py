"""The daemon's durable state (SQLAlchemy Core: SQLite or PostgreSQL).

``store`` (``Store``: transactions and the lease), ``schema`` (the tables),
``tx`` (the base of every transaction) and one module per query area:
``actions``, ``fleet``, ``notices``.
"""
