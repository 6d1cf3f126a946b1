"""The memory tool's commands as changes of the memory directory, worked out before any is made.

A :class:`Change` says what every memory holds after the command (``after``), which memory each
renamed one came from (``renamed``) and the one disk operation that makes it (``apply``), so
that the edit can be judged as a transition first and written only if it is allowed. A command
the directory cannot take (a missing file, an ``old_str`` that is not there exactly once, a
file over the size limit) is a :class:`MemoryFileError`, never a change.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from prunewarden.integrations._memory_files import (
    MEMORY_ROOT,
    MemoryDirectory,
    MemoryFileError,
)

TOMBSTONES: Final = f"{MEMORY_ROOT}/tombstones/"
DEFAULT_KIND: Final = "memory"
TOMBSTONE_KIND: Final = "tombstone"
_MAX_KIND_CHARS: Final = 64  # what a segment's kind holds (input.v1)


@dataclass(frozen=True, slots=True)
class Change:
    """A command's effect: every memory after it, renames (new path -> old) and the disk write."""

    after: dict[str, str]
    apply: Callable[[], None]
    result: str
    renamed: dict[str, str] = field(default_factory=dict)


def front_matter(text: str) -> dict[str, Any]:
    """The YAML mapping between a leading ``---`` line and the next one; empty when there is
    none or it is not a mapping (a memory's front matter is optional)."""
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    try:
        value = yaml.safe_load(text[4:end])
    except yaml.YAMLError:
        return {}
    return value if isinstance(value, dict) else {}


def recorded_paths(text: str) -> list[str] | None:
    """A tombstone's ``tombstone_for``: the memory paths it records, or None when it names none
    in the form expected (a list of paths under ``/memories``, or one path)."""
    value = front_matter(text).get("tombstone_for")
    paths = [value] if isinstance(value, str) else value
    if not isinstance(paths, list) or not paths:
        return None
    if not all(isinstance(p, str) and p.startswith(MEMORY_ROOT + "/") for p in paths):
        return None
    return [p.rstrip("/") for p in paths]


def kind_of(path: str, text: str, kinds: Mapping[str, str]) -> str:
    """A memory's kind: ``tombstone`` under ``/memories/tombstones/`` and nowhere else; else the
    first pattern of ``kinds`` matching its path (the operator's word, which the model cannot
    change); else its front matter's ``kind``; else ``memory``. A front matter claiming
    ``kind: tombstone`` elsewhere is the model's word: such a memory is judged as what it is (a
    tombstone segment is no summary, so a rewrite claiming to be one would skip the fidelity
    check)."""
    if path.startswith(TOMBSTONES):
        return TOMBSTONE_KIND
    for pattern, kind in kinds.items():
        if fnmatch.fnmatchcase(path, pattern):
            return kind
    declared = front_matter(text).get("kind")
    if (
        isinstance(declared, str)
        and 0 < len(declared) <= _MAX_KIND_CHARS
        and declared != TOMBSTONE_KIND
    ):
        return declared
    return DEFAULT_KIND


def check_kinds(kinds: Mapping[str, str]) -> None:
    """Refuse (``ValueError``) a ``kinds`` pattern whose kind is ``tombstone``: a tombstone is a
    file under ``/memories/tombstones/``, nothing else."""
    named = sorted(pattern for pattern, kind in kinds.items() if kind == TOMBSTONE_KIND)
    if named:
        message = (
            f"kinds {named}: {TOMBSTONE_KIND!r} is not a kind to give; the tombstones are the "
            f"files under {TOMBSTONES}"
        )
        raise ValueError(message)


def tombstone_example(paths: list[str]) -> str:
    """The file a model writes to record ``paths`` before removing or rewriting them."""
    names = ", ".join(paths)
    return f"---\ntombstone_for: [{names}]\n---\nWhat the memory held, and why it goes.\n"


def plan_create(directory: MemoryDirectory, files: dict[str, str], path: str, text: str) -> Change:
    memory_path, place = directory.locate(path)
    if memory_path == MEMORY_ROOT or any(p.startswith(memory_path + "/") for p in files):
        raise MemoryFileError(memory_path, "is a directory; create writes a file")
    _refuse_inside_a_file(files, memory_path)
    directory.check_size(memory_path, len(text.encode("utf-8")))
    if memory_path.startswith(TOMBSTONES) and recorded_paths(text) is None:
        example = tombstone_example(["/memories/<path>"])
        message = (
            f"is a tombstone without a tombstone_for list of memory paths; begin it with\n{example}"
        )
        raise MemoryFileError(memory_path, message)
    verb = "overwritten" if memory_path in files else "created"
    return Change(
        {**files, memory_path: text},
        lambda: directory.write(place, text),
        f"File {verb} successfully at: {memory_path}",
    )


def plan_str_replace(
    directory: MemoryDirectory, files: dict[str, str], path: str, old: str, new: str
) -> Change:
    memory_path, place = _existing_file(directory, files, path)
    content = files[memory_path]
    count = content.count(old) if old else 0
    if count != 1:
        found = "did not appear verbatim" if count == 0 else f"appears {count} times"
        message = f"no replacement was made: old_str {old!r} {found}; it must occur exactly once"
        raise MemoryFileError(memory_path, message)
    text = content.replace(old, new, 1)
    directory.check_size(memory_path, len(text.encode("utf-8")))
    return Change(
        {**files, memory_path: text},
        lambda: directory.write(place, text),
        f"The memory file {memory_path} has been edited.",
    )


def plan_insert(
    directory: MemoryDirectory, files: dict[str, str], path: str, line: int, inserted: str
) -> Change:
    memory_path, place = _existing_file(directory, files, path)
    lines = files[memory_path].split("\n")
    if lines[-1] == "":
        lines.pop()  # the empty tail a final newline leaves is no line
    if not 0 <= line <= len(lines):
        message = f"insert_line {line} is outside [0, {len(lines)}]"
        raise MemoryFileError(memory_path, message)
    lines.insert(line, inserted.rstrip("\n"))
    text = "\n".join(lines) + "\n"
    directory.check_size(memory_path, len(text.encode("utf-8")))
    return Change(
        {**files, memory_path: text},
        lambda: directory.write(place, text),
        f"The file {memory_path} has been edited.",
    )


def plan_delete(directory: MemoryDirectory, files: dict[str, str], path: str) -> Change:
    memory_path, place = directory.locate(path)
    if memory_path == MEMORY_ROOT:
        raise MemoryFileError(memory_path, "is the memory directory itself; it is not deleted")
    if not place.exists():
        raise MemoryFileError(memory_path, "does not exist")
    after = {p: t for p, t in files.items() if p != memory_path and not _under(p, memory_path)}
    return Change(after, lambda: directory.remove(place), f"Successfully deleted {memory_path}")


def plan_rename(directory: MemoryDirectory, files: dict[str, str], old: str, new: str) -> Change:
    old_path, old_place = directory.locate(old)
    new_path, new_place = directory.locate(new)
    if old_path == MEMORY_ROOT:
        raise MemoryFileError(old_path, "is the memory directory itself; it is not renamed")
    if not old_place.exists():
        raise MemoryFileError(old_path, "does not exist")
    if new_place.exists() or new_path == MEMORY_ROOT:
        raise MemoryFileError(new_path, "exists; rename does not replace")
    if _under(new_path, old_path):
        raise MemoryFileError(new_path, f"is inside {old_path}; a folder is not moved into itself")
    _refuse_inside_a_file(files, new_path)
    renamed = {
        new_path + p[len(old_path) :]: p for p in files if p == old_path or _under(p, old_path)
    }
    after = {p: t for p, t in files.items() if p not in renamed.values()}
    after.update((p, files[origin]) for p, origin in renamed.items())
    for memory_path, text in after.items():
        tombstone = memory_path in renamed and memory_path.startswith(TOMBSTONES)
        if tombstone and recorded_paths(text) is None:
            raise MemoryFileError(memory_path, "would be a tombstone without tombstone_for")
    return Change(
        dict(sorted(after.items())),
        lambda: directory.move(old_place, new_place),
        f"Successfully renamed {old_path} to {new_path}",
        renamed,
    )


def _existing_file(
    directory: MemoryDirectory, files: dict[str, str], path: str
) -> tuple[str, Path]:
    memory_path, place = directory.locate(path)
    if memory_path not in files:
        reason = "is not a file" if place.exists() else "does not exist"
        raise MemoryFileError(memory_path, reason)
    return memory_path, place


def _refuse_inside_a_file(files: dict[str, str], memory_path: str) -> None:
    """A path below a memory file cannot be written: refuse it before it is judged."""
    parts = memory_path.split("/")
    for end in range(3, len(parts)):  # "", "memories", then each folder on the way
        folder = "/".join(parts[:end])
        if folder in files:
            raise MemoryFileError(memory_path, f"is inside {folder}, which is a file")


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder + "/")
