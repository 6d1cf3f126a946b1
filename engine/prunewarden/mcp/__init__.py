"""``prunewarden mcp``: the decision point as a Model Context Protocol server (docs/mcp.md).

Tools ``evaluate``, ``explain``, ``plan`` and ``verify_transition`` answer with the CLI's
documents as structured content; resources name the policy in force and hold the JSON Schemas. Every
decision goes through the one engine and its audit log, as everywhere else. Built on the
official ``mcp`` SDK, over stdio or streamable HTTP on loopback. Needs the ``mcp`` extra
(``pip install 'prunewarden[mcp]'``). Imports ``reload`` and the layers below it; only ``cli``
imports this, when ``prunewarden mcp`` runs.
"""

from __future__ import annotations

from prunewarden.mcp._resources import POLICY_URI, policy_document
from prunewarden.mcp._server import (
    ListenError,
    bind,
    create_server,
    endpoint_url,
    parse_listen,
    run_http,
    run_stdio,
)
from prunewarden.mcp._tools import Caller

__all__ = [
    "POLICY_URI",
    "Caller",
    "ListenError",
    "bind",
    "create_server",
    "endpoint_url",
    "parse_listen",
    "policy_document",
    "run_http",
    "run_stdio",
]
