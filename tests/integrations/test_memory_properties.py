"""Properties of the governed memory tool over random command sequences (Hypothesis).

Whatever the model asks, in any order: each call answers text or a ``ToolError``, nothing is
written outside the directory, the log's manifests chain from edit to edit and end at what the
directory holds, and a pinned memory never changes or goes unless a tombstone on disk named it
before the edit. ``PRUNEWARDEN_FUZZ_SCALE`` multiplies the examples (``make fuzz``).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path
from typing import Any

from anthropic.lib.tools import ToolError
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden import Engine
from prunewarden.audit import AuditLog
from prunewarden.integrations._memory_edits import recorded_paths
from prunewarden.integrations.memory import (
    GuardedMemoryTool,
    manifest_digest,
    memory_edits,
    memory_manifest,
)

SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))
PINNED = "/memories/core/a.md"
PATHS = [PINNED, "/memories/b.md", "/memories/dir/c.md", "/memories/core", "/memories/dir"]
TOMBSTONE = "/memories/tombstones/t.md"
TEXTS = st.text(alphabet="ab\n", max_size=6)


def _tombstone_text(named: list[str]) -> str:
    return f"---\ntombstone_for: [{', '.join(named)}]\n---\nrecorded\n"


COMMANDS = st.one_of(
    st.builds(
        lambda path, text: {"command": "create", "path": path, "file_text": text},
        st.sampled_from([*PATHS, "/memories/../x", "/memories/.h"]),
        TEXTS,
    ),
    st.builds(
        lambda named: {"command": "create", "path": TOMBSTONE, "file_text": _tombstone_text(named)},
        st.lists(st.sampled_from(PATHS), min_size=1, max_size=2, unique=True),
    ),
    st.builds(
        lambda path, old, new: {
            "command": "str_replace",
            "path": path,
            "old_str": old,
            "new_str": new,
        },
        st.sampled_from(PATHS),
        st.sampled_from(["a", "b", "ab"]),
        TEXTS,
    ),
    st.builds(
        lambda path, line: {
            "command": "insert",
            "path": path,
            "insert_line": line,
            "insert_text": "z",
        },
        st.sampled_from(PATHS),
        st.integers(0, 3),
    ),
    st.builds(
        lambda path: {"command": "delete", "path": path}, st.sampled_from([*PATHS, TOMBSTONE])
    ),
    st.builds(
        lambda old, new: {"command": "rename", "old_path": old, "new_path": new},
        st.sampled_from([*PATHS, TOMBSTONE]),
        st.sampled_from(PATHS),
    ),
)


def _tombstoned(root: Path) -> set[str]:
    """Every path a tombstone on disk names (folders expanded by prefix when checked)."""
    place = root / "tombstones" / "t.md"
    named = recorded_paths(place.read_text(encoding="utf-8")) if place.exists() else None
    return set(named or ())


def _named(path: str, tombstoned: set[str]) -> bool:
    return any(path == n or path.startswith(n + "/") for n in tombstoned)


class TestRandomSequences:
    @settings(max_examples=25 * SCALE, deadline=None)
    @given(commands=st.lists(COMMANDS, max_size=12))
    def test_the_log_and_the_pins_hold_whatever_the_model_asks(
        self, commands: list[dict[str, Any]]
    ) -> None:
        """Text or a ToolError each call; nothing outside the directory; the manifests chain
        and end at the directory; a pinned memory changes only under a tombstone."""
        with tempfile.TemporaryDirectory() as scratch:
            base = Path(scratch)
            engine = Engine(Engine.default().policy, audit=AuditLog(base / "audit.jsonl"))
            root = base / "memories"
            tool = GuardedMemoryTool(root, engine, kinds={"/memories/core/*": "constraint"})
            for command in commands:
                before = memory_manifest(root)
                tombstoned = _tombstoned(root)
                try:
                    assert isinstance(tool.call(command), str)
                except ToolError:
                    assert memory_manifest(root) == before  # a refused command changed nothing
                after = memory_manifest(root)
                if PINNED in before and after.get(PINNED) != before[PINNED]:
                    assert _named(PINNED, tombstoned)
            if engine.audit is not None:
                engine.audit.close()
            assert {p.name for p in base.iterdir()} <= {"audit.jsonl", "memories"}
            log = base / "audit.jsonl"
            edits = memory_edits([log]) if log.exists() else []
            for previous, edit in itertools.pairwise(edits):
                assert edit.manifest_before == previous.state
            final = manifest_digest(memory_manifest(root))
            assert (edits[-1].state if edits else manifest_digest({})) == final
