"""Where audit records go: a chained, locked, rotating JSON-lines file, or a stream.

Many threads and processes may append to one file. Each append takes an OS lock on the file
(``fcntl.flock``), reads what other writers appended since (to learn the last hash and which
policies this file has activated), and writes its records with one ``write`` call before it lets go,
so records never interleave and the chain stays whole. Rotation happens under the same lock: the
file is hard-linked to ``NAME.000001`` (the next free number) and a fresh file, already locked, is
renamed over ``NAME``; its first record is a ``log_rotated`` header chained to the last record of
the file it continues. A FIFO or a character device is a stream instead (``_pipe``).

A writer killed mid-write leaves a line that is not a record. The next writer ends that line and
writes a ``write_recovered`` record naming its length and hash, then goes on: the chain runs
from the last whole record across the gap, and ``verify`` reports the loss.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Literal, Self

import structlog

from prunewarden.audit import _record
from prunewarden.audit._chain import is_keyed, key_from_env, seal
from prunewarden.audit._file_state import Chain, FileState, file_identity
from prunewarden.audit._locking import lock_exclusive, require_file_locks, unlock
from prunewarden.audit._pipe import PipeWriter, is_stream_device
from prunewarden.audit._reading import scan_appended
from prunewarden.audit._redaction import masks_setting
from prunewarden.audit._rotation import next_sequence, sync_dir, sync_file
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
    ``hmac_key_env``: the name of an environment variable holding a key of at least
    ``MIN_KEY_BYTES`` bytes; records are then sealed with HMAC-SHA-256, so whoever can write the
    file cannot recompute the chain. A sink without a key refuses to append to a file whose
    records are keyed.
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
        self.masks: tuple[str, ...] | None = masks_setting(inputs)
        self._hmac_key = key_from_env(hmac_key_env)
        self.path: Path | None = None
        self._stream: IO[str] | None = None
        self._pipe: PipeWriter | None = None
        if isinstance(target, str | os.PathLike):
            if os.fspath(target) == "-":
                self._stream = sys.stdout
            elif is_stream_device(Path(target)):
                self._pipe = PipeWriter(Path(target))
            else:
                self.path = Path(target)
        else:
            self._stream = target
        self._lock = threading.Lock()
        _SINKS.add(self)
        self._policies: dict[str, dict[str, Any]] = {}
        self._file: FileState | None = None
        self._chain = Chain()
        self.logger = structlog.wrap_logger(
            _Writer(self),
            processors=[_record.event_to_kind],
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
        if self._pipe is not None:
            return str(self._pipe.path)
        return str(self.path) if self.path is not None else getattr(self._stream, "name", "-")

    def add_policy(self, policy: Policy) -> None:
        """Make ``policy`` known, so that the first decision under its digest in a file is
        preceded by a ``policy_activated`` record holding it."""
        with self._lock:
            self._policies.setdefault(policy.digest, _record.policy_activated_record(policy))

    def open(self) -> None:
        """Open (creating it) and lock-check the file, or open the FIFO, now instead of at the
        first record.

        Raises :class:`AuditError` when it cannot be written.
        """
        if self._pipe is not None:
            with self._lock:
                try:
                    self._pipe.open()
                except OSError as exc:
                    raise self._error(exc) from None
            return
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
        self.write_batch([record])

    def write_batch(self, records: list[dict[str, Any]]) -> None:
        """Chain and append ``records`` (and the policy activations they need) as one batch:
        one lock, one read of what others appended, one ``write``, one step of the chain, and
        under ``fsync="batch"`` at most one sync. A batch is written whole or not at all (a
        killed writer leaves a torn tail, which the next writer accounts for).

        Raises :class:`AuditError` when it cannot be written; nothing already written is
        touched.
        """
        if not records:
            return
        with self._lock:
            try:
                if self._pipe is not None:
                    self._write_pipe(self._pipe, records)
                elif self.path is None:
                    self._write_stream(records)
                else:
                    self._write_file(records)
            except OSError as exc:
                raise self._error(exc) from None
            except ValueError as exc:  # a closed stream, a value JSON cannot hold
                msg = f"cannot write audit log {self.name}: {exc}"
                raise AuditError(msg) from None

    def sync(self) -> None:
        """Sync what was written so far without holding the writers back.

        The file is synced through a duplicate of its descriptor, outside the lock, so appends go
        on meanwhile. A caller that calls this in the background often enough (``prunewarden
        serve`` does) takes ``batch``'s syncs off the writers' time: a writer then syncs only
        when the background has fallen ``BATCH_RECORDS`` records behind.
        """
        with self._lock:
            state = self._file
            if state is None or state.pid != os.getpid() or not state.unsynced:
                return
            fd, pending = os.dup(state.fd), state.unsynced
        try:
            sync_file(fd)
        finally:
            os.close(fd)
        with self._lock:
            if self._file is state:
                state.unsynced = max(0, state.unsynced - pending)
                state.synced_at = time.monotonic()

    def close(self) -> None:
        """Sync what ``batch`` left unsynced and close the file."""
        with self._lock:
            if self._pipe is not None:
                self._pipe.close()
            state, self._file = self._file, None
            if state is None or state.pid != os.getpid():
                return
            try:
                if self.fsync != "never" and state.unsynced:
                    sync_file(state.fd)
            finally:
                os.close(state.fd)

    # --- streams -------------------------------------------------------------------------------

    def _write_stream(self, batch: list[dict[str, Any]]) -> None:
        stream = self._stream
        assert stream is not None  # noqa: S101 - no path means a stream
        data, last, activated = self._seal(self._chain, self._with_activation(self._chain, batch))
        stream.write(data.decode("utf-8"))
        stream.flush()
        self._chain.advance(last, activated)

    def _write_pipe(self, pipe: PipeWriter, batch: list[dict[str, Any]]) -> None:
        pipe.finish(self._chain.advance)  # sealed after what a reader has whole, or not at all
        data, last, activated = self._seal(self._chain, self._with_activation(self._chain, batch))
        pipe.send(data, last, activated, self._chain.advance)

    # --- files ---------------------------------------------------------------------------------

    def _write_file(self, batch: list[dict[str, Any]]) -> None:
        state = self._acquire()
        try:
            torn = self._catch_up(state)
            if self._hmac_key is None and is_keyed(state.chain.last):
                msg = (
                    f"cannot write audit log {self.name}: its records are keyed (HMAC), and "
                    "unkeyed records after them would fail its verification; give the key"
                )
                raise AuditError(msg)
            if torn:
                recovered = [_record.write_recovered_record(torn)]
                self._append(state, self._seal(state.chain, recovered), 1)
            records = self._with_activation(state.chain, batch)
            sealed = self._seal(state.chain, records)
            full = self.max_bytes is not None and state.size + len(sealed[0]) > self.max_bytes
            if full and state.size > 0:
                # Sealed again only here: the new file starts its own activations.
                state, header = self._rotate(state)
                records = [header, *self._with_activation(state.chain, batch)]
                sealed = self._seal(state.chain, records)
            self._append(state, sealed, len(records))
        finally:
            if self._file is not None:
                unlock(self._file.fd)
        # Synced after the lock is let go: other writers append while this one waits for the
        # disk (it syncs their records too), and the records are on disk before this returns.
        if self._file is not None and self._file.sync_due:
            self._file.sync_due = False
            sync_file(self._file.fd)

    def _acquire(self) -> FileState:
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
                state = self._file = FileState(fd, os.getpid(), file_identity(os.fstat(fd)))
            lock_exclusive(state.fd)
            try:
                current: tuple[int, int] | None = file_identity(self.path.stat())
            except FileNotFoundError:
                current = None
            if current == state.identity:
                return state
            unlock(state.fd)
            os.close(state.fd)
            self._file = state = None

    def _catch_up(self, state: FileState) -> list[dict[str, Any]]:
        """Read what other writers appended since our last write; return the torn lines to
        recover (their lengths and hashes).

        Ends a torn last line with a newline, so that our records start on a line of their own.
        """
        size = os.fstat(state.fd).st_size
        if size < state.size:  # truncated under us: learn the file again
            state.size, state.chain = 0, Chain()
        if size == state.size:
            return []
        scan = scan_appended(state.fd, state.size, size, state.chain.last)
        state.chain.advance(scan.last_hash, scan.activated)
        state.size = size
        if scan.tail is None:
            return scan.torn
        os.write(state.fd, b"\n")
        state.size += 1
        if scan.tail_record is not None and not scan.torn:
            # Cut just before its newline: the record itself is whole.
            state.chain.last = _record.hash_of(scan.tail_record)
            return []
        return [*scan.torn, scan.tail]

    def _rotate(self, state: FileState) -> tuple[FileState, dict[str, Any]]:
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
        fresh = FileState(fd, state.pid, file_identity(os.fstat(fd)))
        fresh.chain.last = state.chain.last
        self._file = fresh
        try:
            if self.fsync != "never":
                sync_file(state.fd)
                sync_dir(path.parent)
        finally:
            unlock(state.fd)
            os.close(state.fd)
        return fresh, _record.log_rotated_record(archived.name, sequence)

    def _append(self, state: FileState, sealed: tuple[bytes, str, set[str]], count: int) -> None:
        """Write ``count`` sealed records in one go; the chain and the size move on only once
        all of it is written (a failed write leaves a torn tail for the next writer to
        recover)."""
        data, last, activated = sealed
        view = memoryview(data)
        while view:
            view = view[os.write(state.fd, view) :]
        state.size += len(data)
        state.chain.advance(last, activated)
        state.unsynced += count
        if self.fsync == "always" or (
            self.fsync == "batch"
            and (
                state.unsynced >= BATCH_RECORDS
                or time.monotonic() - state.synced_at >= BATCH_SECONDS
            )
        ):
            state.sync_due = True  # synced once the lock is let go (_write_file)
            state.unsynced = 0
            state.synced_at = time.monotonic()

    # --- chaining ------------------------------------------------------------------------------

    def _with_activation(self, chain: Chain, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``batch`` with a ``policy_activated`` record before the first decision (or pass)
        under each policy this file has not activated yet."""
        out: list[dict[str, Any]] = []
        activated: set[str] = set()
        for record in batch:
            if _record.kind_of(record) in (_record.DECISION, _record.PRUNING_PASS):
                # The policy that decided, and a shadow policy beside it: both reconstructible.
                needed = [_record.policy_digest_of(record), _record.shadow_digest_of(record)]
                for digest in dict.fromkeys(needed):
                    if not digest or digest in chain.activated or digest in activated:
                        continue
                    activation = self._policies.get(digest)
                    if activation is None:
                        msg = f"policy {digest} was not added to {self!r} (AuditLog.add_policy)"
                        raise AuditError(msg)
                    out.append(_record.restamped(activation))
                    activated.add(digest)
            out.append(record)
        return out

    def _seal(self, chain: Chain, records: list[dict[str, Any]]) -> tuple[bytes, str, set[str]]:
        """The lines for ``records`` after the chain's last hash, the new last hash, and the
        digests they activate."""
        lines: list[bytes] = []
        last, activated = chain.last, set()
        for record in records:
            line, last = seal(record, last, self._hmac_key)
            lines.append(line)
            if _record.kind_of(record) == _record.POLICY_ACTIVATED:
                activated.add(_record.policy_digest_of(record))
        return b"".join(lines), last, activated

    def _error(self, exc: OSError) -> AuditError:
        reason = exc.strerror or type(exc).__name__
        return AuditError(f"cannot write audit log {self.name}: {reason}")


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
