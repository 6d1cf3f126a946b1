"""``prunewarden serve``: the engine as a policy decision point over HTTP (API v1).

One policy (or one per tenant, chosen per request by labels), one audit log, one place to reload,
for agents in any language: Starlette routes on
uvicorn, the same JSON documents as the CLI, RFC 9457 problem documents with the CLI's located
messages, sessions held server-side. Needs the ``serve`` extra (``pip install
'prunewarden[serve]'``). Imports ``reload`` and the layers below it; only ``cli`` imports this.
"""

from __future__ import annotations

from prunewarden.server._app import create_app
from prunewarden.server._collector_run import CollectorServer
from prunewarden.server._config import (
    Listen,
    ServerConfig,
    ServerConfigError,
    parse_listen,
    read_token,
)
from prunewarden.server._listening import bind, bound_url
from prunewarden.server._openapi import openapi_document
from prunewarden.server._run import Built, build_app, run
from prunewarden.server._tenant_config import (
    LABELS_HEADER,
    TenantsConfig,
    TenantsError,
    TenantSpec,
    read_tenants,
)

__all__ = [
    "LABELS_HEADER",
    "Built",
    "CollectorServer",
    "Listen",
    "ServerConfig",
    "ServerConfigError",
    "TenantSpec",
    "TenantsConfig",
    "TenantsError",
    "bind",
    "bound_url",
    "build_app",
    "create_app",
    "openapi_document",
    "parse_listen",
    "read_tenants",
    "read_token",
    "run",
]
