"""Which policy made a decision: its name, version and digest, and the files it was read from.

At the bottom of the package so that a decision can name its policy without importing the
loader.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PolicyIdentity:
    """What every decision names: which policy, which version, which exact content."""

    name: str
    version: str
    digest: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "digest": self.digest}


@dataclass(frozen=True, slots=True)
class PolicySource:
    """A file a policy was read from, and the SHA-256 (hex) of its bytes as they were read.

    The digest ignores comments and formatting; this hash pins the exact text a reviewer signed.
    """

    path: str
    sha256: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256}
