"""``prunewarden audit collect``: what the receiver of shipped decision logs holds, whatever
carries the batches to it.

A batch of records from one replica goes into ``DIR/REPLICA.jsonl`` (:mod:`._receiving` checks
the chain) and is answered ``{"accepted", "duplicates", "dropped", "head"}`` once it is synced,
or refused (:class:`~prunewarden.shipping._receiving.BatchRefused`, its kind the problem the
sender gets). One replica's batches are taken in turn (a lock per replica) while other replicas'
go on.

Everything is read back from the files at start: each replica found in ``DIR`` has its head,
its count and its latest record hashes (the dedup window) before the first batch arrives, so a
collector started again drops what a shipper sends twice across its restart, and lists every
replica it holds. A server's status document (``serve --status-url``) is kept per replica in
``DIR/status/REPLICA.json``, replaced whole (written beside it, synced, renamed over it).

The HTTP side is :class:`prunewarden.server.CollectorServer` (the ``serve`` extra: the same
Starlette and uvicorn stack as ``prunewarden serve``, with its connection limits).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from prunewarden.audit._rotation import sync_dir
from prunewarden.decision import utc_now
from prunewarden.shipping._receiving import REPLICA_NAME, Accepted, ReplicaChain

STATUS_FOLDER = "status"  # DIR/status/REPLICA.json: each replica's last status document


class Collector:
    """Receives batches into ``directory`` (created if missing); ``token``: the bearer token a
    sender must present, as any replica (None: none); ``tokens``: tokens each bound to the one
    replica it may ship as (:func:`~prunewarden.shipping.read_collect_tokens`), instead of or
    beside ``token``; ``key``: the HMAC key to check keyed records with (None: their links are
    checked, their seals are left to ``audit verify`` with the key; with it, an unkeyed record
    is refused as a forgery); ``before_answer``: called with the replica's name once a batch is
    written and before it is acknowledged (tests hold a receiver there: a slow receiver, or a
    sender gone before its answer; the batch is read as it streams in, so a hold before it is
    read would race the sender's last bytes)."""

    def __init__(
        self,
        directory: Path,
        *,
        token: str | None = None,
        tokens: Mapping[str, str] | None = None,
        key: bytes | None = None,
        before_answer: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.tokens: Mapping[str, str] = dict(tokens or {})
        self.key = key
        self.before_answer = before_answer
        self._replicas: dict[str, ReplicaChain] = {}
        self._statuses: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._status_writes = threading.Lock()  # one document written at a time (they are small)
        for path in sorted(directory.glob("*.jsonl")):
            if REPLICA_NAME.fullmatch(path.stem):
                self.replica(path.stem)
        self._read_statuses()

    def replica(self, name: str) -> ReplicaChain:
        """The chain of replica ``name`` (read from its files the first time)."""
        with self._lock:
            chain = self._replicas.get(name)
            if chain is None:
                chain = self._replicas[name] = ReplicaChain(self.directory, name, self.key)
            return chain

    def chains(self) -> list[ReplicaChain]:
        """Every replica's chain, by name."""
        with self._lock:
            return [self._replicas[name] for name in sorted(self._replicas)]

    def accept(self, replica: str, body: bytes | Iterable[bytes]) -> Accepted:
        """Take the batch ``body`` of ``replica`` (:meth:`ReplicaChain.accept`), then call
        ``before_answer``. Raises :class:`BatchRefused` or :class:`OSError`."""
        accepted = self.replica(replica).accept(body)
        if self.before_answer is not None:
            self.before_answer(replica)
        return accepted

    def replicas(self) -> dict[str, Any]:
        """``GET /v1/replicas``: each replica's head and counts."""
        return {
            chain.name: {
                "head": chain.head,
                "records": chain.records,
                "dropped": chain.dropped,
                "duplicates": chain.duplicates,
            }
            for chain in self.chains()
        }

    # --- status documents ----------------------------------------------------------------------

    def keep_status(self, replica: str, instance: str, document: dict[str, Any]) -> dict[str, Any]:
        """Keep ``document`` (a server's ``/v1/status``, pushed by ``instance``) as replica
        ``replica``'s, on disk before it is answered; returns the entry ``GET /v1/fleet`` shows.
        Raises :class:`OSError` (the previous one is kept)."""
        entry = {"received_at": utc_now(), "instance": instance, "status": document}
        folder = self.directory / STATUS_FOLDER
        folder.mkdir(exist_ok=True)
        final = folder / f"{replica}.json"
        partial = folder / f".{replica}.json.partial"
        data = json.dumps(entry, sort_keys=True, ensure_ascii=False).encode("utf-8")
        with self._status_writes:
            try:
                with partial.open("wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                partial.replace(final)
            except OSError:
                with contextlib.suppress(OSError):
                    partial.unlink()
                raise
            sync_dir(folder)
            with self._lock:
                self._statuses[replica] = entry
        return entry

    def fleet(self) -> dict[str, Any]:
        """``GET /v1/fleet``: each replica's last status document, when it came and from where,
        and a summary (replicas reporting, how many are healthy)."""
        with self._lock:
            entries = {name: self._statuses[name] for name in sorted(self._statuses)}
        healthy = sum(1 for entry in entries.values() if entry["status"].get("healthy") is True)
        return {"replicas": entries, "reporting": len(entries), "healthy": healthy}

    def _read_statuses(self) -> None:
        """The documents kept before this start; one that cannot be read is left out (the next
        push replaces it)."""
        folder = self.directory / STATUS_FOLDER
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("*.json")):
            if not REPLICA_NAME.fullmatch(path.stem):
                continue
            try:
                entry = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("status"), dict):
                self._statuses[path.stem] = entry
