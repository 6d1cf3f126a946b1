"""Anthropic's memory tool, governed: every edit of the memory directory judged before it is made.

A travel agent keeps its memories under ``/memories``; the user's standing rules live under
``/memories/core/``, which this harness pins (kind ``constraint``, pinned by the default
policy). A scripted model drives the SDK's own tool runner, offline: it writes the rules and a
note, edits the note, then tries to delete the rules. The delete is refused before it touches
disk, and the tool error the model reads names the remedy: a tombstone under
``/memories/tombstones/``. The model writes one and the delete is made. Every edit is one
record in ``audit.jsonl`` with the directory's manifest digest before and after; the last
lines find the final directory in the log. Run it with ``make demo-agents``, which then runs
``prunewarden audit verify`` on the log (needs ``prunewarden[anthropic]``).

    python examples/agents/memory_tool.py OUTPUT_DIR
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx2
from anthropic import Anthropic
from prunewarden import Engine
from prunewarden.audit import AuditLog
from prunewarden.integrations.memory import GuardedMemoryTool, locate_memory_state

RULES = "/memories/core/rules.md"
TOMBSTONE = "/memories/tombstones/rules.md"
CALLS: list[dict[str, Any]] = [
    {"command": "create", "path": RULES, "file_text": "Never book red-eye flights.\n"},
    {"command": "create", "path": "/memories/trip.md", "file_text": "Ferry to Naxos at 9.\n"},
    {"command": "str_replace", "path": "/memories/trip.md", "old_str": "9", "new_str": "10"},
    {"command": "delete", "path": RULES},
    {
        "command": "create",
        "path": TOMBSTONE,
        "file_text": f"---\ntombstone_for: [{RULES}]\n---\nThe user lifted the rule.\n",
    },
    {"command": "delete", "path": RULES},
]


class ScriptedModel:
    """The Messages API as a model that makes one scripted memory call per turn, offline."""

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.calls = calls
        self.turn = 0
        self.shown: set[str] = set()  # tool results already printed (a request may repeat them)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        for message in json.loads(request.content)["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else ():
                if block.get("type") == "tool_result" and block["tool_use_id"] not in self.shown:
                    self.shown.add(block["tool_use_id"])
                    show(block)
        turn, self.turn = self.turn, self.turn + 1
        if turn < len(self.calls):
            call = self.calls[turn]
            print(f"model: memory {call['command']} {call.get('path', call.get('old_path'))}")
            block = {"type": "tool_use", "id": f"toolu_{turn:02d}", "name": "memory"}
            content, stop = [{**block, "input": call}], "tool_use"
        else:
            content, stop = [{"type": "text", "text": "Done."}], "end_turn"
        reply = {
            "id": f"msg_{turn:02d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-scripted",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return httpx2.Response(200, json=reply)


def show(result: dict[str, Any]) -> None:
    content = result["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    marker = "refused" if result.get("is_error") else "ok"
    first, *rest = text.splitlines()
    print(f"  tool ({marker}): {first}")
    for line in rest:
        print(f"    {line}")


def main(output: Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    log = output / "audit.jsonl"
    engine = Engine(Engine.default().policy, audit=AuditLog(log))
    kinds = {"/memories/core/*": "constraint"}
    tool = GuardedMemoryTool(output / "memories", engine, kinds=kinds, session_id="travel")
    http = httpx2.Client(transport=httpx2.MockTransport(ScriptedModel(CALLS)))
    client = Anthropic(api_key="offline", base_url="http://model.invalid", http_client=http)
    runner = client.beta.messages.tool_runner(
        model="claude-scripted",
        max_tokens=256,
        messages=[{"role": "user", "content": "Plan the Naxos trip; keep your notes."}],
        tools=[tool],
    )
    for _ in runner:
        pass
    if engine.audit is not None:
        engine.audit.close()
    state = locate_memory_state(output / "memories", [log])
    made = sum(edit.made for edit in state.edits)
    print(f"audit: {len(state.edits)} edits judged, {made} made, log {log.name}")
    for edit in state.after:
        print(f"the directory now is the state after edit {edit.index}: {edit.command} {edit.path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
