"""What a bundle holds, as its manifest says: every file's SHA-256, each policy's identity, a
revision and when it was built (values, and their one JSON form).

The manifest is what a signature covers: its bytes as stored in the archive are signed and
verified, never a re-encoding, so a verifier needs no canonical form to agree with the signer.
It is written in RFC 8785 form all the same, so that two builds of the same files and revision
at the same time are the same bytes.

Version 2 adds one field: a policy may name its ``shadow``, the candidate a server decides beside
it (docs/fleet.md). A manifest without shadows is still written as version 1, byte for byte as
before, so that a bundle any reader could read stays readable by every reader; a reader of
version 1 refuses version 2 rather than run the policy without the candidate its builder meant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prunewarden._json import encode_canonical
from prunewarden.errors import Problem

MANIFEST_NAME = "manifest.json"
SIGNATURES_NAME = "signatures.json"
MANIFEST_VERSION = 3  # the newest this reader knows and writes
_VERSIONS = (1, 2, MANIFEST_VERSION)  # every version this reader reads
_SHADOW_VERSION = 2  # the first version with a policy's ``shadow``
SEQUENCE_VERSION = 3  # the first version with a ``sequence``
MAX_SEQUENCE = 2**63 - 1  # what every JSON reader and a signed 64-bit integer hold

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# A revision travels in every decision record and in URLs of operators' tools: keep it short
# and printable.
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")


@dataclass(frozen=True, slots=True)
class BundledPolicy:
    """A policy of the bundle: the file it is read from (relative to the bundle's root) and the
    identity it must load to; ``shadow``: the candidate decided beside it (None: none), itself
    a policy of the bundle's files, but not one a server can be told to run."""

    path: str
    name: str
    version: str
    digest: str
    shadow: BundledPolicy | None = None

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "path": self.path,
            "name": self.name,
            "version": self.version,
            "digest": self.digest,
        }
        if self.shadow is not None:
            document["shadow"] = self.shadow.to_dict()
        return document


@dataclass(frozen=True, slots=True)
class Manifest:
    """A bundle's table of contents. ``files`` maps each file's path in the archive to the
    SHA-256 (hex) of its bytes; ``lock`` names the lock file among them (None: none)."""

    revision: str
    built_at: str
    files: Mapping[str, str]
    policies: tuple[BundledPolicy, ...]
    lock: str | None
    sequence: int | None = None  # None: a manifest of version 1 or 2, which had none

    @property
    def manifest_version(self) -> int:
        """3 with a sequence (every bundle built now); a manifest read without one keeps its
        form: 2 when a policy names a shadow, else 1."""
        if self.sequence is not None:
            return SEQUENCE_VERSION
        shadows = any(policy.shadow is not None for policy in self.policies)
        return _SHADOW_VERSION if shadows else 1

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "manifest_version": self.manifest_version,
            "revision": self.revision,
            "built_at": self.built_at,
            "lock": self.lock,
            "files": dict(sorted(self.files.items())),
            "policies": [policy.to_dict() for policy in self.policies],
        }
        if self.sequence is not None:
            document["sequence"] = self.sequence
        return document

    def encode(self) -> bytes:
        return encode_canonical(self.to_dict())

    def policy(self, name: str | None) -> BundledPolicy | None:
        """The policy called ``name`` (None: the first one listed)."""
        if name is None:
            return self.policies[0] if self.policies else None
        return next((policy for policy in self.policies if policy.name == name), None)


def check_revision(revision: str) -> str | None:
    """Why ``revision`` cannot name a bundle, or None."""
    if _REVISION.match(revision):
        return None
    return "a revision is 1 to 128 letters, digits or ._:+- and starts with a letter or digit"


def check_sequence(sequence: object) -> str | None:
    """Why ``sequence`` cannot order a bundle, or None."""
    if (
        isinstance(sequence, int)
        and not isinstance(sequence, bool)
        and 0 <= sequence <= MAX_SEQUENCE
    ):
        return None
    return f"a sequence is an integer from 0 to {MAX_SEQUENCE}"


def parse_manifest(data: bytes, where: str) -> tuple[Manifest | None, list[Problem]]:
    """The manifest in ``data``, or None and every problem found (``where`` names the file)."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, [Problem(where, 0, 0, "$", f"not UTF-8 JSON ({exc})")]
    problems = list(_shape_problems(document, where))
    if problems:
        return None, problems
    policies = tuple(_entry(p) for p in document["policies"])
    manifest = Manifest(
        document["revision"],
        document["built_at"],
        document["files"],
        policies,
        document["lock"],
        document.get("sequence"),
    )
    return manifest, []


def _entry(document: dict[str, Any]) -> BundledPolicy:
    shadow = document.get("shadow")
    return BundledPolicy(
        document["path"],
        document["name"],
        document["version"],
        document["digest"],
        _entry(shadow) if shadow is not None else None,
    )


def _shape_problems(document: Any, where: str) -> Iterator[Problem]:  # noqa: C901, PLR0912 - one check a field
    def problem(path: str, message: str) -> Problem:
        return Problem(where, 0, 0, path, message)

    if not isinstance(document, dict):
        yield problem("$", "the manifest is not a JSON object")
        return
    manifest_version = document.get("manifest_version")
    if manifest_version not in _VERSIONS or isinstance(manifest_version, bool):
        known = ", ".join(str(v) for v in _VERSIONS[:-1]) + f" and {_VERSIONS[-1]}"
        yield problem("$.manifest_version", f"{manifest_version!r}: this reader knows {known}")
        return
    revision = document.get("revision")
    if not isinstance(revision, str) or check_revision(revision) is not None:
        yield problem("$.revision", f"{revision!r}: {check_revision('')}")
    if not isinstance(document.get("built_at"), str):
        yield problem("$.built_at", "not a timestamp string")
    sequence = document.get("sequence")
    if manifest_version < SEQUENCE_VERSION:
        if "sequence" in document:
            yield problem("$.sequence", f"needs manifest_version {SEQUENCE_VERSION}")
    elif check_sequence(sequence) is not None:
        yield problem("$.sequence", f"{sequence!r}: {check_sequence(sequence)}")
    files = document.get("files")
    if not isinstance(files, dict) or not files:
        yield problem("$.files", "not an object of paths to SHA-256 digests")
        files = {}
    for path, digest in files.items():
        if not isinstance(digest, str) or not _SHA256_HEX.match(digest):
            yield problem(f"$.files[{path!r}]", f"{digest!r} is not a SHA-256 (hex)")
    lock = document.get("lock")
    if lock is not None and lock not in files:
        yield problem("$.lock", f"{lock!r} is not one of the files")
    policies = document.get("policies")
    if not isinstance(policies, list) or not policies:
        yield problem("$.policies", "not a non-empty list of policies")
        return
    for index, entry in enumerate(policies):
        at = f"$.policies[{index}]"
        yield from _entry_problems(entry, files, at, where)
        shadow = entry.get("shadow") if isinstance(entry, dict) else None
        if shadow is None:
            continue
        if manifest_version < _SHADOW_VERSION:
            yield problem(f"{at}.shadow", f"needs manifest_version {_SHADOW_VERSION}")
        elif isinstance(shadow, dict) and "shadow" in shadow:
            yield problem(f"{at}.shadow.shadow", "a shadow has no shadow of its own")
        else:
            yield from _entry_problems(shadow, files, f"{at}.shadow", where)


def _entry_problems(entry: Any, files: Mapping[str, Any], at: str, where: str) -> Iterator[Problem]:
    fields = ("path", "name", "version", "digest")
    if not isinstance(entry, dict) or not all(isinstance(entry.get(f), str) for f in fields):
        yield Problem(where, 0, 0, at, f"needs the strings {', '.join(fields)}")
        return
    if entry["path"] not in files:
        yield Problem(where, 0, 0, f"{at}.path", f"{entry['path']!r} is not one of the files")
    if not _DIGEST.match(entry["digest"]):
        yield Problem(where, 0, 0, f"{at}.digest", f"{entry['digest']!r} is not sha256:HEX")
