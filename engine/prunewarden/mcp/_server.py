"""The MCP server over one engine, and its two transports: stdio and streamable HTTP.

Built on the low-level ``Server`` of the ``mcp`` SDK rather than its decorator front
(``MCPServer``): the tools' input and output schemas are the project's own JSON Schemas, not
ones derived from Python signatures, and each result is the CLI's document unchanged.

Streamable HTTP listens on loopback only: the MCP endpoint has no authentication of its own,
and a decision point anyone on the network could call (and fill the audit log through) is not
one to offer by accident. The SDK's DNS-rebinding protection checks ``Host`` and ``Origin``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import signal
import socket
from collections.abc import Iterator
from typing import Any

import anyio
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ListResourcesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
)

from prunewarden.__about__ import __version__
from prunewarden.errors import PrunewardenError
from prunewarden.mcp._resources import read_resource, resources
from prunewarden.mcp._stdio import serve_stdio
from prunewarden.mcp._tools import Caller, Deciding, call_tool, tools

ENDPOINT = "/mcp"
INSTRUCTIONS = (
    "prunewarden guards edits of an agent's context window. Before removing, summarizing or "
    "rewriting context, call verify_transition with the window before and after the edit (or "
    "plan for a pruning pass, or evaluate for any input.v1 document) and follow the decision: "
    "on deny or halt, apply its restore and rescore actions instead; explain answers what "
    "would have allowed a refusal. The resource "
    "prunewarden://policy names the policy in force; prunewarden://schemas/ holds the schemas."
)
# Long enough for a decision in flight to be answered and logged; a stream a client keeps
# open does not hold the shutdown longer.
_SHUTDOWN_SECONDS = 5


class ListenError(PrunewardenError):
    """An address ``prunewarden mcp --transport http`` cannot listen on."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"--listen {address!r}: {reason}")
        self.address = address
        self.reason = reason


def create_server(engine: Deciding, caller: Caller | None = None) -> Server[Any]:
    """An MCP server deciding through ``engine`` (whose audit log takes every decision), each
    decision recording ``caller``'s session id and labels."""
    who = caller if caller is not None else Caller()

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=tools())

    async def on_call_tool(
        _ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        return await call_tool(engine, who, params.name, params.arguments or {})

    async def list_resources(
        _ctx: ServerRequestContext[Any], _params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=resources())

    async def on_read_resource(
        _ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        return read_resource(engine, str(params.uri))

    return Server(
        "prunewarden",
        version=__version__,
        title="prunewarden",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=list_resources,
        on_read_resource=on_read_resource,
    )


def run_stdio(server: Server[Any]) -> None:
    """Serve one client over this process's standard input and output until it closes them;
    a line that is not a JSON-RPC message is answered with a JSON-RPC error (``_stdio``)."""
    anyio.run(serve_stdio, server)


def parse_listen(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT``) on a loopback address; port 0 picks a free one."""
    host, sep, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host:
        raise ListenError(address, "expected HOST:PORT")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(address, f"{port!r} is not a TCP port")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ListenError(address, "the MCP endpoint has no authentication: loopback only")
    return host, int(port)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``, bound before the server starts so that the
    address it really got (port 0) can be announced."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenError(f"{host}:{port}", f"cannot listen: {exc.strerror}") from None
    return sock


def endpoint_url(sock: socket.socket) -> str:
    """The URL clients connect to on ``sock``."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{ENDPOINT}"


def run_http(server: Server[Any], sock: socket.socket) -> None:
    """Serve streamable HTTP on ``sock`` (at ``/mcp``) until SIGTERM or SIGINT."""
    host = sock.getsockname()[0]
    # JSON answers rather than event streams: every tool answers once, so nothing is streamed.
    app = server.streamable_http_app(streamable_http_path=ENDPOINT, json_response=True, host=host)
    config = uvicorn.Config(
        app,
        log_config=None,  # the command chose where diagnostics go; uvicorn keeps to that
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=_SHUTDOWN_SECONDS,
    )
    _Uvicorn(config).run(sockets=[sock])


class _Uvicorn(uvicorn.Server):
    """uvicorn, asked to stop by SIGTERM or SIGINT, returns instead of re-raising the signal
    once it has stopped: the command still has its audit log to close and its exit code to give
    (0: stopped as asked). ``prunewarden serve`` stops the same way."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        stopping = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in stopping}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
