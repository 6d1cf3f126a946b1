"""Errors as RFC 9457 problem documents, carrying the same located problems as the CLI.

A caller in another language gets what ``prunewarden evaluate`` prints on standard error, as
data: each problem's file (``<request>``), line, column, JSON path and message, and the one-line
text ``<request>:3:14: $.segment.kind: ...``. The ``type`` URIs name the kind of failure; they
are identifiers (RFC 9457 section 3.1.1), listed in docs/server.md, not pages to fetch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prunewarden.errors import Problem

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_BASE = "https://prunewarden.dev/problems/"

# Each kind of failure: its HTTP status and title.
KINDS: dict[str, tuple[int, str]] = {
    "invalid-input": (400, "The request document is not valid"),
    "session-conflict": (409, "The request conflicts with the session's state"),
    "session-state-rejected": (409, "The session's stored state was altered or cannot be read"),
    "tenant-conflict": (409, "The session is bound to another tenant's policy"),
    "request-timeout": (408, "The request was not received in time"),
    "request-too-large": (413, "The request body is larger than the limit"),
    "unsupported-media-type": (415, "The request body must be JSON"),
    "unauthorized": (401, "A valid bearer token is required"),
    "forbidden-tenant": (403, "The request's credential does not reach this tenant or route"),
    "not-found": (404, "No such resource"),
    "method-not-allowed": (405, "The method is not allowed on this resource"),
    "audit-unavailable": (503, "The decision could not be logged, so it is not returned"),
    "session-store-unavailable": (503, "The session store cannot be reached"),
    "deadline-exceeded": (503, "The request took longer than the limit"),
    "server-busy": (503, "The server is at one of its limits; try again"),
    "not-ready": (503, "The server is not ready"),
    "internal-error": (500, "Internal error"),
}


@dataclass(frozen=True, slots=True)
class ProblemDocument:
    """One RFC 9457 problem: a kind from :data:`KINDS`, a detail, and extension members."""

    kind: str
    detail: str
    problems: tuple[Problem, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> int:
        return KINDS[self.kind][0]

    def to_dict(self) -> dict[str, Any]:
        status, title = KINDS[self.kind]
        out: dict[str, Any] = {
            "type": PROBLEM_BASE + self.kind,
            "title": title,
            "status": status,
            "detail": self.detail,
        }
        if self.problems:
            out["problems"] = [problem_dict(p) for p in self.problems]
        # The members RFC 9457 defines keep their meaning: an extra member of the same name
        # (readiness's own "status") does not replace the HTTP status.
        out.update({key: value for key, value in self.extra.items() if key not in out})
        return out


def problem_dict(problem: Problem) -> dict[str, Any]:
    """A located problem as data, with the line the CLI would print."""
    return {
        "file": problem.file,
        "line": problem.line,
        "column": problem.column,
        "path": problem.path,
        "message": problem.message,
        "text": str(problem),
    }


def invalid_input(problems: Iterable[Problem], kind: str = "invalid-input") -> ProblemDocument:
    """The document carrying every problem of a refused request, the first one as the detail."""
    found = tuple(problems)
    detail = str(found[0]) if found else "the request is not valid"
    if len(found) > 1:
        detail += f" (and {len(found) - 1} more)"
    return ProblemDocument(kind, detail, found)
