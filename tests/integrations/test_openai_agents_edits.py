"""GuardedSession: edits of an Agents SDK session's history (pop, clear, a trim) judged as
transitions on a real SQLiteSession, offline."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession
from prunewarden import Engine, UnsafeTransitionError, parse_policy
from prunewarden.integrations.openai_agents_edits import GuardedSession

# Trims and pops record no tombstones: this harness accepts that and keeps what is pinned.
POLICY = """
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: agents-edits, version: 1.0.0}
spec:
  transition: {require_tombstones: false}
"""

ITEMS: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a travel planner."},
    {"role": "user", "content": "Plan a two-day ferry trip for two adults."},
    {"type": "function_call", "call_id": "c1", "name": "ferries", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "07:30 and 16:00"},
    {"role": "assistant", "content": "Take the 07:30 crossing."},
    {"role": "user", "content": "And the return?"},
]


TOMBSTONE_TEXT = "[prunewarden: 2 earlier messages removed: 1 tool, 1 tool_call]"


def _session(name: str, **options: Any) -> GuardedSession:
    engine = Engine(parse_policy(POLICY, "agents-edits"))
    return GuardedSession(SQLiteSession(name), engine, **options)


async def _filled(session: GuardedSession) -> GuardedSession:
    await session.add_items(list(ITEMS))
    return session


class TestGuardedSession:
    def test_a_trim_that_splits_a_call_is_written_repaired(self) -> None:
        """replace_items with a trim keeping the output without its call writes the history
        with the call put back (and the task, which the trim dropped too)."""

        async def scenario() -> tuple[list[Any], tuple[str, ...]]:
            session = await _filled(_session("edits-trim"))
            written = await session.replace_items([ITEMS[0], *ITEMS[3:]], applied_by="trim")
            assert session.last_decision is not None
            return written, session.last_decision.codes

        written, codes = asyncio.run(scenario())
        assert codes == ("pinned_removed", "group_split")
        assert written == ITEMS

    def test_an_allowed_trim_is_written_with_the_guards_tombstone(self) -> None:
        """Dropping a whole call and its output, keeping the pins, stands, the guard's
        tombstone in their place."""
        tombstone = {"role": "assistant", "content": TOMBSTONE_TEXT}

        async def scenario() -> list[Any]:
            session = await _filled(_session("edits-ok"))
            kept = [ITEMS[0], ITEMS[1], *ITEMS[4:]]
            assert await session.replace_items(kept) == [*ITEMS[:2], tombstone, *ITEMS[4:]]
            return await session.get_items()

        assert asyncio.run(scenario()) == [*ITEMS[:2], tombstone, *ITEMS[4:]]

    def test_under_the_default_policy_a_trim_trims_and_only_what_must_stay_comes_back(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Tombstones required: a trim dropping the task, the call (keeping its output) and the
        answer after it is written with the task and the call put back, the answer recorded by
        the guard's tombstone; a warning names what came back and the decision."""

        async def scenario() -> tuple[list[Any], Any]:
            engine = Engine.default()
            session = await _filled(GuardedSession(SQLiteSession("edits-default"), engine))
            written = await session.replace_items([ITEMS[0], ITEMS[3], ITEMS[5]])
            return written, session.last_decision

        with caplog.at_level(logging.WARNING, logger="prunewarden.integrations"):
            written, decision = asyncio.run(scenario())
        answer = {
            "role": "assistant",
            "content": "[prunewarden: 1 earlier messages removed: 1 assistant]",
        }
        assert decision.codes == ("pinned_removed", "group_split", "no_tombstone")
        assert written == [*ITEMS[:4], answer, ITEMS[5]]
        (warning,) = caplog.records
        assert warning.getMessage().endswith(f"(decision {decision.decision_id})")
        assert "put back item-" in warning.getMessage()

    def test_under_the_default_policy_a_pop_is_recorded_by_its_decision(self) -> None:
        """A pop of the newest item (nothing pinned, no call split) stands with tombstones
        required: the decision records what the caller deleted."""

        async def scenario() -> tuple[Any, Any]:
            session = GuardedSession(SQLiteSession("edits-pop-default"), Engine.default())
            await session.add_items([*ITEMS, {"role": "assistant", "content": "Noted."}])
            return await session.pop_item(), session.last_decision

        popped, decision = asyncio.run(scenario())
        assert popped == {"role": "assistant", "content": "Noted."}
        assert decision.codes == ("transition_clean",)

    def test_pop_is_an_edit_and_clear_is_refused(self) -> None:
        """pop_item drops the newest item (no pin on it for an edit); clearing would drop the
        system prompt and the task, so it changes nothing."""

        async def scenario() -> tuple[Any, int, tuple[str, ...]]:
            session = await _filled(_session("edits-pop"))
            popped = await session.pop_item()
            await session.clear_session()
            assert session.last_decision is not None
            return popped, len(await session.get_items()), session.last_decision.codes

        popped, left, codes = asyncio.run(scenario())
        assert popped == ITEMS[-1]
        assert left == len(ITEMS) - 1
        assert codes == ("pinned_removed",)

    def test_raise_mode_raises(self) -> None:
        """on_refusal="raise" raises UnsafeTransitionError and writes nothing."""

        async def scenario() -> int:
            session = await _filled(_session("edits-raise", on_refusal="raise"))
            with pytest.raises(UnsafeTransitionError):
                await session.clear_session()
            return len(await session.get_items())

        assert asyncio.run(scenario()) == len(ITEMS)


class TestPolicyClassifier:
    def test_a_function_output_a_policy_rule_names_a_constraint_is_kept(self) -> None:
        """spec.classify: the ferries tool's outputs are constraints; a trim dropping the whole
        call has the output put back with its call (its group), not recorded by a tombstone."""
        policy = parse_policy(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: c, version: 1.0.0}\n"
            "spec:\n  classify:\n    rules:\n"
            "      - {match: {role: tool, tool: ferries}, kind: constraint}\n",
            "c",
        )

        async def scenario() -> list[Any]:
            session = GuardedSession(SQLiteSession("edits-classify"), Engine(policy))
            await _filled(session)
            return await session.replace_items([ITEMS[0], ITEMS[1], *ITEMS[4:]])

        assert asyncio.run(scenario()) == ITEMS


class TestExample:
    def test_the_demo_refuses_a_pop_and_repairs_a_trim(self) -> None:
        """examples/agents/guarded_agents_session.py (make demo-agents): the pop that would
        orphan a call is refused and pops nothing; the trim is written with the task and the
        call put back."""
        done = subprocess.run(
            [sys.executable, "guarded_agents_session.py"],
            cwd=Path(__file__).resolve().parents[2] / "examples" / "agents",
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        lines = done.stdout.splitlines()
        assert lines[0] == "pop_item -> None"
        assert lines[1] == "  transition: deny (group_split)"
        assert lines[3] == "  history: 8 items, unchanged"
        assert lines[5] == "  transition: deny (pinned_removed, group_split, no_tombstone)"
        assert lines[-1] == (
            "  written: ['system', 'user', 'function_call:c1', 'function_call_output:c1', "
            "'assistant', 'user', 'function_call:c2', 'function_call_output:c2']"
        )
        assert done.stderr == ""
