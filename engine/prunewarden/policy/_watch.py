"""Watching a policy's files: what a reloading engine compares between two looks, and checks
after a load (apart from :mod:`prunewarden.reload`, which is about swapping snapshots)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from prunewarden._files import open_regular, read_regular
from prunewarden.limits import MAX_POLICY_BYTES
from prunewarden.policy._lock import LOCK_FILENAME
from prunewarden.policy._model import LockOption, Policy
from prunewarden.policy._overlay import BUILTIN

Signature = tuple[int, int, int] | None  # (mtime_ns, size, inode), None when absent


def lock_files(policy: str, lock: LockOption) -> list[str]:
    if lock is False or policy.startswith(BUILTIN):
        return []
    if lock is not None:
        return [str(lock)]
    # Watched even while absent: a lock file that appears applies from then on.
    return [str(Path(policy).parent / LOCK_FILENAME)]


def file_signature(name: str) -> Signature:
    try:
        found = os.stat(name)  # noqa: PTH116 - one call, the fields the signature needs
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size, found.st_ino)


def unchanged_since_read(policy: Policy) -> bool:
    """Every file of the chain still holds the bytes that were read."""
    for source in policy.sources:
        if source.path.startswith(BUILTIN):
            continue
        try:
            with open_regular(source.path) as stream:  # never blocks on a FIFO put in its place
                digest = hashlib.file_digest(stream, "sha256").hexdigest()
        except OSError:
            return False
        if digest != source.sha256:
            return False
    return True


def contents_digest(signatures: Mapping[str, Signature]) -> str:
    """A digest of what the watched files hold (a regular file's bytes, else why not)."""
    digest = hashlib.sha256()
    for name in sorted(signatures):
        try:
            data = read_regular(name, MAX_POLICY_BYTES)
        except OSError as exc:
            data = f"unreadable: {exc.strerror}".encode()
        digest.update(hashlib.sha256(name.encode("utf-8", "surrogatepass") + b"\0" + data).digest())
    return digest.hexdigest()
