"""The resources: the policy in force and the bundled JSON Schemas.

``prunewarden://policy`` is what ``GET /v1/policy`` of ``prunewarden serve`` answers: the
policy's ``name@version`` and digest, the files it was resolved from, the resolved document,
and the shadow policy beside it. ``prunewarden://schemas/NAME.vN.schema.json`` is each bundled
schema, as ``prunewarden schema NAME`` prints it.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ReadResourceResult, Resource, TextResourceContents

from prunewarden import _resources as bundled
from prunewarden.engine import Engine
from prunewarden.reload import ReloadingEngine

POLICY_URI = "prunewarden://policy"
SCHEMA_PREFIX = "prunewarden://schemas/"
JSON = "application/json"


def resources() -> list[Resource]:
    """The policy, then every bundled schema by file name."""
    policy = Resource(
        uri=POLICY_URI,
        name="policy",
        title="The policy in force",
        description="name@version, digest, source files and the resolved document of the "
        "policy every decision of this server is made under (and the shadow policy, if any)",
        mime_type=JSON,
    )
    schemas = [
        Resource(
            uri=SCHEMA_PREFIX + path.name,
            name=path.name.removesuffix(".schema.json"),
            title=f"JSON Schema {path.name}",
            description=_schema_description(path.name),
            mime_type="application/schema+json",
        )
        for path in bundled.schema_files()
    ]
    return [policy, *schemas]


def read_resource(engine: Engine | ReloadingEngine, uri: str) -> ReadResourceResult:
    """The resource at ``uri``; an unknown one is an invalid-params error naming it."""
    if uri == POLICY_URI:
        return _contents(uri, JSON, policy_document(engine))
    if uri.startswith(SCHEMA_PREFIX):
        name = uri.removeprefix(SCHEMA_PREFIX)
        for path in bundled.schema_files():
            if path.name == name:
                return _contents(uri, "application/schema+json", _schema(name))
    raise MCPError(INVALID_PARAMS, f"no resource {uri!r}", {"uri": uri})


def policy_document(engine: Engine | ReloadingEngine) -> dict[str, Any]:
    """The policy in force now (after any reload), as ``GET /v1/policy`` answers it."""
    in_force = engine.engine if isinstance(engine, ReloadingEngine) else engine
    policy = in_force.policy
    shadow = in_force.shadow.policy.identity.to_dict() if in_force.shadow is not None else None
    return {
        "policy": policy.identity.to_dict(),
        "digest": policy.digest,
        "sources": [source.to_dict() for source in policy.sources],
        "document": policy.document,
        "shadow": shadow,
    }


def _schema(file_name: str) -> dict[str, Any]:
    kind, version = file_name.split(".")[:2]
    return bundled.schema(kind, int(version.removeprefix("v")))


def _schema_description(file_name: str) -> str:
    title = _schema(file_name).get("title")
    return str(title) if title else file_name


def _contents(uri: str, mime_type: str, document: dict[str, Any]) -> ReadResourceResult:
    text = json.dumps(document, indent=2, ensure_ascii=False)
    return ReadResourceResult(
        contents=[TextResourceContents(uri=uri, mime_type=mime_type, text=text)]
    )
