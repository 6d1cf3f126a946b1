"""Traces a careless or hostile caller can name: regular files only, located errors for what
Python cannot carry, and lines over a size limit refused before the schema runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _support.blocking import call_guarded, make_fifo, run_bounded
from prunewarden._schemas import schema_problems
from prunewarden.errors import Problem
from prunewarden.limits import MAX_LABELS, MAX_SPANS
from prunewarden.replay import _trace as trace_module
from prunewarden.replay._events import TraceLine
from prunewarden.replay._trace import check_trace

HEADER = {"type": "session", "trace_version": 1, "session_id": "run-7"}


def write(path: Path, *lines: Any) -> Path:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


class TestTraceFiles:
    def test_a_device_is_refused_unread(self) -> None:
        """/dev/zero as a trace is refused at once instead of read forever (in a child with a
        timeout: reading it would never end)."""
        code = (
            "import sys; from prunewarden.replay._trace import check_trace; "
            "print([p.message for p in check_trace(sys.argv[1])])"
        )
        done = run_bounded(code, "/dev/zero")
        assert done.returncode == 0, done.stderr
        reason = "cannot read: a character device, not a regular file: only regular files are read"
        assert done.stdout == f"[{reason!r}]\n"

    def test_a_fifo_is_refused_without_blocking(self, tmp_path: Path) -> None:
        """A FIFO as a trace is refused instead of waiting for a writer."""
        fifo = make_fifo(tmp_path / "trace.jsonl")
        problems = call_guarded(lambda: check_trace(fifo), fifo)
        assert [p.message for p in problems] == [
            "cannot read: a FIFO, not a regular file: only regular files are read"
        ]


class TestLocatedLineErrors:
    def test_an_integer_too_long_to_read_is_located(self, tmp_path: Path) -> None:
        """A trace line with an integer of more than 4300 digits is a located problem."""
        path = write(tmp_path / "t.jsonl", HEADER, '{"type": "turn", "turn": ' + "7" * 5000 + "}")
        (problem,) = check_trace(path)
        assert (problem.line, problem.column, problem.path) == (2, 26, "$.turn")
        assert problem.message == "an integer of more than 4300 digits"

    def test_a_lone_surrogate_is_located(self, tmp_path: Path) -> None:
        """A lone surrogate in a trace line is a located problem."""
        line = '{"type": "cycle", "scores": {"t\\ud800": 0.5}}'
        path = write(tmp_path / "t.jsonl", HEADER, line)
        (problem,) = check_trace(path)
        assert (problem.line, problem.path) == (2, "$.scores")
        assert "lone surrogate" in problem.message


class TestSizesBeforeTheSchema:
    @pytest.fixture
    def no_schema(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The schema may check small lines (a valid header), never an oversized one."""
        real = schema_problems

        def refuse(name: str, line: TraceLine) -> list[Problem]:
            if len(line.text) > 1000:
                msg = "the schema ran on an oversized line"
                raise AssertionError(msg)
            return real(name, line)

        monkeypatch.setattr(trace_module, "schema_problems", refuse)

    @pytest.mark.usefixtures("no_schema")
    def test_an_oversized_list_is_refused_before_the_schema(self, tmp_path: Path) -> None:
        """A line over a count limit is refused by its count, as an input document is."""
        spans = [{"id": f"s{i}", "score": 0.5} for i in range(MAX_SPANS + 1)]
        event = {"type": "prune", "spans": spans, "keep_top_k": 1}
        path = write(tmp_path / "t.jsonl", HEADER, event)
        (problem,) = check_trace(path)
        assert (problem.line, problem.path) == (2, "$.spans")
        assert problem.message == f"{MAX_SPANS + 1} items, more than the limit of {MAX_SPANS}"

    @pytest.mark.usefixtures("no_schema")
    def test_oversized_header_labels_are_refused_before_the_schema(self, tmp_path: Path) -> None:
        """A header with more labels than the limit is refused by its count."""
        labels = {f"label-{i:03d}": "v" * 20 for i in range(MAX_LABELS + 1)}
        path = write(tmp_path / "t.jsonl", {**HEADER, "labels": labels})
        (problem,) = check_trace(path)
        assert (problem.line, problem.path) == (1, "$.labels")
        assert problem.message.endswith(f"more than the limit of {MAX_LABELS}")
