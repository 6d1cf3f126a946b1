"""Trace lines of type transition: replayed through Session.verify, checked like any event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prunewarden import Engine
from prunewarden.decision import Decision
from prunewarden.replay._events import TraceEvent, TraceHeader
from prunewarden.replay._run import Result, SilentLogger, run_trace

BEFORE = [
    {"id": "task", "kind": "turn", "text": "Port the exporter to UTC."},
    {"id": "t1", "kind": "turn", "text": "read export.py"},
    {"id": "t2", "kind": "turn", "text": "it writes local time"},
]


def _trace(path: Path, *events: dict[str, Any]) -> Path:
    header = {"type": "session", "trace_version": 1, "session_id": "agent-9"}
    lines = [json.dumps(line) for line in (header, *events)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _replayed(trace: Path) -> tuple[list[tuple[TraceEvent, Result]], Any]:
    found: list[tuple[TraceEvent, Result]] = []

    def keep(header: TraceHeader, event: TraceEvent, results: list[Result]) -> None:
        del header
        found.append((event, results[0]))

    run = run_trace([Engine.default(logger=SilentLogger())], str(trace), keep)
    return found, run


class TestTransitionEvents:
    def test_a_transition_line_is_decided_with_the_sessions_history(self, tmp_path: Path) -> None:
        """The canary the session observed is pinned in the transition that follows."""
        trace = _trace(
            tmp_path / "t.jsonl",
            {"type": "cycle", "scores": {"task": 0.9, "t1": 0.4, "t2": 0.3}, "pinned": ["task"]},
            {"type": "transition", "before": BEFORE, "after": BEFORE[1:], "tombstones": ["t9"]},
            {"type": "transition", "before": BEFORE, "after": BEFORE, "applied_by": "noop"},
        )
        found, run = _replayed(trace)
        assert (run.problems, run.failure) == ((), "")
        decided = [r for _, r in found if isinstance(r, Decision)]
        verdicts = [r.codes for r in decided if r.check == "transition"]
        assert verdicts == [("pinned_removed", "no_tombstone"), ("transition_clean",)]

    def test_a_malformed_transition_line_is_located_in_the_trace(self, tmp_path: Path) -> None:
        """A duplicate id on line 2 is reported at that line, with its path in the line."""
        trace = _trace(
            tmp_path / "bad.jsonl",
            {"type": "transition", "before": [BEFORE[0], BEFORE[0]], "after": []},
        )
        _, run = _replayed(trace)
        assert [(p.line, p.path) for p in run.problems] == [(2, "$.before[1].id")]
