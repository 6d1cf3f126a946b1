"""A memory directory's history in the audit log: each judged edit's manifest digests, and a
directory snapshot found among them (what the agent remembered, and after which edit).

Needs no SDK: a log and a directory are all it reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from prunewarden.audit import RecordFilter, Skipped, query, verify_files
from prunewarden.errors import AuditError
from prunewarden.integrations._memory_files import MemoryDirectory, manifest_digest, manifest_of

LABEL_COMMAND: Final = "memory.command"
LABEL_PATH: Final = "memory.path"
LABEL_BEFORE: Final = "memory.manifest_before"
LABEL_AFTER: Final = "memory.manifest_after"


def memory_manifest(directory: str | os.PathLike[str]) -> dict[str, str]:
    """A memory directory's manifest: each memory path (``/memories/...``) -> SHA-256 of its
    bytes, sorted; read as the tool reads it (no links, bounded files)."""
    return manifest_of(MemoryDirectory(Path(directory).resolve()).snapshot())


@dataclass(frozen=True, slots=True)
class MemoryEdit:
    """One judged memory edit, from its audit record; ``state`` is the manifest digest the
    directory held after it (``manifest_after`` if it was made, else ``manifest_before``)."""

    index: int
    decision_id: str
    ts: str
    command: str
    path: str
    outcome: str
    made: bool
    manifest_before: str
    manifest_after: str

    @property
    def state(self) -> str:
        return self.manifest_after if self.made else self.manifest_before


@dataclass(frozen=True, slots=True)
class MemoryState:
    """Where a directory's manifest digest stands in a log: the edits after which the directory
    held exactly it (``after``), and whether it is the state before the first edit."""

    digest: str
    edits: tuple[MemoryEdit, ...]
    after: tuple[MemoryEdit, ...]
    initial: bool

    @property
    def found(self) -> bool:
        return bool(self.after) or self.initial


def memory_edits(paths: Iterable[str | os.PathLike[str]]) -> list[MemoryEdit]:
    """Every judged memory edit in ``paths``, in log order (a binding refusal was not made)."""
    edits: list[MemoryEdit] = []
    for _, row in query(paths, RecordFilter(check="transition"), Skipped()):
        labels = row.get("labels") or {}
        if LABEL_BEFORE not in labels or LABEL_AFTER not in labels:
            continue
        edits.append(
            MemoryEdit(
                len(edits),
                str(row.get("decision_id")),
                str(row.get("ts")),
                str(labels.get(LABEL_COMMAND)),
                str(labels.get(LABEL_PATH)),
                str(row.get("outcome")),
                not (row.get("outcome") == "deny" and row.get("enforced")),
                str(labels[LABEL_BEFORE]),
                str(labels[LABEL_AFTER]),
            )
        )
    return edits


def locate_memory_state(
    directory: str | os.PathLike[str],
    paths: Iterable[str | os.PathLike[str]],
    *,
    key: bytes | None = None,
) -> MemoryState:
    """Verify the log ``paths`` (its chain, and HMAC with ``key``) and find the manifest of
    ``directory`` (a snapshot of a memory directory) in it. Raises :class:`AuditError` when the
    log does not verify."""
    logs = [Path(p) for p in paths]
    verification = verify_files(logs, key=key)
    if verification.findings:
        first = verification.findings[0]
        msg = f"the log does not verify ({len(verification.findings)} finding(s)): {first}"
        raise AuditError(msg)
    digest = manifest_digest(memory_manifest(directory))
    edits = memory_edits(logs)
    return MemoryState(
        digest,
        tuple(edits),
        tuple(edit for edit in edits if edit.state == digest),
        bool(edits) and edits[0].manifest_before == digest,
    )
