"""The ``components`` of API v1's OpenAPI document: the security scheme, and the schemas no
bundled JSON Schema describes (a plan, a problem document, the acknowledgements, a fleet's
status). Kept apart from the paths (:mod:`._openapi`), which refer to these by name.
"""

from __future__ import annotations

from typing import Any

from prunewarden._schemas import plan_schema
from prunewarden.server._fleet import BUNDLE_DETAIL, status_schema, tenants_detail
from prunewarden.server._tenants import (
    policies_schema,
    ready_tenant_schema,
    tenant_schema,
)

SCHEMA_BASE = "https://prunewarden.dev/schemas/"
INPUT = SCHEMA_BASE + "input.v1.schema.json"
DECISION = SCHEMA_BASE + "decision.v1.schema.json"


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def identity() -> dict[str, Any]:
    return {"$ref": DECISION + "#/properties/policy"}


def components() -> dict[str, Any]:
    return {
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "Asked when the server has a token (always beyond loopback)",
            }
        },
        "schemas": {
            **_document_schemas(),
            **_session_schemas(),
            **_health_schemas(),
            **_policy_schemas(),
            **_problem_schemas(),
        },
    }


def _document_schemas() -> dict[str, Any]:
    """The documents a request carries, and the decision and plan answering them."""
    return {
        "InputDocument": {"$ref": INPUT},
        "PlanDocument": {"$ref": INPUT + "#/$defs/plan"},
        "Snapshot": {"$ref": INPUT + "#/$defs/snapshot"},
        "Turn": {"$ref": INPUT + "#/$defs/turn"},
        "EvictionDocument": {"$ref": INPUT + "#/$defs/eviction"},
        "StalenessDocument": {"$ref": INPUT + "#/$defs/staleness"},
        "TransitionDocument": {"$ref": INPUT + "#/$defs/transition"},
        "Decision": {"$ref": DECISION},
        "Plan": plan_schema({"$ref": DECISION}),
    }


def _session_schemas() -> dict[str, Any]:
    """A session's answers that are no decision: a turn observed, its state, its end."""
    return {
        "TurnObserved": {
            "type": "object",
            "required": ["session_id", "turn", "halted", "policy"],
            "properties": {
                "session_id": {"type": "string"},
                "turn": {"type": ["integer", "null"]},
                "halted": {"type": "boolean"},
                "policy": identity(),
            },
        },
        "SessionState": {
            "type": "object",
            "required": ["session_id", "halted", "state", "policy"],
            "properties": {
                "session_id": {"type": "string"},
                "halted": {"type": "boolean"},
                "state": {"$ref": SCHEMA_BASE + "session-state.v4.schema.json"},
                "policy": identity(),
                "tenant": {"type": "string", "description": "With tenants: the session's"},
            },
        },
        "SessionDeleted": {
            "type": "object",
            "required": ["session_id", "deleted", "policy"],
            "properties": {
                "session_id": {"type": "string"},
                "deleted": {"type": "boolean"},
                "policy": identity(),
            },
        },
    }


def _health_schemas() -> dict[str, Any]:
    """Health, readiness and status."""
    return {
        "Health": {
            "type": "object",
            "required": ["status", "policy"],
            "properties": {"status": {"const": "ok"}, "policy": identity()},
        },
        "Readiness": {
            "type": "object",
            "required": ["status", "checks", "policy"],
            "properties": {
                "status": {"type": "string"},
                "checks": {"type": "object"},
                "policy": identity(),
                "bundle": BUNDLE_DETAIL,
                "default_tenant": {"type": "string"},
                "tenants": tenants_detail(ref("ReadyTenant")),
            },
        },
        "Status": status_schema(identity(), ref("Tenant")),
    }


def _policy_schemas() -> dict[str, Any]:
    """The policy in force, and the tenants."""
    return {
        "PolicyInForce": {
            "type": "object",
            "required": ["policy", "digest", "sources", "document", "shadow"],
            "properties": {
                "policy": identity(),
                "digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                "sources": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["path", "sha256"],
                        "properties": {
                            "path": {"type": "string"},
                            "sha256": {"type": "string"},
                        },
                    },
                },
                "document": {
                    "type": "object",
                    "description": "The resolved policy.v1 document",
                },
                "shadow": {"oneOf": [{"type": "null"}, identity()]},
                "tenant": {"type": "string", "description": "With tenants: whose policy"},
            },
        },
        "Tenant": tenant_schema(identity()),
        "ReadyTenant": ready_tenant_schema(identity()),
        "Policies": policies_schema(ref("Tenant")),
    }


def _problem_schemas() -> dict[str, Any]:
    """A problem document (RFC 9457) with the located problems."""
    return {
        "Problem": {
            "type": "object",
            "description": "RFC 9457 problem details; `problems` holds the located problems "
            "the CLI prints",
            "required": ["type", "title", "status", "detail"],
            "properties": {
                "type": {"type": "string", "format": "uri"},
                "title": {"type": "string"},
                "status": {"type": "integer"},
                "detail": {"type": "string"},
                "problems": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["file", "line", "column", "path", "message", "text"],
                        "properties": {
                            "file": {"type": "string"},
                            "line": {"type": "integer"},
                            "column": {"type": "integer"},
                            "path": {"type": "string"},
                            "message": {"type": "string"},
                            "text": {"type": "string"},
                        },
                    },
                },
            },
        },
    }
