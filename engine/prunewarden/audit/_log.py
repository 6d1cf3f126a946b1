"""Where audit records go: a chained, locked, rotating JSON-lines file, or a stream.

Many threads and processes may append to one file. Each append takes an OS lock on the file
(``fcntl.flock``), reads what other writers appended since (to learn the last hash and which
policies this file has activated), and writes its records with one ``write`` call before it lets go,
so records never interleave and the chain stays whole. Rotation happens under the same lock: a
fresh file, already locked, gets a ``log_rotated`` header chained to the last record of the file
it continues; the file is hard-linked to ``NAME.000001`` (the next free number) and the fresh one
renamed over ``NAME``. A FIFO or a character device is a stream instead (``_pipe``).

A writer killed mid-write, or refused by a full disk mid-record, leaves a line that is not a
record. The next write ends that line and writes a ``write_recovered`` record naming its length
and hash, then goes on: the chain runs from the last whole record across the gap, and ``verify``
reports the loss. A writer never builds on bytes it has not terminated: what it knows of the
file (its size, the chain's last hash) moves on only once the bytes it wrote are whole records
ended by their newline, so after a failed write it learns the tail again as a fresh process
would (``_tail``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any, Literal, Self

from prunewarden.audit import _fields, _record
from prunewarden.audit._batch import Sealed, seal_batch, with_activation
from prunewarden.audit._chain import key_from_env
from prunewarden.audit._file_state import Chain, FileState, Tail, file_identity
from prunewarden.audit._locking import ForkSafeLock, lock_exclusive, require_file_locks, unlock
from prunewarden.audit._pipe import PipeWriter, is_stream_device
from prunewarden.audit._redaction import masks_setting
from prunewarden.audit._rotation import (
    next_sequence,
    replace_with_new_file,
    sync_dir,
    sync_file,
    write_all,
)
from prunewarden.audit._tail import learn_appended, probe_space, refuse_other_key, refuse_retired
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
        self._hmac_key_env = hmac_key_env
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
        self._lock = ForkSafeLock()
        self._policies: dict[str, dict[str, Any]] = {}
        self._file: FileState | None = None
        self._chain = Chain()
        # Why the last write failed (None: it did not); cleared by the next write that succeeds.
        self._failure: str | None = None
        self.logger = _record.sink_logger(self)

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

    @property
    def failure(self) -> str | None:
        """Why the last write failed, until a write succeeds again (None: it did not fail)."""
        return self._failure

    def open(self) -> None:
        """Open (creating it) and lock-check the file, or open the FIFO, now instead of at the
        first record. A file's tail is learned as the next write would: the remains of an
        interrupted write are ended and accounted for (``write_recovered``), and a keyed sink
        checks its key against the last keyed record. After a failed write with nothing torn
        left to recover, a scratch write in the file's directory tells whether the disk takes
        writes again.

        Raises :class:`AuditError` when it cannot be written (or, keyed, when the file's records
        are sealed with another key).
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
                state = self._acquire()
                try:
                    wrote = self._recover(state)
                finally:
                    unlock(state.fd)
                if state.sync_due:
                    state.sync_due = False
                    sync_file(state.fd)
                if self._failure is not None and not wrote:
                    probe_space(self.path.parent)
            except OSError as exc:
                raise self._failed(self._error(exc)) from None
            except AuditError as exc:
                raise self._failed(exc) from None
            self._failure = None

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
                raise self._failed(self._error(exc)) from None
            except ValueError as exc:  # a closed stream, a value JSON cannot hold
                msg = f"cannot write audit log {self.name}: {exc}"
                raise self._failed(AuditError(msg)) from None
            except AuditError as exc:
                raise self._failed(exc) from None
            self._failure = None

    def write_at_tail(
        self, build: Callable[[Tail], dict[str, Any] | None]
    ) -> dict[str, Any] | None:
        """Append the record ``build`` makes of the file's :class:`Tail`, seen under the
        writers' lock, so that no other record comes between what it describes and it (None:
        nothing is written). What a log shipper's ``records_dropped`` record needs: the range
        it names ends exactly before it. A file sink only; it does not rotate (the record is
        small, and a rotation header between the range and it would break that adjacency).

        Returns the record written. Raises :class:`AuditError` when it cannot be written.
        """
        if self.path is None or self._pipe is not None:
            msg = f"cannot write audit log {self.name} at its tail: not a file"
            raise AuditError(msg)
        with self._lock:
            try:
                record = self._append_at_tail(build)
            except OSError as exc:
                raise self._failed(self._error(exc)) from None
            except AuditError as exc:
                raise self._failed(exc) from None
            self._failure = None
            return record

    def _append_at_tail(
        self, build: Callable[[Tail], dict[str, Any] | None]
    ) -> dict[str, Any] | None:
        assert self.path is not None  # noqa: S101 - checked by write_at_tail
        state = self._acquire()
        try:
            self._recover(state)
            record = build(Tail(self.path, state.identity, state.size, state.chain.last))
            if record is not None:
                self._append(state, self._seal(state.chain, [record]), 1)
                if _fields.kind_of(record) == _record.RECORDS_DROPPED:
                    # A receiver that missed the range missed the activations in it too: the
                    # policies are activated again after it, as at the top of a file.
                    state.chain.activated = set()
        finally:
            unlock(state.fd)
        if state.sync_due:
            state.sync_due = False
            sync_file(state.fd)
        return record

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
            self._recover(state)
            records = self._with_activation(state.chain, batch)
            sealed = self._seal(state.chain, records)
            full = self.max_bytes is not None and state.size + len(sealed[0]) > self.max_bytes
            if full and state.size > 0:
                # Sealed again only here: the new file starts its own activations.
                state = self._rotate(state)
                records = self._with_activation(state.chain, batch)
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

    def _recover(self, state: FileState) -> bool:
        """Learn what was appended since the last bytes this writer terminated; end a torn last
        line and account for torn lines with a ``write_recovered`` record. Whether it wrote.

        The state moves past those bytes only once the ending newline and the record are
        written: a write refused halfway leaves it where it was, and the next one learns the
        same tail again, now with the refused bytes in it.
        """
        size = os.fstat(state.fd).st_size
        if size < state.size:  # truncated under us: learn the file again
            state.size, state.chain = 0, Chain()
        if size == state.size:
            return False
        first = state.size == 0  # the file as found, not what another writer just appended
        recovery = learn_appended(state.fd, state.size, size, state.chain)
        refuse_other_key(state.fd, recovery, self.name, self._hmac_key, self._hmac_key_env)
        if first:
            refuse_retired(state.fd, recovery, self.name)
        data = b"\n" if recovery.unended else b""
        count = 0
        if recovery.torn:
            recovered = [_record.write_recovered_record(recovery.torn)]
            line, last, activated = self._seal(recovery.chain, recovered)
            data += line
            recovery.chain.advance(last, activated)
            count = 1
        if data:
            write_all(state.fd, data)
        state.size, state.chain = size + len(data), recovery.chain
        state.note_written(count, self.fsync, BATCH_RECORDS, BATCH_SECONDS)
        return bool(data)

    def _rotate(self, state: FileState) -> FileState:
        """Archive the current file as ``NAME.NNNNNN`` and go on in a new one, already locked
        and holding its ``log_rotated`` header; return its state."""
        assert self.path is not None  # noqa: S101 - only file sinks rotate
        path = self.path
        sequence = next_sequence(path)
        archived = path.with_name(f"{path.name}.{sequence:06d}")
        header = [_record.log_rotated_record(archived.name, sequence)]
        line, last, _ = self._seal(state.chain, header)
        fd = replace_with_new_file(path, archived, line)
        fresh = FileState(fd, state.pid, file_identity(os.fstat(fd)), size=len(line))
        fresh.chain.last = last
        fresh.note_written(1, self.fsync, BATCH_RECORDS, BATCH_SECONDS)
        self._file = fresh
        try:
            if self.fsync != "never":
                sync_file(state.fd)
                sync_dir(path.parent)
        finally:
            unlock(state.fd)
            os.close(state.fd)
        return fresh

    def _append(self, state: FileState, sealed: Sealed, count: int) -> None:
        """Write ``count`` sealed records in one go; the chain and the size move on only once
        all of it is written (a failed write leaves a torn tail for the next writer to
        recover)."""
        data, last, activated = sealed
        write_all(state.fd, data)
        state.size += len(data)
        state.chain.advance(last, activated)
        state.note_written(count, self.fsync, BATCH_RECORDS, BATCH_SECONDS)

    # --- chaining ------------------------------------------------------------------------------

    def _with_activation(self, chain: Chain, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return with_activation(chain, batch, self._policies, repr(self))

    def _seal(self, chain: Chain, records: list[dict[str, Any]]) -> Sealed:
        return seal_batch(chain, records, self._hmac_key)

    def _failed(self, error: AuditError) -> AuditError:
        """Note that a write failed (what ``failure`` and ``open`` go by) and return ``error``."""
        self._failure = str(error)
        return error

    def _error(self, exc: OSError) -> AuditError:
        reason = exc.strerror or type(exc).__name__
        return AuditError(f"cannot write audit log {self.name}: {reason}")
