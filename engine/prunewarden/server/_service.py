"""The decision point without HTTP: request bodies in, answers or problem documents out.

Everything here is synchronous and thread-safe; the HTTP layer (:mod:`._app`) runs each call in
a worker thread under a deadline. Kept apart from Starlette so that what the server decides can
be read (and tested) without a socket.

Fail closed: a decision the audit log refused (``audit_unavailable``) is never returned; the
caller gets HTTP 503 and the refusal's id instead, so a client cannot act on a decision that is
not in the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prunewarden._identity import PolicyIdentity
from prunewarden._source import locate
from prunewarden.audit import AuditLog
from prunewarden.decision import Decision
from prunewarden.errors import AuditError, InputError, PrunewardenError
from prunewarden.planner import Plan
from prunewarden.server._documents import check_object, read_body
from prunewarden.server._fleet import FleetStatus, bundle_detail
from prunewarden.server._problems import ProblemDocument, invalid_input
from prunewarden.server._tenant_config import merged_labels
from prunewarden.server._tenants import (
    ForbiddenTenantError,
    PolicyHolder,
    Tenant,
    TenantConflictError,
    Tenants,
)

AUDIT_UNAVAILABLE = "audit_unavailable"

_T = TypeVar("_T")


class ServiceProblemError(Exception):
    """Raised by the service with the problem document the caller gets."""

    def __init__(self, problem: ProblemDocument) -> None:
        super().__init__(problem.detail)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Answer:
    """A successful answer: the JSON document, the ids of the decisions it carries, and the
    policy it was decided or read under (None: the one in force when it is sent). The
    ``Prunewarden-Policy`` header names ``policy``, so header and body never disagree across a
    reload."""

    document: dict[str, Any]
    decision_ids: tuple[str, ...] = ()
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    policy: PolicyIdentity | None = None


class DecisionService:
    """Stateless decisions and policy information over the server's tenants (or one policy
    holder, such as a :class:`~prunewarden.ReloadingEngine`: a server of one policy)."""

    def __init__(
        self,
        tenants: Tenants | PolicyHolder,
        audit: AuditLog,
        fleet: FleetStatus | None = None,
    ) -> None:
        """``fleet`` counts the engine's decisions (one of its decision hooks); without it,
        ``/v1/status`` counts none."""
        self.tenants = tenants if isinstance(tenants, Tenants) else Tenants.single(tenants)
        self.audit = audit
        self.fleet = fleet if fleet is not None else FleetStatus()
        # The tenant a session id is bound to (the app asks its session service): a stateless
        # call naming a session is decided under the session's tenant, or refused another.
        self.binding: Callable[[str], str | None] = lambda _session_id: None
        # With a trusted labels header (serve --trusted-labels-header), a document's own
        # labels cannot choose its tenant: they are refused.
        self.trusted_labels_header: str | None = None

    @property
    def engine(self) -> PolicyHolder:
        """The default tenant's policy (the only one of a server of one policy)."""
        return self.tenants.default.holder

    # --- stateless ---------------------------------------------------------------------------

    def evaluate(
        self,
        body: bytes,
        session_id: str | None = None,
        *,
        explain: bool = False,
        labels: Mapping[str, str] | None = None,
        credential: str | None = None,
    ) -> Answer:
        """``POST /v1/evaluate``: one input document, one decision (``decision.v1``), by the
        tenant its labels (``labels``: the ``Prunewarden-Labels`` header's, and the document's)
        choose, or the tenant whose token it presents (``credential``); ``explain``
        (``?explain=true``): with ``would_allow`` and rule traces."""
        data, text = read_body(body)
        named = session_id or _named_session(data)
        tenant, chosen = self._tenant(data, text, labels, named, credential)
        decision = guarded(
            lambda: tenant.holder.evaluate(
                data,
                filename="<request>",
                text=text,
                session_id=session_id,
                labels=chosen,
                explain=explain,
            )
        )
        return decision_answer(decision)

    def plan(
        self,
        body: bytes,
        *,
        explain: bool = False,
        labels: Mapping[str, str] | None = None,
        credential: str | None = None,
    ) -> Answer:
        """``POST /v1/plan``: one pruning pass, every decision of it (``?explain=true``: each
        explained), by the tenant its labels (or its token) choose."""
        data, text = read_body(body)
        check_object(data)
        tenant, chosen = self._tenant(data, text, labels, _named_session(data), credential)
        plan = guarded(
            lambda: tenant.holder.plan(
                data, filename="<request>", text=text, labels=chosen, explain=explain
            )
        )
        return plan_answer(plan)

    def _tenant(
        self,
        data: Any,
        text: str,
        header: Mapping[str, str] | None,
        session_id: str | None = None,
        credential: str | None = None,
    ) -> tuple[Tenant, dict[str, str] | None]:
        """The tenant a request's labels or token choose (the session's, for a call naming
        one), and those labels (None: it carries none)."""
        if self.trusted_labels_header is not None and isinstance(data, dict) and "labels" in data:
            message = f"labels come from the proxy's {self.trusted_labels_header} header here"
            problem = locate(text, "<request>").problem(("labels",), message, at_key=True)
            raise ServiceProblemError(invalid_input([problem]))
        chosen = guarded(lambda: merged_labels(header, data, text))
        bound = self.binding(session_id) if session_id is not None else None
        if session_id is not None and bound is not None:
            tenants = self.tenants
            routed = conflict_problem(
                lambda: tenants.of_session(session_id, bound, chosen, credential)
            )
            return routed, chosen
        return conflict_problem(lambda: self.tenants.choose(chosen, credential)), chosen

    # --- the policy and health ---------------------------------------------------------------

    def policy_document(
        self, labels: Mapping[str, str] | None = None, credential: str | None = None
    ) -> Answer:
        """``GET /v1/policy``: the identity, digest, files and resolved document in force, of
        the tenant ``labels`` (or the token, ``credential``) choose (the default without)."""
        tenant = conflict_problem(lambda: self.tenants.choose(labels, credential))
        engine = tenant.holder.engine
        policy = engine.policy
        shadow = engine.shadow.policy.identity.to_dict() if engine.shadow is not None else None
        document = {
            "policy": policy.identity.to_dict(),
            "digest": policy.digest,
            "sources": [source.to_dict() for source in policy.sources],
            "document": policy.document,
            "shadow": shadow,
        }
        if self.tenants.bound:
            document["tenant"] = tenant.name
        return Answer(document, policy=policy.identity)

    def policies_document(self) -> Answer:
        """``GET /v1/policies``: every tenant, its selector and the policy it holds."""
        return Answer(self.tenants.document(), policy=self.engine.policy.identity)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether the server can decide: a policy is loaded and the audit log can be written."""
        checks: dict[str, Any] = {"policy": True}
        try:
            self.audit.open()
            checks["audit_log"] = True
        except AuditError as exc:
            checks["audit_log"] = False
            checks["audit_error"] = str(exc)
        ready = all(value is True for key, value in checks.items() if key != "audit_error")
        document: dict[str, Any] = {
            "status": "ready" if ready else "not ready",
            "checks": checks,
            "policy": self.engine.policy.identity.to_dict(),
        }
        bundle = bundle_detail(self.engine)
        if bundle is not None:
            # The last good bundle keeps deciding: a failed fetch is told, not a reason to stop.
            document["bundle"] = bundle
        # Likewise a tenant whose reload failed decides on its last good policy: told here.
        document["default_tenant"] = self.tenants.default.name
        # Open without the token: names and health, not which labels route to whom.
        document["tenants"] = [
            {key: value for key, value in tenant.items() if key != "selector"}
            for tenant in self.tenants.document()["tenants"]
        ]
        return ready, document

    def status_document(self) -> Answer:
        """``GET /v1/status``: what a fleet's operators read (see :class:`FleetStatus`)."""
        document = self.fleet.document(self.tenants)
        return Answer(document, policy=self.engine.policy.identity)


def _named_session(data: Any) -> str | None:
    """The session a document names itself (a plan's or a transition's ``session_id``)."""
    named = data.get("session_id") if isinstance(data, dict) else None
    return named if isinstance(named, str) else None


def conflict_problem(call: Callable[[], _T]) -> _T:
    """Run ``call``; a session bound to another tenant becomes HTTP 409 ``tenant-conflict``,
    a tenant the request's credential does not reach HTTP 403 ``forbidden-tenant``."""
    try:
        return call()
    except TenantConflictError as exc:
        raise ServiceProblemError(ProblemDocument("tenant-conflict", str(exc))) from None
    except ForbiddenTenantError as exc:
        raise ServiceProblemError(ProblemDocument("forbidden-tenant", str(exc))) from None


def guarded(call: Callable[[], _T]) -> _T:
    """Run an engine call; a refused input becomes a 400 problem document."""
    try:
        return call()
    except InputError as exc:
        raise ServiceProblemError(invalid_input(exc.problems)) from None
    except PrunewardenError as exc:
        raise ServiceProblemError(ProblemDocument("invalid-input", str(exc))) from None


def decision_answer(decision: Decision) -> Answer:
    """A decision as the answer, unless it could not be logged (HTTP 503)."""
    refuse_unlogged((decision,))
    return Answer(decision.to_dict(), (decision.decision_id,), policy=decision.policy)


def plan_answer(plan: Plan) -> Answer:
    refuse_unlogged(plan.decisions)
    policy = plan.decisions[0].policy if plan.decisions else None
    return Answer(plan.to_dict(), tuple(d.decision_id for d in plan.decisions), policy=policy)


def refuse_unlogged(decisions: Sequence[Decision]) -> None:
    """Fail closed: a decision the audit log did not take is not an answer."""
    for decision in decisions:
        if AUDIT_UNAVAILABLE in decision.codes:
            reason = decision.reasons[decision.codes.index(AUDIT_UNAVAILABLE)]
            raise ServiceProblemError(
                ProblemDocument(
                    "audit-unavailable",
                    reason.message,
                    extra={"decision_id": decision.decision_id, "policy": _identity(decision)},
                )
            )


def _identity(decision: Decision) -> Mapping[str, str]:
    return decision.policy.to_dict()
