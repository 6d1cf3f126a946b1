"""What the HTTP layer reads from a request beside its body: the session id of its path and
query, decoded strictly as UTF-8, ``?explain=``, and the labels of its header (the caller's
``Prunewarden-Labels``, or the one a trusted proxy sets)."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote_to_bytes

from starlette.requests import Request

from prunewarden.errors import Problem
from prunewarden.server._problems import invalid_input
from prunewarden.server._service import ServiceProblemError
from prunewarden.server._tenant_config import (
    HEADER_FILE,
    LABELS_HEADER,
    LabelsError,
    parse_labels_header,
)


def path_session_id(request: Request) -> str:
    """The session id of the path, decoded as UTF-8 from the bytes the client sent: an id whose
    escapes are not UTF-8 (``%FF``) is refused, not read with replacement characters (which
    would make ``%FF`` and ``%FE`` one session)."""
    raw = request.scope.get("raw_path")
    if not isinstance(raw, bytes):
        session_id: str = request.path_params["session_id"]
        return session_id
    escaped = raw.split(b"/")[3]  # /v1/sessions/{id}[/part]
    return utf8(unquote_to_bytes(escaped), "$.session_id")


def query_session_id(request: Request) -> str | None:
    """``?session_id=`` decoded strictly as UTF-8 (as :func:`path_session_id`)."""
    query = request.scope.get("query_string", b"")
    if b"session_id" not in query:
        return None
    found = None
    for name, value in parse_qsl(query.decode("latin-1"), encoding="latin-1"):
        if name == "session_id":
            found = utf8(value.encode("latin-1"), "$.session_id")
    return found


def header_labels(request: Request, trusted: str | None = None) -> dict[str, str] | None:
    """The labels of the ``Prunewarden-Labels`` header (None: no header, or an empty one), or
    with ``trusted`` of that header alone, which only a proxy in front sets (a request that
    also sends ``Prunewarden-Labels`` is refused: its caller may not choose). A header given
    on two lines is refused (400) rather than one line preferred (a proxy and a caller may each
    have added one)."""
    name = trusted or LABELS_HEADER
    if trusted is not None and request.headers.getlist(LABELS_HEADER):
        message = f"labels come from the proxy's {trusted} header here: leave {LABELS_HEADER} out"
        raise LabelsError([Problem(HEADER_FILE, 1, 1, "$.labels", message)])
    values = request.headers.getlist(name)
    if len(values) > 1:
        message = f"given on {len(values)} header lines: send one {name} header"
        raise LabelsError([Problem(f"<header {name}>", len(values), 1, "$.labels", message)])
    return (parse_labels_header(values[0], name) or None) if values else None


def query_explain(request: Request) -> bool:
    """``?explain=true`` (or ``false``, the default); any other value is refused (400)."""
    query = request.scope.get("query_string", b"")
    if b"explain" not in query:
        return False
    explain = False
    for name, value in parse_qsl(query.decode("latin-1"), encoding="latin-1"):
        if name != "explain":
            continue
        if value not in {"true", "false"}:
            message = f"{value!r} is not one of 'true', 'false'"
            raise ServiceProblemError(
                invalid_input([Problem("<request>", 0, 0, "$.explain", message[:120])])
            )
        explain = value == "true"
    return explain


def utf8(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"the session id is not UTF-8 (byte {exc.start} after percent-decoding)"
        raise ServiceProblemError(
            invalid_input([Problem("<request>", 0, 0, path, message)])
        ) from None
