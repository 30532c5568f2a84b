"""A sweep's inputs as one bundle at one URL, read once by each worker.

Owns: ``check_url`` (a ``file://`` directory or an ``s3://bucket/prefix``,
refused at load with one line), ``pack`` (the files as one gzipped tar, the
same bytes for the same files), ``publish`` (the bundle written under the
URL, named by its SHA-256) and ``fetch`` (a worker's copy: downloaded once a
process, its digest checked, unpacked with the tar ``data`` filter so no
member lands outside its scratch directory).

S3 goes through the client the caller hands in (``S3Client``; the command
line's is ``markets.aws.sdk.s3_client``, default credential chain): the
client needs ``s3:PutObject`` on the prefix, the workers ``s3:GetObject``.

Must not: know what the files mean or which scenario names them
(``broker.cli.sweep``), or keep a bundle past the process that fetched it.
"""

from __future__ import annotations

import atexit
import gzip
import hashlib
import io
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from markets.errors import InputError, SpotfolioError

__all__ = ["S3Client", "check_url", "fetch", "pack", "publish"]

# builds the S3 client (PutObject, GetObject) for s3:// URLs
S3Client = Callable[[], Any]

_EXPECTED = "a file:///directory or s3://bucket/prefix URL"
_fetched: dict[str, Path] = {}


def check_url(url: str, option: str = "--inputs-url") -> str:
    """``url`` with no trailing slash, or the one-line refusal."""
    u = urlsplit(url)
    if u.scheme == "file":
        if u.netloc not in ("", "localhost") or not u.path:
            raise InputError(option, None, _EXPECTED, got=url)
        d = Path(unquote(u.path))
        if not d.is_dir():
            raise InputError(option, None, "a file:// URL of an existing directory", got=url)
    elif u.scheme == "s3":
        if not u.netloc or u.query or u.fragment:
            raise InputError(option, None, _EXPECTED, got=url)
    else:
        raise InputError(option, None, _EXPECTED, got=url)
    return url.rstrip("/")


def pack(files: Mapping[str, bytes]) -> bytes:
    """``{member path: bytes}`` as a gzipped tar, deterministic (sorted
    members, fixed times and owners) so equal inputs give one digest."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    return gzip.compress(raw.getvalue(), mtime=0)


def _key(url: str, digest: str) -> tuple[str, str]:
    u = urlsplit(url)
    prefix = u.path.strip("/")
    return u.netloc, f"{prefix}/{digest}.tar.gz" if prefix else f"{digest}.tar.gz"


def publish(url: str, data: bytes, s3: S3Client) -> tuple[str, str]:
    """Write ``data`` under ``url`` (``check_url``'d): ``(its location, sha256)``."""
    digest = hashlib.sha256(data).hexdigest()
    if url.startswith("file:"):
        target = Path(unquote(urlsplit(url).path)) / f"{digest}.tar.gz"
        if not target.exists():
            part = target.with_name(target.name + ".part")
            part.write_bytes(data)
            part.replace(target)  # whole or absent, never half-written
        return target.as_uri(), digest
    bucket, key = _key(url, digest)
    s3().put_object(Bucket=bucket, Key=key, Body=data)
    return f"s3://{bucket}/{key}", digest


def _read(location: str, s3: S3Client) -> bytes:
    if location.startswith("file:"):
        return Path(unquote(urlsplit(location).path)).read_bytes()
    u = urlsplit(location)
    body = s3().get_object(Bucket=u.netloc, Key=u.path.lstrip("/"))["Body"]
    data: bytes = body.read()
    return data


def fetch(location: str, digest: str, s3: S3Client) -> Path:
    """The directory this process unpacked ``location`` into (read once)."""
    if digest in _fetched:
        return _fetched[digest]
    data = _read(location, s3)
    if hashlib.sha256(data).hexdigest() != digest:
        raise SpotfolioError(
            f"sweep inputs at {location} are not the bundle published (sha256 {digest[:12]}...)"
        )
    root = Path(tempfile.mkdtemp(prefix="spotfolio-inputs-"))
    atexit.register(shutil.rmtree, root, True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(root, filter="data")
    _fetched[digest] = root
    return root
