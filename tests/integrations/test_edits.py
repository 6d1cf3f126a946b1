"""EditGuard: edits of a LangChain message list, made by the real trim_messages, judged and
repaired (or raised) through a session."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from _support.trim_corpus import conversations, history
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately
from prunewarden import Engine, UnsafeTransitionError
from prunewarden.integrations.edits import EditGuard
from prunewarden.integrations.langgraph import message_segments


def _messages() -> list[BaseMessage]:
    return history(conversations()["household-budget"])


def _ids(messages: list[BaseMessage]) -> list[str]:
    return [str(message.id) for message in messages]


def _trim(messages: list[BaseMessage], max_tokens: int) -> list[BaseMessage]:
    return trim_messages(
        messages,
        max_tokens=max_tokens,
        strategy="last",
        token_counter=count_tokens_approximately,
        include_system=True,
    )


TOMBSTONE = "prunewarden-tombstone-9941f1994d3e"  # the guard's, for m02 to m07


class TestEditGuard:
    def test_a_refused_trim_keeps_its_trimming_and_puts_back_only_what_must_stay(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Under the default policy (tombstones required), a trim that drops the task and cuts
        a tool call from its result goes through with the guard's tombstone: only the task and
        the call are put back, the tombstone counts what stays removed, and a warning names
        what was put back and the decision."""
        engine = Engine.default()
        guard = EditGuard(engine.session("edits-1"), applied_by="trim")
        messages = _messages()
        trimmed = _trim(messages, 180)
        with caplog.at_level(logging.WARNING, logger="prunewarden.integrations"):
            outcome = guard.judge(messages, trimmed)
        assert outcome.repaired
        # m01 (the task, pinned) is named by no tombstone; m08 (the call) splits its group.
        assert outcome.decision.codes == ("pinned_removed", "group_split", "no_tombstone")
        assert outcome.restored == outcome.decision.restore == ("m01", "m08")
        assert _ids(outcome.messages) == [
            "m00",
            "m01",
            TOMBSTONE,
            *(f"m{i:02d}" for i in range(8, 16)),
        ]
        assert outcome.tombstone is outcome.messages[2]
        assert outcome.tombstone.content == (
            "[prunewarden: 6 earlier messages removed: 4 assistant, 1 tool, 1 user]"
        )
        (warning,) = caplog.records
        assert warning.getMessage() == (
            "session edits-1: edit by trim refused (pinned_removed, group_split, no_tombstone); "
            f"put back m01, m08 (decision {outcome.decision.decision_id})"
        )

    def test_the_repaired_trim_is_one_the_policy_allows(self) -> None:
        """The repaired history, its tombstone naming what stays removed, is allowed."""
        session = Engine.default().session("edits-1b")
        messages = _messages()
        outcome = EditGuard(session).judge(messages, _trim(messages, 180))
        before = message_segments(messages)
        by_id = {segment["id"]: segment for segment in before}
        assert outcome.tombstone is not None
        after = [
            by_id[str(m.id)]
            if m is not outcome.tombstone
            else {
                "id": str(m.id),
                "kind": "tombstone",
                "text": str(m.content),
                "tombstone_for": [f"m{i:02d}" for i in range(2, 8)],
            }
            for m in outcome.messages
        ]
        assert session.verify(before, after).codes == ("transition_clean",)

    def test_an_unpinned_trim_goes_through_with_the_tombstone(self) -> None:
        """A trim that keeps the prompt, the task and whole tool calls is allowed as it is, the
        guard's tombstone in the place of what it removed; nothing is logged."""
        guard = EditGuard(Engine.default().session("edits-1c"))
        messages = _messages()
        trimmed = [messages[0], messages[1], *messages[8:]]
        outcome = guard.judge(messages, trimmed)
        assert (outcome.repaired, outcome.decision.codes) == (False, ("transition_clean",))
        assert outcome.tombstone is not None
        assert outcome.messages == [*messages[:2], outcome.tombstone, *messages[8:]]
        assert str(outcome.tombstone.id).startswith("prunewarden-tombstone-")
        assert outcome.restored == ()

    def test_an_allowed_edit_passes_through_unchanged(self) -> None:
        """An edit that only appends is allowed; the guard returns the edited list itself."""
        guard = EditGuard(Engine.default().session("edits-2"))
        messages = _messages()
        appended = [*messages, HumanMessage("One more thing.", id="m99")]
        outcome = guard.judge(messages, appended)
        assert (outcome.repaired, outcome.decision.codes) == (False, ("transition_clean",))
        assert outcome.messages == appended

    def test_raise_mode_raises_the_refusal(self) -> None:
        """on_refusal="raise" raises UnsafeTransitionError carrying the decision."""
        guard = EditGuard(Engine.default().session("edits-3"), on_refusal="raise")
        messages = _messages()
        with pytest.raises(UnsafeTransitionError) as raised:
            guard.judge(messages, _trim(messages, 180))
        assert raised.value.decision.check == "transition"

    def test_wrap_guards_every_call_of_a_function(self) -> None:
        """guard.wrap(trim_messages) returns the repaired list and names the function."""
        records: list[str] = []

        def keep(_decision: object, record: Mapping[str, Any]) -> None:
            records.append(record["subject"]["transition"]["applied_by"])

        engine = Engine.default(on_decision=keep)
        guard = EditGuard(engine.session("edits-4"))
        guarded = guard.wrap(trim_messages)
        messages = _messages()
        kept = guarded(
            messages,
            max_tokens=180,
            strategy="last",
            token_counter=count_tokens_approximately,
            include_system=True,
        )
        # The trim stands but for the task and the call it cut from its result.
        assert _ids(kept) == ["m00", "m01", TOMBSTONE, *(f"m{i:02d}" for i in range(8, 16))]
        assert records == ["langchain_core.messages.utils.trim_messages"]

    def test_a_new_message_without_an_id_names_no_earlier_one(self) -> None:
        """A summary without an id is a new segment, not a rewrite of the message at its place;
        the guard's tombstone records the messages it replaced."""
        transitions: list[Mapping[str, Any]] = []

        def keep(_decision: object, record: Mapping[str, Any]) -> None:
            transitions.append(record["subject"]["transition"])

        guard = EditGuard(Engine.default(on_decision=keep).session("edits-5"))
        messages = _messages()
        summary = AIMessage("Budget so far: income 5200, rent 1450.")
        outcome = guard.judge(messages, [messages[0], messages[1], summary, messages[-1]])
        assert outcome.decision.codes == ("transition_clean",)
        assert outcome.tombstone is not None
        assert outcome.messages == [*messages[:2], summary, outcome.tombstone, messages[-1]]
        (transition,) = transitions
        assert transition["rewritten"] == []
        assert sorted(transition["added"]) == sorted(["edited-2", str(outcome.tombstone.id)])
        assert transition["tombstoned"] == [f"m{i:02d}" for i in range(2, 15)]


class TestPolicyClassifier:
    def test_an_instruction_the_classifier_names_a_constraint_is_kept(self) -> None:
        """A later user message saying "never" is a constraint by the policy's classifier
        (spec.classify defaults), pinned: a trim that drops it has it put back, the messages
        around it trimmed with the tombstone."""
        guard = EditGuard(Engine.default().session("edits-classify"))
        messages = _messages()
        rule = HumanMessage("Never round amounts; keep the cents.", id="m16")
        history = [*messages[:3], rule, *messages[3:]]
        trimmed = [messages[0], messages[1], *messages[8:]]
        outcome = guard.judge(history, trimmed)
        assert outcome.restored == ("m16",)
        assert rule in outcome.messages
        assert outcome.tombstone is not None
        # With the classifier off (every message its role's kind), it would have gone.
        plain = EditGuard(Engine.default().session("edits-plain"), classify=lambda _m: None)
        assert rule not in plain.judge(history, trimmed).messages


class TestExample:
    def test_the_demo_repairs_a_real_trim(self) -> None:
        """examples/agents/guarded_trim.py (make demo-agents), under the default policy, keeps
        the trim with the guard's tombstone and puts back exactly the task and the split call."""
        script = Path(__file__).resolve().parents[2] / "examples" / "agents" / "guarded_trim.py"
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120
        )
        lines = done.stdout.splitlines()
        assert lines[1] == "transition: deny (pinned_removed, group_split, no_tombstone)"
        assert lines[5] == "  restore: m01, m08"
        assert lines[6] == (
            f"repaired: ['m00', 'm01', '{TOMBSTONE}', 'm08', 'm09', 'm10', 'm11', 'm12', 'm13', "
            "'m14', 'm15']"
        )
        assert (
            lines[7]
            == "  tombstone: [prunewarden: 6 earlier messages removed: 4 assistant, 1 tool, 1 user]"
        )
        assert done.stderr == ""
