"""Which policy made a decision: its name, version and digest, and the files it was read from.

At the bottom of the package so that a decision can name its policy without importing the
loader.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PolicyIdentity:
    """What every decision names: which policy, which version, which exact content, and the
    revision of the signed bundle it came from (None when read from its own files)."""

    name: str
    version: str
    digest: str
    bundle_revision: str | None = None

    def to_dict(self) -> dict[str, str]:
        # Left out when None, so that records of policies read from files keep their form.
        out = {"name": self.name, "version": self.version, "digest": self.digest}
        if self.bundle_revision is not None:
            out["bundle_revision"] = self.bundle_revision
        return out


@dataclass(frozen=True, slots=True)
class PolicySource:
    """A file a policy was read from, and the SHA-256 (hex) of its bytes as they were read.

    The digest ignores comments and formatting; this hash pins the exact text a reviewer signed.
    """

    path: str
    sha256: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256}
