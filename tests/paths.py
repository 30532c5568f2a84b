"""Where tests find the repository and the shared data, wherever a test file sits."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The real public traces and price histories (../shared/data beside the checkout).
SHARED_DATA = REPO.parent / "shared" / "data"
