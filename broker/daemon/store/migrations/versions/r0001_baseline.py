"""Baseline: the store's tables as main 83a16c0 created them.

Revision ID: 0001
Revises: (none)

A database made before migrations existed (``meta.create_all``, no
``alembic_version`` table) has exactly these tables; ``migrations.upgrade``
recognises it and stamps it 0001 instead of running this script. The tables
are written out here, not taken from ``schema.meta``: a revision is frozen,
the schema module moves on.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def _created() -> list[sa.Column[object]]:
    return [sa.Column("created_at", sa.DateTime(), nullable=False)]


def upgrade() -> None:
    op.create_table(
        "actions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("idempotency_key", sa.String(64), nullable=False, unique=True),
        sa.Column("owner", sa.String(128), nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("result", sa.JSON()),
        *_created(),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("notice_id", sa.String(128), unique=True),
        sa.Column("owner", sa.String(128), nullable=False, index=True),
        sa.Column("kind", sa.String(24), nullable=False),
        sa.Column("workload", sa.String(64)),
        sa.Column("reason", sa.String(1000), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("break_glass_usd", sa.Float(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        *_created(),
    )
    op.create_table(
        "fleet",
        sa.Column("instance_id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False, index=True),
        sa.Column("workload", sa.String(64), nullable=False),
        sa.Column("pool_key", sa.String(200), nullable=False),
        sa.Column("tier", sa.String(16), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("launched_at", sa.DateTime(), nullable=False),
        sa.Column("action_key", sa.String(64)),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "hook_results",
        sa.Column("notice_id", sa.String(128), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False, index=True),
        sa.Column("workload", sa.String(64), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        *_created(),
    )
    op.create_table(
        "lease",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("acquired_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "notices",
        sa.Column("notice_id", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("instance_id", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("handled_at", sa.DateTime()),
    )
    op.create_table(
        "plans",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("owner", sa.String(128), nullable=False, index=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        *_created(),
        sa.Column("summary", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    for name in ("plans", "notices", "lease", "hook_results", "fleet", "decisions", "actions"):
        op.drop_table(name)
