"""How a hot-reloading engine stands, as a value a health check reads.

Apart from :mod:`prunewarden.reload` so that the value needs nothing but a policy's identity,
and the reloading engine's module stays about reloading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from prunewarden._identity import PolicyIdentity

ReloadOutcome = Literal["reloaded", "unchanged", "failed"]


@dataclass(frozen=True, slots=True)
class ReloadStatus:
    """How a :class:`ReloadingEngine` stands, for a health check: the policy (and shadow) in
    force and since when, the last reload that looked at changed files (when, and whether it
    swapped a new snapshot in, found the same content, or kept the old policy because of
    ``problems``), and whether the files are being polled.

    ``healthy`` is false while the files on disk are not the policy in force: the last reload
    failed, and its problems say why.
    """

    policy: PolicyIdentity
    shadow: PolicyIdentity | None
    in_force_since: str
    last_reload_at: str | None
    last_reload: ReloadOutcome | None
    problems: tuple[str, ...]
    polling: bool

    @property
    def healthy(self) -> bool:
        return self.last_reload != "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "policy": self.policy.to_dict(),
            "shadow": self.shadow.to_dict() if self.shadow is not None else None,
            "in_force_since": self.in_force_since,
            "last_reload_at": self.last_reload_at,
            "last_reload": self.last_reload,
            "problems": list(self.problems),
            "polling": self.polling,
        }
