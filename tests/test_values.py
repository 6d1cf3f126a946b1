"""The per-decision values (``decision``, ``inputs``) keep what they promised as dataclasses:
constructors by position and keyword, equality, hashing, immutability and pickling; and a
reason's message is formatted when first read, with the text an eager one has."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import msgspec
import pytest
from prunewarden import Action, Decision, Engine, PolicyIdentity, Reason
from prunewarden._values import replace_value
from prunewarden.decision import Verdict
from prunewarden.inputs import EvictionRequest, ScoreRange, Segment, Span, Turn

POLICY = PolicyIdentity("p", "1.0.0", "sha256:00")
TEMPLATE = "segment {!r} score moved {:.2f} -> {:.2f} under perturbation, more than {}"
VALUES = ("seg-1", 0.123, 0.456, 0.25)
TEXT = "segment 'seg-1' score moved 0.12 -> 0.46 under perturbation, more than 0.25"


def segment(**changes: Any) -> Segment:
    fields: dict[str, Any] = {
        "id": "seg-1",
        "kind": "turn",
        "text": "hello",
        "non_recoverable": False,
        "score_dependencies": ("a",),
        "tombstone_written": True,
        "tokens": 3,
    }
    return Segment(**{**fields, **changes})


def decision(**changes: Any) -> Decision:
    fields: dict[str, Any] = {
        "check": "eviction",
        "outcome": "deny",
        "enforced": True,
        "reasons": (Reason.deferred("unstable_score", TEMPLATE, VALUES, {"segment": "seg-1"}),),
        "actions": (Action("rescore", ("seg-1",)),),
        "policy": POLICY,
        "pass_id": "p",
        "index": 0,
    }
    return Decision(**{**fields, **changes})


class TestDeferredReason:
    def test_the_message_is_the_template_formatted_with_its_values(self) -> None:
        """A deferred reason's message is the text the guard's f-string made."""
        reason = Reason.deferred("unstable_score", TEMPLATE, VALUES)
        assert reason.message == TEXT
        assert reason.to_dict() == {"code": "unstable_score", "message": TEXT, "detail": {}}

    def test_the_message_is_formatted_once(self) -> None:
        """The formatted message is kept: a second read returns the same string object."""
        reason = Reason.deferred("unstable_score", TEMPLATE, VALUES)
        assert reason.message is reason.message

    def test_a_deferred_reason_equals_the_eager_one_with_its_text(self) -> None:
        """Equality and hashing go by code, message and detail, however the message was
        given; a different text is a different reason."""
        deferred = Reason.deferred("stale", "span {!r} is stale", ("s1",))
        eager = Reason("stale", "span 's1' is stale")
        assert deferred == eager
        assert not deferred != eager  # noqa: SIM202 - __ne__ is what is tested
        assert deferred != Reason("stale", "span 's2' is stale")
        assert deferred != Reason("other", "span 's1' is stale")
        with pytest.raises(TypeError, match="unhashable"):
            hash(deferred)  # its detail is a dict, as a frozen dataclass's would be

    def test_keyword_constructor_and_fresh_default_detail(self) -> None:
        """``Reason(code=, message=, detail=)`` works; each reason without detail has its
        own empty dict."""
        reason = Reason(code="authorized", message="ok", detail={"segment": "a"})
        assert (reason.code, reason.message, reason.detail) == (
            "authorized",
            "ok",
            {"segment": "a"},
        )
        assert Reason("a", "b").detail is not Reason("a", "b").detail

    def test_a_reason_is_frozen(self) -> None:
        """No field of a reason can be set or deleted, read or not."""
        reason = Reason.deferred("unstable_score", TEMPLATE, VALUES)
        with pytest.raises(AttributeError, match="frozen"):
            reason.code = "other"
        with pytest.raises(AttributeError, match="frozen"):
            del reason.detail
        assert not hasattr(reason, "__dict__")

    def test_pickles_copies_and_prints_by_its_text(self) -> None:
        """Pickled, copied or printed, a deferred reason carries its formatted text."""
        reason = Reason.deferred("unstable_score", TEMPLATE, VALUES, {"segment": "seg-1"})
        restored = pickle.loads(pickle.dumps(reason))  # noqa: S301 - our own bytes
        assert restored == reason
        assert restored.message == TEXT
        assert copy.deepcopy(reason) == reason
        assert repr(reason) == (
            f"Reason(code='unstable_score', message={TEXT!r}, detail={{'segment': 'seg-1'}})"
        )

    def test_with_detail_keeps_the_finding_and_its_message(self) -> None:
        """``with_detail`` replaces the detail only; the message reads as before."""
        reason = Reason.deferred("unstable_score", TEMPLATE, VALUES, {"segment": "seg-1"})
        changed = reason.with_detail({"segment": "seg-1", "calibration": {}})
        assert (changed.code, changed.message) == ("unstable_score", TEXT)
        assert changed.detail == {"segment": "seg-1", "calibration": {}}
        assert reason.detail == {"segment": "seg-1"}

    def test_values_that_cannot_be_formatted_still_give_a_message(self) -> None:
        """A template its values do not fit reads as the template with a note, never an
        exception: a decision's record must still be writable."""
        reason = Reason.deferred("unstable_score", "score {:.2f}", ("not a number",))
        assert reason.message == "score {:.2f} (not formatted: ValueError)"


class TestDecisionValues:
    def test_pickle_round_trip_keeps_every_field(self) -> None:
        """A decision pickled (as Dask ships one) comes back equal, field for field."""
        original = decision()
        restored = pickle.loads(pickle.dumps(original))  # noqa: S301 - our own bytes
        assert restored == original
        assert restored.to_dict() == original.to_dict()

    def test_frozen_and_without_dict(self) -> None:
        """Decisions, actions and verdict-free values refuse assignment and have no
        ``__dict__``."""
        value = decision()
        with pytest.raises(AttributeError):
            value.outcome = "allow"  # type: ignore[misc]
        assert not hasattr(value, "__dict__")
        assert not hasattr(Action("pin"), "__dict__")

    def test_positional_and_keyword_constructors(self) -> None:
        """The constructors take the fields by position and by keyword, in the dataclasses'
        order, with the same defaults."""
        by_position = Decision("eviction", "allow", True, (), (), POLICY, "id-1", "t")
        by_keyword = Decision(
            check="eviction",
            outcome="allow",
            enforced=True,
            reasons=(),
            actions=(),
            policy=POLICY,
            decision_id="id-1",
            evaluated_at="t",
        )
        assert by_position == by_keyword
        assert by_keyword.kept is None
        assert by_keyword.sources == ()
        assert Action("pin") == Action(action="pin", ids=None)

    def test_each_decision_gets_its_own_id_and_time(self) -> None:
        """Unless given, a decision's id is new for each decision."""
        first = Decision("eviction", "allow", True, (), (), POLICY)
        second = Decision("eviction", "allow", True, (), (), POLICY)
        assert first.decision_id != second.decision_id
        assert first.evaluated_at.endswith("Z")

    def test_actions_hash_by_value(self) -> None:
        """Equal actions are equal and hash alike, so they deduplicate in sets."""
        assert {Action("rescore", ("a",)), Action("rescore", ("a",))} == {Action("rescore", ("a",))}

    def test_replace_value_changes_only_what_it_names(self) -> None:
        """``replace_value`` stands for ``dataclasses.replace``: a copy with the changes."""
        original = decision()
        changed = replace_value(original, explanation={"mode": "enforce"})
        assert changed.explanation == {"mode": "enforce"}
        assert replace_value(changed, explanation=None) == original
        assert original.explanation is None

    def test_a_verdict_is_filled_in_as_the_guard_decides(self) -> None:
        """A verdict is the one mutable value: the pipeline sets its reasons."""
        verdict = Verdict(True, [Reason("a", "b")])
        verdict.reasons = [Reason("c", "d")]
        assert verdict.actions == []
        assert verdict.reasons == [Reason("c", "d")]


class TestRequestValues:
    def test_requests_pickle_compare_and_hash(self) -> None:
        """Requests and their parts survive pickling equal; hashable ones hash alike."""
        request = EvictionRequest(segment(), 0.1, 0.2, frozenset({"seg-1"}))
        assert pickle.loads(pickle.dumps(request)) == request  # noqa: S301 - our own bytes
        assert hash(ScoreRange(0.0, 1.0)) == hash(ScoreRange(0.0, 1.0))
        assert hash(Turn(1, 0.5, 10)) == hash(Turn(turn=1, mean_relevance=0.5, tokens=10))
        assert isinstance(request, msgspec.Struct)

    def test_requests_are_frozen(self) -> None:
        """A request's fields cannot be assigned."""
        with pytest.raises(AttributeError):
            segment().id = "other"  # type: ignore[misc]

    def test_span_equality_ignores_the_cached_digest(self) -> None:
        """A span's text digest is a cache of its text: equality, hash and repr leave it
        out; pickling keeps it."""
        hashed = Span("s1", "text", 0.5, "", 0, (), "digest")
        plain = Span("s1", "text", 0.5, "", 0, ())
        assert hashed == plain
        assert not hashed != plain  # noqa: SIM202 - __ne__ is what is tested
        assert hash(hashed) == hash(plain)
        assert "digest" not in repr(hashed)
        assert hashed != Span("s1", "other", 0.5, "", 0, ())
        assert pickle.loads(pickle.dumps(hashed)).text_digest == "digest"  # noqa: S301


class TestPassDecisions:
    def test_a_pass_decision_reads_its_messages_after_the_record(self) -> None:
        """Decisions of a pass, their messages formatted only when read, say what the
        per-document decisions say."""
        engine = Engine.default()
        items = [
            {"segment": {"id": "a", "kind": "turn", "tombstone_written": True}, "score": 0.1},
            {
                "segment": {"id": "b", "kind": "turn", "tombstone_written": True},
                "score": 0.1,
                "perturbed_score": 0.9,
            },
        ]
        passed = engine.authorize_evictions(items)
        alone = [
            engine.evaluate({"check": "eviction", **item, "eviction_candidates": ["a", "b"]})
            for item in items
        ]
        assert [d.to_dict()["reasons"] for d in passed] == [d.to_dict()["reasons"] for d in alone]
        assert [r.code for r in passed[1].reasons] == ["unstable_score"]
