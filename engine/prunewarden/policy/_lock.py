"""Version discipline: a lock file holds each policy ``name@version`` to one digest.

``prunewarden policy lock`` records the digest of each policy of a chain under its
``name@version``; loading content whose ``name@version`` is recorded with another digest is
refused ("version 1.4.0 reused for different content: bump the version"). Entries are never
removed, so a version means one content for good, including versions no longer deployed.

Which lock file a load checks (:func:`find`): the one named explicitly (``load_policy(path,
lock=...)``, ``--lock FILE``), else ``policy.lock`` in the policy's own folder when there is one,
else none. Bundled policies (``builtin:<name>``) are versioned with prunewarden itself and are
not recorded.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from prunewarden._identity import PolicyIdentity
from prunewarden._json import DIGEST_VERSION as CANONICAL_DIGEST_VERSION
from prunewarden._json import RETIRED_DIGEST_VERSION
from prunewarden._schemas import read_yaml_file
from prunewarden._source import Parsed
from prunewarden.errors import PolicyError, Problem
from prunewarden.policy._merge import Resolution
from prunewarden.policy._model import LockOption
from prunewarden.policy._overlay import BUILTIN

LOCK_FILENAME = "policy.lock"
LOCK_VERSION = 1
# The digests a lock file holds: version 2 (RFC 8785), named on its digestVersion line. A file
# without the line, or of version 1, holds digests of Python's sorted-keys JSON, written before
# the first release: it is refused, naming the version.
DIGEST_VERSION = CANONICAL_DIGEST_VERSION

_HEADER = """\
# prunewarden policy lock: each policy name@version and the digest of its resolved content.
# Written by `prunewarden policy lock`. A policy whose name@version is listed here loads only
# with this digest; change the content, bump the version. Entries are never removed.
"""


@dataclass(frozen=True, slots=True)
class PolicyLock:
    """A lock file as read: its entries and where each one is, for messages."""

    path: str
    entries: dict[str, str]  # name@version -> digest
    parsed: Parsed | None = None
    digest_version: int = DIGEST_VERSION


def key(identity: PolicyIdentity) -> str:
    return f"{identity.name}@{identity.version}"


def find(policy: str | os.PathLike[str], lock: LockOption) -> Path | None:
    """The lock file a load of ``policy`` checks: ``lock`` when given, else ``policy.lock``
    next to the policy if it exists; ``lock=False`` checks none."""
    if lock is False:
        return None
    if lock is not None:
        return Path(lock)
    if str(policy).startswith(BUILTIN):
        return None
    candidate = Path(policy).parent / LOCK_FILENAME
    return candidate if candidate.is_file() else None


def read(path: str | os.PathLike[str]) -> PolicyLock:
    """Read a lock file (a regular file, no larger than a policy may be); raise
    :class:`PolicyError` if it cannot be read or is malformed."""
    parsed, problems = read_yaml_file(path, "policy-lock")
    if parsed is not None and isinstance(parsed.data, dict):
        version = parsed.data.get("digestVersion", RETIRED_DIGEST_VERSION)
        if version == RETIRED_DIGEST_VERSION:
            # One problem saying what the file is, in place of the schema's about the line.
            problems = [p for p in problems if "digestVersion" not in f"{p.path} {p.message}"]
            message = (
                f"digest version {RETIRED_DIGEST_VERSION} (a lock file without a digestVersion "
                f"line), written before the first release, is no longer read (only "
                f"digestVersion: {DIGEST_VERSION}): delete the file and run prunewarden policy "
                "lock on every deployed policy"
            )
            problems.append(parsed.problem(("digestVersion",), message))
    if parsed is None or problems:
        raise PolicyError(problems)
    return PolicyLock(str(path), dict(parsed.data["policies"]), parsed, DIGEST_VERSION)


def _digests(resolution: Resolution) -> tuple[str, ...]:
    """Each layer's digest, as a lock file holds it (digest version 2)."""
    return tuple(identity.digest for identity in resolution.identities)


def problems(resolution: Resolution, lock: PolicyLock) -> list[Problem]:
    """Each policy of the chain whose ``name@version`` the lock holds to another digest, located
    at its ``metadata.version``."""
    found = []
    layers = zip(resolution.layers, resolution.identities, _digests(resolution), strict=True)
    for layer, identity, digest in layers:
        locked = lock.entries.get(key(identity))
        if locked is None or locked == digest:
            continue
        message = (
            f"version {identity.version} reused for different content: bump the version "
            f"({lock.path} holds {key(identity)} to {locked}; this content is {digest})"
        )
        found.append(layer.parsed.problem(("metadata", "version"), message))
    return found


def enforce(resolution: Resolution, path: Path | None) -> None:
    """Raise :class:`PolicyError` when the lock file at ``path`` (if any) refuses the policy."""
    if path is None:
        return
    found = problems(resolution, read(path))
    if found:
        raise PolicyError(found)


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of ``prunewarden policy lock``'s report."""

    key: str
    digest: str
    added: bool


def update(path: str | os.PathLike[str], resolutions: list[Resolution]) -> list[Entry]:
    """Record every (non-bundled) policy of each chain in the lock file at ``path``, creating
    it if needed. A version already recorded with another digest is refused, and then nothing
    is written."""
    target = Path(path)
    lock = read(target) if target.exists() else PolicyLock(str(target), {})
    entries = dict(lock.entries)
    report: list[Entry] = []
    found: list[Problem] = []
    for resolution in resolutions:
        found += problems(resolution, PolicyLock(lock.path, entries, None, lock.digest_version))
        digests = _digests(resolution)
        for layer, identity, digest in zip(
            resolution.layers, resolution.identities, digests, strict=True
        ):
            name = key(identity)
            if layer.source.path.startswith(BUILTIN) or any(e.key == name for e in report):
                continue
            added = name not in entries
            entries.setdefault(name, digest)
            report.append(Entry(name, digest, added))
    if found:
        raise PolicyError(found)
    if any(entry.added for entry in report):
        write(target, entries, lock.digest_version)
    return report


def render(entries: dict[str, str], digest_version: int = DIGEST_VERSION) -> str:
    """The lock file's text: a header, then the entries by name and version."""
    lines = [_HEADER.rstrip("\n"), f"lockVersion: {LOCK_VERSION}"]
    lines.append(f"digestVersion: {digest_version}")
    lines.append("policies:")
    lines += [f"  {name}: {entries[name]}" for name in sorted(entries, key=_order)]
    if not entries:
        lines[-1] = "policies: {}"
    return "\n".join(lines) + "\n"


def write(path: Path, entries: dict[str, str], digest_version: int = DIGEST_VERSION) -> None:
    """Replace the lock file atomically, so that a process watching it never reads half of it.
    Raises :class:`PolicyError` when it cannot be written."""
    text = render(entries, digest_version)
    try:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        problem = Problem(str(path), 0, 0, "$", f"cannot write: {exc.strerror}")
        raise PolicyError([problem]) from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        Path(temporary).chmod(mode)
        Path(temporary).replace(path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            Path(temporary).unlink()
        if isinstance(exc, OSError):
            problem = Problem(str(path), 0, 0, "$", f"cannot write: {exc.strerror}")
            raise PolicyError([problem]) from None
        raise


_NUMBERS = re.compile(r"\d+")


def _order(name: str) -> tuple[str, tuple[int, ...], str]:
    policy, _, version = name.partition("@")
    core = version.split("-")[0].split("+")[0]
    return policy, tuple(int(n) for n in _NUMBERS.findall(core)), version
