"""The HTTP layer: Starlette routes over the decision service, with access, size and time limits.

Each endpoint is wrapped once (:meth:`_Endpoints.wrap`) rather than run through middleware: the
wrapper checks the bearer token, reads the body up to the size limit, runs the engine call, and
turns every failure into an RFC 9457 problem document. One function on the hot path, no
per-request middleware stack.

Where the engine call runs (:mod:`._turns`): always in a worker thread under the request
deadline, a session's call only once the session's earlier calls have ended (waited for on the
event loop, not in a thread). The event loop itself only reads, routes and answers: ``/healthz``
and ``/metrics`` are answered there, so a server whose threads are all busy still says it is
alive; ``/readyz`` opens the audit log, which can wait, so it runs in a thread of its own.

Every response names the policy its answer was decided under (``Prunewarden-Policy``) and, when
it carries decisions, how many (``Prunewarden-Decision-Count``) and, up to
:data:`~prunewarden.limits.MAX_HEADER_DECISION_IDS` of them, their ids
(``Prunewarden-Decision-Ids``); the body always lists every decision with its id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
)
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from prunewarden import _resources as resources
from prunewarden._identity import PolicyIdentity
from prunewarden.errors import InputError
from prunewarden.limits import MAX_HEADER_DECISION_IDS, PENDING_BODY_REQUESTS
from prunewarden.server._config import ServerConfig
from prunewarden.server._credentials import CredentialError, Credentials
from prunewarden.server._metrics import LATENCY, REQUESTS, ServerMetrics
from prunewarden.server._openapi import openapi_document
from prunewarden.server._problems import PROBLEM_MEDIA_TYPE, ProblemDocument, invalid_input
from prunewarden.server._request_parts import (
    header_labels,
    path_session_id,
    query_explain,
    query_session_id,
)
from prunewarden.server._service import Answer, DecisionService, ServiceProblemError
from prunewarden.server._sessions import SessionService
from prunewarden.server._turns import SessionTurns, run_in_thread
from prunewarden.session import save_deadline

_diagnostics = logging.getLogger("prunewarden.server")
DEADLINE_SCOPE_KEY = "prunewarden.deadline"  # when the worker running a call is given up on

THREADS = 64  # worker threads deciding at once (each request's engine call runs in one)
PROBE_THREADS = 2  # threads of their own for /readyz, which busy workers cannot starve

# Probes answer without a token: they say only whether the server can decide.
_OPEN_PATHS = frozenset({"/healthz", "/readyz"})
CREDENTIAL_SCOPE_KEY = "prunewarden.credential"  # the tenant whose token the request presents

Handler = Callable[[Request, bytes], Answer]
# Where a handler runs: a worker thread, a session's turn (then a worker thread), the probes'
# thread, or the event loop (only what cannot wait).
Where = Literal["worker", "session", "probe", "loop"]


def create_app(  # noqa: PLR0913 - what the app stands on, each optional but the first three
    config: ServerConfig,
    service: DecisionService,
    sessions: SessionService,
    on_shutdown: Callable[[], None] = lambda: None,
    decision_metrics: CollectorRegistry | None = None,
    *,
    server_metrics: ServerMetrics | None = None,
) -> Starlette:
    """The ASGI application; ``on_shutdown`` runs once the last request has been answered.
    ``decision_metrics`` is the registry of the engine's :class:`DecisionMetrics`, served at
    ``/metrics`` after the process-wide registry (the HTTP metrics); ``server_metrics`` counts
    the limits reached (made on ``decision_metrics``, or a registry of its own, when None)."""
    if server_metrics is None:
        server_metrics = ServerMetrics(decision_metrics or CollectorRegistry())
    endpoints = _Endpoints(config, service, sessions, decision_metrics, server_metrics)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        on_shutdown()

    return Starlette(
        routes=endpoints.routes(),
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )


class _Endpoints:
    """The routes of API v1 and the one wrapper each handler runs in."""

    def __init__(
        self,
        config: ServerConfig,
        service: DecisionService,
        sessions: SessionService,
        decision_metrics: CollectorRegistry | None,
        server_metrics: ServerMetrics,
    ) -> None:
        self.config = config
        tenants = config.tenants.tenants if config.tenants is not None else ()
        self.credentials = Credentials(config.token, tenants)
        self.decision_metrics = decision_metrics
        self.server_metrics = server_metrics
        self.service = service
        self.sessions = sessions
        sessions.on_limit = server_metrics.reached
        service.binding = sessions.bound_tenant
        service.trusted_labels_header = config.trusted_labels_header
        server_metrics.count_live(lambda: sessions.live_count)
        self.openapi = openapi_document()
        # The bundled schemas by the file name their $id ends with (input.v1.schema.json).
        self.schemas = {path.name: path.name.split(".")[0] for path in resources.schema_files()}
        self.workers = ThreadPoolExecutor(THREADS, thread_name_prefix="prunewarden-request")
        self.probes = ThreadPoolExecutor(PROBE_THREADS, thread_name_prefix="prunewarden-probe")
        self.turns = SessionTurns(server_metrics.waiting)
        # Bytes of request bodies being read right now, and how many they may be together.
        self.pending_body_bytes = 0
        self.pending_body_limit = PENDING_BODY_REQUESTS * config.max_request_bytes

    def routes(self) -> list[Route]:
        service, wrap = self.service, self.wrap
        session_posts = [
            Route(
                f"/v1/sessions/{{session_id}}/{part}",
                wrap(self.session_call(name), where="session"),
                methods=["POST"],
            )
            for part, name in SessionService.POSTS.items()
        ]
        return [
            Route("/healthz", wrap(self.health, reads_body=False, where="loop"), methods=["GET"]),
            Route("/readyz", wrap(self.ready, reads_body=False, where="probe"), methods=["GET"]),
            Route("/openapi.json", wrap(self.schema, reads_body=False), methods=["GET"]),
            Route("/schemas/{name}", wrap(self.bundled_schema, reads_body=False), methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
            Route(
                "/v1/policy",
                wrap(
                    lambda r, _b: service.policy_document(self.labels(r), _credential(r)),
                    reads_body=False,
                ),
                methods=["GET"],
            ),
            Route(
                "/v1/policies",
                wrap(lambda _r, _b: service.policies_document(), reads_body=False),
                methods=["GET"],
            ),
            Route(
                "/v1/status",
                wrap(lambda _r, _b: service.status_document(), reads_body=False),
                methods=["GET"],
            ),
            Route("/v1/evaluate", wrap(self.evaluate), methods=["POST"]),
            Route("/v1/plan", wrap(self.plan), methods=["POST"]),
            *session_posts,
            Route(
                "/v1/sessions/{session_id}",
                wrap(self.session_call("state"), reads_body=False, where="session"),
                methods=["GET"],
            ),
            Route(
                "/v1/sessions/{session_id}",
                wrap(self.session_call("delete"), reads_body=False, where="session"),
                methods=["DELETE"],
            ),
        ]

    def wrap(
        self, handler: Handler, *, reads_body: bool = True, where: Where = "worker"
    ) -> Callable[..., Awaitable[Any]]:
        """The endpoint running ``handler``: timed and counted by route template."""

        async def run(request: Request) -> Response:
            route = request.scope["route"].path
            with LATENCY.labels(route).time():
                response = await self.answer(request, handler, reads_body, where)
            REQUESTS.labels(route, str(response.status_code)).inc()
            return response

        return run

    async def answer(
        self, request: Request, handler: Handler, reads_body: bool, where: Where
    ) -> Response:
        """Token, body, the handler where ``where`` says, under the deadline; problems as
        such."""
        config = self.config
        try:
            self.authorize(request)
            session_id = path_session_id(request) if where == "session" else None
            body = await self.read_body(request) if reads_body else b""
            # Past this, the call's session saves are refused (it must not save after the
            # caller was answered that it took too long).
            request.scope[DEADLINE_SCOPE_KEY] = time.monotonic() + config.request_seconds
            async with asyncio.timeout(config.request_seconds):
                answer = await self.dispatch(request, handler, body, where, session_id)
        except ServiceProblemError as exc:
            return problem_response(exc.problem, self.policy_header(None))
        except InputError as exc:  # a body that is not JSON, or not the document asked for
            return problem_response(invalid_input(exc.problems), self.policy_header(None))
        except TimeoutError:
            self.server_metrics.reached("request_timeout")
            detail = f"no answer within {config.request_seconds:g} s"
            problem = ProblemDocument("deadline-exceeded", detail)
            return problem_response(problem, self.policy_header(None))
        except ClientDisconnect:  # dropped at a deadline (._connections): nobody reads this
            problem = ProblemDocument("request-timeout", "the client is gone")
            return problem_response(problem, {})
        except Exception as exc:  # noqa: BLE001 - never a traceback to the caller
            _diagnostics.exception("request failed: %s %s", request.method, request.url.path)
            problem = ProblemDocument("internal-error", f"{type(exc).__name__}: {exc}")
            return problem_response(problem, self.policy_header(None))
        headers = self.policy_header(answer.policy)
        if answer.decision_ids:
            count = len(answer.decision_ids)
            headers["Prunewarden-Decision-Count"] = str(count)
            if count <= MAX_HEADER_DECISION_IDS:
                headers["Prunewarden-Decision-Ids"] = ",".join(answer.decision_ids)
        headers.update(answer.headers)
        return json_response(answer.document, answer.status, headers)

    async def dispatch(
        self, request: Request, handler: Handler, body: bytes, where: Where, session_id: str | None
    ) -> Answer:
        def call() -> Answer:
            return handler(request, body)

        if where == "loop":
            return call()
        if where == "probe":
            return await run_in_thread(self.probes, call)
        if session_id is not None:
            request.scope["prunewarden.session_id"] = session_id
            return await self.turns.run(session_id, self.workers, call)
        return await run_in_thread(self.workers, call)

    def policy_header(self, identity: PolicyIdentity | None) -> dict[str, str]:
        """The policy an answer was decided under (else the one in force now), as a header."""
        policy = identity if identity is not None else self.service.engine.policy.identity
        return {"Prunewarden-Policy": f"{policy.name}@{policy.version} {policy.digest}"}

    async def read_body(self, request: Request) -> bytes:
        """The body, refused (HTTP 413) from its declared length or as soon as it passes the
        limit, and (HTTP 503) when the bodies being read together would pass their budget."""
        limit = self.config.max_request_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            self.server_metrics.reached("request_bytes")
            raise ServiceProblemError(_too_large(int(declared), limit))
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                self.pending_body_bytes += len(chunk)
                if size > limit:
                    self.server_metrics.reached("request_bytes")
                    raise ServiceProblemError(_too_large(size, limit))
                if self.pending_body_bytes > self.pending_body_limit:
                    self.server_metrics.reached("pending_body_bytes")
                    raise ServiceProblemError(self._busy_reading())
                chunks.append(chunk)
        finally:
            self.pending_body_bytes -= size
        return b"".join(chunks)

    def _busy_reading(self) -> ProblemDocument:
        detail = f"the request bodies being read hold {self.pending_body_limit} bytes, their limit"
        return ProblemDocument("server-busy", detail, extra={"limit": "pending_body_bytes"})

    # --- handlers (in worker threads, but for health) ----------------------------------------

    def evaluate(self, request: Request, body: bytes) -> Answer:
        return self.service.evaluate(
            body,
            query_session_id(request),
            explain=query_explain(request),
            labels=self.labels(request),
            credential=_credential(request),
        )

    def plan(self, request: Request, body: bytes) -> Answer:
        return self.service.plan(
            body,
            explain=query_explain(request),
            labels=self.labels(request),
            credential=_credential(request),
        )

    def authorize(self, request: Request) -> None:
        """The request's bearer token checked (:class:`Credentials`; probes need none), and the
        tenant it makes the request kept in its scope."""
        if request.url.path in _OPEN_PATHS:
            return
        authorization = request.headers.get("authorization")
        try:
            tenant = self.credentials.identify(authorization, request.url.path)
        except CredentialError as exc:
            raise ServiceProblemError(exc.problem) from None
        request.scope[CREDENTIAL_SCOPE_KEY] = tenant

    def labels(self, request: Request) -> dict[str, str] | None:
        """The request's header labels, from the header the configuration trusts."""
        return header_labels(request, self.config.trusted_labels_header)

    def health(self, _request: Request, _body: bytes) -> Answer:
        identity = self.service.engine.policy.identity
        return Answer({"status": "ok", "policy": identity.to_dict()}, policy=identity)

    def ready(self, _request: Request, _body: bytes) -> Answer:
        is_ready, document = self.service.readiness()
        if not is_ready:
            raise ServiceProblemError(
                ProblemDocument("not-ready", "the audit log cannot be written", extra=document)
            )
        return Answer(document)

    def schema(self, _request: Request, _body: bytes) -> Answer:
        return Answer(self.openapi)

    def bundled_schema(self, request: Request, _body: bytes) -> Answer:
        name = request.path_params["name"]
        if name not in self.schemas:
            raise ServiceProblemError(ProblemDocument("not-found", f"no bundled schema {name!r}"))
        return Answer(resources.schema(self.schemas[name]))

    def session_call(self, name: str) -> Handler:
        call = getattr(self.sessions, name)
        explains = name in SessionService.EXPLAINED

        def handle(request: Request, body: bytes) -> Answer:
            options: dict[str, Any] = {"explain": query_explain(request)} if explains else {}
            options["labels"] = self.labels(request)
            options["credential"] = _credential(request)
            with save_deadline(request.scope.get(DEADLINE_SCOPE_KEY)):
                answer: Answer = call(request.scope["prunewarden.session_id"], body, **options)
            return answer

        return handle

    async def metrics(self, request: Request) -> Response:
        """``GET /metrics``: the Prometheus text format (behind the token like the data)."""
        try:
            self.authorize(request)
        except ServiceProblemError as exc:
            return problem_response(exc.problem, {})
        text = generate_latest(REGISTRY)
        text += generate_latest(self.server_metrics.registry)
        if (
            self.decision_metrics is not None
            and self.decision_metrics is not self.server_metrics.registry
        ):
            text += generate_latest(self.decision_metrics)
        return Response(text, media_type=CONTENT_TYPE_LATEST)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    kind = {404: "not-found", 405: "method-not-allowed"}.get(status, "internal-error")
    return problem_response(ProblemDocument(kind, f"{request.method} {request.url.path}"), {})


def _credential(request: Request) -> str | None:
    """The tenant whose token the request presented (None: the server's, or none)."""
    tenant = request.scope.get(CREDENTIAL_SCOPE_KEY)
    return tenant if isinstance(tenant, str) else None


def _too_large(size: int, limit: int) -> ProblemDocument:
    return ProblemDocument(
        "request-too-large",
        f"the body is {size} bytes or more; the limit is {limit} bytes",
        extra={"limit": limit},
    )


def json_response(document: Any, status: int, headers: dict[str, str]) -> Response:
    content = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return Response(content, status, headers, media_type="application/json")


def problem_response(problem: ProblemDocument, headers: dict[str, str]) -> Response:
    extra = {"WWW-Authenticate": "Bearer"} if problem.kind == "unauthorized" else {}
    return Response(
        json.dumps(problem.to_dict(), ensure_ascii=False, separators=(",", ":")),
        problem.status,
        {**headers, **extra},
        media_type=PROBLEM_MEDIA_TYPE,
    )
