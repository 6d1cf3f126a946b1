"""Claude Code's and Codex's compaction, gated: recorded sessions replayed through the hook.

A short coding session is written as Claude Code writes its transcript (JSON lines: the task,
a tool use and its result, an answer), then compacted twice, as Claude Code appends a compaction
(a ``compact_boundary`` record and the summary marked ``isCompactSummary``): first with a lossy
summary that keeps "timestamps are UTC" but drops "never emit local time", then with a faithful
one; then the same session as a Codex rollout (its ``compacted`` line holding the summary).
Each time the hook runs as the agent runs it — ``PreCompact`` records the window,
``SessionStart`` with ``source: compact`` judges the compaction — under a policy with
``spec.fidelity`` on. The lossy one is refused and its constraint put back verbatim through
``additionalContext``; the faithful one is allowed; ``prunewarden audit verify`` checks the log.
Run it with ``make demo-agents``: ``python claude_code_compaction.py FOLDER``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TASK = (
    "Fix the CSV exporter in src/report/export.py. "
    "All timestamps must be UTC; never emit local time."
)
SUMMARIES = {
    "lossy": "Fixing the CSV exporter in src/report/export.py; timestamps are UTC, emit local "
    "time.",
    "faithful": "Fixing the CSV exporter in src/report/export.py. All timestamps must be UTC; "
    "never emit local time.",
}
POLICY = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: compaction-demo, version: 1.0.0}
spec:
  fidelity: {mode: enforce}
"""


def record(uuid: str, parent: str | None, kind: str, content: Any, **extra: Any) -> str:
    role = "assistant" if kind == "assistant" else "user"
    message = {"role": role, "content": content}
    return json.dumps(
        {
            "type": kind,
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "demo",
            "message": message,
            **extra,
        }
    )


def session(path: Path) -> None:
    use = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Read",
        "input": {"file_path": "src/report/export.py"},
    }
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "88: stamp = datetime.now()",
    }
    lines = [
        record("u1", None, "user", TASK),
        record("a1", "u1", "assistant", [use]),
        record("u2", "a1", "user", [result]),
        record("a2", "u2", "assistant", [{"type": "text", "text": "Line 88 reads local time."}]),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def compacted(path: Path, summary: str) -> None:
    boundary = json.dumps({"type": "system", "subtype": "compact_boundary", "uuid": "b1"})
    with path.open("a", encoding="utf-8") as stream:
        stream.write(
            boundary + "\n" + record("s1", "b1", "user", summary, isCompactSummary=True) + "\n"
        )


def rollout(path: Path) -> None:
    """The same session as Codex writes its rollout."""

    def line(kind: str, payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": "2026-12-07T10:00:00Z", "type": kind, "payload": payload})

    def message(role: str, text: str) -> str:
        block = "output_text" if role == "assistant" else "input_text"
        content = [{"type": block, "text": text}]
        return line("response_item", {"type": "message", "role": role, "content": content})

    call = {
        "type": "function_call",
        "name": "shell",
        "call_id": "call_1",
        "arguments": '{"cmd": ["sed", "-n", "88p", "src/report/export.py"]}',
    }
    output = {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "stamp = datetime.now()",
    }
    lines = [
        message("user", TASK),
        line("response_item", call),
        line("response_item", output),
        message("assistant", "Line 88 reads local time."),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def rollout_compacted(path: Path, summary: str) -> None:
    with path.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps({"type": "compacted", "payload": {"message": summary}}) + "\n")


def hook(payload: dict[str, Any], policy: Path, audit: Path, agent: str = "claude-code") -> str:
    command = [
        sys.executable,
        "-m",
        "prunewarden",
        "hook",
        agent,
        "--policy",
        str(policy),
        "--audit-log",
        str(audit),
    ]
    done = subprocess.run(  # noqa: S603 - this interpreter, the demo's own arguments
        command, input=json.dumps(payload), capture_output=True, text=True, check=True
    )
    return done.stdout


def main() -> None:
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    policy, audit = folder / "policy.yaml", folder / "audit.jsonl"
    policy.write_text(POLICY, encoding="utf-8")
    for agent, write, compact in (
        ("claude-code", session, compacted),
        ("codex", rollout, rollout_compacted),
    ):
        for name, summary in SUMMARIES.items():
            transcript = folder / f"{agent}-{name}.jsonl"
            write(transcript)
            base = {
                "session_id": f"{agent}-{name}",
                "transcript_path": str(transcript),
                "cwd": str(folder),
            }
            hook({**base, "hook_event_name": "PreCompact", "trigger": "auto"}, policy, audit, agent)
            compact(transcript, summary)
            start = {**base, "hook_event_name": "SessionStart", "source": "compact"}
            out = hook(start, policy, audit, agent)
            if not out:
                print(f"{agent}: {name} compaction: allowed, nothing added")
                continue
            context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
            notice, restored = context.split("\n\n", 1)
            print(f"{agent}: {name} compaction: refused; the next context starts with")
            print(f"  {notice.split('; decision')[0]}]")
            print(f"  {restored}")


if __name__ == "__main__":
    main()
