"""Shipping a local audit log to other destinations, without blocking a decision and without
losing the chain.

Decisions are written to the local file as always (:class:`~prunewarden.audit.AuditLog`); a
:class:`LogShipper` reads that file from a cursor kept next to it, in one thread per
destination, and sends batches. A batch is acknowledged, then the cursor moves: a shipper killed
at any time ships again, at its next start, what was not acknowledged, and the receiver drops
the records it already has (each record's hash is its id). So delivery is at least once.

A destination that is down, slow or refusing never holds a decision back: the records wait in
the file. The buffer of records read and not yet acknowledged is bounded (records and bytes);
when it is full and the file holds more, the shipper passes over those, counting them, and
once the buffer has room again writes a ``records_dropped`` record into the local chain,
naming how many were not shipped, the first and the last (``AuditLog.write_at_tail``, so that
nothing comes between the range and it). That record is shipped after the buffered ones: the
receiver's chain goes on across the range it names, still verifies, and shows where it is blind.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Self

from prunewarden.audit import AuditLog
from prunewarden.audit._file_state import Tail
from prunewarden.audit._record import records_dropped_record
from prunewarden.decision import utc_now
from prunewarden.errors import AuditError
from prunewarden.shipping._cursor import cursor_path, load_cursor, save_cursor
from prunewarden.shipping._destinations import open_sink
from prunewarden.shipping._reading import ChainReader, PositionLost, Shipped, Skipped, start_of
from prunewarden.shipping._sinks import ShipError, Sink

DEFAULT_BUFFER_RECORDS = 50_000
DEFAULT_BUFFER_BYTES = 32 * 1024 * 1024
BATCH_RECORDS = 500
BATCH_BYTES = 1024 * 1024
POLL_SECONDS = 0.2  # how often an idle shipper looks for new records
RETRY_SECONDS = 0.5  # the first wait after a failed batch; doubled each time up to the cap
RETRY_MAX_SECONDS = 30.0

_diagnostics = logging.getLogger("prunewarden.shipping")


@dataclass(frozen=True, slots=True)
class SinkStatus:
    """How shipping to one destination stands: records acknowledged and dropped since start,
    what is buffered, the last acknowledged record, and the last failure (``failing``: how
    many batches in a row failed; 0 when the last one was acknowledged)."""

    destination: str
    replica: str
    shipped: int
    dropped: int
    buffered_records: int
    buffered_bytes: int
    last_shipped_hash: str | None
    last_shipped_at: str | None
    failing: int
    last_error: str | None
    last_error_at: str | None

    @property
    def healthy(self) -> bool:
        return self.failing == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "destination": self.destination,
            "replica": self.replica,
            "healthy": self.healthy,
            "shipped": self.shipped,
            "dropped": self.dropped,
            "buffered_records": self.buffered_records,
            "buffered_bytes": self.buffered_bytes,
            "last_shipped_hash": self.last_shipped_hash,
            "last_shipped_at": self.last_shipped_at,
            "failing": self.failing,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
        }


class LogShipper:
    """Ships the file of ``audit`` to each destination (a URL, or a :class:`Sink`) as
    ``replica`` (default: the host name), in background threads started by :meth:`start`.

    A destination shipped to for the first time gets the log from the start of its current
    file (archived ones are not sent). Raises :class:`AuditError` when the file cannot be
    opened, :class:`OSError` when the cursor cannot be kept beside it.

    ``buffer_records`` and ``buffer_bytes`` bound what is read and not yet acknowledged, per
    destination; past them records are dropped, and a ``records_dropped`` record says so in
    the chain. ``retry_seconds`` and ``retry_max_seconds``: the backoff after a failed batch
    (exponential, with full jitter). Raises :class:`ShipError` for a URL that names no sink.
    """

    def __init__(  # noqa: PLR0913 - each setting is independent and keyword-only
        self,
        audit: AuditLog,
        destinations: Iterable[str | Sink],
        *,
        replica: str | None = None,
        buffer_records: int = DEFAULT_BUFFER_RECORDS,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        retry_seconds: float = RETRY_SECONDS,
        retry_max_seconds: float = RETRY_MAX_SECONDS,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        if audit.path is None:
            raise ShipError("only an audit log file can be shipped", retry=False)
        if buffer_records < 1 or buffer_bytes < 1:
            raise ShipError("the shipping buffer must hold at least one record", retry=False)
        self.replica = replica or socket.gethostname()
        settings = _Settings(
            buffer_records, buffer_bytes, retry_seconds, retry_max_seconds, poll_seconds
        )
        sinks = [open_sink(d) if isinstance(d, str) else d for d in destinations]
        self._workers = [_Worker(audit, sink, self.replica, settings) for sink in sinks]
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        for worker in self._workers:
            thread = threading.Thread(
                target=worker.run, name=f"prunewarden-ship {worker.sink.name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def status(self) -> list[SinkStatus]:
        return [worker.status() for worker in self._workers]

    def wait_caught_up(self, timeout: float) -> bool:
        """Wait until every destination has acknowledged everything in the file when called
        (or dropped it); whether it did within ``timeout`` seconds."""
        return all(worker.wait_caught_up(timeout) for worker in self._workers)

    def close(self) -> None:
        """Stop shipping (what is not acknowledged is shipped at the next start)."""
        for worker in self._workers:
            worker.stop()
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        for worker in self._workers:
            worker.sink.close()


@dataclass(frozen=True, slots=True)
class _Settings:
    buffer_records: int
    buffer_bytes: int
    retry_seconds: float
    retry_max_seconds: float
    poll_seconds: float


@dataclass(slots=True)
class _Gap:
    """Records passed over while the buffer was full, after the record hashed ``after``."""

    after: str
    skipped: Skipped


class _Worker:
    """Ships to one destination: fill the buffer from the file, send a batch, move the cursor."""

    def __init__(self, audit: AuditLog, sink: Sink, replica: str, settings: _Settings) -> None:
        assert audit.path is not None  # noqa: S101 - checked by LogShipper
        self.audit = audit
        self.sink = sink
        self.replica = replica
        self.settings = settings
        self.cursor = cursor_path(audit.path, sink.name, replica)
        position = load_cursor(self.cursor)
        if position is None:
            # A new destination gets the log from the start of the file current now (not the
            # archived ones: a history it may not want), kept at once so that a restart
            # before the first batch starts there too.
            audit.open()
            position = start_of(audit.path)
            assert position is not None  # noqa: S101 - open() created it
            save_cursor(self.cursor, position, sink.name, replica)
        self.reader = ChainReader(audit.path, position)
        self.buffer: deque[Shipped] = deque()
        self.buffered_bytes = 0
        self.gap: _Gap | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._changed = threading.Condition(self._lock)
        self._passes = 0  # loops run; one that found nothing to ship is "caught up"
        self._caught_up = 0
        self.shipped = 0
        self.dropped = 0
        self.last_hash: str | None = None
        self.last_at: str | None = None
        self.failing = 0
        self.error: str | None = None
        self.error_at: str | None = None

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._passes += 1
                started = self._passes
            try:
                self._fill()
            except PositionLost as exc:
                # Its files were removed: go on from the start of the current one (the
                # receiver refuses the gap, which its status and this one show).
                self.reader.position, self.gap = start_of(self.reader.path), None
                self._failed(f"{exc}: shipping from the start of the current file")
            except (AuditError, OSError) as exc:
                self._failed(str(exc))
            if not self.buffer:
                with self._changed:
                    if self.gap is None:
                        self._caught_up = started
                        self._changed.notify_all()
                self._stop.wait(self.settings.poll_seconds)
                continue
            batch = self._batch()
            try:
                self.sink.send(self.replica, batch)
            except ShipError as exc:
                self._failed(str(exc))
                self._stop.wait(self._backoff())
                continue
            self._acknowledged(batch)

    def wait_caught_up(self, timeout: float) -> bool:
        with self._changed:
            target = self._passes + 1
            return self._changed.wait_for(lambda: self._caught_up >= target, timeout)

    def status(self) -> SinkStatus:
        with self._lock:
            return SinkStatus(
                self.sink.name,
                self.replica,
                self.shipped,
                self.dropped,
                len(self.buffer),
                self.buffered_bytes,
                self.last_hash,
                self.last_at,
                self.failing,
                self.error,
                self.error_at,
            )

    # --- the buffer ---------------------------------------------------------------------------

    def _fill(self) -> None:
        settings = self.settings
        room = settings.buffer_records - len(self.buffer)
        room_bytes = settings.buffer_bytes - self.buffered_bytes
        if self.gap is not None:
            if room <= 0 or room_bytes <= 0:
                self._skip()
                return
            self._close_gap(self.gap)
        records, more = self.reader.read(room, room_bytes, at_least_one=not self.buffer)
        with self._lock:
            self.buffer.extend(records)
            self.buffered_bytes += sum(record.size for record in records)
        if more and self.reader.position is not None:
            # The buffer is full: what follows is passed over until it has room again.
            self.gap = _Gap(self.reader.position.last_hash, Skipped())
            self._skip()

    def _skip(self) -> None:
        """Pass over what the file holds beyond the full buffer, counting it."""
        assert self.gap is not None  # noqa: S101 - only while a gap is open
        skipped = self.reader.skip()
        gap = self.gap.skipped
        if skipped.count:
            gap.count += skipped.count
            gap.first = gap.first or skipped.first
            gap.last = skipped.last

    def _close_gap(self, gap: _Gap) -> None:
        """Write the ``records_dropped`` record for the records passed over (and any written
        since, up to the tail), right after them."""
        reader = ChainReader(self.reader.path, self.reader.position)
        counted: list[Skipped] = []

        def build(tail: Tail) -> dict[str, Any] | None:
            counted.append(reader.skip((tail.identity, tail.size)))
            last = counted[0]
            count = gap.skipped.count + last.count
            first = gap.skipped.first or last.first
            if count == 0 or first is None:
                return None
            return records_dropped_record(self.sink.name, count, gap.after, first, tail.last_hash)

        record = self.audit.write_at_tail(build)
        self.reader.position = reader.position
        self.gap = None
        if record is not None:
            with self._lock:
                self.dropped += record["dropped"]["count"]
            _diagnostics.warning(
                "shipping to %s: %d records dropped (the buffer was full)",
                self.sink.name,
                record["dropped"]["count"],
            )

    def _batch(self) -> list[Shipped]:
        batch: list[Shipped] = []
        size = 0
        for record in self.buffer:
            if batch and (len(batch) >= BATCH_RECORDS or size + record.size > BATCH_BYTES):
                break
            batch.append(record)
            size += record.size
        return batch

    def _acknowledged(self, batch: Sequence[Shipped]) -> None:
        with self._lock:
            for _ in batch:
                self.buffer.popleft()
            self.buffered_bytes -= sum(record.size for record in batch)
            self.shipped += len(batch)
            self.last_hash = batch[-1].hash
            self.last_at = utc_now()
            self.failing = 0
        try:
            save_cursor(self.cursor, batch[-1].end, self.sink.name, self.replica)
        except OSError as exc:
            # Shipping goes on; a restart ships again from the last cursor kept.
            self._failed(f"cannot keep the shipping cursor {self.cursor}: {exc.strerror}")

    def _failed(self, message: str) -> None:
        with self._lock:
            if self.error != message:
                _diagnostics.warning("shipping to %s: %s", self.sink.name, message)
            self.failing += 1
            self.error = message
            self.error_at = utc_now()

    def _backoff(self) -> float:
        """Exponential backoff with full jitter: a fleet of replicas whose receiver comes back
        does not retry in step."""
        with self._lock:
            attempt = min(self.failing, 32)
        ceiling = min(self.settings.retry_max_seconds, self.settings.retry_seconds * 2**attempt)
        return random.uniform(0, ceiling)  # noqa: S311 - jitter, not a secret
