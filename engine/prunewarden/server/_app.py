"""The HTTP layer: Starlette routes over the decision service, with access, size and time limits.

Each endpoint is wrapped once (:meth:`_Endpoints.wrap`) rather than run through middleware: the
wrapper checks the bearer token, reads the body up to the size limit, runs the engine call, and
turns every failure into an RFC 9457 problem document. One function on the hot path, no
per-request middleware stack.

Where the engine call runs: in a worker thread under the request deadline, so that a slow call
(a large document, a disk sync, a store across the network) never stalls the event loop. Handing
a call to a thread and back costs about a third of a small request's CPU, so the calls that
cannot wait on anything run on the event loop itself: a stateless evaluation or an eviction of a
live session, with a body under :data:`INLINE_BODY_BYTES`, when the audit log does not sync every
record and sessions are not in Redis. Such a call only decides and appends one record (the
background syncer keeps ``batch`` syncs off it), in tens of microseconds; at worst it waits for
another call of the same session to finish saving.

Every response names the policy in force (``Prunewarden-Policy``) and, when it carries decisions,
their ids (``Prunewarden-Decision-Ids``), besides what the JSON body says.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prunewarden import _resources as resources
from prunewarden.errors import InputError
from prunewarden.server._config import ServerConfig
from prunewarden.server._openapi import openapi_document
from prunewarden.server._problems import PROBLEM_MEDIA_TYPE, ProblemDocument, invalid_input
from prunewarden.server._service import Answer, DecisionService, ServiceProblemError
from prunewarden.server._sessions import SessionService
from prunewarden.session import save_deadline

_diagnostics = logging.getLogger("prunewarden.server")
DEADLINE_SCOPE_KEY = "prunewarden.deadline"  # when the worker running a call is given up on

# Requests answered, by route template and status; and how long they took.
REQUESTS = Counter("prunewarden_http_requests_total", "HTTP requests answered", ["route", "status"])
LATENCY = Histogram(
    "prunewarden_http_request_seconds",
    "Time from a request's arrival to its answer",
    ["route"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
)

INLINE_BODY_BYTES = 16 * 1024  # the largest body a call may have to run on the event loop
THREADS = 64  # worker threads deciding at once (each request's engine call runs in one)

# Probes answer without a token: they say only whether the server can decide.
_OPEN_PATHS = frozenset({"/healthz", "/readyz"})

Handler = Callable[[Request, bytes], Answer]
# Whether a request's call may run on the event loop (see the module's docstring).
Inline = Callable[[Request], bool]


def create_app(
    config: ServerConfig,
    service: DecisionService,
    sessions: SessionService,
    on_shutdown: Callable[[], None] = lambda: None,
    decision_metrics: CollectorRegistry | None = None,
) -> Starlette:
    """The ASGI application; ``on_shutdown`` runs once the last request has been answered.
    ``decision_metrics`` is the registry of the engine's :class:`DecisionMetrics`, served at
    ``/metrics`` after the process-wide registry (the HTTP metrics)."""
    endpoints = _Endpoints(config, service, sessions, decision_metrics)

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
    ) -> None:
        self.config = config
        self.decision_metrics = decision_metrics
        self.service = service
        self.sessions = sessions
        self.openapi = openapi_document()
        # The bundled schemas by the file name their $id ends with (input.v1.schema.json).
        self.schemas = {path.name: path.name.split(".")[0] for path in resources.schema_files()}
        self.workers = ThreadPoolExecutor(THREADS, thread_name_prefix="prunewarden-request")

    def routes(self) -> list[Route]:
        service, wrap, sessions = self.service, self.wrap, self.sessions
        # Calls that cannot wait on anything, when nothing on their path syncs or crosses a
        # network: a stateless evaluation, an eviction of a session already live.
        quick = self.config.audit_fsync != "always" and not sessions.shared

        def live_session(request: Request) -> bool:
            return quick and sessions.is_live(request.path_params["session_id"])

        session_posts = [
            Route(
                f"/v1/sessions/{{session_id}}/{part}",
                wrap(
                    self.session_call(name),
                    inline=live_session if name == "authorize" else None,
                ),
                methods=["POST"],
            )
            for part, name in SessionService.POSTS.items()
        ]
        return [
            Route("/healthz", wrap(self.health, reads_body=False), methods=["GET"]),
            Route("/readyz", wrap(self.ready, reads_body=False), methods=["GET"]),
            Route("/openapi.json", wrap(self.schema, reads_body=False), methods=["GET"]),
            Route("/schemas/{name}", wrap(self.bundled_schema, reads_body=False), methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
            Route(
                "/v1/policy",
                wrap(lambda _r, _b: service.policy_document(), reads_body=False),
                methods=["GET"],
            ),
            Route(
                "/v1/evaluate",
                wrap(self.evaluate, inline=(lambda _request: True) if quick else None),
                methods=["POST"],
            ),
            Route("/v1/plan", wrap(lambda _r, body: service.plan(body)), methods=["POST"]),
            *session_posts,
            Route(
                "/v1/sessions/{session_id}",
                wrap(self.session_call("state"), reads_body=False),
                methods=["GET"],
            ),
            Route(
                "/v1/sessions/{session_id}",
                wrap(self.session_call("delete"), reads_body=False),
                methods=["DELETE"],
            ),
        ]

    def wrap(
        self, handler: Handler, *, reads_body: bool = True, inline: Inline | None = None
    ) -> Callable[..., Awaitable[Any]]:
        """The endpoint running ``handler``: timed and counted by route template."""

        async def run(request: Request) -> Response:
            route = request.scope["route"].path
            with LATENCY.labels(route).time():
                response = await self.answer(request, handler, reads_body, inline)
            REQUESTS.labels(route, str(response.status_code)).inc()
            return response

        return run

    async def answer(
        self, request: Request, handler: Handler, reads_body: bool, inline: Inline | None
    ) -> Response:
        """Token, body, the handler (on the loop when ``inline`` says it may, else in a worker
        thread under the deadline); problems as such."""
        config = self.config
        policy = self.service.engine.policy
        headers = {"Prunewarden-Policy": f"{policy.name}@{policy.version} {policy.digest}"}
        try:
            _authorize(request, config.token)
            body = await _read_body(request, config.max_request_bytes) if reads_body else b""
            if inline is not None and len(body) <= INLINE_BODY_BYTES and inline(request):
                answer = handler(request, body)
            else:
                # Past this, the call's session saves are refused (it must not save after the
                # caller was answered that it took too long).
                request.scope[DEADLINE_SCOPE_KEY] = time.monotonic() + config.request_seconds
                answer = await asyncio.wait_for(
                    asyncio.get_running_loop().run_in_executor(
                        self.workers, handler, request, body
                    ),
                    config.request_seconds,
                )
        except ServiceProblemError as exc:
            return problem_response(exc.problem, headers)
        except InputError as exc:  # a body that is not JSON, or not the document asked for
            return problem_response(invalid_input(exc.problems), headers)
        except TimeoutError:
            detail = f"no answer within {config.request_seconds:g} s"
            return problem_response(ProblemDocument("deadline-exceeded", detail), headers)
        except Exception as exc:  # noqa: BLE001 - never a traceback to the caller
            _diagnostics.exception("request failed: %s %s", request.method, request.url.path)
            problem = ProblemDocument("internal-error", f"{type(exc).__name__}: {exc}")
            return problem_response(problem, headers)
        if answer.decision_ids:
            headers["Prunewarden-Decision-Ids"] = ",".join(answer.decision_ids)
        headers.update(answer.headers)
        return json_response(answer.document, answer.status, headers)

    # --- handlers (run in worker threads) -----------------------------------------------------

    def evaluate(self, request: Request, body: bytes) -> Answer:
        return self.service.evaluate(body, request.query_params.get("session_id"))

    def health(self, _request: Request, _body: bytes) -> Answer:
        return Answer({"status": "ok", "policy": self.service.engine.policy.identity.to_dict()})

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

        def handle(request: Request, body: bytes) -> Answer:
            with save_deadline(request.scope.get(DEADLINE_SCOPE_KEY)):
                answer: Answer = call(request.path_params["session_id"], body)
            return answer

        return handle

    async def metrics(self, request: Request) -> Response:
        """``GET /metrics``: the Prometheus text format (behind the token like the data)."""
        try:
            _authorize(request, self.config.token)
        except ServiceProblemError as exc:
            return problem_response(exc.problem, {})
        text = generate_latest(REGISTRY)
        if self.decision_metrics is not None:
            text += generate_latest(self.decision_metrics)
        return Response(text, media_type=CONTENT_TYPE_LATEST)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    kind = {404: "not-found", 405: "method-not-allowed"}.get(status, "internal-error")
    return problem_response(ProblemDocument(kind, f"{request.method} {request.url.path}"), {})


def _authorize(request: Request, token: str | None) -> None:
    """Constant-time comparison of the bearer token, when the server has one."""
    if token is None or request.url.path in _OPEN_PATHS:
        return
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    expected = token.encode("utf-8")
    if scheme.lower() != "bearer" or not hmac.compare_digest(value.encode("utf-8"), expected):
        raise ServiceProblemError(
            ProblemDocument("unauthorized", "send Authorization: Bearer <token>")
        )


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused (HTTP 413) from its declared length or as soon as it passes ``limit``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ServiceProblemError(_too_large(int(declared), limit))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ServiceProblemError(_too_large(size, limit))
        chunks.append(chunk)
    return b"".join(chunks)


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
