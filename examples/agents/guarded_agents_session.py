"""The OpenAI Agents SDK's own session edits, judged: pop_item and a trim under a GuardedSession.

A travel planner's history (the system prompt, the task, two function calls and their outputs)
lives in an in-memory ``SQLiteSession`` wrapped by ``GuardedSession``, under the default policy
(the guard records what an edit may drop). An undo (``pop_item``)
would take the newest function output away from its call, which a provider refuses: the guard
refuses it and nothing is popped. A trim written through ``replace_items`` drops the task and
keeps an output without its call: the guard writes the history repaired instead (both put back,
so nothing is left for its tombstone to record). Run it with
``make demo-agents`` (needs ``prunewarden[openai-agents]``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import SQLiteSession
from prunewarden import Decision, Engine
from prunewarden.integrations.openai_agents_edits import GuardedSession

ITEMS: list[Any] = [
    {"role": "system", "content": "You are a travel planner."},
    {"role": "user", "content": "Plan a two-day ferry trip for two adults."},
    {"type": "function_call", "call_id": "c1", "name": "ferries", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "07:30 and 16:00"},
    {"role": "assistant", "content": "Take the 07:30 crossing."},
    {"role": "user", "content": "And the return?"},
    {"type": "function_call", "call_id": "c2", "name": "ferries", "arguments": '{"day": 2}'},
    {"type": "function_call_output", "call_id": "c2", "output": "16:00 and 19:15"},
]


def label(item: Any) -> str:
    """A short name for an item: its role, or its type and call id."""
    return str(item.get("role") or f"{item['type']}:{item['call_id']}")


def show(decision: Decision | None) -> None:
    if decision is None:  # every edit above is judged; nothing to show otherwise
        return
    print(f"  transition: {decision.outcome} ({', '.join(decision.codes)})")
    for reason in decision.reasons:
        print(f"    {reason.code}: {reason.message}")


async def main() -> None:
    engine = Engine.default()
    session = GuardedSession(SQLiteSession("guarded-session"), engine)
    await session.add_items(list(ITEMS))

    popped = await session.pop_item()
    print(f"pop_item -> {popped}")
    show(session.last_decision)
    print(f"  history: {len(await session.get_items())} items, unchanged")

    trimmed = [ITEMS[0], *ITEMS[3:]]  # drops the task and the first call, keeps its output
    print(f"trim keeps {[label(item) for item in trimmed]}")
    written = await session.replace_items(trimmed, applied_by="harness.trim")
    show(session.last_decision)
    print(f"  written: {[label(item) for item in written]}")


if __name__ == "__main__":
    asyncio.run(main())
