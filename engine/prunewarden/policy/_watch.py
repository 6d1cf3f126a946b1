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


def reused_version(new: Policy, old: Policy) -> bool:
    """The same ``name@version`` as the policy in force, with another content: refused even
    without a lock file."""
    return (new.name, new.version) == (old.name, old.version) and new.digest != old.digest


def pair_differs(
    new: Policy, candidate: Policy | None, old: Policy, old_candidate: Policy | None
) -> bool:
    """Whether a policy and its shadow differ from the pair in force (a shadow gained or lost
    is a change)."""
    if candidate is None or old_candidate is None:
        return differs(new, old) or candidate is not old_candidate
    return differs(new, old) or differs(candidate, old_candidate)


def differs(new: Policy, old: Policy) -> bool:
    """A new snapshot is worth swapping in when the content or any file's bytes changed (the
    decisions name the files' hashes)."""
    return new.digest != old.digest or new.sources != old.sources
