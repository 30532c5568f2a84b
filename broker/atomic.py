"""Output files written whole or not at all.

Owns: ``atomic_output(path)``, a context manager that hands the caller a
temporary path in the same directory as ``path`` (same file system, so the
rename is atomic) and, when the block ends without an error, renames it over
``path`` with ``os.replace``; on an error, or a kill before the rename, the
previous file (or none) stays and the temporary one is removed (a SIGKILL
leaves at most a hidden ``.<name>.*.tmp`` file, never a half-written
``path``). The what-if chart (``--plot``) and the bench report (``--out``)
write through it.

Must not: know what is written.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_output"]


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` (same suffix) renamed over it on success."""
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}"
    )
    os.close(fd)
    # mkstemp makes the file 0600; an output keeps the mode it had, else 0644.
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        mode = 0o644
    os.chmod(tmp, mode)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
