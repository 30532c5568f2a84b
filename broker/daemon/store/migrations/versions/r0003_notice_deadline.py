"""Notices keep their deadline.

Revision ID: 0003
Revises: 0002

``notices.deadline``: when the noticed instance goes (a revocation's window
end, an AWS Health scheduled change's start), so that a restarted daemon
counts the instance as going until then, not for a default two minutes
(NULL for the rows written before: the default window applies).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("notices") as t:
        t.add_column(sa.Column("deadline", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notices") as t:
        t.drop_column("deadline")
