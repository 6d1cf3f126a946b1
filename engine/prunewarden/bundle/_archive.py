"""A bundle's bytes: a gzip-compressed tar archive, written the same way every time and read
without trusting it.

Written deterministically (entries sorted, mtime 0, owner 0:0 without names, mode 0644, a gzip
header without a file name or time), so that two builds of the same files are the same bytes
and a reviewer can rebuild a bundle to check it. Read into memory, never onto disk: only regular
files with relative paths that stay inside the archive, no links, no devices, and a bounded
total size, so that a hostile archive cannot write anywhere or fill memory.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import zlib
from collections.abc import Mapping
from pathlib import PurePosixPath

from prunewarden.errors import Problem
from prunewarden.limits import MAX_BUNDLE_BYTES

_MODE = 0o644


def pack(files: Mapping[str, bytes]) -> bytes:
    """The archive of ``files`` (path in the archive -> bytes), sorted by path."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = _MODE
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            archive.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    # mtime=0 and no file name in the gzip header: the same files give the same bytes.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as compressed:
        compressed.write(raw.getvalue())
    return out.getvalue()


def unpack(data: bytes, where: str) -> tuple[dict[str, bytes], list[Problem]]:
    """The files of the archive ``data`` (path -> bytes) and every problem found; an archive
    that cannot be read whole (truncated, not gzip, not tar) gives no files."""
    try:
        raw = _decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        return {}, [Problem(where, 0, 0, "$", f"not a complete gzip archive ({exc})")]
    if raw is None:
        message = f"larger than {MAX_BUNDLE_BYTES} bytes once decompressed"
        return {}, [Problem(where, 0, 0, "$", message)]
    files: dict[str, bytes] = {}
    problems: list[Problem] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as archive:
            for member in archive:
                problem = _refusal(member)
                if problem is not None:
                    problems.append(Problem(where, 0, 0, f"$[{member.name!r}]", problem))
                    continue
                if member.name in files:
                    problems.append(Problem(where, 0, 0, f"$[{member.name!r}]", "appears twice"))
                    continue
                stream = archive.extractfile(member)
                files[member.name] = stream.read() if stream is not None else b""
    except tarfile.TarError as exc:
        return {}, [Problem(where, 0, 0, "$", f"not a complete tar archive ({exc})")]
    return files, problems


def _decompress(data: bytes) -> bytes | None:
    """The decompressed bytes, or None past the size limit (a gzip bomb stops early)."""
    with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as stream:
        raw = stream.read(MAX_BUNDLE_BYTES + 1)
    return raw if len(raw) <= MAX_BUNDLE_BYTES else None


def _refusal(member: tarfile.TarInfo) -> str | None:
    """Why ``member`` is not taken, or None for a regular file at a safe relative path."""
    if not member.isreg():
        return "not a regular file (links, folders and devices are refused)"
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts or member.name != path.as_posix():
        return "not a plain relative path inside the archive"
    return None
