"""Anthropic's server-side compaction: a compaction block judged against the messages it
replaces, repaired by what follows it, and the policy compiled into the edit's instructions;
against the real SDK's types, offline."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from anthropic.types.beta import (
    BetaCompact20260112EditParam,
    BetaCompactionConfigParam,
    BetaContextManagementConfigParam,
    BetaMessage,
    BetaMessageParam,
)
from prunewarden import Engine, InputError, parse_policy
from prunewarden.integrations.anthropic import (
    SUMMARIZE_PROMPT,
    compaction_window,
    compile_compact_edit,
    compile_compaction,
    compile_context_management,
    judge_compaction,
)
from pydantic import TypeAdapter

SYSTEM = "You are a careful engineer."
TASK = (
    "Fix the CSV exporter in src/report/export.py. "
    "All timestamps must be UTC; never emit local time."
)
LOSSY = "The user wants the CSV exporter fixed; timestamps are UTC, emit local time."
FAITHFUL = (
    "The user wants the CSV exporter in src/report/export.py fixed. All timestamps must be UTC; "
    "never emit local time. Line 88 reads the clock."
)
FIDELITY = parse_policy(
    "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: compaction, version: 1.0.0}\n"
    "spec:\n  fidelity: {mode: enforce}\n"
)
MESSAGES: list[BetaMessageParam] = [
    {"role": "user", "content": TASK},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading the exporter."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "export.py"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "88: datetime.now()"}
        ],
    },
]


def _request() -> dict[str, Any]:
    edit: BetaCompact20260112EditParam = {
        "type": "compact_20260112",
        "pause_after_compaction": True,
    }
    return {"system": SYSTEM, "messages": MESSAGES, "context_management": {"edits": [edit]}}


def _response(summary: str | None) -> BetaMessage:
    """A paused response as the server returns it: the compaction block alone."""
    return BetaMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [{"type": "compaction", "content": summary, "signature": "sig-1"}],
            "stop_reason": "compaction",
            "stop_sequence": None,
            "usage": {"input_tokens": 160_000, "output_tokens": 400},
        }
    )


class TestJudgeCompaction:
    def test_a_lossy_summary_is_refused_and_the_task_comes_back_after_the_block(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The summary drops "never": negation_lost on the task; repair sends the block back
        unchanged and one user turn after it with the task verbatim and the decision's id."""
        session = Engine(FIDELITY).session("compaction-lossy")
        with caplog.at_level(logging.WARNING, logger="prunewarden.integrations"):
            outcome = judge_compaction(session, _request(), _response(LOSSY))
        assert outcome.refused
        assert "negation_lost" in outcome.decision.codes
        task_id = next(s["id"] for s in outcome.before if s["text"] == TASK)
        assert outcome.lost == [task_id]
        block, restored = outcome.repair()
        assert block == {
            "role": "assistant",
            "content": [{"type": "compaction", "content": LOSSY, "signature": "sig-1"}],
        }
        notice, text = restored["content"]
        assert restored["role"] == "user"
        assert text == {"type": "text", "text": TASK}
        assert outcome.decision.decision_id in notice["text"]
        TypeAdapter(list[BetaMessageParam]).validate_python(outcome.repair())
        (warning,) = caplog.records
        assert f"put back after it {task_id}" in warning.getMessage()

    def test_a_faithful_summary_is_allowed_and_repair_adds_nothing(self) -> None:
        session = Engine(FIDELITY).session("compaction-faithful")
        outcome = judge_compaction(session, _request(), _response(FAITHFUL))
        assert (outcome.refused, outcome.lost) == (False, [])
        assert len(outcome.repair()) == 1
        assert outcome.decision.codes == ("transition_clean",)

    def test_without_fidelity_the_pinned_blocks_come_back_after_each_compaction(self) -> None:
        """Nothing reads the summary: the task is not tombstoned by it, so it is put back."""
        outcome = judge_compaction(Engine.default().session("c"), _request(), _response(FAITHFUL))
        assert outcome.decision.codes[0] == "pinned_removed"
        assert [s["text"] for s in outcome.before if s["id"] in outcome.lost] == [TASK]

    def test_the_system_prompt_stays_and_the_summary_derives_from_every_message_block(
        self,
    ) -> None:
        block = {"type": "compaction", "content": FAITHFUL}
        before, after, tombstones = compaction_window(_request(), block, FIDELITY)
        system, summary = after
        assert (system["text"], summary["kind"], summary["text"]) == (SYSTEM, "summary", FAITHFUL)
        assert summary["derived_from"] == [s["id"] for s in before[1:]] == tombstones

    def test_an_earlier_compaction_block_starts_the_window(self) -> None:
        """The server reads nothing before the last compaction block of the request."""
        request = _request()
        request["messages"] = [
            {"role": "user", "content": "an old turn the server no longer reads"},
            {"role": "assistant", "content": [{"type": "compaction", "content": FAITHFUL}]},
            {"role": "user", "content": "Now add a --utc flag."},
        ]
        before, _, _ = compaction_window(request, {"type": "compaction", "content": "x"}, FIDELITY)
        assert [(s["kind"], s["text"]) for s in before] == [
            ("system", SYSTEM),
            ("summary", FAITHFUL),
            ("user", "Now add a --utc flag."),
        ]

    def test_a_failed_compaction_is_a_no_op(self) -> None:
        """A block with null content: the server ignores it, so the window is unchanged."""
        outcome = judge_compaction(Engine(FIDELITY).session("f"), _request(), _response(None))
        assert (outcome.refused, outcome.before) == (False, outcome.after)

    @pytest.mark.parametrize(
        ("content", "path"),
        [
            ([{"type": "text", "text": "no block"}], "$.content"),
            ([{"type": "compaction", "content": 7}], "$.content[0].content"),
        ],
        ids=["no-compaction-block", "block-the-sdk-refuses"],
    )
    def test_a_response_without_a_valid_block_is_a_located_input_error(
        self, content: list[dict[str, Any]], path: str
    ) -> None:
        with pytest.raises(InputError) as raised:
            judge_compaction(Engine(FIDELITY).session("e"), _request(), {"content": content})
        assert [problem.path for problem in raised.value.problems] == [path]


class TestCompileCompaction:
    def test_the_edit_keeps_the_pins_verbatim_and_pauses(self) -> None:
        """The task (pinned) is listed verbatim after the caller's instructions; the edit is a
        valid SDK parameter and pauses so the judge sees the block first."""
        base: BetaCompact20260112EditParam = {
            "type": "compact_20260112",
            "instructions": "Be brief.",
            "trigger": {"type": "input_tokens", "value": 100_000},
        }
        edit = compile_compact_edit(FIDELITY, messages=MESSAGES, edit=base)
        assert edit["pause_after_compaction"] is True
        assert edit["trigger"] == {"type": "input_tokens", "value": 100_000}
        assert edit["instructions"] == (
            "Be brief.\n\nKeep each of the following verbatim in the summary, word for word, "
            f"as it was given:\n- {TASK}"
        )
        TypeAdapter(BetaCompact20260112EditParam).validate_python(edit)

    def test_an_edit_that_turns_the_pause_off_keeps_it_off(self) -> None:
        edit = compile_compact_edit(
            FIDELITY,
            messages=MESSAGES,
            edit={"type": "compact_20260112", "pause_after_compaction": False},
        )
        assert edit["pause_after_compaction"] is False

    def test_context_management_carries_the_edit_beside_exclude_tools(self) -> None:
        config = compile_context_management(
            FIDELITY, messages=MESSAGES, tool_kinds={"read": "constraint"}, compact=True
        )
        clear, compact = config["edits"]
        assert (clear["type"], clear.get("exclude_tools")) == ("clear_tool_uses_20250919", ["read"])
        assert compact["type"] == "compact_20260112"
        assert "- 88: datetime.now()" in str(compact.get("instructions"))
        TypeAdapter(BetaContextManagementConfigParam).validate_python(config)

    def test_the_compaction_parameter_replaces_the_prompt_only_when_something_is_pinned(
        self,
    ) -> None:
        config = compile_compaction(FIDELITY, messages=MESSAGES)
        assert str(config.get("instructions")).startswith(SUMMARIZE_PROMPT + "\n\nKeep each")
        TypeAdapter(BetaCompactionConfigParam).validate_python(config)
        plain: list[BetaMessageParam] = [{"role": "assistant", "content": "hello"}]
        assert compile_compaction(FIDELITY, messages=plain) == {"type": "summarize"}
