"""broker.atomic.atomic_output: an output is whole or not there."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.atomic import atomic_output


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    out.write_text("old")
    with pytest.raises(RuntimeError), atomic_output(out) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_a_finished_write_replaces_the_file_keeping_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "chart.png"
    out.write_text("old")
    out.chmod(0o640)
    with atomic_output(out) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".png"  # same dir: the rename is atomic
        tmp.write_text("new")
    assert out.read_text() == "new"
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chart.png"]


def test_a_new_file_is_readable_by_others(tmp_path: Path) -> None:
    out = tmp_path / "new.md"
    with atomic_output(out) as tmp:
        tmp.write_text("x")
    assert out.stat().st_mode & 0o777 == 0o644
