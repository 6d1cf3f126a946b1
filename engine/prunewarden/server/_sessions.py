"""Sessions held by the server: one per id, opened at its first call, forgotten when idle.

The endpoints under ``/v1/sessions/{id}`` feed one :class:`~prunewarden.Session` each: its cycles
and turns as they happen, its evictions, prunes and plans decided with the history it kept. A
session follows the server's policy reloads as the engine's sessions do.

Every change of a session is saved in the session store before its call returns (the
:class:`~prunewarden.SessionStore` of the engine), so a server killed and restarted comes back
with every session's history and halt. Two ways to hold them:

- one server (SQLite, the default): live sessions stay in memory between calls, each change
  saved to the database file; a session held only in the file (after a restart) is opened from
  it at its first call;
- several replicas (Redis): no replica keeps a session between calls. Each call takes the
  session's lease, opens it from Redis, decides, saves, and lets go, so any replica can take the
  next call.

A change that cannot be saved (the store failed, a Redis lease ran out, the request's deadline
passed) is not answered as made: the call gets HTTP 503 ``session-store-unavailable`` and may be
retried; a halt it decided holds meanwhile. A stored state that fails its integrity check gets
HTTP 409 ``session-state-rejected`` (and a ``session_state_rejected`` record) on every endpoint
of the session but ``DELETE``, which clears it (and records that).

Live sessions are capped (``max_live``): past the cap, the least recently used session that is
idle (no call running or waiting) and saved goes back to the store, where its next call finds it
again; one whose last save failed is never dropped, since memory is then all that holds its
change. When every live session is in use or unsaved, a new session is refused (HTTP 503
``server-busy``, retry) rather than any held one lost. Redis keeps no live sessions: no cap.

A session idle for longer than the TTL is forgotten (its history and its halt): the next call
under its id starts afresh. Redis expires it by itself; with SQLite, expiry is checked when a
session is touched and, for the others, in a sweep at most every tenth of the TTL (a session
found in the file at start counts as used then), so no thread is needed.

On a server of tenants (``--tenants``), a session is bound to the tenant that opened it, and
the binding is saved with its state: a call whose ``Prunewarden-Labels`` choose another tenant
is refused (HTTP 409 ``tenant-conflict``), never moved (:mod:`._holding`). How sessions are held
between calls lives there; the endpoints, here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from prunewarden.errors import Problem
from prunewarden.inputs import parse_plan, parse_request
from prunewarden.policy import Policy
from prunewarden.server._documents import (
    check_definition,
    check_object,
    read_body,
    refuse_supplied,
)
from prunewarden.server._holding import Credential, Labels, SessionHolding, check_id
from prunewarden.server._problems import ProblemDocument, invalid_input
from prunewarden.server._service import (
    Answer,
    ServiceProblemError,
    decision_answer,
    guarded,
    plan_answer,
)
from prunewarden.server._tenants import TENANT_KEY
from prunewarden.session import Session


class SessionService(SessionHolding):
    """The session endpoints (how sessions are held between calls: :class:`SessionHolding`)."""

    # POST /v1/sessions/{id}/<part>: the method answering it.
    POSTS: ClassVar[dict[str, str]] = {
        "cycles": "observe_cycle",
        "turns": "observe_turn",
        "evictions": "authorize",
        "prunes": "prune",
        "plans": "plan",
        "transitions": "verify",
    }
    # The endpoints that decide, and so take ``?explain=true`` (docs/explain.md).
    EXPLAINED: ClassVar[frozenset[str]] = frozenset(POSTS.values()) - {"observe_turn"}

    # --- endpoints ---------------------------------------------------------------------------

    def observe_cycle(
        self,
        session_id: str,
        body: bytes,
        *,
        explain: bool = False,
        labels: Labels = None,
        credential: Credential = None,
    ) -> Answer:
        data, text = read_body(body)
        check_object(data)
        # The cycle may be left out (the next number), as Session.observe_cycle allows.
        check_definition({"cycle": 0, **data}, text, "snapshot")
        decision = self._call(
            session_id,
            labels,
            lambda session: session.observe_cycle(
                data["scores"], data.get("pinned", ()), cycle=data.get("cycle"), explain=explain
            ),
            "$.history[0]",
            text,
            credential=credential,
        )
        return decision_answer(decision)

    def observe_turn(
        self, session_id: str, body: bytes, *, labels: Labels = None, credential: Credential = None
    ) -> Answer:
        data, text = read_body(body)
        check_object(data)
        check_definition({"turn": 0, **data}, text, "turn")

        def observe(session: Session) -> Answer:
            session.observe_turn(data["mean_relevance"], data["tokens"], turn=data.get("turn"))
            state = session.state()
            identity = session.policy.identity
            return Answer(
                {
                    "session_id": session_id,
                    "turn": state["turns"][-1]["turn"] if state["turns"] else data.get("turn"),
                    "halted": session.halted,
                    "policy": identity.to_dict(),
                },
                policy=identity,
            )

        answer: Answer = self._call(
            session_id, labels, observe, "$.turns[0]", text, credential=credential
        )
        return answer

    def authorize(
        self,
        session_id: str,
        body: bytes,
        *,
        explain: bool = False,
        labels: Labels = None,
        credential: Credential = None,
    ) -> Answer:
        data, text = read_body(body)
        decision = self._call(
            session_id,
            labels,
            lambda session: session.authorize(
                data["segment"],
                data["score"],
                data.get("perturbed_score"),
                data.get("eviction_candidates", ()),
                explain=explain,
            ),
            "$",
            text,
            check=self._document(data, text, "eviction"),
            credential=credential,
        )
        return decision_answer(decision)

    def prune(
        self,
        session_id: str,
        body: bytes,
        *,
        explain: bool = False,
        labels: Labels = None,
        credential: Credential = None,
    ) -> Answer:
        data, text = read_body(body)
        decision = self._call(
            session_id,
            labels,
            lambda session: session.prune(
                data["spans"],
                data["keep_top_k"],
                turn=data.get("turn"),
                tombstones=data.get("tombstones", ()),
                recompute_budget=data.get("recompute_budget"),
                explain=explain,
            ),
            "$",
            text,
            check=self._document(data, text, "staleness"),
            credential=credential,
        )
        return decision_answer(decision)

    def plan(
        self,
        session_id: str,
        body: bytes,
        *,
        explain: bool = False,
        labels: Labels = None,
        credential: Credential = None,
    ) -> Answer:
        data, text = read_body(body)

        def check(policy: Policy) -> None:
            scores = policy.spec.scores
            guarded(lambda: parse_plan(data, scores, filename="<request>", text=text))
            guarded(lambda: refuse_supplied(data, "plan", text))

        plan = self._call(
            session_id,
            labels,
            lambda session: session.plan(
                data["segments"],
                free_tokens=data.get("free_tokens"),
                keep_top_k=data.get("keep_top_k"),
                turn=data.get("turn"),
                tombstones=data.get("tombstones", ()),
                recompute_budget=data.get("recompute_budget"),
                explain=explain,
            ),
            "$",
            text,
            check=check,
            credential=credential,
        )
        return plan_answer(plan)

    def verify(
        self,
        session_id: str,
        body: bytes,
        *,
        explain: bool = False,
        labels: Labels = None,
        credential: Credential = None,
    ) -> Answer:
        """``POST /v1/sessions/{id}/transitions``: an edit of the window, judged with the
        session's halt, canaries and rule pins (``Session.verify``)."""
        data, text = read_body(body)
        decision = self._call(
            session_id,
            labels,
            lambda session: session.verify(
                data["before"],
                data["after"],
                tombstones=data.get("tombstones", ()),
                applied_by=data.get("applied_by"),
                reported=data.get("reported"),
                canaries=data.get("canaries", ()),
                explain=explain,
            ),
            "$",
            text,
            check=self._document(data, text, "transition"),
            credential=credential,
        )
        return decision_answer(decision)

    def state(
        self, session_id: str, _body: bytes, *, labels: Labels = None, credential: Credential = None
    ) -> Answer:
        """``GET /v1/sessions/{id}``: the session's ``session-state.v4`` document; 404 when the
        server holds none."""
        check_id(session_id)
        with self._held(session_id):
            tenant = self._route(session_id, labels, credential=credential)
            live = self._live.get(session_id) if not self.shared else None
            document = (
                live.state()
                if live is not None
                else self._rejecting(self._load, session_id, tenant)
            )
        if document is None:
            raise ServiceProblemError(
                ProblemDocument("not-found", f"no session {session_id!r} is held")
            )
        identity = tenant.holder.policy.identity
        answer = {
            "session_id": session_id,
            "halted": document["halt"] is not None,
            # The binding is told beside the state, as a live session (which has none) tells it.
            "state": {key: value for key, value in document.items() if key != TENANT_KEY},
            "policy": identity.to_dict(),
        }
        if self.tenants.bound:
            answer["tenant"] = tenant.name
        return Answer(answer, policy=identity)

    def delete(
        self, session_id: str, _body: bytes, *, labels: Labels = None, credential: Credential = None
    ) -> Answer:
        """``DELETE /v1/sessions/{id}``: forget the session (its history and its halt)."""
        check_id(session_id)
        with self._held(session_id):
            tenant = self._route(session_id, labels, deleting=True, credential=credential)
            found = self._forget(session_id)
        identity = tenant.holder.policy.identity
        return Answer(
            {"session_id": session_id, "deleted": found, "policy": identity.to_dict()},
            policy=identity,
        )

    @staticmethod
    def _document(data: Any, text: str, check: str) -> Callable[[Policy], None]:
        """The check that the body is an input document of ``check`` (valid under the policy
        of the session's tenant), without what the session supplies; another check is refused
        at ``$.check``."""

        def valid(policy: Policy) -> None:
            scores = policy.spec.scores
            guarded(lambda: parse_request(data, scores, filename="<request>", text=text))
            if data["check"] != check:
                article = "an" if check[0] in "aeiou" else "a"
                message = f"{data['check']!r}: this endpoint takes {article} {check} document"
                raise ServiceProblemError(
                    invalid_input([Problem("<request>", 0, 0, "$.check", message)])
                )
            guarded(lambda: refuse_supplied(data, check, text))

        return valid
