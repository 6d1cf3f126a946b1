"""The stdio transport, answering every line it cannot read as a JSON-RPC message.

The SDK's stdio reader hands the server an exception for a line that is not a JSON-RPC message,
and the server drops it: a client that sent a request it got wrong waits for an answer that
never comes. Over HTTP the same message is answered at once. Here each such line is answered
too, and the next line is served as if nothing had happened: ``-32700`` (parse error, ``id``
null) for a line that is not JSON, ``-32600`` (invalid request, with the message's ``id`` when it
has a usable one) for JSON that is no JSON-RPC 2.0 request, notification or response. A blank
line is no message and is not answered.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Final, Self

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

_MAX_DETAIL: Final = 200  # characters of the parser's own words in an answer


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over this process's standard input and output until it closes them."""
    async with stdio_server() as (read_stream, write_stream):
        answering = AnsweringUnreadable(read_stream, write_stream)
        await server.run(answering, write_stream, server.create_initialization_options())


def unreadable_answer(error: Exception) -> JSONRPCError | None:
    """The JSON-RPC error answering a line the transport could not read as a message (``error``
    says why); None for a blank line."""
    problems = error.errors() if isinstance(error, ValidationError) else []
    if problems and problems[0]["type"] == "json_invalid":
        if not str(problems[0].get("input", "")).strip():
            return None
        detail = str(problems[0]["msg"])
        return _answer(PARSE_ERROR, f"Parse error: {detail[:_MAX_DETAIL]}", None)
    if not problems:  # not the parser's own finding: still no message read
        return _answer(PARSE_ERROR, f"Parse error: {type(error).__name__}", None)
    message = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
    return _answer(INVALID_REQUEST, message, _request_id(problems))


def _answer(code: int, message: str, request_id: str | int | None) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _request_id(problems: list[Any]) -> str | int | None:
    """The ``id`` of the object the parser refused, where it is one JSON-RPC allows."""
    for problem in problems:
        found = problem.get("input")
        if isinstance(found, dict):
            value = found.get("id")
            if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
                return value
            return None
    return None


class AnsweringUnreadable:
    """The read stream the server serves: the transport's messages, each unreadable line
    answered on ``answers`` (the transport's write stream) instead of passed on."""

    def __init__(self, inner: Any, answers: Any) -> None:
        self._inner = inner
        self._answers = answers

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message, as the SDK's own stream keeps it."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item  # type: ignore[no-any-return]
            answer = unreadable_answer(item)
            if answer is not None:
                await self._answers.send(SessionMessage(answer))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
