"""Anthropic Messages: requests as segments, server-side context edits judged, a policy compiled
into ``context_management``; against the real SDK's types, offline."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.sdk_corpus import (
    CLEAR_KEEP_3,
    SYSTEM_PROMPT,
    anthropic_messages,
    applied,
)
from _support.trim_corpus import conversations
from anthropic.types.beta import (
    BetaContextManagementConfigParam,
    BetaContextManagementResponse,
    BetaMessage,
    BetaMessageParam,
    BetaTextBlock,
    BetaToolUseBlock,
    BetaUsage,
)
from prunewarden import Engine, InputError, parse_policy
from prunewarden.integrations.anthropic import (
    PLACEHOLDER,
    applied_window,
    compile_context_management,
    judge_applied_edits,
    message_segments,
)
from pydantic import TypeAdapter

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
LINES = conversations()["ferry-trip"]  # the task and eleven tool uses: search, read_notes, ...


def _request(edits: BetaContextManagementConfigParam) -> dict[str, Any]:
    return {
        "system": SYSTEM_PROMPT,
        "messages": anthropic_messages(LINES),
        "context_management": edits,
    }


def _kinds(segments: list[dict[str, Any]]) -> list[str]:
    return [segment["kind"] for segment in segments]


class TestMessageSegments:
    def test_blocks_map_to_segments_with_groups_and_pins(self) -> None:
        """A block is a segment: a tool use and its result share a group, a turn's thinking its
        own; the system prompt and the task are pinned, nothing else."""
        segments = message_segments(anthropic_messages(LINES[:3]), system=SYSTEM_PROMPT)
        assert _kinds(segments) == [
            "system",
            "user",
            "thinking",
            "tool_call",
            "tool",
            "thinking",
            "tool_call",
            "tool",
        ]
        assert [s.get("group") for s in segments] == [
            None,
            None,
            "thinking:1",
            "tool_use:toolu_00",
            "tool_use:toolu_00",
            "thinking:3",
            "tool_use:toolu_01",
            "tool_use:toolu_01",
        ]
        assert [s["non_recoverable"] for s in segments] == [True, True] + [False] * 6

    def test_ids_come_from_content_whatever_the_form(self) -> None:
        """The SDK's response blocks map to the same ids as the dicts a request sends."""
        as_dicts: list[BetaMessageParam] = [
            {"role": "user", "content": "Plan the trip."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": 1}},
                ],
            },
        ]
        blocks = [
            BetaTextBlock(type="text", text="Looking."),
            BetaToolUseBlock(type="tool_use", id="toolu_1", name="search", input={"q": 1}),
        ]
        as_models: list[Any] = [as_dicts[0], {"role": "assistant", "content": blocks}]
        ids = [s["id"] for s in message_segments(as_dicts)]
        assert [s["id"] for s in message_segments(as_models)] == ids
        assert ids == [s["id"] for s in message_segments(as_dicts)]
        assert len(set(ids)) == len(ids)

    def test_pinned_tools_and_tool_kinds(self) -> None:
        """A pinned tool's results are canaries; tool_kinds gives a tool's results a kind."""
        segments = message_segments(
            anthropic_messages(LINES[:4]),
            pinned_tools=["calculator"],
            tool_kinds={"read_notes": "constraint"},
        )
        results = [s for s in segments if s["kind"] in {"tool", "constraint"}]
        assert [(s["kind"], s["metadata"]["canary"]) for s in results] == [
            ("tool", False),
            ("constraint", False),
            ("tool", True),
        ]


class TestAppliedWindow:
    def test_oldest_results_become_placeholders(self) -> None:
        """The eight oldest results (three kept) are replaced by placeholders naming them."""
        window = applied_window(_request(CLEAR_KEEP_3), applied(tool_uses=8))
        placeholders = [s for s in window.after if s["kind"] == "tombstone"]
        results = [s["id"] for s in window.before if s["kind"] == "tool"]
        assert [s["tombstone_for"] for s in placeholders] == [[i] for i in results[:8]]
        assert {s["text"] for s in placeholders} == {PLACEHOLDER}
        assert window.cleared == tuple(results[:8])
        assert len(window.after) == len(window.before)

    def test_exclude_tools_and_inputs(self) -> None:
        """exclude_tools is never cleared; clear_tool_inputs replaces the calls too."""
        edits: BetaContextManagementConfigParam = {
            "edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "exclude_tools": ["read_notes"],
                    "clear_tool_inputs": True,
                }
            ]
        }
        window = applied_window(_request(edits), applied(tool_uses=2))
        calls = [s["id"] for s in window.before if s["kind"] in {"tool_call", "tool"}]
        # toolu_00 (search) and toolu_02 (calculator): read_notes' toolu_01 is skipped.
        assert window.cleared == (calls[0], calls[1], calls[4], calls[5])

    def test_thinking_turns_dropped_and_recorded(self) -> None:
        """clear_thinking drops the oldest turns' thinking, recorded as tombstones."""
        edits: BetaContextManagementConfigParam = {"edits": [{"type": "clear_thinking_20251015"}]}
        window = applied_window(_request(edits), applied(thinking_turns=10))
        thinking = [s["id"] for s in window.before if s["kind"] == "thinking"]
        assert window.tombstones == tuple(thinking[:10])
        assert [s["id"] for s in window.after if s["kind"] == "thinking"] == thinking[10:]

    def test_a_response_from_the_sdk_message(self) -> None:
        """A whole BetaMessage response is read for its context_management."""
        response = BetaMessage(
            id="msg_1",
            type="message",
            role="assistant",
            model="claude-sonnet-4-5",
            content=[BetaTextBlock(type="text", text="Done.")],
            usage=BetaUsage(input_tokens=10, output_tokens=2),
            context_management=applied(tool_uses=1),
        )
        window = applied_window(_request(CLEAR_KEEP_3), response)
        assert len(window.cleared) == 1

    def test_no_applied_edit_leaves_the_window(self) -> None:
        """An empty applied_edits list means nothing was cleared."""
        empty = BetaContextManagementResponse(applied_edits=[])
        window = applied_window(_request(CLEAR_KEEP_3), empty)
        assert (window.after, window.cleared) == (window.before, ())

    @pytest.mark.parametrize(
        ("edits", "response", "path"),
        [
            (CLEAR_KEEP_3, applied(tool_uses=9), "applied_edits[*].cleared_tool_uses"),
            ({"edits": []}, applied(tool_uses=1), "applied_edits"),
        ],
        ids=["more-than-allowed", "not-requested"],
    )
    def test_a_report_the_request_cannot_explain_is_refused(
        self, edits: BetaContextManagementConfigParam, response: Any, path: str
    ) -> None:
        """More clearing than the request allows, or an edit it did not ask for: InputError."""
        with pytest.raises(InputError) as raised:
            applied_window(_request(edits), response)
        assert raised.value.problems[0].path == f"$.context_management.{path}"

    @pytest.mark.parametrize(
        ("edits", "response", "path"),
        [
            (
                CLEAR_KEEP_3,
                {"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 1}]},
                "$.context_management.applied_edits[0].cleared_input_tokens",
            ),
            (
                {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"value": 2}}]},
                applied(tool_uses=1),
                "$.context_management.edits[0].keep.type",
            ),
        ],
        ids=["response-field-missing", "request-field-missing"],
    )
    def test_what_the_sdk_types_refuse_is_a_located_input_error(
        self, edits: Any, response: Any, path: str
    ) -> None:
        """A response or a request the SDK's own types refuse: InputError at the field."""
        with pytest.raises(InputError) as raised:
            applied_window(_request(edits), response)
        assert [problem.path for problem in raised.value.problems] == [path]


class TestJudgeAppliedEdits:
    def test_clearing_unpinned_results_is_allowed(self) -> None:
        """Placeholders record what they replaced: the default policy allows the edit."""
        session = Engine.default().session("anthropic-clean")
        outcome = judge_applied_edits(session, _request(CLEAR_KEEP_3), applied(tool_uses=8))
        assert (outcome.refused, outcome.decision.codes) == (False, ("transition_clean",))

    def test_clearing_a_pinned_kind_is_refused_with_a_restore(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """read_notes results as constraints: their clearing is pinned_removed, restored; a
        warning names what to restore and the decision."""
        session = Engine.default().session("anthropic-pinned")
        with caplog.at_level(logging.WARNING, logger="prunewarden.integrations"):
            outcome = judge_applied_edits(
                session,
                _request(CLEAR_KEEP_3),
                applied(tool_uses=8),
                tool_kinds={"read_notes": "constraint"},
            )
        pinned = [s["id"] for s in outcome.window.before if s["kind"] == "constraint"]
        assert outcome.decision.codes == ("pinned_removed", "no_tombstone")
        assert outcome.decision.restore == tuple(pinned[:3])
        (warning,) = caplog.records
        assert warning.getMessage() == (
            "session anthropic-pinned: anthropic.context_management refused (pinned_removed, "
            f"no_tombstone); to restore {', '.join(pinned[:3])} "
            f"(decision {outcome.decision.decision_id})"
        )


class TestCompileContextManagement:
    def test_pins_become_exclude_tools_and_keep(self) -> None:
        """Pinned tools and tools of a pinned kind are excluded; keep reaches the oldest canary;
        the result is a valid SDK parameter."""
        messages = anthropic_messages(LINES)
        canary = [s for s in message_segments(messages) if s["kind"] == "tool"][5]["id"]
        compiled = compile_context_management(
            Engine.default().policy,
            messages=messages,
            pinned_tools=["calculator"],
            tool_kinds={"read_notes": "constraint"},
            canaries=[canary],
        )
        TypeAdapter(BetaContextManagementConfigParam).validate_python(compiled)
        assert compiled == {
            "edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "keep": {"type": "tool_uses", "value": 6},
                    "exclude_tools": ["calculator", "read_notes"],
                }
            ]
        }

    def test_a_pinned_thinking_kind_keeps_all_thinking(self) -> None:
        """A policy pinning thinking compiles clear_thinking with keep all, listed first."""
        policy = parse_policy(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: t, version: 1.0.0}\n"
            "spec: {transition: {pinned_kinds: [thinking]}}\n",
            "t",
        )
        compiled = compile_context_management(policy)
        assert next(iter(compiled["edits"])) == {"type": "clear_thinking_20251015", "keep": "all"}

    def test_a_thinking_canary_keeps_all_thinking(self) -> None:
        """A canary that is a thinking block compiles clear_thinking with keep all."""
        messages = anthropic_messages(LINES[:3])
        canary = next(s["id"] for s in message_segments(messages) if s["kind"] == "thinking")
        compiled = compile_context_management(
            Engine.default().policy, messages=messages, canaries=[canary]
        )
        assert next(iter(compiled["edits"])) == {"type": "clear_thinking_20251015", "keep": "all"}

    def test_the_compiled_edit_clears_nothing_pinned(self) -> None:
        """Whatever the server clears under the compiled parameter, the edit is allowed."""
        messages = anthropic_messages(LINES)
        kinds = {"read_notes": "constraint"}
        compiled = compile_context_management(
            Engine.default().policy, messages=messages, tool_kinds=kinds
        )
        request = {"system": SYSTEM_PROMPT, "messages": messages, "context_management": compiled}
        session = Engine.default().session("anthropic-compiled")
        # Eleven uses, three kept, read_notes excluded: five are all the server may clear.
        outcome = judge_applied_edits(session, request, applied(tool_uses=5), tool_kinds=kinds)
        assert outcome.decision.codes == ("transition_clean",)


class TestExample:
    def test_the_demo_refuses_the_naive_edit_and_allows_the_compiled_one(self) -> None:
        """examples/agents/anthropic_context_editing.py (make demo-agents): the recorded edit
        that cleared three constraints is refused, the compiled request's edit allowed."""
        done = subprocess.run(
            [sys.executable, "anthropic_context_editing.py"],
            cwd=EXAMPLES,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        verdicts = [line.strip() for line in done.stdout.splitlines() if "transition:" in line]
        assert verdicts == [
            "transition: deny (pinned_removed, no_tombstone)",
            "transition: allow (transition_clean)",
        ]
        assert '"exclude_tools": ["read_notes"]' in done.stdout
        assert done.stderr == ""
