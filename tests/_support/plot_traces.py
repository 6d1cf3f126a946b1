"""Traces of a few cycles for the plot tests: a healthy or a collapsing session."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any


def cycle_trace(folder: Path, name: str, seed: int, *, collapsed: bool) -> str:
    """A trace of eight cycles of twelve entries and a pinned canary."""
    rng = random.Random(seed)  # noqa: S311 - test data
    lines: list[dict[str, Any]] = [
        {"type": "session", "trace_version": 1, "session_id": name, "labels": {}}
    ]
    for cycle in range(1, 9):
        squeeze = 0.5 ** (cycle - 1) if collapsed else 1.0
        scores = {
            f"e{i:02d}": round(min(0.91, max(0.35, 0.63 + rng.gauss(0, 0.06) * squeeze)), 4)
            for i in range(12)
        }
        scores["task"] = round(0.75 - 0.04 * cycle if collapsed else 0.61, 4)
        lines.append({"type": "cycle", "cycle": cycle, "scores": scores, "pinned": ["task"]})
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)
