"""Typing a pruning pass hashes each span's text once, and strict JSON still refuses what it
refused before its fast paths."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from _support.generators import json_values
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden._source import parse_json
from prunewarden.inputs._model import ScoreRange
from prunewarden.inputs._parse import parse_plan

SCORES = ScoreRange(0.0, 1.0)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        msg = "duplicate key"
        raise ValueError(msg)
    return dict(pairs)


def _window(*texts: str) -> dict[str, object]:
    return {
        "segments": [
            {"id": f"s{i}", "kind": "turn", "text": text, "score": 0.5}
            for i, text in enumerate(texts)
        ],
        "keep_top_k": 1,
    }


class TestPlanDigests:
    def test_each_span_of_a_window_carries_its_text_digest(self) -> None:
        """A typed window's spans hold the SHA-256 of their text, for the guard and the record."""
        request = parse_plan(_window("alpha", "", "é"), SCORES)
        digests = [w.span.text_digest for w in request.segments]
        assert digests == [
            hashlib.sha256(text.encode("utf-8")).hexdigest() for text in ("alpha", "", "é")
        ]

    def test_a_lone_surrogate_text_has_no_digest(self) -> None:
        """A text with no UTF-8 bytes keeps no digest: the guard hashes it and fails closed."""
        request = parse_plan(_window("\ud800"), SCORES)
        assert request.segments[0].span.text_digest == ""


class TestStrictJson:
    def test_an_escaped_lone_surrogate_in_ascii_text_is_located(self) -> None:
        """An ASCII document escaping a lone surrogate is refused at the string that holds it."""
        _, problems = parse_json('{"a": "ok",\n "b": "x\\ud800"}', "doc.json")
        assert [(p.line, p.path, p.message) for p in problems] == [
            (2, "$.b", "holds a lone surrogate (not Unicode text)")
        ]

    def test_an_escaped_surrogate_pair_is_text(self) -> None:
        """A surrogate pair written as two escapes is one character, not a problem."""
        parsed, problems = parse_json('{"a": "\\ud83d\\ude00"}', "doc.json")
        assert (parsed.data, problems) == ({"a": "\U0001f600"}, [])

    def test_a_duplicate_key_is_refused_and_named(self) -> None:
        """Each key written twice in an object is named, first the first repeated."""
        _, problems = parse_json('{"a": 1, "b": 2, "b": 3, "a": 4}', "doc.json")
        assert [p.message for p in problems] == [
            "duplicate key 'b' (first defined at line 1)",
            "duplicate key 'a' (first defined at line 1)",
        ]

    @pytest.mark.parametrize(
        "text",
        [
            '{"a": "x:y", "a": 1}',  # a colon inside a string beside a key given twice
            '{"a": {"b": 1, "b": 2}}',
            '[{"k": "v"}, {"k": "v", "k": "w"}]',
        ],
        ids=["colon-in-string", "nested", "in-a-list"],
    )
    def test_a_key_given_twice_is_found_wherever_it_is(self, text: str) -> None:
        """However the text is spelled, a key written twice is refused (and named)."""
        _, problems = parse_json(text, "doc.json")
        assert problems
        assert problems[0].message.startswith("duplicate key")

    def test_integers_beyond_64_bits_stay_integers(self) -> None:
        """An integer past 2**64 is read as the integer it is, not as a float."""
        parsed, problems = parse_json('{"n": 18446744073709551617, "m": -9223372036854775809}', "d")
        assert (parsed.data, problems) == (
            {"n": 18446744073709551617, "m": -9223372036854775809},
            [],
        )

    @settings(max_examples=300, deadline=None)
    @given(value=json_values, duplicate=st.booleans())
    def test_read_as_the_strict_reader_reads(self, value: Any, duplicate: bool) -> None:
        """Any JSON text, with or without a key given twice, is read or refused as
        ``json.loads`` with the strict checks reads or refuses it."""
        text = json.dumps(value, ensure_ascii=False)
        if duplicate and text.startswith("{") and text != "{}":
            text = '{"k": "a:b", "k": 0, ' + text[1:]
        try:
            expected = json.loads(text, object_pairs_hook=_no_duplicates)
        except ValueError:
            expected = None
        parsed, problems = parse_json(text, "doc.json")
        assert (parsed.data if not problems else None) == expected

    def test_distinct_keys_keep_their_order(self) -> None:
        """An object without repeated keys is read whole, in the order written."""
        parsed, problems = parse_json('{"z": 1, "a": {"y": 2, "b": 3}}', "doc.json")
        assert (list(parsed.data), list(parsed.data["a"]), problems) == (["z", "a"], ["y", "b"], [])
