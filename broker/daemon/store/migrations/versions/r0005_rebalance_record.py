"""Rebalance recommendations keep their track record.

Revision ID: 0005
Revises: 0004

``rebalance_record``: per owner and pool, how many rebalance
recommendations were resolved and how many of them were followed by an
interruption of the same instance within the lifecycle's window, so that a
restarted daemon keeps what it learned instead of starting from nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "rebalance_record",
        sa.Column("owner", sa.String(128), primary_key=True),
        sa.Column("pool_key", sa.String(200), primary_key=True),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.Column("resolved", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rebalance_record")
