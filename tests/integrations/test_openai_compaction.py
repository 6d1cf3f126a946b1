"""OpenAI compaction items: an encrypted summary judged as one whose text cannot be read
(``spec.fidelity.opaque``), on a real SQLiteSession, with the SDKs' real types, offline."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from agents import SQLiteSession
from agents.memory.openai_responses_compaction_session import OpenAIResponsesCompactionSession
from openai import AsyncOpenAI
from openai.types.responses import ResponseCompactionItem
from openai.types.responses.compacted_response import CompactedResponse
from prunewarden import Engine, parse_policy
from prunewarden.integrations.openai_agents_edits import COMPACTION_SESSION, GuardedSession

SYSTEM = {"role": "developer", "content": "Never book a crossing before 07:00."}
TASK = {"role": "user", "content": "Plan a two-day ferry trip for two adults."}
HISTORY: list[dict[str, Any]] = [
    SYSTEM,
    TASK,
    {"type": "function_call", "call_id": "c1", "name": "ferries", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "07:30 and 16:00"},
    {"role": "assistant", "content": "Take the 07:30 crossing."},
    {"role": "user", "content": "And the return?"},
]


def _policy(opaque: str | None) -> str:
    field = f", opaque: {opaque}" if opaque else ""
    return (
        "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: opaque, version: 1.0.0}\n"
        f"spec:\n  fidelity: {{mode: enforce{field}}}\n"
    )


def _compacted() -> list[dict[str, Any]]:
    """What /responses/compact returns (the user messages, then one encrypted compaction item),
    its compaction item read with the SDK's model."""
    response = CompactedResponse.model_validate(
        {
            "id": "resp_c1",
            "created_at": 1_765_000_000,
            "object": "response.compaction",
            "output": [
                {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"},
            ],
            "usage": {
                "input_tokens": 900,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": 80,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 980,
            },
        }
    )
    assert isinstance(response.output[-1], ResponseCompactionItem)
    return [TASK, response.output[-1].model_dump(exclude_none=True)]


def _replaced(opaque: str | None, name: str) -> tuple[list[Any], GuardedSession]:
    async def scenario() -> tuple[list[Any], GuardedSession]:
        engine = Engine(parse_policy(_policy(opaque), "opaque"))
        session = GuardedSession(SQLiteSession(name), engine)
        await session.add_items(list(HISTORY))
        written = await session.replace_items(_compacted(), applied_by="responses.compact")
        return written, session

    return asyncio.run(scenario())


class TestOpaqueCompaction:
    def test_keep_pinned_refuses_and_re_appends_the_pinned_item_after_the_compaction(
        self,
    ) -> None:
        """The default: the developer message is pinned and nothing can tell the encrypted item
        kept it, so summary_opaque, and it is written again right after the compaction item;
        the unpinned items stay replaced."""
        written, session = _replaced(None, "opaque-default")
        assert session.last_decision is not None
        assert session.last_decision.codes[0] == "summary_opaque"
        assert session.last_decision.blocks
        assert written == [TASK, _compacted()[1], SYSTEM]

    def test_allow_lets_the_compaction_replace_everything(self) -> None:
        written, session = _replaced("allow", "opaque-allow")
        assert session.last_decision is not None
        assert not session.last_decision.blocks
        assert written == _compacted()

    def test_refuse_refuses_any_opaque_summary(self) -> None:
        written, session = _replaced("refuse", "opaque-refuse")
        assert session.last_decision is not None
        reasons = [r for r in session.last_decision.reasons if r.code == "summary_opaque"]
        assert len(reasons) == 5  # every item the compaction replaced, pinned or not
        assert written[:2] == _compacted()

    def test_nothing_pinned_replaced_is_allowed_under_keep_pinned(self) -> None:
        """A compaction that keeps the pinned items verbatim loses nothing that must stay."""

        async def scenario() -> GuardedSession:
            engine = Engine(parse_policy(_policy(None), "opaque"))
            session = GuardedSession(SQLiteSession("opaque-kept"), engine)
            await session.add_items(list(HISTORY))
            await session.replace_items([SYSTEM, *_compacted()])
            return session

        session = asyncio.run(scenario())
        assert session.last_decision is not None
        assert not session.last_decision.blocks

    def test_the_sdk_compaction_session_writes_through_the_guard(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """OpenAIResponsesCompactionSession replaces its history on the guarded session: the
        same judgement, recorded under its name."""

        async def scenario() -> tuple[list[Any], GuardedSession]:
            engine = Engine(parse_policy(_policy(None), "opaque"))
            guarded = GuardedSession(SQLiteSession("opaque-sdk"), engine)
            await guarded.add_items(list(HISTORY))
            compaction = OpenAIResponsesCompactionSession(
                "opaque-sdk",
                underlying_session=guarded,
                client=AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9"),
            )
            await compaction._replace_underlying_session_items(
                output_items=_compacted(),  # type: ignore[arg-type]
                previous_items=list(HISTORY),  # type: ignore[arg-type]
            )
            return await guarded.get_items(), guarded

        with caplog.at_level(logging.WARNING, logger="prunewarden.integrations"):
            items, guarded = asyncio.run(scenario())
        assert guarded.last_decision is not None
        assert f"{COMPACTION_SESSION} refused (summary_opaque" in caplog.records[0].getMessage()
        assert guarded.last_decision.codes[0] == "summary_opaque"
        assert items[-1] == SYSTEM


@pytest.mark.parametrize("value", ["keep_pinned", "refuse", "allow"])
def test_the_policy_field_is_schema_checked_and_the_default_changes_no_digest(
    value: str,
) -> None:
    policy = parse_policy(_policy(value), "opaque")
    assert policy.spec.fidelity.opaque == value
    implicit = parse_policy(_policy(None), "opaque")
    assert (policy.digest == implicit.digest) is (value == "keep_pinned")


def test_without_fidelity_the_pinned_items_come_back_as_removed() -> None:
    """Nothing judges the opaque summary: what it replaced that is pinned is pinned_removed."""
    policy = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: o, version: 1.0.0}\n"

    async def scenario() -> tuple[list[Any], GuardedSession]:
        session = GuardedSession(SQLiteSession("opaque-off"), Engine(parse_policy(policy, "o")))
        await session.add_items(list(HISTORY))
        return await session.replace_items(_compacted()), session

    written, session = asyncio.run(scenario())
    assert session.last_decision is not None
    assert "pinned_removed" in session.last_decision.codes
    assert written[:3] == [TASK, _compacted()[1], SYSTEM]
