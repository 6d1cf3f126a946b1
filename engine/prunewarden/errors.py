"""The one exception hierarchy.

Every error carries data, not only a message: the file, line and column where known, the JSON path
and the offending value. ``str(error)`` gives one line per problem, sorted, in the shape
``FILE:LINE:COL: JSON-PATH: message``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from collections.abc import Iterable

    from prunewarden.decision import Decision

# The core API's names (docs/api.md); REFUSALS and describe_value serve the package itself.
__all__ = [
    "AuditError",
    "BundleError",
    "ExitCode",
    "InputError",
    "PolicyError",
    "Problem",
    "ProblemsError",
    "PrunewardenError",
    "RefusedError",
    "RelevanceCollapseError",
    "SessionIntegrityError",
    "SessionStateError",
    "SessionStoreError",
    "StaleScoreError",
    "SuiteError",
    "UnsafeTransitionError",
    "UntrustedEvictionError",
]


class ExitCode(IntEnum):
    """The exit codes of every ``prunewarden`` command; each command's ``--help`` says what
    they mean for it."""

    OK = 0
    REFUSED = 1  # a refusal, or: the policies differ, decisions changed, a collapse not caught
    USAGE = 2  # a usage error, or a malformed input document or trace
    POLICY = 3  # an invalid policy (or suite), or a version reused for different content
    FAILED = 4  # a policy test case failed, or coverage fell short
    UNVERIFIED = 5  # an audit log or a policy bundle failed verification
    INTERNAL = 70  # a bug: please report it


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with a policy or a document, located as precisely as it can be."""

    file: str = ""
    line: int = 0
    column: int = 0
    path: str = "$"
    message: str = ""

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line:
            where = f"{where}:{self.line}:{self.column}"
        return f"{where}: {self.path}: {self.message}"


class PrunewardenError(Exception):
    """Base class of every error prunewarden raises on purpose."""

    exit_code: ClassVar[int] = ExitCode.USAGE


class ProblemsError(PrunewardenError):
    """An error made of one or more located problems, reported together."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(sorted(set(problems)))
        super().__init__("\n".join(str(p) for p in self.problems))


class PolicyError(ProblemsError):
    """A policy file is malformed, fails its schema, or cannot be read."""

    exit_code = ExitCode.POLICY


class BundleError(ProblemsError):
    """A policy bundle that cannot be used: unreachable, incomplete, not signed by the key
    given, a file unlike its manifest, or a policy in it that does not load as listed."""

    exit_code = ExitCode.UNVERIFIED


class InputError(ProblemsError):
    """An input document is malformed or fails its schema; it is never a decision."""

    exit_code = ExitCode.USAGE


class SessionStateError(InputError):
    """A session state (``Session.state()``, or what a store held) that cannot be restored under
    this policy: malformed, or kept under windows the policy cannot use."""


class SessionIntegrityError(SessionStateError):
    """A stored session state that fails its integrity check (its seal does not match: it was
    altered, or written without the key), or cannot be read at all. The session refuses until
    an operator deletes the state; nothing writes over it."""


class SessionStoreError(PrunewardenError):
    """A session's change could not be saved to its store, so it is not made: the session is as
    before the call, except that a halt the call decided still holds (in memory, and for the
    engine's stateless calls), and pruning is refused until a save succeeds. Retry the call.

    ``error`` names the failure without addresses; ``decision_ids`` are the decisions the call
    made and logged (a retry makes them again)."""

    exit_code = ExitCode.USAGE

    def __init__(self, session_id: str, error: str, decision_ids: Iterable[str] = ()) -> None:
        self.session_id = session_id
        self.error = error
        self.decision_ids = tuple(decision_ids)
        super().__init__(f"session {session_id!r}: the change was not saved ({error})")


class SuiteError(ProblemsError):
    """A policy test suite is malformed, fails its schema, or names an invalid policy or input."""

    exit_code = ExitCode.POLICY


class AuditError(PrunewardenError):
    """The decision could not be written to the audit log."""


class RefusedError(PrunewardenError):
    """An enforced guard refused; raised by :meth:`Engine.enforce` and carrying the decision."""

    exit_code = ExitCode.REFUSED

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        primary = decision.reasons[0] if decision.reasons else None
        detail = f"{primary.code}: {primary.message}" if primary else decision.outcome
        super().__init__(f"{decision.check} {decision.outcome}: {detail}")


class RelevanceCollapseError(RefusedError):
    """The score distribution collapsed and a pinned canary inverted: pruning must halt."""


class UntrustedEvictionError(RefusedError):
    """A self-scored number was about to delete a segment the scorer cannot re-derive."""


class StaleScoreError(RefusedError):
    """A score was about to be applied to text it was not computed against."""


class UnsafeTransitionError(RefusedError):
    """An edit of the window, made by any code, removed or changed what the policy protects."""


# What Engine.enforce and Session.enforce raise for a binding refusal, by check.
REFUSALS: dict[str, type[RefusedError]] = {
    "collapse": RelevanceCollapseError,
    "eviction": UntrustedEvictionError,
    "staleness": StaleScoreError,
    "transition": UnsafeTransitionError,
}


def describe_value(value: Any) -> str:
    """Quote a value for a one-line message, shortened if long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
