"""Trace lines read by the C decoder: the same data as the strict reader, or left to it."""

from __future__ import annotations

import importlib.util
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prunewarden import Engine, InputError, load_builtin_policy
from prunewarden._source import parse_json
from prunewarden.replay import SilentLogger, replay_trace
from prunewarden.replay import _trace as trace_module
from prunewarden.replay._trace import UNREAD, TraceReader, read_plain_line

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_TRACES = sorted((ROOT / "examples" / "traces").glob("*.jsonl"))
# What differs between two runs of the same trace: ids and times.
_RUN_FIELDS = re.compile(r'"(decision_id|pass_id|evaluated_at)":"[^"]*"')


def strict(text: str) -> Any:
    parsed, problems = parse_json(text, "<line>")
    assert not problems
    return parsed.data


def typed(data: Any) -> str:
    """Data with its types shown: 1 and 1.0, or True and 1, are told apart."""
    return repr(data)


def json_values() -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(10**30), max_value=10**30)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=8)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=12,
    )


class TestPlainLines:
    @pytest.mark.parametrize("path", EXAMPLE_TRACES, ids=lambda path: path.name)
    def test_example_lines_read_as_the_strict_reader_reads_them(self, path: Path) -> None:
        """Every line of the example traces decodes to the strict reader's data, types too."""
        for text in path.read_text(encoding="utf-8").splitlines():
            assert typed(read_plain_line(text)) == typed(strict(text))

    @pytest.mark.parametrize(
        "text",
        [
            '{"a": 1, "a": 2}',
            '{"a": {"b": [1, {"c": 1, "c": 1}]}}',
            '{"a": "x\\u003a", "a": 1}',
            '{"a": "\\ud800"}',
            '{"a": NaN}',
            '{"a": Infinity}',
            '{"a": 1e400}',
            '{"a": ' + "9" * 5000 + "}",
            '{"a": 1,}',
            '{"a": 1} {"a": 1}',
            '{"a": 01}',
        ],
    )
    def test_what_strict_json_refuses_is_left_to_the_strict_reader(self, text: str) -> None:
        """Duplicate keys, escapes, non-finite or oversized numbers and bad syntax: UNREAD."""
        assert read_plain_line(text) is UNREAD

    @given(st.lists(st.tuples(st.text(max_size=3), json_values()), max_size=5))
    def test_an_object_read_or_left_never_differs(self, pairs: list[tuple[str, Any]]) -> None:
        """An object written from pairs, keys repeated or not: the strict reader's data or
        UNREAD, and UNREAD whenever a key repeats."""
        text = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
        found = read_plain_line(text)
        keys = [key for key, _ in pairs]
        if len(set(keys)) < len(keys):
            assert found is UNREAD
        elif found is not UNREAD:
            assert typed(found) == typed(json.loads(text))

    def test_a_duplicate_key_is_still_located(self) -> None:
        """A line with a key given twice is refused at its line and column, as before."""
        header = '{"type": "session", "trace_version": 1, "session_id": "s"}\n'
        line = '{"type": "turn", "mean_relevance": 0.5, "tokens": 9, "tokens": 10}\n'
        with (
            TraceReader(io.BytesIO((header + line).encode())) as reader,
            pytest.raises(InputError) as caught,
        ):
            list(reader)
        (problem,) = caught.value.problems
        assert (problem.line, "duplicate key" in problem.message) == (2, True)


class TestReplayUnchanged:
    def test_a_synthetic_trace_replays_the_same_whichever_reader(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Replaying a generated trace gives the same records and summary with every line
        read by the strict reader."""
        trace = tmp_path / "synthetic.jsonl"
        spec = importlib.util.spec_from_file_location(
            "make_traces", ROOT / "examples" / "make_traces.py"
        )
        assert spec is not None
        assert spec.loader is not None
        make_traces = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(make_traces)
        make_traces.main(["--synthetic", "--turns", "12", "--segments", "20", "--out", str(trace)])
        engine = Engine(load_builtin_policy("default"), logger=SilentLogger())

        def replayed() -> tuple[str, dict[str, Any]]:
            out = io.StringIO()
            summary = replay_trace(engine, str(trace), out=out)
            return _RUN_FIELDS.sub(r'"\1":""', out.getvalue()), summary.to_dict()

        plain = replayed()
        monkeypatch.setattr(trace_module, "read_plain_line", lambda _text: UNREAD)
        assert replayed() == plain
        assert plain[1]["decisions"] > 0
