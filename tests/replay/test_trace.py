"""The trace reader: events in order, numbered; located problems; one line held at a time."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prunewarden import InputError
from prunewarden.errors import Problem
from prunewarden.inputs._model import ScoreRange
from prunewarden.limits import MAX_PROBLEMS
from prunewarden.replay._trace import TraceReader, check_trace

HEADER = {"type": "session", "trace_version": 1, "session_id": "run-7", "labels": {"team": "x"}}
SHA = "0" * 64


def write(path: Path, *lines: Any) -> Path:
    """A trace file: dicts are written as JSON, strings as they are."""
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


def cycle(**fields: Any) -> dict[str, Any]:
    return {"type": "cycle", "scores": {"task": 0.9, "t1": 0.2}, "pinned": ["task"], **fields}


def turn(**fields: Any) -> dict[str, Any]:
    return {"type": "turn", "mean_relevance": 0.5, "tokens": 900, **fields}


def problems_of(path: Path, **options: Any) -> list[str]:
    return [str(problem) for problem in check_trace(path, **options)]


class TestReading:
    def test_header_and_events_in_order(self, tmp_path: Path) -> None:
        """The header gives the session; events come numbered, with their line."""
        trace = write(tmp_path / "t.jsonl", HEADER, cycle(), turn(), cycle(), turn(turn=9))
        with TraceReader(trace) as reader:
            assert (reader.header.session_id, reader.header.labels) == ("run-7", {"team": "x"})
            events = list(reader)
        assert [(e.index, e.line, e.type) for e in events] == [
            (1, 2, "cycle"),
            (2, 3, "turn"),
            (3, 4, "cycle"),
            (4, 5, "turn"),
        ]

    def test_cycles_and_turns_default_to_the_next_number(self, tmp_path: Path) -> None:
        """An event without a number follows the last; other events carry the latest ones."""
        trace = write(
            tmp_path / "t.jsonl",
            HEADER,
            turn(),
            cycle(cycle=4),
            {"type": "eviction", "segment": {"id": "s", "kind": "turn"}, "score": 0.1},
            cycle(),
            turn(turn=7),
            turn(),
        )
        with TraceReader(trace) as reader:
            numbers = [(e.type, e.cycle, e.turn) for e in reader]
        assert numbers == [
            ("turn", None, 1),
            ("cycle", 4, 1),
            ("eviction", 4, 1),
            ("cycle", 5, 1),
            ("turn", 5, 7),
            ("turn", 5, 8),
        ]

    def test_blank_lines_are_skipped_but_counted(self, tmp_path: Path) -> None:
        """Line numbers are the file's, blank lines included."""
        trace = write(tmp_path / "t.jsonl", "", HEADER, "   ", cycle())
        with TraceReader(trace) as reader:
            assert reader.header.line == 2
            assert [e.line for e in reader] == [4]

    def test_arguments_leave_out_type_and_note(self, tmp_path: Path) -> None:
        """What the session call gets is the event's fields without type and note."""
        trace = write(tmp_path / "t.jsonl", HEADER, turn(note="turn 41"))
        with TraceReader(trace) as reader:
            (event,) = list(reader)
        assert event.arguments() == {"mean_relevance": 0.5, "tokens": 900}

    def test_a_binary_stream_is_read_too(self) -> None:
        """Any binary stream, named for its problems."""
        data = (json.dumps(HEADER) + "\n" + json.dumps(cycle()) + "\n").encode()
        with TraceReader(io.BytesIO(data), name="pipe") as reader:
            assert [e.type for e in reader] == ["cycle"]
            assert reader.name == "pipe"
            assert reader.size is None


BAD_LINES: list[tuple[str, list[Any], str]] = [
    ("empty", [], "t.jsonl:1:1: $: empty trace: the first line must be a session header"),
    (
        "no header",
        [cycle()],
        (
            "t.jsonl:1:10: $.type: the first line must be a session header "
            '({"type": "session", "trace_version": 1, "session_id": ...}), not type \'cycle\''
        ),
    ),
    (
        "future version",
        [{**HEADER, "trace_version": 2}],
        (
            "t.jsonl:1:38: $.trace_version: trace version 2 is not supported "
            "(this prunewarden reads version 1)"
        ),
    ),
    (
        "second header",
        [HEADER, HEADER],
        "t.jsonl:2:10: $.type: only the first line may be a session header",
    ),
    ("invalid JSON", [HEADER, '{"type": "cycle",'], "t.jsonl:2:18: $: invalid JSON: "),
    ("NaN", [HEADER, '{"type": "turn", "mean_relevance": NaN, "tokens": 1}'], "NaN is not"),
    (
        "duplicate key",
        [HEADER, '{"type": "turn", "type": "turn"}'],
        "t.jsonl:2:18: $.type: duplicate key 'type' (first defined at line 2)",
    ),
    ("not an object", [HEADER, "[1, 2]"], "t.jsonl:2:1: $: a trace line must be a JSON object"),
    ("unknown type", [HEADER, {"type": "rewrite"}], "t.jsonl:2:10: $.type: 'rewrite' is not one"),
    (
        "unknown field",
        [HEADER, turn(bogus=1)],
        (
            "t.jsonl:2:56: $.bogus: unknown field 'bogus' (expected one of: mean_relevance, "
            "note, tokens, turn, type)"
        ),
    ),
    (
        "missing field",
        [HEADER, {"type": "turn", "tokens": 3}],
        "t.jsonl:2:1: $: 'mean_relevance' is a required property",
    ),
    (
        "score out of range",
        [HEADER, cycle(scores={"task": 1.5})],
        "t.jsonl:2:38: $.scores.task: 1.5 is outside the policy's score range [0.0, 1.0]",
    ),
    (
        "cycle not increasing",
        [HEADER, cycle(cycle=3), cycle(cycle=3)],
        "t.jsonl:3:84: $.cycle: 3 does not follow cycle 3: cycles must increase",
    ),
    (
        "turn not increasing",
        [HEADER, turn(), turn(turn=1)],
        "t.jsonl:3:64: $.turn: 1 does not follow turn 1: turns must increase",
    ),
    (
        "both targets",
        [HEADER, {"type": "pass", "segments": [], "free_tokens": 1, "keep_top_k": 1}],
        "t.jsonl:2:66: $.keep_top_k: give one target: free_tokens or keep_top_k, not both",
    ),
    (
        "no target",
        [HEADER, {"type": "pass", "segments": []}],
        "t.jsonl:2:1: $: a pass needs a target: free_tokens or keep_top_k",
    ),
    (
        "duplicate span",
        [
            HEADER,
            {
                "type": "prune",
                "keep_top_k": 1,
                "spans": [
                    {"span_id": "a", "text": "", "score": 0.1, "text_sha256": ""},
                    {"span_id": "a", "text": "", "score": 0.1, "text_sha256": ""},
                ],
            },
        ],
        "$.spans[1].span_id: duplicate span id 'a' (first at spans[0])",
    ),
    (
        "pass segment",
        [
            HEADER,
            {
                "type": "pass",
                "free_tokens": 10,
                "segments": [
                    {"id": "a", "kind": "turn", "score": 0.1},
                    {"id": "a", "kind": "turn", "score": 0.2},
                ],
            },
        ],
        "t.jsonl:2:100: $.segments[1].id: duplicate segment id 'a' (first at segments[0])",
    ),
    (
        "eviction score",
        [HEADER, {"type": "eviction", "segment": {"id": "s", "kind": "turn"}, "score": -1}],
        "$.score: -1 is outside the policy's score range [0.0, 1.0]",
    ),
]


class TestProblems:
    @pytest.mark.parametrize(
        ("lines", "expected"), [case[1:] for case in BAD_LINES], ids=[c[0] for c in BAD_LINES]
    )
    def test_located_problem(self, tmp_path: Path, lines: list[Any], expected: str) -> None:
        """Each malformed line is reported as FILE:LINE:COL: JSON-PATH: message."""
        trace = write(tmp_path / "t.jsonl", *lines)
        found = problems_of(trace)
        assert found, "expected a problem"
        name = str(tmp_path / "t.jsonl")
        assert any(expected in problem.replace(name, "t.jsonl") for problem in found), found

    def test_every_problem_of_the_file_at_once(self, tmp_path: Path) -> None:
        """Reading goes on after a bad line; later bad lines are reported too, in order."""
        trace = write(
            tmp_path / "t.jsonl", HEADER, turn(bogus=1), cycle(), "{", cycle(scores={"a": 2})
        )
        lines = [problem.line for problem in check_trace(trace)]
        assert lines == [2, 4, 5]

    def test_at_most_the_limit(self, tmp_path: Path) -> None:
        """A file full of bad lines reports the first MAX_PROBLEMS problems, then a note; the
        lines after them are not read."""
        trace = write(tmp_path / "t.jsonl", HEADER, *(["{"] * (MAX_PROBLEMS + 50)))
        found = check_trace(trace)
        assert [p.line for p in found[:-1]] == list(range(2, MAX_PROBLEMS + 2))
        assert str(found[-1]) == (
            f"{trace}: $: more problems not shown: at most {MAX_PROBLEMS} are reported"
        )

    def test_the_policy_score_range_applies(self, tmp_path: Path) -> None:
        """Scores are checked against the range given, not only [0, 1]."""
        trace = write(tmp_path / "t.jsonl", HEADER, cycle(scores={"task": 7}))
        assert problems_of(trace, scores=ScoreRange(0, 10)) == []
        assert "[0, 5]" in problems_of(trace, scores=ScoreRange(0, 5))[0]

    def test_a_missing_file(self, tmp_path: Path) -> None:
        """A file that cannot be read is one problem naming it."""
        (problem,) = check_trace(tmp_path / "none.jsonl")
        assert problem.message == "cannot read: No such file or directory"

    def test_not_utf8(self, tmp_path: Path) -> None:
        """A line that is not UTF-8 names the byte."""
        trace = tmp_path / "t.jsonl"
        trace.write_bytes(json.dumps(HEADER).encode() + b'\n{"type": "\xff"}\n')
        (problem,) = check_trace(trace)
        assert (problem.line, problem.column) == (2, 11)
        assert problem.message == "not UTF-8 text (byte 11 of the line)"

    def test_a_line_too_long_is_skipped_unheld(self, tmp_path: Path) -> None:
        """A line over the limit is one problem; the reader goes on at the next line."""
        long_line = json.dumps(cycle(note="x" * 5000))
        trace = write(tmp_path / "t.jsonl", HEADER, long_line, "{")
        with TraceReader(trace, max_line_bytes=1000) as reader:
            with pytest.raises(InputError) as got:
                list(reader)
            assert [p.line for p in reader.rest_problems()] == [3]
        assert str(got.value.problems[0]).endswith(
            "t.jsonl:2:1: $: line is longer than the limit of 1000 bytes"
        )


class TestSessionChecks:
    def test_bodies_left_to_the_session(self, tmp_path: Path) -> None:
        """With check_bodies off, a value only the session judges passes the reader."""
        trace = write(tmp_path / "t.jsonl", HEADER, cycle(scores={"task": 1.5}))
        with TraceReader(trace, check_bodies=False) as reader:
            (event,) = list(reader)
        assert event.fields["scores"] == {"task": 1.5}

    @pytest.mark.parametrize(
        "line",
        [
            turn(bogus=1),
            {"type": "turn", "tokens": 1},
            cycle(pinned="task"),
            cycle(scores=[["task", 0.5]]),
            {"type": "prune", "spans": {}, "keep_top_k": 1},
            {"type": "pass", "segments": [], "free_tokens": 1, "keep_top_k": 1},
            cycle(cycle=True),
            cycle(cycle=-1),
        ],
        ids=lambda line: json.dumps(line)[:40],
    )
    def test_what_the_session_cannot_see_is_still_checked(
        self, tmp_path: Path, line: dict[str, Any]
    ) -> None:
        """Fields, containers, targets and numbers are checked even with check_bodies off."""
        trace = write(tmp_path / "t.jsonl", HEADER, line)
        with TraceReader(trace, check_bodies=False) as reader, pytest.raises(InputError) as got:
            list(reader)
        assert got.value.problems[0].line == 2

    def test_explain_locates_the_session_refusal(self, tmp_path: Path) -> None:
        """A session's refusal of an event is checked in full and located in its line."""
        trace = write(tmp_path / "t.jsonl", HEADER, cycle(cycle=2), cycle(scores={"task": 1.5}))
        with TraceReader(trace, check_bodies=False) as reader:
            events = list(reader)
            refusal = InputError([Problem("<session>", 0, 0, "$.history[0].scores.task", "x")])
            (problem,) = reader.explain(events[1], refusal)
        assert (problem.line, problem.column, problem.path) == (3, 38, "$.scores.task")
        assert "outside the policy's score range" in problem.message

    def test_explain_falls_back_to_the_session_problems(self, tmp_path: Path) -> None:
        """When the full check finds nothing, the session's own problems get the line."""
        trace = write(tmp_path / "t.jsonl", HEADER, cycle())
        with TraceReader(trace, check_bodies=False) as reader:
            (event,) = list(reader)
            refusal = InputError([Problem("<session>", 0, 0, "$.scores", "not today")])
            (problem,) = reader.explain(event, refusal)
        assert problem == Problem(str(trace), 2, 1, "$.scores", "not today")


class TestBoundedMemory:
    def test_peak_does_not_grow_with_length(self, tmp_path: Path) -> None:
        """Reading 20k events peaks at about what reading 2k does: one line at a time."""

        def peak(events: int) -> int:
            trace = tmp_path / f"{events}.jsonl"
            with trace.open("w") as out:
                out.write(json.dumps(HEADER) + "\n")
                for i in range(events):
                    out.write(
                        json.dumps(cycle(scores={f"e{j}": 0.5 for j in range(20)}, note=str(i)))
                        + "\n"
                    )
            tracemalloc.start()
            try:
                with TraceReader(trace, check_bodies=False) as reader:
                    for _ in reader:
                        pass
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

        small, large = peak(2_000), peak(20_000)
        assert large < small * 1.5 + 64 * 1024, (small, large)

    def test_a_huge_line_is_never_held(self, tmp_path: Path) -> None:
        """Skipping a 20 MB line allocates about the limit, not the line."""
        trace = tmp_path / "t.jsonl"
        with trace.open("w") as out:
            out.write(json.dumps(HEADER) + "\n")
            out.write('{"type": "turn", "note": "' + "x" * 20_000_000 + '"}\n')
        tracemalloc.start()
        try:
            with TraceReader(trace, max_line_bytes=100_000) as reader, pytest.raises(InputError):
                list(reader)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 2_000_000, peak


lines = st.one_of(
    st.text(max_size=60),
    st.dictionaries(
        st.sampled_from(["type", "cycle", "turn", "scores", "tokens", "mean_relevance", "x"]),
        st.one_of(
            st.sampled_from(["cycle", "turn", "pass", "prune", "session", "eviction"]),
            st.integers(-3, 3),
            st.floats(allow_nan=False),
            st.dictionaries(st.text(max_size=3), st.floats(0, 1), max_size=3),
        ),
        max_size=5,
    ).map(json.dumps),
)


class TestProperties:
    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(body=st.lists(lines, max_size=6), check_bodies=st.booleans())
    def test_any_lines_are_events_or_located_problems(
        self, body: list[str], check_bodies: bool
    ) -> None:
        """Whatever the lines, the reader yields events or raises located problems, no other
        exception; each problem names the file and a line that exists."""
        lines_ = [
            json.dumps(HEADER),
            *(line.replace("\n", " ").replace("\r", " ") for line in body),
        ]
        data = "\n".join(lines_).encode("utf-8", "surrogatepass")
        problems: tuple[Problem, ...] = ()
        try:
            with TraceReader(io.BytesIO(data), name="p", check_bodies=check_bodies) as reader:
                types = {event.type for event in reader}
            assert types <= {"cycle", "turn", "eviction", "prune", "pass"}
        except InputError as exc:
            problems = exc.problems or (Problem(),)
        for problem in problems:
            assert problem.file == "p"
            assert 1 <= problem.line <= len(lines_)
