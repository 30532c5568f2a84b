"""The fenced lease: the lease's epoch and the epoch each mutation carries.

Revision ID: 0002
Revises: 0001

``lease.epoch`` goes up at every acquisition (0 for the row a store made
before this revision holds); ``actions``, ``plans`` and ``decisions`` record
the epoch of the daemon that wrote them (NULL for the rows written before).
Additive: no row is rewritten.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

_STAMPED = ("actions", "plans", "decisions")


def upgrade() -> None:
    with op.batch_alter_table("lease") as t:
        t.add_column(sa.Column("epoch", sa.Integer(), nullable=False, server_default="0"))
    for name in _STAMPED:
        with op.batch_alter_table(name) as t:
            t.add_column(sa.Column("lease_epoch", sa.Integer(), nullable=True))


def downgrade() -> None:
    for name in _STAMPED:
        with op.batch_alter_table(name) as t:
            t.drop_column("lease_epoch")
    with op.batch_alter_table("lease") as t:
        t.drop_column("epoch")
