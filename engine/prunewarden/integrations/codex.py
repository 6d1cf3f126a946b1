"""Codex's compaction, judged: its rollout file read as the window Claude Code's reader builds.

No extra needed. Codex writes each session as a JSON-lines rollout (docs/compaction.md has what
is confirmed and what is our reading): lines ``{"timestamp", "type", "payload"}`` whose
``response_item`` payloads are the history — ``message`` items (``role`` ``user``,
``assistant`` or ``developer``, ``content`` blocks of ``input_text`` / ``output_text``),
``function_call`` (``name``, ``arguments``, ``call_id``) and ``function_call_output``
(``call_id``, ``output``) — and whose ``compacted`` line (``payload.message``: the summary)
starts the window again. :func:`read_rollout` turns the window in force into the records
:func:`prunewarden.integrations.claude_code.transcript_window` reads: a function call and its
output one group, the first user message the task, ``developer`` messages and the harness's
``AGENTS.md`` messages pinned as the harness's instructions, its environment message (written
again each turn) left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prunewarden.errors import InputError, Problem
from prunewarden.integrations.claude_code import MAX_TRANSCRIPT_BYTES, Transcript

#: What a compaction's transition records as its editor (``:manual`` or ``:auto`` appended).
APPLIED_BY = "codex.compact"
#: How the harness's instructions start among user messages (our reading of Codex's rollouts):
#: pinned, as developer messages are.
HARNESS_PREFIXES = ("<user_instructions>", "# AGENTS.md")
#: How the environment message starts: the harness writes it again each turn, so it is left out.
ENVIRONMENT_PREFIX = "<environment_context>"


def read_rollout(path: str | Path) -> Transcript:
    """The window in force of the rollout at ``path``; a line that is no JSON object is an
    :class:`InputError` naming the file and line."""
    with Path(path).open(encoding="utf-8") as stream:
        text = stream.read(MAX_TRANSCRIPT_BYTES + 1)
    if len(text) > MAX_TRANSCRIPT_BYTES:
        raise InputError([Problem(str(path), 0, 0, "$", "rollout larger than its limit")])
    records: list[dict[str, Any]] = []
    replaced: list[dict[str, Any]] = []
    summary: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            problem = Problem(str(path), number, exc.colno, "$", f"not JSON: {exc.msg}")
            raise InputError([problem]) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("payload"), dict):
            raise InputError([Problem(str(path), number, 1, "$", "expected a rollout line")])
        payload = entry["payload"]
        if entry.get("type") == "compacted":
            replaced, records = records, []
            summary = str(payload.get("message", ""))
        elif entry.get("type") == "response_item":
            record = _record(payload, f"{Path(path).stem}:{number}")
            if record is not None:
                records.append(record)
    return Transcript(records, summary, replaced)


def _record(item: dict[str, Any], uuid: str) -> dict[str, Any] | None:
    kind = item.get("type")
    if kind == "message":
        role = str(item.get("role"))
        blocks = [
            {"type": "text", "text": str(b.get("text", ""))}
            for b in item.get("content") or []
            if isinstance(b, dict) and b.get("type") in {"input_text", "output_text", "text"}
        ]
        text = "\n".join(b["text"] for b in blocks)
        if role == "user" and text.startswith(ENVIRONMENT_PREFIX):
            return None
        meta = role == "developer" or (role == "user" and text.startswith(HARNESS_PREFIXES))
        shown = "assistant" if role == "assistant" else "user"
        return {"type": shown, "uuid": uuid, "isMeta": meta, "message": {"content": blocks}}
    if kind == "function_call":
        arguments = item.get("arguments", "")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError:
            parsed = arguments
        use = {
            "type": "tool_use",
            "id": item.get("call_id"),
            "name": item.get("name"),
            "input": parsed,
        }
        return {"type": "assistant", "uuid": uuid, "message": {"content": [use]}}
    if kind == "function_call_output":
        output = item.get("output", "")
        text = output if isinstance(output, str) else json.dumps(output, sort_keys=True)
        result = {"type": "tool_result", "tool_use_id": item.get("call_id"), "content": text}
        return {"type": "user", "uuid": uuid, "message": {"content": [result]}}
    return None  # reasoning and other items: nothing a summary is read against


__all__ = ["APPLIED_BY", "ENVIRONMENT_PREFIX", "HARNESS_PREFIXES", "read_rollout"]
