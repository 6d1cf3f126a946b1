"""Coding agents' transcripts as they write them, for the compaction hooks' tests: a short
Claude Code session (CLAUDE.md, the task, a tool call and its result) and the same as a Codex
rollout, what each appends when it compacts, and the audit log's decision records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TASK = (
    "Fix the CSV exporter in src/report/export.py. "
    "All timestamps must be UTC; never emit local time."
)
CODEX_TASK = "Fix the CSV exporter. All timestamps must be UTC; never emit local time."


def claude_record(
    uuid: str, parent: str | None, kind: str, content: Any, **extra: Any
) -> dict[str, Any]:
    role = "assistant" if kind == "assistant" else "user"
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s-1",
        "message": {"role": role, "content": content},
        **extra,
    }


def write_transcript(path: Path) -> None:
    """A short session: CLAUDE.md (a meta record), the task, a tool call and its result."""
    records = [
        claude_record("u0", None, "user", "Project rule: never commit to main.", isMeta=True),
        claude_record("u1", "u0", "user", TASK),
        claude_record(
            "a1",
            "u1",
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Read",
                    "input": {"file_path": "src/report/export.py"},
                }
            ],
        ),
        claude_record(
            "u2",
            "a1",
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "88: stamp = datetime.now()",
                }
            ],
        ),
        claude_record(
            "a2", "u2", "assistant", [{"type": "text", "text": "Line 88 reads local time."}]
        ),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def compact(path: Path, summary: str) -> None:
    """What Claude Code appends when it compacts: the boundary, then the summary record."""
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "b1",
        "parentUuid": "a2",
        "compactMetadata": {"trigger": "auto", "preTokens": 1200},
    }
    summary_record = claude_record("s1", "b1", "user", summary, isCompactSummary=True)
    with path.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps(boundary) + "\n" + json.dumps(summary_record) + "\n")


def records(audit: Path) -> list[dict[str, Any]]:
    """The log's decision records (it opens with the record of the policy loaded)."""
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    return [record for record in lines if record["kind"] == "decision"]


def rollout_line(kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": "2026-12-07T10:00:00Z", "type": kind, "payload": payload})


def rollout_message(role: str, text: str) -> str:
    block = "output_text" if role == "assistant" else "input_text"
    return rollout_line(
        "response_item",
        {"type": "message", "role": role, "content": [{"type": block, "text": text}]},
    )


def write_rollout(path: Path) -> None:
    lines = [
        rollout_line("session_meta", {"id": "c-1", "cwd": "/repo"}),
        rollout_message("developer", "Never commit to main."),
        rollout_message("user", "<environment_context>cwd: /repo</environment_context>"),
        rollout_message("user", CODEX_TASK),
        rollout_line(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"cmd": ["cat", "export.py"]}',
                "call_id": "call_1",
            },
        ),
        rollout_line(
            "response_item",
            {"type": "function_call_output", "call_id": "call_1", "output": "88: datetime.now()"},
        ),
        rollout_message("assistant", "Line 88 reads local time."),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def narrowing(cycle: int, total: int = 5) -> dict[str, float]:
    """Scores whose spread narrows to the midpoint while the canary ``task`` drifts 0.9 ->
    0.6: the collapse guard halts at the last cycle."""
    t = (cycle - 1) / (total - 1)
    scores = {"task": 0.9 - 0.3 * t}
    for i in range(10):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"t{i}"] = noise + (0.5 + 0.01 * (i % 5) - noise) * t
    return scores


def halt(session: Any) -> Any:
    """``session`` after five narrowing cycles: halted."""
    for cycle in range(1, 6):
        session.observe_cycle(narrowing(cycle), ["task"])
    assert session.halted
    return session
