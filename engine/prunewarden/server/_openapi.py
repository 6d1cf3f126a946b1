"""The OpenAPI 3.1 description of API v1, built from the bundled JSON Schemas.

Request and decision documents are not restated: they are ``$ref``s to the schemas by their
``$id`` (``https://prunewarden.dev/schemas/input.v1.schema.json#/$defs/plan``), the same
references the schemas use among themselves. A tool resolves them from the bundled files
(``prunewarden schema NAME``), or from the server, which serves each at ``/schemas/NAME``. Only
what no schema describes yet (a plan, a problem document, the small acknowledgements) is
defined here.

``schemas/openapi.v1.json`` is this document, committed (``prunewarden serve --print-openapi``
writes it); a test holds the two equal.
"""

from __future__ import annotations

from typing import Any

from prunewarden.server._openapi_components import components, ref
from prunewarden.server._tenants import (
    LABELS_PARAMETER,
)

_JSON = "application/json"
_PROBLEM = "application/problem+json"


def _json_body(name: str, description: str) -> dict[str, Any]:
    return {
        "required": True,
        "description": description,
        "content": {_JSON: {"schema": ref(name)}},
    }


# What every answer says in its headers besides its body.
_HEADERS = {
    "Prunewarden-Policy": {
        "description": "The policy the answer was decided (or read) under: "
        "`name@version sha256:...`",
        "schema": {"type": "string"},
    },
    "Prunewarden-Decision-Count": {
        "description": "How many decisions the answer carries (when it carries any)",
        "schema": {"type": "integer", "minimum": 1},
    },
    "Prunewarden-Decision-Ids": {
        "description": "Their ids, comma-separated, when there are at most 64; a larger answer "
        "(a pass over many segments) lists them only in its body, each decision with its "
        "`decision_id`",
        "schema": {"type": "string"},
    },
}


def _ok(name: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": _HEADERS,
        "content": {_JSON: {"schema": ref(name)}},
    }


def _problems(*statuses: int) -> dict[str, Any]:
    meaning = {
        400: "The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`)",
        401: "No valid bearer token",
        403: "The request's bearer token is a tenant's (the tenants file's `tokens`) and its "
        "labels choose another tenant, or it chooses a tenant that lists tokens without "
        "presenting one of them, or a tenant's token on a route showing every tenant "
        "(`forbidden-tenant`)",
        404: "No such session",
        409: "The request conflicts with the session's state: a cycle or turn out of order, a "
        "stored state this policy cannot use, the session busy on another replica, a stored "
        "state that fails its integrity check (`session-state-rejected`: DELETE clears it), or "
        "labels choosing another tenant than the session's (`tenant-conflict`)",
        408: "The body did not arrive within the body deadline; the connection is closed",
        413: "The body is larger than the limit",
        503: "The decision could not be logged (fail closed), the session store cannot be "
        "reached or the change could not be saved (it is not made: retry), the request ran out "
        "of time, the server is not ready, or it is at one of its limits (`server-busy`: "
        "connections, bodies being read, live sessions; retry)",
    }
    return {
        str(status): {
            "description": meaning[status],
            "content": {_PROBLEM: {"schema": ref("Problem")}},
        }
        for status in statuses
    }


_SESSION_ID = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "description": "The session's id, chosen by the caller (one path segment: no '/'); its "
    "percent-escapes must decode to UTF-8 (else 400)",
    "schema": {"type": "string", "minLength": 1, "maxLength": 256, "pattern": "^[^/]+$"},
}

_DECIDING = (400, 401, 403, 408, 413, 503)
_SESSION_DECIDING = (400, 401, 403, 408, 409, 413, 503)

# ?explain=true on every endpoint that decides (docs/explain.md).
_EXPLAIN = {
    "name": "explain",
    "in": "query",
    "required": False,
    "description": "true: each refusing reason of a guard carries detail.would_allow (and "
    "would_allow_text) and each decision an explanation with a trace of every rule, as "
    "`prunewarden explain` (docs/explain.md); any other value than true or false is a 400",
    "schema": {"type": "boolean", "default": False},
}


def _session_post(
    operation: str, summary: str, body: str, answer: str, body_text: str
) -> dict[str, Any]:
    deciding = answer != "TurnObserved"  # a turn is recorded, not decided: nothing to explain
    return {
        "post": {
            "operationId": operation,
            "summary": summary,
            "tags": ["sessions"],
            "parameters": [_SESSION_ID, _EXPLAIN, LABELS_PARAMETER]
            if deciding
            else [_SESSION_ID, LABELS_PARAMETER],
            "requestBody": _json_body(body, body_text),
            "responses": {
                "200": _ok(answer, "The decision (or acknowledgement), logged"),
                **_problems(*_SESSION_DECIDING),
            },
        }
    }


def _paths() -> dict[str, Any]:
    return {
        **_operation_paths(),
        **_policy_paths(),
        **_decision_paths(),
        **_session_report_paths(),
        **_session_state_paths(),
    }


def _operation_paths() -> dict[str, Any]:
    """Health, readiness and the bundled schemas: no token needed."""
    return {
        "/healthz": {
            "get": {
                "operationId": "health",
                "summary": "The process is up",
                "tags": ["operations"],
                "security": [],
                "responses": {"200": _ok("Health", "Up")},
            }
        },
        "/readyz": {
            "get": {
                "operationId": "readiness",
                "summary": "A policy is loaded and the audit log can be written",
                "tags": ["operations"],
                "security": [],
                "responses": {"200": _ok("Readiness", "Ready"), **_problems(503)},
            }
        },
        "/schemas/{name}": {
            "get": {
                "operationId": "schema",
                "summary": "A bundled JSON Schema, by the file name its `$id` ends with",
                "tags": ["operations"],
                "security": [],
                "parameters": [
                    {
                        "name": "name",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": "^[a-z-]+\\.v1\\.schema\\.json$"},
                    }
                ],
                "responses": {
                    "200": {"description": "The schema", "content": {_JSON: {"schema": {}}}},
                    **_problems(404),
                },
            }
        },
    }


def _policy_paths() -> dict[str, Any]:
    """The policy in force, the tenants and the server's status."""
    return {
        "/v1/policy": {
            "get": {
                "operationId": "policy",
                "summary": "The policy in force: identity, digest, files, resolved document "
                "(of the tenant the labels choose)",
                "tags": ["policy"],
                "parameters": [LABELS_PARAMETER],
                "responses": {
                    "200": _ok("PolicyInForce", "The policy"),
                    **_problems(400, 401, 403),
                },
            }
        },
        "/v1/policies": {
            "get": {
                "operationId": "policies",
                "summary": "Every tenant: its selector, its policy, bundle revision and shadow "
                "(docs/fleet.md)",
                "tags": ["policy"],
                "responses": {"200": _ok("Policies", "The tenants"), **_problems(401, 403)},
            }
        },
        "/v1/status": {
            "get": {
                "operationId": "status",
                "summary": "The policy and bundle in force, the last activation and error, "
                "decisions by outcome since start (docs/fleet.md)",
                "tags": ["policy"],
                "responses": {"200": _ok("Status", "The server's status"), **_problems(401, 403)},
            }
        },
    }


def _decision_paths() -> dict[str, Any]:
    """The stateless decisions: one input document, one pruning pass."""
    return {
        "/v1/evaluate": {
            "post": {
                "operationId": "evaluate",
                "summary": "Decide on one input document (stateless), as `prunewarden evaluate`",
                "tags": ["decisions"],
                "parameters": [
                    {
                        "name": "session_id",
                        "in": "query",
                        "required": False,
                        "description": "Recorded with the decision; a halted session of this "
                        "id refuses the call",
                        "schema": {"type": "string", "minLength": 1, "maxLength": 256},
                    },
                    _EXPLAIN,
                    LABELS_PARAMETER,
                ],
                "requestBody": _json_body("InputDocument", "An input.v1 document"),
                "responses": {
                    "200": _ok("Decision", "The decision (logged)"),
                    **_problems(*_DECIDING),
                },
            }
        },
        "/v1/plan": {
            "post": {
                "operationId": "plan",
                "summary": "Plan one pruning pass (stateless), as `prunewarden plan`",
                "tags": ["decisions"],
                "parameters": [_EXPLAIN, LABELS_PARAMETER],
                "requestBody": _json_body("PlanDocument", "A plan document"),
                "responses": {
                    "200": _ok("Plan", "The plan (every decision logged)"),
                    **_problems(*_DECIDING),
                },
            }
        },
    }


def _session_report_paths() -> dict[str, Any]:
    """What a session reports, each decided (or recorded) on its history."""
    return {
        "/v1/sessions/{session_id}/cycles": _session_post(
            "observe_cycle",
            "Report one rewrite cycle's scores; the collapse decision on the session's history",
            "Snapshot",
            "Decision",
            "One cycle: `{cycle, scores, pinned}`",
        ),
        "/v1/sessions/{session_id}/turns": _session_post(
            "observe_turn",
            "Report one turn's mean relevance and tokens (no decision)",
            "Turn",
            "TurnObserved",
            "One turn: `{turn, mean_relevance, tokens}`",
        ),
        "/v1/sessions/{session_id}/evictions": _session_post(
            "authorize",
            "The eviction guard for one segment, refused while the session is halted",
            "EvictionDocument",
            "Decision",
            "An eviction document without `labels`",
        ),
        "/v1/sessions/{session_id}/prunes": _session_post(
            "prune",
            "The staleness guard, with the turns the session observed",
            "StalenessDocument",
            "Decision",
            "A staleness document without `turns` and `labels`",
        ),
        "/v1/sessions/{session_id}/plans": _session_post(
            "plan_session",
            "Plan one pruning pass with the session's history",
            "PlanDocument",
            "Plan",
            "A plan document without `history`, `baseline`, `turns`, `session_id`, `labels`",
        ),
        "/v1/sessions/{session_id}/transitions": _session_post(
            "verify",
            "The transition guard on an edit of the window, with the session's halt and pins",
            "TransitionDocument",
            "Decision",
            "A transition document without `session_id` and `labels`",
        ),
    }


def _session_state_paths() -> dict[str, Any]:
    """What a session keeps: read it, or forget it."""
    return {
        "/v1/sessions/{session_id}": {
            "get": {
                "operationId": "state",
                "summary": "What the session keeps",
                "tags": ["sessions"],
                "parameters": [_SESSION_ID, LABELS_PARAMETER],
                "responses": {
                    "200": _ok("SessionState", "The state"),
                    **_problems(400, 401, 403, 404, 409, 503),
                },
            },
            "delete": {
                "operationId": "delete_session",
                "summary": "Forget the session: its history and its halt",
                "tags": ["sessions"],
                "parameters": [_SESSION_ID, LABELS_PARAMETER],
                "responses": {
                    "200": _ok("SessionDeleted", "Done"),
                    **_problems(400, 401, 403, 409, 503),
                },
            },
        },
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document ``GET /openapi.json`` serves."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "prunewarden decision point",
            "version": "v1",
            "description": "Policy decisions for self-editing context windows over HTTP: "
            "the documents of the prunewarden CLI, validated by its bundled schemas. "
            "See docs/server.md.",
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "security": [{"bearer": []}],
        "paths": _paths(),
        "components": components(),
    }
