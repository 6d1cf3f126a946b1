"""Shared by the framework tests: a scorer that can be made to collapse, and the validator of
an OpenAI-style message list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prunewarden.scoring import Perturbation, RecencyScorer, Scores


class CollapsibleScorer:
    """Recency scores with the canaries high; once ``collapsed``, every
    score bunches at 0.5 and the canaries sink just below it, as a scorer that lost its frame."""

    def __init__(self) -> None:
        self.collapsed = False
        self.recency = RecencyScorer(low=0.1, high=0.8)

    def score(self, segments: Sequence[Mapping[str, Any]], task: str) -> Scores:
        """Scores by position, or collapsed."""
        scores = dict(self.recency.score(segments, task))
        for segment in segments:
            own = str(segment["id"])
            if self.collapsed:
                value = 0.45 if segment["metadata"]["canary"] else 0.5
                scores[own] = (value, value)
            elif segment["metadata"]["canary"]:
                scores[own] = (0.9, 0.9)
        return Scores(scores, dict.fromkeys(scores, Perturbation("none")))


def protocol_problems(roles: Sequence[tuple[str, Sequence[str], str | None]]) -> list[str]:
    """What an OpenAI-style provider would reject: each item is (role, tool call ids made,
    tool call id answered). Every call is answered right after it, and no tool message
    answers a call that is not pending."""
    problems = []
    pending: set[str] = set()
    for i, (role, calls, answers) in enumerate(roles):
        if role == "tool":
            if answers not in pending:
                problems.append(f"{i}: orphan tool message for {answers}")
            pending.discard(answers or "")
            continue
        if pending:
            problems.append(f"{i}: {role} before the calls {sorted(pending)} were answered")
            pending = set()
        pending = set(calls)
    if pending:
        problems.append(f"end: calls {sorted(pending)} unanswered")
    return problems
