"""Where audit records go: a chained, locked, rotating JSON-lines file, or a stream.

Many threads and processes may append to one file. Each append takes an OS lock on the file
(``fcntl.flock``), reads what other writers appended since (to learn the last hash and which
policies this file has activated), and writes its records with one ``write`` call before it lets go,
so records never interleave and the chain stays whole. Rotation happens under the same lock: the
file is hard-linked to ``NAME.000001`` (the next free number) and a fresh file, already locked, is
renamed over ``NAME``; its first record is a ``log_rotated`` header chained to the last record of
the file it continues.

A writer killed mid-write leaves a line that is not a record. The next writer ends that line and
writes a ``write_recovered`` record naming its length and hash, then goes on: the chain runs
from the last whole record across the gap, and ``verify`` reports the loss.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, Self

import structlog

from prunewarden.audit import _record as auditlog
from prunewarden.audit._chain import GENESIS, seal
from prunewarden.audit._locking import lock_exclusive, require_file_locks, unlock
from prunewarden.audit._reading import scan_appended
from prunewarden.audit._redaction import DEFAULT_MASKS, parse_masks
from prunewarden.audit._rotation import next_sequence
from prunewarden.errors import AuditError
from prunewarden.policy import Policy

FsyncMode = Literal["always", "batch", "never"]
FSYNC_MODES: tuple[FsyncMode, ...] = ("always", "batch", "never")

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# batch: fsync once this many records or this many seconds have gone unsynced (checked per write,
# and on close).
BATCH_RECORDS = 100
BATCH_SECONDS = 1.0


class AuditLog:
    """An audit sink: a JSON-lines file (or ``"-"`` for standard output, or any text stream).

    ``fsync``: ``always`` (every record reaches the disk before the decision returns), ``batch``
    (the default: at most ``BATCH_RECORDS`` records or ``BATCH_SECONDS`` seconds unsynced; a
    killed process loses nothing, a power cut at most that much) or ``never`` (the OS decides).
    ``required``: when a record cannot be written, the decision becomes a refusal
    (``audit_unavailable``); otherwise the failure is reported through structlog and the
    decision stands. ``inputs``: ``None`` (the default) logs no input document; ``True`` logs it
    with segment and span text erased; a list of JSON pointers logs it with exactly those erased.
    ``hmac_key_env``: the name of an environment variable holding a key; records are then sealed
    with HMAC-SHA-256, so whoever can write the file cannot recompute the chain.
    ``max_bytes``: rotate before a file would grow past this size (``None``: never).
    """

    def __init__(  # noqa: PLR0913 - each setting is independent and keyword-only
        self,
        target: str | os.PathLike[str] | IO[str] = "-",
        *,
        fsync: FsyncMode = "batch",
        required: bool = True,
        inputs: bool | Iterable[str] | None = None,
        hmac_key_env: str | None = None,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> None:
        if fsync not in FSYNC_MODES:
            msg = f"fsync must be one of {', '.join(FSYNC_MODES)}, not {fsync!r}"
            raise AuditError(msg)
        if max_bytes is not None and max_bytes < 1:
            msg = f"max_bytes must be positive, not {max_bytes!r}"
            raise AuditError(msg)
        self.fsync = fsync
        self.required = required
        self.max_bytes = max_bytes
        self.masks: tuple[str, ...] | None = _masks(inputs)
        self._hmac_key = _key(hmac_key_env)
        self.path: Path | None = None
        self._stream: IO[str] | None = None
        if isinstance(target, str | os.PathLike):
            if os.fspath(target) == "-":
                self._stream = sys.stdout
            else:
                self.path = Path(target)
        else:
            self._stream = target
        self._lock = threading.Lock()
        _SINKS.add(self)
        self._policies: dict[str, dict[str, Any]] = {}
        self._file: _FileState | None = None
        self._chain = _Chain()
        self.logger = structlog.wrap_logger(
            _Writer(self),
            processors=[auditlog.event_to_kind],
            wrapper_class=structlog.BoundLogger,
            context_class=dict,
            cache_logger_on_first_use=False,
        )

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else "<stream>"
        return f"AuditLog({where!r}, fsync={self.fsync!r}, required={self.required})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def name(self) -> str:
        return str(self.path) if self.path is not None else getattr(self._stream, "name", "-")

    def add_policy(self, policy: Policy) -> None:
        """Make ``policy`` known, so that the first decision under its digest in a file is
        preceded by a ``policy_activated`` record holding it."""
        with self._lock:
            self._policies.setdefault(policy.digest, auditlog.policy_activated_record(policy))

    def open(self) -> None:
        """Open (creating it) and lock-check the file now, instead of at the first record.

        Raises :class:`AuditError` when it cannot be written.
        """
        if self.path is None:
            return
        with self._lock:
            try:
                unlock(self._acquire().fd)
            except OSError as exc:
                raise self._error(exc) from None

    def write(self, record: dict[str, Any]) -> None:
        """Chain and append one record (and the policy activation it needs).

        Raises :class:`AuditError` when it cannot be written; nothing already written is
        touched.
        """
        with self._lock:
            try:
                if self.path is None:
                    self._write_stream(record)
                else:
                    self._write_file(record)
            except OSError as exc:
                raise self._error(exc) from None
            except ValueError as exc:  # a closed stream, a value JSON cannot hold
                msg = f"cannot write audit log {self.name}: {exc}"
                raise AuditError(msg) from None

    def close(self) -> None:
        """Sync what ``batch`` left unsynced and close the file."""
        with self._lock:
            state, self._file = self._file, None
            if state is None or state.pid != os.getpid():
                return
            try:
                if self.fsync != "never" and state.unsynced:
                    _sync(state.fd)
            finally:
                os.close(state.fd)

    # --- streams -------------------------------------------------------------------------------

    def _write_stream(self, record: dict[str, Any]) -> None:
        stream = self._stream
        assert stream is not None  # noqa: S101 - no path means a stream
        data, last, activated = self._seal(self._chain, self._with_activation(self._chain, record))
        stream.write(data.decode("ascii"))
        stream.flush()
        self._chain.advance(last, activated)

    # --- files ---------------------------------------------------------------------------------

    def _write_file(self, record: dict[str, Any]) -> None:
        state = self._acquire()
        try:
            torn = self._catch_up(state)
            if torn:
                self._append(state, [auditlog.write_recovered_record(torn)])
            records = self._with_activation(state.chain, record)
            data, _, _ = self._seal(state.chain, records)
            full = self.max_bytes is not None and state.size + len(data) > self.max_bytes
            if full and state.size > 0:
                state, header = self._rotate(state)
                records = [header, *self._with_activation(state.chain, record)]
            self._append(state, records)
        finally:
            if self._file is not None:
                unlock(self._file.fd)

    def _acquire(self) -> _FileState:
        """Open and lock the file now at ``path`` (reopening if it was rotated or replaced)."""
        assert self.path is not None  # noqa: S101 - only file sinks lock
        require_file_locks()
        state = self._file
        if state is not None and state.pid != os.getpid():
            # Inherited through fork: the open file description, and so the lock, is shared with
            # the parent. Open our own (closing our copy leaves the parent's lock alone).
            with contextlib.suppress(OSError):
                os.close(state.fd)
            self._file = state = None
        while True:
            if state is None:
                flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
                fd = os.open(self.path, flags, 0o644)
                state = self._file = _FileState(fd, os.getpid(), _identity(os.fstat(fd)))
            lock_exclusive(state.fd)
            try:
                current: tuple[int, int] | None = _identity(self.path.stat())
            except FileNotFoundError:
                current = None
            if current == state.identity:
                return state
            unlock(state.fd)
            os.close(state.fd)
            self._file = state = None

    def _catch_up(self, state: _FileState) -> list[bytes]:
        """Read what other writers appended since our last write; return torn lines to recover.

        Ends a torn last line with a newline, so that our records start on a line of their own.
        """
        size = os.fstat(state.fd).st_size
        if size < state.size:  # truncated under us: learn the file again
            state.size, state.chain = 0, _Chain()
        if size == state.size:
            return []
        scan = scan_appended(state.fd, state.size, size, state.chain.last)
        state.chain.advance(scan.last_hash, scan.activated)
        state.size = size
        if not scan.tail:
            return scan.torn
        os.write(state.fd, b"\n")
        state.size += 1
        if scan.tail_record is not None and not scan.torn:
            # Cut just before its newline: the record itself is whole.
            state.chain.last = auditlog.hash_of(scan.tail_record)
            return []
        return [*scan.torn, scan.tail]

    def _rotate(self, state: _FileState) -> tuple[_FileState, dict[str, Any]]:
        """Archive the current file as ``NAME.NNNNNN`` and go on in a new one, already locked;
        return its state and its ``log_rotated`` header."""
        assert self.path is not None  # noqa: S101 - only file sinks rotate
        path = self.path
        sequence = next_sequence(path)
        archived = path.with_name(f"{path.name}.{sequence:06d}")
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o644)
        try:
            lock_exclusive(fd)
            # Link, then rename over: NAME always exists, so no writer creates a stray file.
            os.link(path, archived)
            temporary.replace(path)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        fresh = _FileState(fd, state.pid, _identity(os.fstat(fd)))
        fresh.chain.last = state.chain.last
        self._file = fresh
        try:
            if self.fsync != "never":
                _sync(state.fd)
                _sync_dir(path.parent)
        finally:
            unlock(state.fd)
            os.close(state.fd)
        return fresh, auditlog.log_rotated_record(archived.name, sequence)

    def _append(self, state: _FileState, records: list[dict[str, Any]]) -> None:
        """Seal and write ``records`` in one go; the chain and the size move on only once all of
        it is written (a failed write leaves a torn tail for the next writer to recover)."""
        data, last, activated = self._seal(state.chain, records)
        view = memoryview(data)
        while view:
            view = view[os.write(state.fd, view) :]
        state.size += len(data)
        state.chain.advance(last, activated)
        state.unsynced += len(records)
        if self.fsync == "always" or (
            self.fsync == "batch"
            and (
                state.unsynced >= BATCH_RECORDS
                or time.monotonic() - state.synced_at >= BATCH_SECONDS
            )
        ):
            _sync(state.fd)
            state.unsynced = 0
            state.synced_at = time.monotonic()

    # --- chaining ------------------------------------------------------------------------------

    def _with_activation(self, chain: _Chain, record: dict[str, Any]) -> list[dict[str, Any]]:
        if auditlog.kind_of(record) != auditlog.DECISION:
            return [record]
        # The policy that decided, and a shadow policy beside it: both reconstructible.
        needed = [auditlog.policy_digest_of(record), auditlog.shadow_digest_of(record)]
        activations = []
        for digest in dict.fromkeys(d for d in needed if d and d not in chain.activated):
            activation = self._policies.get(digest)
            if activation is None:
                msg = f"policy {digest} was not added to {self!r} (AuditLog.add_policy)"
                raise AuditError(msg)
            activations.append(auditlog.restamped(activation))
        return [*activations, record]

    def _seal(self, chain: _Chain, records: list[dict[str, Any]]) -> tuple[bytes, str, set[str]]:
        """The lines for ``records`` after the chain's last hash, the new last hash, and the
        digests they activate."""
        lines: list[bytes] = []
        last, activated = chain.last, set()
        for record in records:
            line, last = seal(record, last, self._hmac_key)
            lines.append(line)
            if auditlog.kind_of(record) == auditlog.POLICY_ACTIVATED:
                activated.add(auditlog.policy_digest_of(record))
        return b"".join(lines), last, activated

    def _error(self, exc: OSError) -> AuditError:
        reason = exc.strerror or type(exc).__name__
        return AuditError(f"cannot write audit log {self.name}: {reason}")


@dataclass
class _Chain:
    last: str = GENESIS
    activated: set[str] = field(default_factory=set)

    def advance(self, last: str, activated: set[str]) -> None:
        self.last = last
        self.activated |= activated


@dataclass
class _FileState:
    fd: int
    pid: int
    identity: tuple[int, int]
    size: int = 0
    chain: _Chain = field(default_factory=_Chain)
    unsynced: int = 0
    synced_at: float = field(default_factory=time.monotonic)


# Every sink, so that a forked child gets fresh thread locks (one held by another thread of the
# parent at fork time would never be released in the child).
_SINKS: weakref.WeakSet[AuditLog] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for sink in list(_SINKS):
        sink._lock = threading.Lock()  # noqa: SLF001 - the module's own class


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Writer:
    """The logger at the end of the structlog chain: its methods receive the record's fields."""

    def __init__(self, sink: AuditLog) -> None:
        self._sink = sink

    def msg(self, **record: Any) -> None:
        self._sink.write(record)

    info = warning = error = critical = debug = msg


def _masks(inputs: bool | Iterable[str] | None) -> tuple[str, ...] | None:
    if inputs is None or inputs is False:
        return None
    if inputs is True:
        return DEFAULT_MASKS
    if isinstance(inputs, str):
        msg = "inputs takes a list of JSON pointers, not one string"
        raise AuditError(msg)
    return parse_masks(inputs)


def _key(env: str | None) -> bytes | None:
    if env is None:
        return None
    value = os.environ.get(env, "")
    if not value:
        msg = f"keyed audit log: the environment variable {env} is not set or empty"
        raise AuditError(msg)
    return value.encode("utf-8")


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return (stat.st_dev, stat.st_ino)


def _sync(fd: int) -> None:
    try:
        getattr(os, "fdatasync", os.fsync)(fd)
    except OSError as exc:
        # A character device or pipe (/dev/null, a FIFO to a shipper) has nothing to sync.
        if exc.errno != errno.EINVAL:
            raise


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
