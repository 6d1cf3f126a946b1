"""A client for ``prunewarden serve``, with the method names of :class:`~prunewarden.Session`.

An agent that calls a shared decision point instead of embedding the engine changes one line::

    client = Client("unix:/run/prunewarden/pdp.sock")      # or "http://127.0.0.1:8181"
    session = client.session("agent-7")                      # was: engine.session("agent-7")
    decision = session.authorize({"id": "s1", "kind": "tool_output"}, 0.1, 0.12)

Answers are the server's JSON documents, typed: a :class:`DecisionDocument` (``decision.v1``)
from every call that decides, a :class:`PlanDocument` from a plan, and plain mappings for the
rest (states, policies, readiness). A refused input
raises :class:`~prunewarden.InputError` with the server's located problems, as the engine would;
an answer the server could not log raises :class:`~prunewarden.AuditError`; any other problem
document raises :class:`ServerError`. :class:`AsyncClient` has the same methods, awaited.
The ids of the decisions an answer carries are read from its body (:func:`decision_ids`): the
``Prunewarden-Decision-Ids`` header lists at most 64 of them. Needs ``httpx`` (the ``client``
extra).
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, Generic, Literal, NotRequired, Self, TypedDict, TypeVar, cast
from urllib.parse import quote

import httpx

from prunewarden.errors import AuditError, InputError, Problem, PrunewardenError
from prunewarden.inputs import (
    eviction_document,
    plan_document,
    staleness_document,
    transition_document,
)

UNIX_PREFIX = "unix:"
DEFAULT_TIMEOUT = 30.0
_UNIX_BASE = "http://prunewarden"  # the host part is not used on a unix socket

# What the calls return, in the sync client (the document) and the async one (an awaitable of
# it): a decision, a plan, any other document.
_D = TypeVar("_D")
_P = TypeVar("_P")
_R = TypeVar("_R")


class ReasonDocument(TypedDict):
    """One reason of a decision: its code, message and detail (``decision.v1``)."""

    code: str
    message: str
    detail: dict[str, Any]


class ActionDocument(TypedDict):
    """One remediation of a decision, with the ids it applies to."""

    action: str
    ids: NotRequired[list[str]]


class DecisionDocument(TypedDict):
    """A decision as the server answers it: ``Decision.to_dict()``, schema ``decision.v1``."""

    decision_id: str
    check: str
    outcome: Literal["allow", "deny", "halt"]
    enforced: bool
    reasons: list[ReasonDocument]
    actions: list[ActionDocument]
    policy: dict[str, Any]
    evaluated_at: str
    engine_version: str
    kept: NotRequired[list[str]]
    evicted: NotRequired[list[str]]
    pass_id: NotRequired[str]
    index: NotRequired[int]
    explanation: NotRequired[dict[str, Any]]


class PlanDocument(TypedDict):
    """A pruning pass as the server answers it (``prunewarden plan``'s JSON)."""

    evict: list[str]
    tombstones: list[str]
    pinned: list[str]
    unscoreable: list[str]
    recompute: list[str]
    frozen: bool
    target_met: bool
    freed_tokens: int
    decisions: list[DecisionDocument]


class ServerError(PrunewardenError):
    """The server answered with a problem document (``problem``) other than a refused input or
    an unlogged decision: a missing token, a request too large, a deadline, a missing session."""

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        self.status = status
        self.problem = dict(problem)
        super().__init__(f"HTTP {status}: {problem.get('detail') or problem.get('title', '')}")


def decision_ids(answer: Mapping[str, Any]) -> list[str]:
    """The ids of the decisions an answer carries, from its body: a decision's own id, or every
    decision of a plan in order (an answer without decisions: none)."""
    if "decision_id" in answer:
        return [str(answer["decision_id"])]
    return [str(decision["decision_id"]) for decision in answer.get("decisions", ())]


def _raise_for_problem(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        problem = response.json()
    except ValueError:
        problem = {"detail": response.text[:200]}
    if not isinstance(problem, dict):
        problem = {"detail": str(problem)[:200]}
    kind = str(problem.get("type", "")).rsplit("/", 1)[-1]
    if kind in {"invalid-input", "session-conflict"} and problem.get("problems"):
        raise InputError(
            Problem(p["file"], p["line"], p["column"], p["path"], p["message"])
            for p in problem["problems"]
        )
    if kind == "audit-unavailable":
        raise AuditError(str(problem.get("detail", "the decision could not be logged")))
    raise ServerError(response.status_code, problem)


def _transport_options(url: str) -> tuple[str, dict[str, Any]]:
    """The base URL and the transport options for ``url`` (``unix:PATH`` or ``http://...``)."""
    if url.startswith(UNIX_PREFIX):
        return _UNIX_BASE, {"uds": url[len(UNIX_PREFIX) :]}
    return url.rstrip("/"), {}


def _headers(token: str | None, labels: Mapping[str, str] | None) -> dict[str, str]:
    """The bearer token, and the labels choosing a server's tenant (``Prunewarden-Labels``)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    if labels:
        headers["Prunewarden-Labels"] = ",".join(f"{key}={value}" for key, value in labels.items())
    return headers


def _cycle(scores: Mapping[str, float], pinned: Iterable[str], cycle: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"scores": dict(scores), "pinned": list(pinned)}
    if cycle is not None:
        body["cycle"] = cycle
    return body


def _turn(mean_relevance: float, tokens: int, turn: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"mean_relevance": mean_relevance, "tokens": tokens}
    if turn is not None:
        body["turn"] = turn
    return body


class _Calls(Generic[_D, _P, _R]):
    """Every call of API v1 as (method, path, body), sent by the subclass (sync or async) and
    typed by what it answers: a decision (``_D``), a plan (``_P``) or another document."""

    def _send(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        raise NotImplementedError

    def _decide(self, method: str, path: str, body: Any = None, **params: Any) -> _D:
        return cast("_D", self._send(method, path, body, **params))

    def _plan(self, method: str, path: str, body: Any = None, **params: Any) -> _P:
        return cast("_P", self._send(method, path, body, **params))

    def _read(self, method: str, path: str, body: Any = None, **params: Any) -> _R:
        return cast("_R", self._send(method, path, body, **params))

    def evaluate(
        self, document: Mapping[str, Any], *, session_id: str | None = None, explain: bool = False
    ) -> _D:
        """``POST /v1/evaluate``: the decision on one input document; ``explain``: with what
        would have allowed each refusal and the rule traces (``?explain=true``)."""
        return self._decide(
            "POST",
            "/v1/evaluate",
            dict(document),
            session_id=session_id,
            explain=_explain(explain),
        )

    def plan(self, document: Mapping[str, Any], *, explain: bool = False) -> _P:
        """``POST /v1/plan``: one pruning pass; ``explain``: every decision of it explained."""
        return self._plan("POST", "/v1/plan", dict(document), explain=_explain(explain))

    def policy(self) -> _R:
        """``GET /v1/policy``: the policy in force (of the tenant the client's labels choose)."""
        return self._read("GET", "/v1/policy")

    def policies(self) -> _R:
        """``GET /v1/policies``: every tenant, its selector and its policy."""
        return self._read("GET", "/v1/policies")

    def ready(self) -> _R:
        """``GET /readyz``; raises :class:`ServerError` (503) when not ready."""
        return self._read("GET", "/readyz")


class _SessionCalls(Generic[_D, _P, _R]):
    """The calls of one session, with the names and arguments of :class:`~prunewarden.Session`."""

    def __init__(self, calls: _Calls[_D, _P, _R], session_id: str) -> None:
        if not session_id or "/" in session_id:
            message = "a session id is not empty and holds no '/' (it is one segment of a path)"
            raise InputError([Problem("<arguments>", 0, 0, "$.session_id", message)])
        self.session_id = session_id
        # The session sends through its client, typed as the client's calls are.
        self._decide, self._plan, self._read = calls._decide, calls._plan, calls._read  # noqa: SLF001
        self._path = f"/v1/sessions/{quote(session_id, safe='')}"

    def observe_cycle(
        self,
        scores: Mapping[str, float],
        pinned: Iterable[str] = (),
        *,
        cycle: int | None = None,
        explain: bool = False,
    ) -> _D:
        """One rewrite cycle's scores; the collapse decision (``cycle`` defaults to the next).
        ``explain``, on every call that decides: ``?explain=true`` (``Client.evaluate``'s)."""
        body = _cycle(scores, pinned, cycle)
        return self._decide("POST", f"{self._path}/cycles", body, explain=_explain(explain))

    def observe_turn(self, mean_relevance: float, tokens: int, *, turn: int | None = None) -> _R:
        """One turn's mean relevance and tokens (``turn`` defaults to the next)."""
        return self._read("POST", f"{self._path}/turns", _turn(mean_relevance, tokens, turn))

    def authorize(
        self,
        segment: Mapping[str, Any],
        score: float,
        perturbed_score: float | None = None,
        eviction_candidates: Iterable[str] = (),
        *,
        explain: bool = False,
    ) -> _D:
        """The eviction guard for one segment, refused while the session is halted."""
        body = eviction_document(segment, score, perturbed_score, eviction_candidates)
        return self._decide("POST", f"{self._path}/evictions", body, explain=_explain(explain))

    def prune(  # noqa: PLR0913 - mirrors Session.prune
        self,
        spans: Iterable[Mapping[str, Any]],
        keep_top_k: int,
        *,
        turn: Mapping[str, int] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
        explain: bool = False,
    ) -> _D:
        """The staleness guard, with the turns the server observed for the session."""
        body = staleness_document(
            spans, keep_top_k, turn=turn, tombstones=tombstones, recompute_budget=recompute_budget
        )
        return self._decide("POST", f"{self._path}/prunes", body, explain=_explain(explain))

    def verify(  # noqa: PLR0913 - mirrors Session.verify
        self,
        before: Iterable[Mapping[str, Any]],
        after: Iterable[Mapping[str, Any]],
        *,
        tombstones: Iterable[str] = (),
        applied_by: str | None = None,
        reported: Mapping[str, int] | None = None,
        canaries: Iterable[str] = (),
        explain: bool = False,
    ) -> _D:
        """The transition guard on an edit of the window, with the session's halt and pins."""
        body = transition_document(
            before,
            after,
            tombstones=tombstones,
            applied_by=applied_by,
            reported=reported,
            canaries=canaries,
        )
        return self._decide("POST", f"{self._path}/transitions", body, explain=_explain(explain))

    def plan(  # noqa: PLR0913 - mirrors Session.plan
        self,
        segments: Iterable[Mapping[str, Any]],
        *,
        free_tokens: int | None = None,
        keep_top_k: int | None = None,
        turn: Mapping[str, int] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
        explain: bool = False,
    ) -> _P:
        """One pruning pass with the session's history."""
        body = plan_document(
            segments,
            free_tokens=free_tokens,
            keep_top_k=keep_top_k,
            turn=turn,
            tombstones=tombstones,
            recompute_budget=recompute_budget,
        )
        return self._plan("POST", f"{self._path}/plans", body, explain=_explain(explain))

    def state(self) -> _R:
        """``GET /v1/sessions/{id}``: what the server keeps of the session."""
        return self._read("GET", self._path)

    def delete(self) -> _R:
        """``DELETE /v1/sessions/{id}``: forget the session (its history and its halt)."""
        return self._read("DELETE", self._path)


class Client(_Calls[DecisionDocument, PlanDocument, dict[str, Any]]):
    """A client of one server (``http://HOST:PORT`` or ``unix:PATH``); thread-safe."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """``labels`` go with every request (``Prunewarden-Labels``): on a server of tenants,
        they choose whose policy decides (docs/fleet.md)."""
        base, options = _transport_options(url)
        self._http = httpx.Client(
            base_url=base,
            headers=_headers(token, labels),
            timeout=timeout,
            transport=httpx.HTTPTransport(**options),
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def session(self, session_id: str) -> ClientSession:
        """The session ``session_id`` on the server (opened by its first call)."""
        return ClientSession(self, session_id)

    def _send(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        response = self._http.request(method, path, json=body, params=_params(params))
        _raise_for_problem(response)
        return response.json()


class ClientSession(_SessionCalls[DecisionDocument, PlanDocument, dict[str, Any]]):
    """A session held by the server, called synchronously."""


class AsyncClient(
    _Calls[Awaitable[DecisionDocument], Awaitable[PlanDocument], Awaitable[dict[str, Any]]]
):
    """:class:`Client` for asyncio: the same methods, awaited."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        base, options = _transport_options(url)
        self._http = httpx.AsyncClient(
            base_url=base,
            headers=_headers(token, labels),
            timeout=timeout,
            transport=httpx.AsyncHTTPTransport(**options),
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def session(self, session_id: str) -> AsyncClientSession:
        return AsyncClientSession(self, session_id)

    async def _send(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        response = await self._http.request(method, path, json=body, params=_params(params))
        _raise_for_problem(response)
        return response.json()


class AsyncClientSession(
    _SessionCalls[Awaitable[DecisionDocument], Awaitable[PlanDocument], Awaitable[dict[str, Any]]]
):
    """A session held by the server, its calls awaited."""


def _explain(explain: bool) -> str | None:
    """``?explain=true`` when asked; left out otherwise (the server's default)."""
    return "true" if explain else None


def _params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in params.items() if value is not None}


__all__ = [
    "UNIX_PREFIX",
    "ActionDocument",
    "AsyncClient",
    "AsyncClientSession",
    "Client",
    "ClientSession",
    "DecisionDocument",
    "PlanDocument",
    "ReasonDocument",
    "ServerError",
]
