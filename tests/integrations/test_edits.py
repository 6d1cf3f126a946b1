"""EditGuard: edits of a LangChain message list, made by the real trim_messages, judged and
repaired (or raised) through a session."""

from __future__ import annotations

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


class TestEditGuard:
    def test_a_refused_trim_is_repaired_with_the_task_and_the_tool_call(self) -> None:
        """A trim that drops the task and cuts a tool call from its result is refused; the
        repaired list puts back what must stay, in order, and the session allows it."""
        engine = Engine.default()
        guard = EditGuard(engine.session("edits-1"), applied_by="trim")
        messages = _messages()
        trimmed = _trim(messages, 180)
        outcome = guard.judge(messages, trimmed)
        assert outcome.repaired
        assert outcome.decision.codes == ("pinned_removed", "group_split", "no_tombstone")
        assert _ids(outcome.messages) == _ids(messages)  # every removal was unrecorded
        assert outcome.decision.restore == tuple(f"m{i:02d}" for i in range(1, 9))

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
        assert _ids(kept) == _ids(messages)
        assert records == ["langchain_core.messages.utils.trim_messages"]

    def test_a_new_message_without_an_id_names_no_earlier_one(self) -> None:
        """A summary without an id is a new segment, not a rewrite of the message at its place."""
        guard = EditGuard(Engine.default().session("edits-5"))
        messages = _messages()
        summary = AIMessage("Budget so far: income 5200, rent 1450.")
        edited = [messages[0], messages[1], summary, *messages[-2:]]
        outcome = guard.judge(messages, edited)
        assert outcome.decision.codes == ("group_split", "no_tombstone")
        # Restored in place after the task; the new summary keeps its place before m14.
        assert outcome.messages == [*messages[:14], summary, *messages[14:]]


class TestExample:
    def test_the_demo_repairs_a_real_trim(self) -> None:
        """examples/agents/guarded_trim.py (make demo-agents) refuses the trim for the task and
        the split tool call, and puts back exactly those."""
        script = Path(__file__).resolve().parents[2] / "examples" / "agents" / "guarded_trim.py"
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120
        )
        lines = done.stdout.splitlines()
        assert lines[1] == "transition: deny (pinned_removed, group_split)"
        assert lines[4] == "  restore: m01, m08"
        assert lines[5].startswith("repaired: ['m00', 'm01', 'm08', 'm09'")
        assert done.stderr == ""
