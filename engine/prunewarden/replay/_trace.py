"""Traces: a recorded session, one JSON object per line, read as a stream.

A trace (``schemas/trace.v1.schema.json``) is JSON Lines: a ``session`` header, then one event per
line, ``cycle``, ``turn``, ``eviction``, ``prune`` or ``pass``, each carrying the arguments of the
matching :class:`~prunewarden.session.Session` call. The reader holds one line at a time, so a trace
of any length is read in constant memory, and a line longer than the limit is skipped without ever
being held whole. Every problem names the file, the line and column, and the JSON path within the
line: ``run.jsonl:14:23: $.scores.t1: 1.2 is outside the policy's score range [0.0, 1.0]``.

Checking a line against the schema costs about as much as deciding on it, and the session checks
each call's arguments anyway. With ``check_bodies=False`` (what replay uses) the reader checks only
what the session cannot see (the line is a JSON object, its type and fields, the header, increasing
cycle and turn numbers) and leaves the rest to the session; when the session refuses an event's
arguments, :meth:`TraceReader.explain` checks that line in full to say where.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import IO, Any, Final, Self

import msgspec

from prunewarden._schemas import schema_problems
from prunewarden._source import parse_json
from prunewarden.errors import InputError, Problem, describe_value
from prunewarden.inputs import ScoreRange
from prunewarden.limits import (
    MAX_INPUT_CHARS,
    MAX_NOTE_CHARS,
    MAX_PROBLEMS,
    MAX_TRACE_LINE_BYTES,
)
from prunewarden.replay._events import (
    TARGETS,
    EventType,
    TraceEvent,
    TraceHeader,
    TraceLine,
    about_targets,
    check_as_document,
    in_trace,
    line_shapes,
    semantic_problems,
    size_problems,
    target_problems,
)
from prunewarden.replay._sources import open_trace

TRACE_VERSION = 1

# The numbered events: which field carries the number.
_NUMBERED = {"cycle": "cycle", "turn": "turn"}
_IDS = (("tombstones", list),)
_CONTAINERS: dict[str, tuple[tuple[str, type], ...]] = {
    "cycle": (("scores", dict), ("pinned", list)),
    "turn": (),
    "eviction": (("segment", dict), ("eviction_candidates", list)),
    "prune": (("spans", list), ("turn", dict), *_IDS),
    "pass": (("segments", list), ("turn", dict), *_IDS),
    "transition": (
        ("before", list),
        ("after", list),
        ("reported", dict),
        ("canaries", list),
        *_IDS,
    ),
}
_DEFAULT_SCORES = ScoreRange(0.0, 1.0)


class TraceReader:
    """Reads a trace line by line; raises :class:`InputError` at the first bad line.

    ``source`` is a path (of a regular file: a FIFO or a device is refused unread), a URL
    fsspec reads (``s3://...``, ``memory://...``), either gzip- or zstd-compressed by its name
    (``.gz``, ``.zst``), or a binary stream. ``scores`` is the replaying policy's score range
    (default ``[0, 1]``). After an error, :meth:`rest_problems` reads on and reports the problems
    of the remaining lines, so that a malformed trace is reported at once.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | IO[bytes],
        *,
        name: str | None = None,
        scores: ScoreRange | None = None,
        check_bodies: bool = True,
        max_line_bytes: int = MAX_TRACE_LINE_BYTES,
    ) -> None:
        self.scores = scores or _DEFAULT_SCORES
        self.check_bodies = check_bodies
        self.max_line_bytes = max_line_bytes
        self.line = 0  # the last line read
        self.events = 0
        self.bytes_read = 0
        self.size: int | None = None
        self._unreadable = False
        self._last: dict[str, int | None] = {"cycle": None, "turn": None}
        self._before = dict(self._last)  # the numbers before the latest event
        if isinstance(source, str | os.PathLike):
            self.name = name or os.fspath(source)
            try:
                self._file: IO[bytes] = open_trace(source)  # closed by close()
            except OSError as exc:
                problem = Problem(self.name, 0, 0, "$", f"cannot read: {exc.strerror}")
                raise InputError([problem]) from None
            self._owned = True
        else:
            self.name = name or str(getattr(source, "name", "<trace>"))
            self._file = source
            self._owned = False
        try:
            self.size = _regular_size(self._file)
            self.header = self._read_header()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owned:
            self._file.close()

    def __iter__(self) -> Iterator[TraceEvent]:
        while (found := self._next_line()) is not None:
            yield self._event(*found)

    # What a line holds ------------------------------------------------------------------------

    def _read_header(self) -> TraceHeader:
        found = self._next_line()
        if found is None:
            message = "empty trace: the first line must be a session header"
            raise InputError([Problem(self.name, max(self.line, 1), 1, "$", message)])
        line, text = found
        data = self._parse(line, text)
        problems = self._line_problems(line, text, data, header=True)
        if problems:
            raise InputError(problems)
        return TraceHeader(data["session_id"], dict(data.get("labels", {})), line)

    def _event(self, line: int, text: str) -> TraceEvent:
        data = self._parse(line, text)
        if not self._quick(data) or (self.check_bodies and not self._valid_body(data)):
            problems = self._line_problems(line, text, data, header=False)
            if problems:
                raise InputError(problems)
        kind: EventType = data["type"]
        self._before = dict(self._last)
        numbers = dict(self._last)
        if kind in _NUMBERED:
            given = data.get(kind)
            last = self._last[kind]
            numbers[kind] = given if given is not None else (last or 0) + 1
            self._last[kind] = numbers[kind]
        self.events += 1
        return TraceEvent(
            self.events, line, kind, data, numbers["cycle"], numbers["turn"], text=text
        )

    def _parse(self, line: int, text: str) -> Any:
        data = read_plain_line(text)
        if data is not UNREAD:
            return data
        parsed, problems = parse_json(text, self.name)
        if problems:
            raise InputError([in_trace(problem, line) for problem in problems])
        return parsed.data

    def _quick(self, data: Any) -> bool:
        """The checks the session cannot make, done cheaply; False sends the line to the full
        check for a located message."""
        kind = data.get("type") if isinstance(data, dict) else None
        if not isinstance(kind, str) or kind == "session" or kind not in line_shapes():
            return False
        shape = line_shapes()[kind]
        allowed, required = shape
        # A value of the wrong shape that a session call would take anyway (a string as a list
        # of ids, a list of pairs as scores) must not get through.
        containers = all(
            name not in data or isinstance(data[name], container)
            for name, container in _CONTAINERS[kind]
        )
        target = kind != "pass" or sum(target in data for target in TARGETS) == 1
        note = data.get("note", "")
        noted = isinstance(note, str) and len(note) <= MAX_NOTE_CHARS
        return (
            required <= data.keys() <= allowed
            and containers
            and target
            and noted
            and self._next(data)
        )

    def _valid_body(self, data: dict[str, Any]) -> bool:
        """The rest of a line that passed :meth:`_quick`: its fields as the session takes them,
        checked once (a located account is only worked out for a line that fails)."""
        try:
            check_as_document(data, self.scores)
        except InputError:
            return False
        return True

    def _next(self, data: dict[str, Any]) -> bool:
        """A numbered event's number, when given, is a whole number after the last one."""
        number_field = _NUMBERED.get(data["type"])
        if number_field is None or number_field not in data:
            return True
        number, last = data[number_field], self._last[number_field]
        return type(number) is int and number >= 0 and (last is None or number > last)

    def _line_problems(self, line: int, text: str, data: Any, *, header: bool) -> list[Problem]:
        """Everything wrong with one line: its place in the trace, the schema, the policy's
        score range, unique ids and increasing numbers."""
        at = TraceLine(data, self.name, text, line)
        if not isinstance(data, dict):
            shape = type(data).__name__ if data is not None else "null"
            return [at.problem((), f"a trace line must be a JSON object, not {shape}")]
        kind = data.get("type")
        if header and kind != "session":
            message = (
                f"the first line must be a session header "
                f'({{"type": "session", "trace_version": {TRACE_VERSION}, "session_id": ...}}), '
                f"not type {describe_value(kind)}"
            )
            return [at.problem(("type",) if "type" in data else (), message)]
        if not header and kind == "session":
            return [at.problem(("type",), "only the first line may be a session header")]
        if header and "trace_version" in data and data["trace_version"] != TRACE_VERSION:
            message = (
                f"trace version {describe_value(data['trace_version'])} is not supported "
                f"(this prunewarden reads version {TRACE_VERSION})"
            )
            return [at.problem(("trace_version",), message)]
        problems = size_problems(data, at, header=header) or schema_problems("trace", at)
        if kind == "pass":
            problems = [p for p in problems if not about_targets(p)] + target_problems(data, at)
        if problems or header:
            return problems
        return self._numbering(data, at) + semantic_problems(data, self.scores, at)

    def _numbering(self, data: dict[str, Any], at: TraceLine) -> list[Problem]:
        number_field = _NUMBERED.get(data["type"])
        if number_field is None or number_field not in data:
            return []
        last = self._last[number_field]
        if last is None or data[number_field] > last:
            return []
        message = (
            f"{data[number_field]} does not follow {number_field} {last}: "
            f"{number_field}s must increase"
        )
        return [at.problem((number_field,), message)]

    # After an error ---------------------------------------------------------------------------

    def explain(self, event: TraceEvent, error: InputError) -> list[Problem]:
        """Where in its line the session's refusal of ``event``'s arguments comes from.

        The line is checked in full; when that finds nothing (a rule only the session knows),
        the session's own problems are given the line's position.
        """
        saved, self._last = self._last, dict(self._before)  # as it was before the event
        try:
            problems = self._line_problems(event.line, event.text, event.fields, header=False)
        finally:
            self._last = saved
        return problems or [
            Problem(self.name, event.line, 1, p.path, p.message) for p in error.problems
        ]

    def rest_problems(self, limit: int = MAX_PROBLEMS) -> list[Problem]:
        """Read on after a bad line, checking every remaining line in full: at most ``limit``
        problems, then a note if there are more (the lines after them are left unread)."""
        self.check_bodies = True
        problems: list[Problem] = []
        while len(problems) <= limit:
            try:
                found = self._next_line()
                if found is None:
                    break
                self._event(*found)
            except InputError as exc:
                problems += exc.problems
        if len(problems) > limit:
            note = f"more problems not shown: at most {MAX_PROBLEMS} are reported"
            problems[limit:] = [Problem(self.name, 0, 0, "$", note)]
        return problems

    # Lines ------------------------------------------------------------------------------------

    def _next_line(self) -> tuple[int, str] | None:
        """``(line number, text)`` of the next non-blank line, None at the end; raises
        :class:`InputError` for a line too long or not UTF-8 (the next call goes on after it)."""
        limit = self.max_line_bytes
        while raw := self._read_line(limit + 1):
            self.line += 1
            self.bytes_read += len(raw)
            if len(raw) > limit and not raw.endswith(b"\n"):
                self.bytes_read += self._skip_line()
                message = f"line is longer than the limit of {limit} bytes"
                raise InputError([Problem(self.name, self.line, 1, "$", message)])
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                message = f"not UTF-8 text (byte {exc.start + 1} of the line)"
                raise InputError(
                    [Problem(self.name, self.line, exc.start + 1, "$", message)]
                ) from None
            if text.strip():
                return self.line, text
        return None

    def _read_line(self, limit: int, *, within: bool = False) -> bytes:
        """The next line, at most ``limit`` bytes of it (``within``: more of the line counted
        last); b"" at the end, and after a read error (a corrupt or truncated compressed trace,
        one decompressed past its limits), which is raised once as a problem."""
        if self._unreadable:
            return b""
        try:
            return self._file.readline(limit)
        except OSError as exc:
            self._unreadable = True
            message = f"cannot read: {exc.strerror or exc}"
            line = self.line if within else self.line + 1
            raise InputError([Problem(self.name, line, 1, "$", message)]) from None

    def _skip_line(self) -> int:
        skipped = 0
        while chunk := self._read_line(64 * 1024, within=True):
            skipped += len(chunk)
            if chunk.endswith(b"\n"):
                break
        return skipped


UNREAD: Final = object()
_DECODER = msgspec.json.Decoder()


def read_plain_line(text: str) -> Any:
    """A trace line as :func:`~prunewarden._source.parse_json` reads it, at the cost of a C
    decoder, or :data:`UNREAD` for anything the strict reader must look at itself.

    The C decoder rejects what strict JSON rejects (NaN, Infinity, numbers out of range, a
    trailing comma) but keeps the last of two equal keys. Without ``\\u`` escapes every colon
    of the decoded data is one of the text's, written again by the encoder: the data holds
    fewer when a key was given twice (its pair dropped with its colon), so equal counts mean
    unique keys. A line with ``\\u`` escapes (which may spell a colon or a lone surrogate)
    goes to the strict reader, which also locates what is wrong.
    """
    if "\\u" in text or len(text) > MAX_INPUT_CHARS:
        return UNREAD
    try:
        data = _DECODER.decode(text)
        if text.count(":") != msgspec.json.encode(data).count(b":"):
            return UNREAD
    except (msgspec.MsgspecError, ValueError, RecursionError):  # UnicodeEncodeError: a surrogate
        return UNREAD
    return data


def check_trace(
    source: str | os.PathLike[str] | IO[bytes], *, scores: ScoreRange | None = None
) -> list[Problem]:
    """Every problem of a trace, each line checked in full; [] when valid. At most
    :data:`~prunewarden.limits.MAX_PROBLEMS` are reported, then a note."""
    try:
        reader = TraceReader(source, scores=scores)
    except InputError as exc:
        return list(exc.problems)
    with reader:
        try:
            for _ in reader:
                pass
        except InputError as exc:
            return [*exc.problems, *reader.rest_problems(MAX_PROBLEMS - len(exc.problems))]
    return []


def _regular_size(stream: IO[bytes]) -> int | None:
    try:
        status = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None
