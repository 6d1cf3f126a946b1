"""Transition documents: typed with the edit derived by content, or refused with located
problems (duplicate ids, a tombstone naming what was never there, a derivation cycle, sizes)."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pytest
from prunewarden import Engine, InputError
from prunewarden.cli import run
from prunewarden.inputs import ScoreRange, TransitionRequest, derive_edit, parse_request
from prunewarden.inputs._parse import parse_request_exact
from prunewarden.limits import MAX_SEGMENTS

SCORES = ScoreRange(0.0, 1.0)


def _segment(segment_id: str, text: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"id": segment_id, "kind": "turn", "text": text or f"text of {segment_id}", **fields}


def _transition(before: list[Any], after: list[Any], **fields: Any) -> dict[str, Any]:
    return {"check": "transition", "before": before, "after": after, **fields}


def _typed(document: dict[str, Any]) -> TransitionRequest:
    _, request = parse_request(document, SCORES)
    assert isinstance(request, TransitionRequest)
    return request


def _problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(InputError) as raised:
        parse_request(document, SCORES)
    return [(p.path, p.message) for p in raised.value.problems]


class TestDerivation:
    def test_each_segment_of_both_windows_is_classified_by_content(self) -> None:
        """Kept, rewritten, folded, removed; summaries and added: by id and text hash."""
        before = [_segment("a"), _segment("b"), _segment("c"), _segment("d")]
        after = [
            _segment("a"),
            _segment("b", "b, said otherwise"),
            _segment("s1", "c in short", kind="summary", derived_from=["c"]),
            _segment("n1"),
            {"id": "tomb", "kind": "tombstone", "text": "removed d", "tombstone_for": ["d"]},
        ]
        edit = _typed(_transition(before, after)).edit
        assert (edit.kept, edit.rewritten, edit.folded, edit.removed) == (
            ("a",),
            ("b",),
            ("c",),
            ("d",),
        )
        assert (edit.summaries, edit.added, edit.tombstoned) == (
            ("s1",),
            ("n1", "tomb"),
            frozenset({"d"}),
        )

    def test_a_kept_id_with_other_text_is_a_rewrite_whatever_the_editor_claims(self) -> None:
        """The same id and the same declared hash over new text is still a rewrite."""
        digest = hashlib.sha256(b"old").hexdigest()
        before = [_segment("a", "old", score=0.5, text_sha256=digest)]
        after = [_segment("a", "new", score=0.5, text_sha256=digest)]
        edit = _typed(_transition(before, after)).edit
        assert (edit.kept, edit.rewritten, edit.scored_rewrites) == ((), ("a",), ("a",))

    def test_a_rewrite_naming_its_own_id_is_no_summary(self) -> None:
        """A segment deriving only from itself (a rewrite's record) is added, not a summary."""
        edit = _typed(_transition([], [_segment("x", derived_from=["x"])])).edit
        assert (edit.summaries, edit.added) == ((), ("x",))

    def test_an_empty_after_removes_every_segment_in_order(self) -> None:
        """derive_edit on typed windows: nothing after, so every segment of before is removed."""
        before = tuple(_typed(_transition([_segment(f"s{i}") for i in range(3)], [])).before)
        edit = derive_edit(before, (), ())
        assert edit.removed == ("s0", "s1", "s2")


class TestRefused:
    def test_duplicate_ids_in_either_window_are_located(self) -> None:
        """A duplicate id in before or in after is one located problem each."""
        document = _transition(
            [_segment("a"), _segment("a")], [_segment("b"), _segment("c"), _segment("b")]
        )
        assert _problems(document) == [
            ("$.after[2].id", "duplicate segment id 'b' (first at after[0])"),
            ("$.before[1].id", "duplicate segment id 'a' (first at before[0])"),
        ]

    def test_a_tombstone_for_an_id_never_in_before_is_refused(self) -> None:
        """A tombstone records removed segments: it cannot name one that never was."""
        tomb = {"id": "t", "kind": "tombstone", "text": "gone", "tombstone_for": ["a", "zz"]}
        assert _problems(_transition([_segment("a")], [tomb])) == [
            (
                "$.after[0].tombstone_for[1]",
                "'zz' was never in before: a tombstone records removed segments",
            )
        ]

    def test_tombstone_for_belongs_on_a_tombstone_in_after(self) -> None:
        """tombstone_for on another kind, or in before, is refused."""
        document = _transition(
            [_segment("a", tombstone_for=["a"])], [_segment("b", tombstone_for=["a"])]
        )
        message = "tombstone_for belongs on a segment of kind 'tombstone' in after"
        assert _problems(document) == [
            ("$.after[0].tombstone_for", message),
            ("$.before[0].tombstone_for", message),
        ]

    def test_tombstone_for_on_a_summary_in_after_is_refused(self) -> None:
        """A summary of after naming removed ids in tombstone_for (and nothing wrong in before)
        is refused: only a tombstone records removals, or a summary would vouch for them."""
        document = _transition(
            [_segment("a"), _segment("b")],
            [_segment("s", kind="summary", derived_from=["a"], tombstone_for=["b"])],
        )
        message = "tombstone_for belongs on a segment of kind 'tombstone' in after"
        assert _problems(document) == [("$.after[0].tombstone_for", message)]

    def test_a_derivation_cycle_is_refused_with_its_path(self) -> None:
        """a derives from b and b from a: a cycle, named in order."""
        after = [_segment("a", derived_from=["b"]), _segment("b", derived_from=["a"])]
        assert _problems(_transition([], after)) == [
            ("$.after[0].derived_from", "derived_from cycle: a -> b -> a")
        ]

    def test_ids_over_their_limit_are_refused(self) -> None:
        """An id longer than 256 characters is a schema problem, located."""
        problems = _problems(_transition([_segment("x" * 257)], []))
        assert [path for path, _ in problems] == ["$.before[0].id"]

    def test_a_window_over_the_segment_limit_is_refused_before_the_schema(self) -> None:
        """More segments than MAX_SEGMENTS is refused at the list, without validating items."""
        document = _transition([{}] * (MAX_SEGMENTS + 1), [])
        assert _problems(document) == [
            ("$.before", f"{MAX_SEGMENTS + 1} items, more than the limit of {MAX_SEGMENTS}")
        ]

    def test_a_score_outside_the_range_is_refused(self) -> None:
        """Scores are optional here, but one given must lie in the policy's range."""
        problems = _problems(_transition([_segment("a", score=1.5)], []))
        assert problems == [
            ("$.before[0].score", "1.5 is outside the policy's score range [0.0, 1.0]")
        ]

    def test_both_paths_accept_what_the_fast_path_accepts(self) -> None:
        """A valid document typed by the exact path is the fast path's request."""
        document = _transition(
            [_segment("a", group="g"), _segment("b", group="g")],
            [_segment("a", group="g")],
            tombstones=["b"],
            reported={"spans_modified": 0, "scores_invalidated": 0},
        )
        assert parse_request_exact(document, SCORES)[1] == _typed(document)


class TestNothingLoggedAsAllowed:
    def test_a_malformed_transition_exits_2_and_logs_nothing(self, tmp_path: Any) -> None:
        """prunewarden evaluate on a cycle: exit 2, one located line, no record written."""
        document = _transition(
            [], [_segment("a", derived_from=["b"]), _segment("b", derived_from=["a"])]
        )
        source = tmp_path / "edit.json"
        source.write_text(json.dumps(document), encoding="utf-8")
        log = tmp_path / "audit.jsonl"
        out, err = _streams()
        assert run(["evaluate", "--audit-log", str(log), str(source)], out, err) == 2
        assert "$.after[0].derived_from: derived_from cycle: a -> b -> a" in err.getvalue()
        assert not log.exists() or "transition" not in log.read_text(encoding="utf-8")

    def test_engine_evaluate_raises_input_error(self) -> None:
        """Engine.evaluate raises InputError, never a decision, for a bad transition."""
        with pytest.raises(InputError):
            Engine.default().evaluate(_transition([_segment("a"), _segment("a")], []))


def _streams() -> tuple[io.StringIO, io.StringIO]:
    return io.StringIO(), io.StringIO()
