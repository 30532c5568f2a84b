"""The account's own hazard evidence per pool.

Revision ID: 0004
Revises: 0003

``pool_experience``: per owner and pool, the revocations the daemon saw and
the spot hours it held, counted up to ``counted_to`` (the next count starts
there, so a restart neither loses nor double-counts). Read back as each
pool's evidence by the plan (``markets.hazard.learning``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "pool_experience",
        sa.Column("owner", sa.String(128), primary_key=True),
        sa.Column("pool_key", sa.String(200), primary_key=True),
        sa.Column("revocations", sa.Integer(), nullable=False),
        sa.Column("held_hours", sa.Float(), nullable=False),
        sa.Column("counted_to", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pool_experience")
