"""Anthropic's memory tool over a directory, each edit judged as a transition before it is made.

Needs ``prunewarden[anthropic]``. :class:`GuardedMemoryTool` is a ``BetaAbstractMemoryTool``
(the SDK's interface for a memory backend, run by its tool runner): ``view`` reads; ``create``,
``str_replace``, ``insert``, ``delete`` and ``rename`` are worked out first as the directory
before and after the command, one segment per memory (its path the id), and judged by the
engine's policy as a transition (``applied_by: anthropic.memory.<command>``). Only an allowed
edit touches disk, atomically; a refused one raises the SDK's ``ToolError`` with the text the
model reads: the reasons and what to do about them.

A memory is pinned when its kind is: the kind of a path pattern the caller gives
(``kinds={"/memories/core/*": "constraint"}``), else the front matter's ``kind:``. Removing a
pinned memory, renaming it or rewriting it (a rewrite becomes a new segment ``derived_from`` the
old one, so it is judged as a fold, and by a fidelity check where the policy has one) needs a
tombstone: a memory under ``/memories/tombstones/`` whose front matter ``tombstone_for`` lists
the paths it records, written before the edit and after the memory's last write. Every judged
edit is one audit record whose labels name the command, the path and the manifest digests of
the directory before and after (:func:`memory_manifest`, :func:`manifest_digest`);
:func:`locate_memory_state` finds a directory's manifest in a verified log: what the agent
remembered, and after which edit.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import AuditError
from prunewarden.integrations._memory_edits import (
    DEFAULT_KIND,
    TOMBSTONE_KIND,
    TOMBSTONES,
    Change,
    check_kinds,
    kind_of,
    plan_create,
    plan_delete,
    plan_insert,
    plan_rename,
    plan_str_replace,
    recorded_paths,
    tombstone_example,
)
from prunewarden.integrations._memory_files import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_FILES,
    MEMORY_ROOT,
    MemoryDirectory,
    MemoryFileError,
    file_digest,
    manifest_digest,
    manifest_of,
)
from prunewarden.integrations._memory_proof import (
    LABEL_AFTER,
    LABEL_BEFORE,
    LABEL_COMMAND,
    LABEL_PATH,
    MemoryEdit,
    MemoryState,
    locate_memory_state,
    memory_edits,
    memory_manifest,
)

APPLIED_BY: Final = "anthropic.memory"
# Reasons a tombstone answers: the ids they name are memories removed, renamed or rewritten.
_TOMBSTONE_FIXES = ("pinned_removed", "no_tombstone")


class GuardedMemoryTool(BetaAbstractMemoryTool):
    """The memory tool over ``directory`` (``/memories``), every edit judged by ``engine``."""

    def __init__(  # noqa: PLR0913 - every option has a default but the two that matter
        self,
        directory: str | os.PathLike[str],
        engine: Engine,
        *,
        kinds: Mapping[str, str] | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_files: int = DEFAULT_MAX_FILES,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        check_kinds(kinds or {})
        if engine.audit is None:
            msg = "a governed memory tool needs an engine with an audit log: it proves each edit"
            raise AuditError(msg)
        root = Path(directory)
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory = MemoryDirectory(root.resolve(), max_file_bytes, max_files)
        self.engine = engine
        self.kinds = dict(kinds or {})
        self.session_id = session_id
        self.labels = dict(labels or {})
        self.last_decision: Decision | None = None
        self._lock = threading.Lock()

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """A memory with line numbers (``view_range``: first and last line, -1 the end), or the
        files and folders under a path, two levels deep."""
        with self._lock, _as_tool_errors():
            memory_path, place = self.directory.locate(command.path)
            try:
                mode = os.lstat(place).st_mode
            except (FileNotFoundError, NotADirectoryError):
                raise MemoryFileError(memory_path, "does not exist") from None
            if stat.S_ISDIR(mode):
                return _listing(memory_path, self.directory.snapshot())
            lines = self.directory.read(memory_path, place).split("\n")
            first, last = 1, len(lines)
            if command.view_range and len(command.view_range) == 2:
                first = max(1, command.view_range[0])
                last = last if command.view_range[1] == -1 else command.view_range[1]
            numbered = [f"{n:6}\t{lines[n - 1]}" for n in range(first, min(last, len(lines)) + 1)]
            return f"Here's the content of {memory_path} with line numbers:\n" + "\n".join(numbered)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """Create a memory, or overwrite one (a rewrite, judged)."""
        return self._edit(
            "create",
            command.path,
            lambda files: plan_create(self.directory, files, command.path, command.file_text),
        )

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace the one occurrence of ``old_str`` in a memory (a rewrite, judged)."""
        return self._edit(
            "str_replace",
            command.path,
            lambda files: plan_str_replace(
                self.directory, files, command.path, command.old_str, command.new_str
            ),
        )

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert a line after line ``insert_line`` (0: first) of a memory (a rewrite, judged)."""
        return self._edit(
            "insert",
            command.path,
            lambda files: plan_insert(
                self.directory, files, command.path, command.insert_line, command.insert_text
            ),
        )

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Delete a memory or a folder of memories (removals, judged)."""
        return self._edit(
            "delete", command.path, lambda files: plan_delete(self.directory, files, command.path)
        )

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Move a memory or a folder (each file derived from its old path, judged)."""
        return self._edit(
            "rename",
            command.old_path,
            lambda files: plan_rename(self.directory, files, command.old_path, command.new_path),
        )

    def _edit(self, command: str, path: str, plan: Callable[[dict[str, str]], Change]) -> str:
        """Judge ``plan``'s change of the directory, then make it if allowed; every failure is a
        ``ToolError`` and leaves the directory as it was judged to be."""
        with self._lock, _as_tool_errors():
            files = self.directory.snapshot()
            change = plan(files)
            if len(change.after) > self.directory.max_files:
                message = (
                    f"would make more than {self.directory.max_files} files; the limit is max_files"
                )
                raise MemoryFileError(path, message)
            before = manifest_digest(manifest_of(files))
            after = manifest_digest(manifest_of(change.after))
            labels = {
                **self.labels,
                LABEL_COMMAND: command,
                LABEL_PATH: path[:256],
                LABEL_BEFORE: before,
                LABEL_AFTER: after,
            }
            decision = self.engine.evaluate(
                self._transition(command, files, change),
                session_id=self.session_id,
                labels=labels,
            )
            self.last_decision = decision
            if decision.blocks:
                raise ToolError(refusal_text(decision))
            change.apply()
            written = manifest_digest(manifest_of(self.directory.snapshot()))
            if written != after:
                message = f"changed outside the memory tool during the edit (now {written})"
                raise MemoryFileError(MEMORY_ROOT, message)
            return change.result

    def _transition(self, command: str, files: dict[str, str], change: Change) -> dict[str, Any]:
        pinned = self.engine.policy.spec.transition.pinned_kinds
        before = [self._segment(path, text) for path, text in files.items()]
        kinds = {segment["id"]: segment["kind"] for segment in before}
        after = []
        for path, text in change.after.items():
            segment = self._segment(path, text)
            origin = change.renamed.get(path)
            if origin is not None:
                segment["derived_from"] = [origin]
            elif path in files and files[path] != text and kinds[path] in pinned:
                # A pinned memory rewritten is a new segment derived from the old one: judged as
                # a fold (a tombstone must record it) and by any fidelity check of derivations,
                # always: a segment of kind tombstone derives nothing (it is no summary), so the
                # rewrite of a pinned tombstone (a policy pinning that kind) is judged as a memory.
                segment["id"] = f"{path}@{file_digest(text)[:12]}"
                segment["derived_from"] = [path]
                if segment["kind"] == TOMBSTONE_KIND:
                    segment["kind"] = DEFAULT_KIND
            after.append(segment)
        return {
            "check": "transition",
            "before": before,
            "after": after,
            "tombstones": self._recorded(files),
            "applied_by": f"{APPLIED_BY}.{command}",
        }

    def _recorded(self, files: dict[str, str]) -> list[str]:
        """The memories a tombstone on disk records: named in its ``tombstone_for`` (a folder
        names each memory in it) and not written since the tombstone was. A tombstone records
        what a memory held when it was written, so it does not stand for a later content."""
        recorded: set[str] = set()
        for path, text in files.items():
            named = recorded_paths(text) if path.startswith(TOMBSTONES) else None
            if not named:
                continue
            written = self.directory.written_at(path)
            recorded.update(
                memory
                for memory in files
                if any(memory == n or memory.startswith(n + "/") for n in named)
                and self.directory.written_at(memory) <= written
            )
        return sorted(recorded)

    def _segment(self, path: str, text: str) -> dict[str, Any]:
        return {"id": path, "kind": kind_of(path, text, self.kinds), "text": text}


class AsyncGuardedMemoryTool(BetaAsyncAbstractMemoryTool):
    """:class:`GuardedMemoryTool` for the SDK's async tool runner: each command is the same
    judged edit, run in a worker thread so that file writes, fsync and the audit log never
    block the event loop. ``tool`` is the synchronous tool it runs (its ``last_decision``)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        engine: Engine,
        **options: Any,
    ) -> None:
        super().__init__(cache_control=options.get("cache_control"))
        self.tool = GuardedMemoryTool(directory, engine, **options)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await asyncio.to_thread(self.tool.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await asyncio.to_thread(self.tool.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await asyncio.to_thread(self.tool.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await asyncio.to_thread(self.tool.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await asyncio.to_thread(self.tool.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await asyncio.to_thread(self.tool.rename, command)


def refusal_text(decision: Decision) -> str:
    """What the model reads when an edit is refused: the reasons, then how to make it allowed."""
    policy = decision.policy
    heading = (
        f"The memory edit was refused by policy {policy.name}@{policy.version} "
        f"(decision {decision.decision_id}); nothing was changed."
    )
    lines = [heading]
    lines += [f"- {reason.code}: {reason.message}" for reason in decision.reasons]
    paths = sorted(
        {
            str(i)
            for r in decision.reasons
            if r.code in _TOMBSTONE_FIXES
            for i in r.detail.get("ids", ())
        }
    )
    if paths:
        lines.append(
            f"To remove, rename or rewrite {', '.join(paths)}, first record it: create a file "
            f"under {TOMBSTONES} that begins\n{tombstone_example(paths)}then repeat the command."
        )
    codes = set(decision.codes)
    if "pruning_halted" in codes:
        lines.append(
            "Pruning is halted for this session: no memory may be removed or renamed until it "
            "resumes; new memories and edits of unpinned ones still pass."
        )
    if codes & {"internal_error", "audit_unavailable"}:
        lines.append("The edit could not be judged or recorded; try again later.")
    return "\n".join(lines)


def _listing(memory_path: str, files: dict[str, str]) -> str:
    entries: dict[str, int | None] = {}
    for path, text in files.items():
        if not path.startswith(memory_path + "/"):
            continue
        parts = path[len(memory_path) + 1 :].split("/")
        for depth in range(1, min(len(parts), 2) + 1):
            name = "/".join(parts[:depth])
            if depth < len(parts):
                entries.setdefault(name + "/", None)
            else:
                entries[name] = len(text.encode("utf-8"))
    lines = [
        f"{'-' if size is None else f'{size}B'}\t{memory_path}/{name}"
        for name, size in sorted(entries.items())
    ]
    header = f"Here're the files and directories up to 2 levels deep in {memory_path}:"
    return "\n".join([header, f"-\t{memory_path}", *lines])


@contextmanager
def _as_tool_errors() -> Iterator[None]:
    """Every failure as the ``ToolError`` the model reads: a refused path or file by its reason,
    anything unexpected as a failed command (fail closed, never a traceback)."""
    try:
        yield
    except ToolError:
        raise
    except MemoryFileError as error:
        raise ToolError(f"{error.path} {error.reason}") from error
    except Exception as error:
        name = type(error).__name__
        message = f"The memory command failed ({name}: {error}); view the path before repeating it."
        raise ToolError(message) from error


__all__ = [
    "APPLIED_BY",
    "DEFAULT_MAX_FILE_BYTES",
    "LABEL_AFTER",
    "LABEL_BEFORE",
    "LABEL_COMMAND",
    "LABEL_PATH",
    "MEMORY_ROOT",
    "TOMBSTONES",
    "AsyncGuardedMemoryTool",
    "GuardedMemoryTool",
    "MemoryEdit",
    "MemoryFileError",
    "MemoryState",
    "locate_memory_state",
    "manifest_digest",
    "memory_edits",
    "memory_manifest",
    "refusal_text",
]
