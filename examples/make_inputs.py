"""Write the example input documents in examples/inputs/ and the pruning-pass window in
examples/windows/ (deterministic; re-run after edits).

Each document reproduces one observation of the source documents, or its healthy counterpart.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "inputs"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def span(span_id: str, text: str, score: float | None, **extra: Any) -> dict[str, Any]:
    return {"span_id": span_id, "text": text, "score": score, "text_sha256": sha(text), **extra}


def narrowing(cycles: int) -> list[dict[str, Any]]:
    """Collapse (000): the spread narrows toward the midpoint; the task canary drifts 0.9 -> 0.6,
    the noise 0.1 -> 0.5, over the given number of rewrite cycles."""
    history = []
    for c in range(cycles):
        t = c / (cycles - 1)
        scores = {"task": round(0.9 - 0.3 * t, 4)}
        for i in range(12):
            noise = 0.1 + 0.05 * (i % 4)
            scores[f"turn-{i:02d}"] = round(noise + (0.5 + 0.01 * (i % 5) - noise) * t, 4)
        history.append({"cycle": c + 1, "scores": scores, "pinned": ["task"]})
    return history


def documents() -> dict[str, dict[str, Any]]:
    healthy_cycles = [
        {
            "cycle": c,
            "pinned": ["task"],
            "scores": {"task": 0.92, "turn-a": 0.15 + 0.01 * c, "turn-b": 0.55, "turn-c": 0.8},
        }
        for c in (1, 2, 3)
    ]
    homogeneous = [
        {
            "cycle": c,
            "pinned": ["task"],
            "scores": {"task": 0.66, "turn-a": 0.6, "turn-b": 0.62, "turn-c": 0.64},
        }
        for c in (1, 2, 3)
    ]
    transcript = [f"m{i:02d}" for i in range(1, 41)]
    summary_text = "Summary of messages 1-30: the task, its UTC constraint, the buf definition."
    spans = [span("summary", summary_text, 0.93, rewrite_count=1, derived_from=transcript[:30])]
    spans += [span(m, f"message {m}", 0.3 + 0.05 * (i % 10)) for i, m in enumerate(transcript[30:])]
    healthy_spans = [
        span(f"s{i}", f"turn {i} text", s) for i, s in enumerate([0.2, 0.9, 0.55, 0.1, 0.75, 0.4])
    ]
    drift_text = "the task, paraphrased again"
    return {
        "collapse-seed-narrowing.json": {"check": "collapse", "history": narrowing(5)},
        "collapse-healthy.json": {"check": "collapse", "history": healthy_cycles},
        "collapse-homogeneous-buffer.json": {"check": "collapse", "history": homogeneous},
        "eviction-utc-constraint.json": {
            "check": "eviction",
            "segment": {
                "id": "turn-03",
                "kind": "constraint",
                "tokens": 18,
                "text": "All timestamps must be UTC; never emit local time.",
                "tombstone_written": True,
            },
            "score": 0.11,
            "perturbed_score": 0.14,
            "eviction_candidates": ["turn-03", "turn-17"],
        },
        "eviction-buf-definition.json": {
            "check": "eviction",
            "segment": {
                "id": "turn-09",
                "kind": "definition",
                "tokens": 21,
                "text": "`buf` refers to the pre-compaction buffer, not the network buffer.",
                "tombstone_written": True,
            },
            "score": 0.09,
            "perturbed_score": 0.31,
            "eviction_candidates": ["turn-09"],
        },
        # The UTC constraint again, filed as an ordinary turn: the default policy lets it go;
        # examples/policies/content-pins.yaml pins it by its wording.
        "eviction-untagged-negation.json": {
            "check": "eviction",
            "segment": {
                "id": "turn-03",
                "kind": "turn",
                "tokens": 18,
                "text": "All timestamps must be UTC; never emit local time.",
                "tombstone_written": True,
                "metadata": {"source": "user", "turn": 3},
            },
            "score": 0.11,
            "perturbed_score": 0.14,
            "eviction_candidates": ["turn-03", "turn-17"],
        },
        "eviction-unscoreable.json": {
            "check": "eviction",
            "segment": {
                "id": "turn-22",
                "kind": "turn",
                "score_dependencies": ["turn-21"],
                "tombstone_written": True,
            },
            "score": 0.12,
            "perturbed_score": 0.5,
            "eviction_candidates": ["turn-21", "turn-22"],
        },
        "eviction-healthy.json": {
            "check": "eviction",
            "segment": {"id": "turn-30", "kind": "turn", "tombstone_written": True, "tokens": 240},
            "score": 0.08,
            "perturbed_score": 0.1,
            "eviction_candidates": ["turn-30"],
        },
        "staleness-summary-orphans.json": {
            "check": "staleness",
            "spans": spans,
            "keep_top_k": 8,
            "turn": {"spans_modified": 30, "scores_invalidated": 1},
            # The first three originals were folded into the summary and pruned without a
            # tombstone: the summary's derived_from edges now point at nothing.
            "tombstones": transcript[3:30],
        },
        "staleness-paraphrase-drift.json": {
            "check": "staleness",
            "spans": [span("task", drift_text, 0.97, rewrite_count=2)],
            "keep_top_k": 1,
            "turns": [
                {"turn": 1, "mean_relevance": 0.61, "tokens": 9800},
                {"turn": 2, "mean_relevance": 0.68, "tokens": 6100},
                {"turn": 3, "mean_relevance": 0.76, "tokens": 3900},
                {"turn": 4, "mean_relevance": 0.85, "tokens": 2400},
            ],
        },
        "transition-trim-dropped-task.json": trim_transition(),
        "staleness-healthy.json": {
            "check": "staleness",
            "spans": healthy_spans,
            "keep_top_k": 4,
            "turn": {"spans_modified": 2, "scores_invalidated": 2},
            "turns": [
                {"turn": 1, "mean_relevance": 0.52, "tokens": 9000},
                {"turn": 2, "mean_relevance": 0.53, "tokens": 7000},
                {"turn": 3, "mean_relevance": 0.51, "tokens": 5200},
            ],
        },
    }


def trim_transition() -> dict[str, Any]:
    """An edit made by other code (``check: transition``): a token-budget trim kept the system
    prompt and the newest turns, and dropped the task's constraint and a tool call whose result
    it kept, with no tombstone."""
    before: list[dict[str, Any]] = [
        {"id": "m0", "kind": "system", "text": "You are a coding agent."},
        {"id": "m1", "kind": "constraint", "text": "All timestamps must be UTC."},
        {"id": "m2", "kind": "assistant", "text": "read_file(path='export.py')", "group": "c1"},
        {"id": "m3", "kind": "tool", "text": "def export(rows): ...", "group": "c1"},
        {"id": "m4", "kind": "assistant", "text": "The exporter writes local time."},
        {"id": "m5", "kind": "user", "text": "Fix it and add a test."},
    ]
    return {
        "check": "transition",
        "before": before,
        "after": [before[0], *before[3:]],
        "applied_by": "langchain.trim_messages",
    }


def window() -> dict[str, Any]:
    """A pruning pass (``prunewarden plan``), source document 001: a long-horizon coding agent
    must free 30k tokens; the turn-3 UTC constraint scores 0.11 and the ``buf`` definition 0.09,
    a tool result was scored against another one the pass evicts, one turn's score is unstable."""
    utc = "All timestamps must be UTC; never emit local time."
    buf = "`buf` refers to the pre-compaction buffer, not the network buffer."
    segments: list[dict[str, Any]] = [
        {
            "id": "turn-03",
            "kind": "constraint",
            "text": utc,
            "tokens": 18,
            "score": 0.11,
            "perturbed_score": 0.14,
        },
        {
            "id": "turn-09",
            "kind": "definition",
            "text": buf,
            "tokens": 21,
            "score": 0.09,
            "perturbed_score": 0.3,
        },
    ]
    for i in range(12, 41):
        text = f"tool output of turn {i}"
        score = round(0.05 + 0.03 * ((i * 7) % 23), 2)
        segment: dict[str, Any] = {
            "id": f"turn-{i:02d}",
            "kind": "tool_output" if i % 3 else "turn",
            "text": text,
            "tokens": 1200 + 150 * (i % 7),
            "score": score,
            "perturbed_score": score + 0.02,
        }
        if i == 17:
            segment["score_dependencies"] = ["turn-20"]
        if i == 21:
            segment["perturbed_score"] = round(score + 0.4, 2)
        segments.append(segment)
    for segment in segments:
        segment["text_sha256"] = sha(segment["text"])
    return {
        "session_id": "coding-agent-7",
        "labels": {"deployment": "prod-eu"},
        "segments": segments,
        "free_tokens": 30000,
    }


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for name, document in documents().items():
        (HERE / name).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    windows = HERE.parent / "windows"
    windows.mkdir(exist_ok=True)
    (windows / "free-30k-tokens.json").write_text(
        json.dumps(window(), indent=2) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main()
