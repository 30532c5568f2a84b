"""Row-level bookkeeping for the file loaders: what was read, what was bad, where.

Owns: ``BadRow`` (one rejected row: location such as ``line 17`` or
``SpotPriceHistory[3]``, a reason, the raw text), ``ParseReport`` (per file:
rows read, rows bad, the first bad examples, notes), ``BadRowPolicy`` (how many
bad rows are tolerated) and ``check_report`` (raise ``InputError`` naming the
file and the first bad lines when the policy is exceeded). Also the small
shared helpers every loader needs: ``open_text`` (transparent gzip) and
``read_csv_rows`` (CSV rows with their physical line numbers, rows of the wrong
width reported rather than skipped).

Must not: know any dataset's schema, or drop a row without counting it. A
loader excludes a bad row from its frame *and* records it here; the caller
sees the count in the report and an error once the share passes the policy.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from markets.errors import InputError

__all__ = [
    "DEFAULT_POLICY",
    "MAX_EXAMPLES",
    "MAX_TEXT_CHARS",
    "STRICT",
    "BadRow",
    "BadRowPolicy",
    "CsvRows",
    "ParseReport",
    "check_report",
    "get_report",
    "open_text",
    "read_csv_rows",
    "read_text",
    "report_from_mask",
    "require_columns",
    "with_report",
]

# How many bad rows a report keeps verbatim; the count is always exact.
MAX_EXAMPLES = 5
_TEXT_LIMIT = 120


@dataclass(frozen=True)
class BadRow:
    """One rejected row: where it is, why, and (truncated) what it said."""

    location: str
    reason: str
    text: str = ""

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}" + (f" ({self.text})" if self.text else "")


@dataclass(frozen=True)
class ParseReport:
    """What one file gave: rows read, rows bad, the first bad rows, notes."""

    file: str
    rows_read: int = 0
    rows_bad: int = 0
    bad_examples: tuple[BadRow, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def rows_ok(self) -> int:
        return self.rows_read - self.rows_bad

    @property
    def bad_share(self) -> float:
        return self.rows_bad / self.rows_read if self.rows_read else 0.0

    def add(self, bad: Iterable[BadRow], *, rows_read: int = 0) -> ParseReport:
        """A new report with more rows read and more bad rows."""
        bad = list(bad)
        keep = (self.bad_examples + tuple(bad))[:MAX_EXAMPLES]
        return replace(
            self,
            rows_read=self.rows_read + rows_read,
            rows_bad=self.rows_bad + len(bad),
            bad_examples=keep,
        )

    def note(self, text: str) -> ParseReport:
        return replace(self, notes=(*self.notes, text))

    def summary(self) -> str:
        """One line: ``file: 1000 rows, 3 bad (0.3 %): line 7: ...``."""
        share = f"{100 * self.bad_share:.2g} %"
        text = f"{self.file}: {self.rows_read} rows, {self.rows_bad} bad ({share})"
        if self.bad_examples:
            text += "; first: " + "; ".join(str(b) for b in self.bad_examples[:3])
        return text


@dataclass(frozen=True)
class BadRowPolicy:
    """Bad rows tolerated in one file: at most ``max_share`` of the rows read,
    and (when set) at most ``max_count`` rows. Exceeding either raises."""

    max_share: float = 0.01
    max_count: int | None = None

    def exceeded(self, report: ParseReport) -> bool:
        if report.rows_bad == 0:
            return False
        if self.max_count is not None and report.rows_bad > self.max_count:
            return True
        return report.bad_share > self.max_share


DEFAULT_POLICY = BadRowPolicy()
STRICT = BadRowPolicy(max_share=0.0, max_count=0)


def check_report(report: ParseReport, policy: BadRowPolicy = DEFAULT_POLICY) -> ParseReport:
    """Return ``report`` unchanged, or raise ``InputError`` naming the file, the
    first bad locations and the reasons when ``policy`` is exceeded."""
    if not policy.exceeded(report):
        return report
    first = report.bad_examples[0] if report.bad_examples else BadRow("?", "bad row")
    limit = (
        f"at most {policy.max_count} bad rows"
        if policy.max_count is not None and report.rows_bad > policy.max_count
        else f"at most {100 * policy.max_share:g} % bad rows"
    )
    where = ", ".join(b.location for b in report.bad_examples)
    raise InputError(
        report.file,
        where or first.location,
        f"{limit}; {report.rows_bad} of {report.rows_read} rows bad, first: {first.reason}",
        got=first.text or None,
    )


def report_from_mask(
    base: ParseReport,
    bad: NDArray[np.bool_] | pd.Series[bool],
    where: Callable[[int], str],
    reasons: Sequence[str] | NDArray[np.generic],
    text: Callable[[int], str] | None = None,
    *,
    rows_read: int = 0,
) -> ParseReport:
    """Add a vectorised validation's verdict to ``base``: ``bad`` marks
    rejected rows, ``reasons[i]`` says why; ``where(i)`` and ``text(i)`` are
    called only for the first ``MAX_EXAMPLES`` bad rows."""
    mask = np.asarray(bad, dtype=bool)
    idx = np.flatnonzero(mask)
    room = max(0, MAX_EXAMPLES - len(base.bad_examples))
    examples = [
        BadRow(where(int(i)), str(reasons[i]), _clip(text(int(i))) if text else "")
        for i in idx[:room]
    ]
    return replace(
        base,
        rows_read=base.rows_read + rows_read,
        rows_bad=base.rows_bad + len(idx),
        bad_examples=base.bad_examples + tuple(examples),
    )


def _clip(text: str) -> str:
    return text if len(text) <= _TEXT_LIMIT else text[: _TEXT_LIMIT - 3] + "..."


def with_report(df: pd.DataFrame, report: ParseReport) -> pd.DataFrame:
    """Attach ``report`` to ``df.attrs["parse_report"]`` and return ``df``."""
    df.attrs["parse_report"] = report
    return df


def get_report(df: pd.DataFrame) -> ParseReport | None:
    """The ``ParseReport`` a loader attached to ``df`` (``None`` if none)."""
    rep = df.attrs.get("parse_report")
    return rep if isinstance(rep, ParseReport) else None


def open_text(path: Path) -> io.TextIOBase:
    """Open ``path`` for reading text; gzip is detected by its magic bytes, so
    a ``.csv.gz`` renamed ``.csv`` (or the reverse) still reads."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(2)
    except OSError as e:
        raise InputError(str(path), None, "a readable file", got=str(e)) from e
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return io.TextIOWrapper(path.open("rb"), encoding="utf-8", newline="")


# Characters of one input file once decompressed: the shipped and public
# data sets are a few MB; 256 Mi keeps a gzip bomb or a stray disk image from
# filling memory before a line is parsed.
MAX_TEXT_CHARS = 256 * 1024 * 1024


def read_text(path: Path) -> str:
    """The whole (possibly gzipped) file as text; a decoding failure, or more
    than ``MAX_TEXT_CHARS`` characters, is an ``InputError`` naming the file."""
    try:
        with open_text(path) as fh:
            text = fh.read(MAX_TEXT_CHARS + 1)
    except (UnicodeDecodeError, OSError, EOFError, gzip.BadGzipFile) as e:
        raise InputError(str(path), None, "UTF-8 text (optionally gzip)", got=str(e)) from e
    if len(text) > MAX_TEXT_CHARS:
        raise InputError(str(path), None, f"at most {MAX_TEXT_CHARS:,} characters of text")
    return text


@dataclass(frozen=True)
class CsvRows:
    """A CSV's data rows as strings, with their physical line numbers.

    ``frame`` has one ``str`` column per header name (rows of the wrong width
    are left out of it and counted in ``report``); ``lines`` gives each frame
    row's 1-based line number in the file; ``text_of(i)`` the raw text of
    frame row ``i`` (computed on demand: only bad rows need it).
    """

    header: tuple[str, ...]
    frame: pd.DataFrame
    lines: NDArray[np.int64]
    text: str = field(repr=False)
    report: ParseReport

    def text_of(self, i: int) -> str:
        return _line_at(self.text, int(self.lines[i]))

    def where(self, i: int) -> str:
        return f"line {int(self.lines[i])}"


def _line_at(text: str, line: int) -> str:
    """The ``line``-th (1-based) physical line of ``text``, without its newline."""
    pos = 0
    for _ in range(line - 1):
        pos = text.index("\n", pos) + 1
    end = text.find("\n", pos)
    return _clip(text[pos : None if end < 0 else end].rstrip("\r"))


def read_csv_rows(
    path: Path,
    *,
    header: Sequence[str] | None = None,
) -> CsvRows:
    """Read a CSV (gzip or not) into string columns.

    ``header=None`` takes the names from the first non-blank line; otherwise
    the file has no header line and ``header`` names its columns. Blank lines
    are not rows. A row with the wrong number of fields is a bad row
    ("expected N fields, got M"), counted and left out.

    Fast path (no double quotes in the file): field counts are found with
    numpy over the raw bytes and pandas' C parser reads the good lines; with
    quotes, Python's ``csv`` module reads row by row.
    """
    text = read_text(path).lstrip("\ufeff")
    if '"' in text:
        return _slow_rows(path, text, header)
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    nl = np.flatnonzero(data == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(data)]))
    cr = (ends > starts) & (data[np.maximum(ends - 1, 0)] == 13)
    length = ends - starts - cr
    commas = np.flatnonzero(data == 44)
    fields = np.searchsorted(commas, ends) - np.searchsorted(commas, starts) + 1
    nonblank = np.flatnonzero(length > 0)
    if header is None:
        if not len(nonblank):
            raise InputError(str(path), "line 1", "a CSV header line", got="an empty file")
        h = int(nonblank[0])
        names = tuple(f.strip() for f in text[starts[h] : starts[h] + length[h]].split(","))
        data_idx = nonblank[1:]
    else:
        names = tuple(header)
        data_idx = nonblank
    good = fields[data_idx] == len(names)
    bad_idx = data_idx[~good]
    bad = [
        BadRow(
            f"line {i + 1}",
            f"expected {len(names)} fields, got {int(fields[i])}",
            _clip(text[starts[i] : starts[i] + length[i]]),
        )
        for i in bad_idx[:MAX_EXAMPLES]
    ]
    bad += [BadRow(f"line {i + 1}", "wrong field count") for i in bad_idx[MAX_EXAMPLES:]]
    good_idx = data_idx[good]
    if not len(good_idx):
        frame = _empty(names)
    else:
        if len(bad_idx) or header is None:
            body = (
                "\n".join(text[starts[i] : starts[i] + length[i]] for i in good_idx)
                if len(bad_idx)
                else text[starts[good_idx[0]] :]
            )
        else:
            body = text
        frame = pd.read_csv(
            io.StringIO(body),
            header=None,
            names=list(names),
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=True,
            skipinitialspace=True,
            engine="c",
        )
        if len(frame) != len(good_idx):  # pragma: no cover - guards the fast path's premise
            return _slow_rows(path, text, header)
    report = ParseReport(str(path)).add(bad, rows_read=len(data_idx))
    return CsvRows(names, frame, (good_idx + 1).astype(np.int64), text, report)


def _slow_rows(path: Path, text: str, header: Sequence[str] | None) -> CsvRows:
    """Row-by-row reading with the ``csv`` module (quoted fields, embedded newlines)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    names: tuple[str, ...] | None = tuple(header) if header is not None else None
    rows: list[list[str]] = []
    lines: list[int] = []
    bad: list[BadRow] = []
    n_read = 0
    prev_line = 0
    try:
        for fields in reader:
            line = prev_line + 1
            prev_line = reader.line_num
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if names is None:
                names = tuple(f.strip() for f in fields)
                continue
            n_read += 1
            if len(fields) != len(names):
                bad.append(
                    BadRow(
                        f"line {line}",
                        f"expected {len(names)} fields, got {len(fields)}",
                        _clip(",".join(fields)) if len(bad) < MAX_EXAMPLES else "",
                    )
                )
                continue
            rows.append(fields)
            lines.append(line)
    except csv.Error as e:
        raise InputError(str(path), f"line {reader.line_num}", "valid CSV", got=str(e)) from e
    if names is None:
        raise InputError(str(path), "line 1", "a CSV header line", got="an empty file")
    frame = pd.DataFrame(rows, columns=list(names), dtype=str) if rows else _empty(names)
    report = ParseReport(str(path)).add(bad, rows_read=n_read)
    return CsvRows(names, frame, np.asarray(lines, dtype=np.int64), text, report)


def _empty(names: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({n: pd.Series([], dtype=str) for n in names})


def require_columns(path: Path, header: Sequence[str], required: Sequence[str]) -> None:
    """Raise ``InputError`` (field ``header``) unless every required column is present."""
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            str(path),
            "line 1 (header)",
            f"columns {', '.join(required)}",
            got=",".join(header),
        )
