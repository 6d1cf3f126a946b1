"""Write the example traces in examples/traces/ (deterministic; re-run after edits), or a large
synthetic trace for benchmarks.

    python examples/make_traces.py                      # examples/traces/*.jsonl
    python examples/make_traces.py --synthetic --turns 500 --segments 200 --out big.jsonl

Each example trace records one session of an agent loop, one event per line, reproducing an
observation of the source documents or a healthy session where nothing should fire. They were
recorded as a harness running under policies/default.yaml would see them: what a pass evicted is
gone from the later cycles.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "traces"

Event = dict[str, Any]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def header(session_id: str, note: str, **labels: str) -> Event:
    return {
        "type": "session",
        "trace_version": 1,
        "session_id": session_id,
        "labels": labels,
        "note": note,
    }


def span(span_id: str, text: str, score: float | None, **extra: Any) -> dict[str, Any]:
    return {"span_id": span_id, "text": text, "score": score, "text_sha256": sha(text), **extra}


def window_segment(
    segment_id: str, kind: str, score: float, tokens: int, **extra: Any
) -> dict[str, Any]:
    """A segment of the window a pass plans over, its score bound to its text."""
    text = extra.pop("text", f"{kind} {segment_id}")
    return {
        "id": segment_id,
        "kind": kind,
        "text": text,
        "tokens": tokens,
        "score": score,
        "perturbed_score": round(min(1.0, score + 0.01), 4),
        "text_sha256": sha(text),
        **extra,
    }


# --------------------------------------------------------------------------------------------
# 000: relevance-score collapse


def narrowing(cycle: int, cycles: int) -> dict[str, float]:
    """The spread narrows toward the midpoint: the task canary drifts 0.9 -> 0.6, the noise
    0.1 -> 0.5, over ``cycles`` rewrite cycles."""
    t = (cycle - 1) / (cycles - 1)
    scores = {"task": round(0.9 - 0.3 * t, 4)}
    for i in range(12):
        noise = 0.1 + 0.05 * (i % 4)
        scores[f"turn-{i:02d}"] = round(noise + (0.5 + 0.01 * (i % 5) - noise) * t, 4)
    return scores


def collapse_narrowing() -> Iterator[Event]:
    """Fourteen rewrite cycles narrowing the spread. The spread falls below 0.08 at cycle 10;
    at cycle 11 it has stayed there two cycles but the canary still holds (0.67, within 0.25 of
    its 0.9 baseline); at cycle 12 it has dropped 0.25+: halt there, not earlier. The pass the
    harness asks for at cycle 12 (the window at 85%) is frozen, and stays so."""
    cycles = 14
    yield header(
        "seed-000-narrowing",
        "000: spread narrowing to the midpoint, canary 0.9 -> 0.6, noise 0.1 -> 0.5",
        seed="000",
        agent="summarizer",
    )
    for cycle in range(1, cycles + 1):
        scores = narrowing(cycle, cycles)
        yield {"type": "cycle", "cycle": cycle, "scores": scores, "pinned": ["task"]}
        yield {"type": "turn", "turn": cycle, "mean_relevance": 0.5, "tokens": 20_000 - 100 * cycle}
        if cycle == 12:
            segments = [
                window_segment(entry, "task" if entry == "task" else "turn", score, 1500)
                for entry, score in scores.items()
            ]
            segments[0]["non_recoverable"] = True
            yield {
                "type": "pass",
                "segments": segments,
                "free_tokens": 3000,
                "note": "window at 85%: free 3000 tokens",
            }


def collapse_homogeneous() -> Iterator[Event]:
    """A genuinely homogeneous buffer: the spread is below the floor every cycle, but the canary
    holds its rank and baseline (signal A alone): nothing fires."""
    yield header(
        "healthy-homogeneous",
        "000, healthy: low spread without canary inversion is benign compression",
        seed="000",
        agent="summarizer",
    )
    for cycle in range(1, 7):
        scores = {"task": 0.66}
        scores.update(
            {f"turn-{i}": round(0.58 + 0.01 * i + 0.002 * (cycle % 2), 4) for i in range(6)}
        )
        yield {"type": "cycle", "scores": scores, "pinned": ["task"]}
        yield {"type": "turn", "mean_relevance": 0.6, "tokens": 12_000 - 200 * cycle}


# --------------------------------------------------------------------------------------------
# 001: evictions the scorer cannot justify

UTC = "All timestamps must be UTC; never emit local time."
BUF = "`buf` refers to the pre-compaction buffer, not the network buffer."


def _growing_turns(count: int, per_turn: int) -> Iterator[Event]:
    for turn in range(1, count + 1):
        relevance = round(0.55 + 0.01 * ((turn * 7) % 3 - 1), 4)
        yield {"type": "turn", "turn": turn, "mean_relevance": relevance, "tokens": per_turn * turn}


def eviction_utc() -> Iterator[Event]:
    """A long-horizon coding agent, 128k window, self-pruning at 85% utilization: at turn 41
    the turn-3 constraint scores 0.11 and is proposed for eviction (refused: pinned). In the
    same pass a tool output whose score moves 0.30 under perturbation is refused as unstable, and
    an ordinary stale turn is evicted."""
    yield header(
        "seed-001-utc-constraint",
        "001: the turn-3 UTC constraint scored 0.11 at turn 41",
        seed="001",
        agent="long-horizon-coder",
        window="128k",
    )
    yield from _growing_turns(41, 2650)
    candidates = ["turn-03", "turn-17", "turn-22"]
    yield {
        "type": "eviction",
        "segment": {
            "id": "turn-03",
            "kind": "constraint",
            "text": UTC,
            "tokens": 18,
            "tombstone_written": True,
        },
        "score": 0.11,
        "perturbed_score": 0.14,
        "eviction_candidates": candidates,
        "note": "turn 41: the constraint looks redundant with the timezone work in progress",
    }
    yield {
        "type": "eviction",
        "segment": {
            "id": "turn-17",
            "kind": "tool_output",
            "tokens": 2400,
            "tombstone_written": True,
        },
        "score": 0.12,
        "perturbed_score": 0.42,
        "eviction_candidates": candidates,
    }
    yield {
        "type": "eviction",
        "segment": {"id": "turn-22", "kind": "turn", "tokens": 1900, "tombstone_written": True},
        "score": 0.15,
        "perturbed_score": 0.16,
        "eviction_candidates": candidates,
    }


def eviction_buf() -> Iterator[Event]:
    """The second trace: the `buf` definition evicted at 0.09 (refused: pinned), next to an
    ordinary turn that may go."""
    yield header(
        "seed-001-buf-definition",
        "001: the `buf` definition scored 0.09",
        seed="001",
        agent="long-horizon-coder",
        window="128k",
    )
    yield from _growing_turns(30, 3600)
    candidates = ["turn-09", "turn-12"]
    yield {
        "type": "eviction",
        "segment": {
            "id": "turn-09",
            "kind": "definition",
            "text": BUF,
            "tokens": 21,
            "tombstone_written": True,
        },
        "score": 0.09,
        "perturbed_score": 0.31,
        "eviction_candidates": candidates,
    }
    yield {
        "type": "eviction",
        "segment": {"id": "turn-12", "kind": "turn", "tokens": 3100, "tombstone_written": True},
        "score": 0.2,
        "perturbed_score": 0.21,
        "eviction_candidates": candidates,
    }


# --------------------------------------------------------------------------------------------
# 002: scores a rewrite invalidated


def staleness_orphans() -> Iterator[Event]:
    """A 40-message transcript is pruned once while healthy; then it is summarized into 12
    messages (a summary of messages 1-29, and messages 30-40), only the summary is re-scored,
    and the three low-relevance originals folded into it were pruned without tombstones: the
    rewrite reports 29 spans modified and 1 score invalidated, and the summary's parents are
    gone. The second prune is refused (invalidation_gap, orphaned_parent)."""
    yield header(
        "seed-002-summary-orphans",
        "002: 40 messages summarized into 12, only the summary re-scored",
        seed="002",
        agent="summarizer",
    )
    messages = [f"m{i:02d}" for i in range(1, 41)]
    scores = {m: round(0.2 + 0.6 * ((i * 13) % 40) / 39, 4) for i, m in enumerate(messages)}
    yield {"type": "turn", "mean_relevance": 0.52, "tokens": 24_000}
    yield {
        "type": "prune",
        "spans": [span(m, f"message {m}", scores[m]) for m in messages],
        "keep_top_k": 40,
        "note": "before the rewrite: every score bound, nothing to cut yet",
    }
    summary = "Summary of messages 1-29: the task, its UTC constraint, the buf definition."
    spans = [span("summary", summary, 0.93, rewrite_count=1, derived_from=messages[:29])]
    spans += [span(m, f"message {m}", scores[m]) for m in messages[29:]]
    yield {"type": "turn", "mean_relevance": 0.53, "tokens": 7_400}
    yield {
        "type": "prune",
        "spans": spans,
        "keep_top_k": 8,
        "turn": {"spans_modified": 29, "scores_invalidated": 1},
        "tombstones": messages[3:29],
        "note": "after summarizing: m01-m03 were pruned without tombstones",
    }


def staleness_drift() -> Iterator[Event]:
    """Four turns of paraphrase-of-paraphrase: each turn re-summarizes the summary, tokens fall
    (9800 -> 2400) and mean relevance rises (0.61 -> 0.85), every score freshly bound. The prune
    after turn 3 is the first with two consecutive rising turns: flagged there, not earlier."""
    yield header(
        "seed-002-paraphrase-drift",
        "002: relevance rising as tokens fall, four rewrites in a row",
        seed="002",
        agent="summarizer",
    )
    turns = [(0.61, 9800), (0.68, 6100), (0.76, 3900), (0.85, 2400)]
    for turn, (relevance, tokens) in enumerate(turns, start=1):
        yield {"type": "turn", "turn": turn, "mean_relevance": relevance, "tokens": tokens}
        text = "the task" + ", paraphrased" * turn
        yield {
            "type": "prune",
            "spans": [
                span("summary", text, relevance, derived_from=["summary"]),
                span(f"m{turn}-a", f"message {turn}a", 0.4),
                span(f"m{turn}-b", f"message {turn}b", 0.3),
            ],
            "keep_top_k": 2,
            "turn": {"spans_modified": 1, "scores_invalidated": 1},
        }


# --------------------------------------------------------------------------------------------
# Healthy, and synthetic


def healthy_session() -> Iterator[Event]:
    """Eight cycles of a healthy loop: a wide spread, a steady canary, flat relevance, two new
    turns a cycle and a pass that evicts the two lowest-scored turns (gone from the next
    cycle), a prune with every score bound, an authorized eviction. Nothing fires."""
    yield header(
        "healthy-session",
        "healthy: every guard passes, every pass meets its target",
        agent="summarizer",
    )
    yield from _sliding_window(random.Random(7), cycles=8, turns=10, arrivals=2, tokens=1000)


def _sliding_window(
    rng: random.Random, *, cycles: int, turns: int, arrivals: int, tokens: int
) -> Iterator[Event]:
    """A window of ``turns`` turns plus a pinned task and a constraint; each cycle ``arrivals``
    turns arrive, everything is re-scored, and a pass frees ``arrivals`` turns' tokens: the
    lowest-scored turns go, as the planner picks them (lowest first, window order on ties)."""
    live = [f"turn-{i:03d}" for i in range(turns)]
    made = turns
    for cycle in range(1, cycles + 1):
        live += [f"turn-{made + i:03d}" for i in range(arrivals)]
        made += arrivals
        scores = {"task": round(0.9 + rng.uniform(-0.01, 0.01), 4), "c-utc": 0.8}
        scores.update({turn: round(rng.uniform(0.05, 0.95), 4) for turn in live})
        yield {"type": "cycle", "scores": scores, "pinned": ["task"]}
        retained = sum(scores.values()) / len(scores)
        yield {"type": "turn", "mean_relevance": round(retained, 4), "tokens": tokens * len(live)}
        segments = [
            window_segment("task", "task", scores["task"], 300, non_recoverable=True),
            window_segment("c-utc", "constraint", scores["c-utc"], 18, text=UTC),
            *(window_segment(turn, "turn", scores[turn], tokens) for turn in live),
        ]
        yield {"type": "pass", "segments": segments, "free_tokens": tokens * arrivals}
        evicted = sorted(live, key=lambda turn: scores[turn])[:arrivals]
        live = [turn for turn in live if turn not in evicted]
        if cycle == cycles:
            yield {
                "type": "prune",
                "spans": [span(turn, f"turn {turn}", scores[turn]) for turn in live],
                "keep_top_k": len(live) - 2,
            }
            lowest = min(live, key=lambda turn: scores[turn])
            yield {
                "type": "eviction",
                "segment": {
                    "id": lowest,
                    "kind": "turn",
                    "tokens": tokens,
                    "tombstone_written": True,
                },
                "score": scores[lowest],
                "perturbed_score": scores[lowest],
                "eviction_candidates": [lowest],
            }


def synthetic(turns: int, segments: int, seed: int = 0) -> Iterator[Event]:
    """A large healthy session for benchmarks: per turn a cycle with ``segments`` scores, a turn
    and a pass over ``segments`` window segments; then a prune and an eviction."""
    yield header(f"synthetic-{turns}x{segments}", "synthetic benchmark session", synthetic="yes")
    yield from _sliding_window(
        random.Random(seed), cycles=turns, turns=max(segments - 4, 1), arrivals=2, tokens=500
    )


EXAMPLES = {
    "collapse-narrowing.jsonl": collapse_narrowing,
    "healthy-homogeneous.jsonl": collapse_homogeneous,
    "eviction-utc-constraint.jsonl": eviction_utc,
    "eviction-buf-definition.jsonl": eviction_buf,
    "staleness-summary-orphans.jsonl": staleness_orphans,
    "staleness-paraphrase-drift.jsonl": staleness_drift,
    "healthy-session.jsonl": healthy_session,
}


def write(path: Path, events: Iterable[Event]) -> int:
    """Write events as JSON Lines, one at a time; return how many lines."""
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for event in events:
            out.write(json.dumps(event, separators=(", ", ": ")) + "\n")
            count += 1
    return count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--synthetic", action="store_true", help="write one synthetic trace")
    parser.add_argument("--turns", type=int, default=500, help="synthetic: turns (cycles)")
    parser.add_argument("--segments", type=int, default=200, help="synthetic: window size")
    parser.add_argument("--seed", type=int, default=0, help="synthetic: random seed")
    parser.add_argument("--out", type=Path, help="synthetic: output file")
    parser.add_argument("--dir", type=Path, default=HERE, help="examples: output folder")
    args = parser.parse_args(argv)
    if args.synthetic:
        if args.out is None:
            parser.error("--synthetic needs --out FILE")
        lines = write(args.out, synthetic(args.turns, args.segments, args.seed))
        print(f"{args.out}: {lines} lines")
        return
    args.dir.mkdir(parents=True, exist_ok=True)
    for name, events in EXAMPLES.items():
        write(args.dir / name, events())


if __name__ == "__main__":
    main()
