"""prunewarden: policy-as-config guards for self-editing context windows.

Three guards keep an agent that scores and evicts its own context from failing silently:
``collapse`` (the score spread collapsed and a pinned canary inverted), ``eviction`` (a
self-scored number must not delete what the scorer cannot re-derive) and ``staleness`` (a score
bound to text a rewrite changed is stale); a fourth, ``transition``, judges any edit of the
window from the window before and after it, whoever made it. Their thresholds live in versioned
YAML policies.

Silent until the caller chooses a sink: decisions go to an ``AuditLog``, a structlog logger or an
``on_decision`` hook passed to the engine; diagnostics go to ``logging.getLogger("prunewarden")``,
which has only a ``NullHandler`` (the library convention) until the application configures
logging.
"""

import logging

from prunewarden.__about__ import __version__
from prunewarden._identity import PolicyIdentity
from prunewarden._status import ReloadStatus
from prunewarden.audit import AuditLog
from prunewarden.decision import Action, Decision, Reason, ShadowResult
from prunewarden.engine import Engine
from prunewarden.errors import (
    AuditError,
    InputError,
    PolicyError,
    Problem,
    PrunewardenError,
    RefusedError,
    RelevanceCollapseError,
    SessionIntegrityError,
    SessionStateError,
    SessionStoreError,
    StaleScoreError,
    SuiteError,
    UnsafeTransitionError,
    UntrustedEvictionError,
)
from prunewarden.pipeline import PassResult
from prunewarden.planner import Plan
from prunewarden.policy import Policy, load_builtin_policy, load_policy, parse_policy
from prunewarden.reload import ReloadingEngine, ReloadResult
from prunewarden.session import Session, SessionStore, SqliteSessionStore

logging.getLogger("prunewarden").addHandler(logging.NullHandler())

__all__ = [
    "Action",
    "AuditError",
    "AuditLog",
    "Decision",
    "Engine",
    "InputError",
    "PassResult",
    "Plan",
    "Policy",
    "PolicyError",
    "PolicyIdentity",
    "Problem",
    "PrunewardenError",
    "Reason",
    "RefusedError",
    "RelevanceCollapseError",
    "ReloadResult",
    "ReloadStatus",
    "ReloadingEngine",
    "Session",
    "SessionIntegrityError",
    "SessionStateError",
    "SessionStore",
    "SessionStoreError",
    "ShadowResult",
    "SqliteSessionStore",
    "StaleScoreError",
    "SuiteError",
    "UnsafeTransitionError",
    "UntrustedEvictionError",
    "__version__",
    "load_builtin_policy",
    "load_policy",
    "parse_policy",
]
