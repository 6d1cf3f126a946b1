"""The fidelity meaning method inside transitions: the engine's embedder, MiniLM, offline.

A summary that keeps every fact but drops an instruction without one (nothing the facts method
can see) drifts in meaning; with ``method: both`` the engine refuses it as ``meaning_drift``.
"""

from __future__ import annotations

from typing import Any

import pytest
from prunewarden import Engine, parse_policy
from prunewarden.scoring.embed import MiniLMEmbedder

TASK = (
    "Fix the CSV exporter in src/report/export.py. All timestamps must be UTC; never emit "
    "local time. Keep the diff small and explain each change in the pull request."
)
KEPT = (
    "Fix the CSV exporter in src/report/export.py. Timestamps are UTC; local time is never "
    "emitted. Keep the diff small and explain every change in the pull request."
)
DROPPED = (
    "Fix the CSV exporter in src/report/export.py. Timestamps are UTC; local time is never emitted."
)


def summarized(text: str) -> dict[str, Any]:
    """The task folded into a summary, tombstoned (so only fidelity can refuse it)."""
    task = {"id": "task", "kind": "task", "text": TASK}
    summary = {"id": "sum", "kind": "summary", "text": text, "derived_from": ["task"]}
    return {
        "check": "transition",
        "before": [task, {"id": "t1", "kind": "turn", "text": "Looking at it."}],
        "after": [summary, {"id": "t1", "kind": "turn", "text": "Looking at it."}],
        "tombstones": ["task"],
        "canaries": ["task"],
    }


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def engine(method: str, embedder: MiniLMEmbedder) -> Engine:
    text = f"""
apiVersion: prunewarden/v1
kind: Policy
metadata: {{name: meaning, version: 1.0.0}}
spec:
  fidelity: {{method: {method}, embedding_floor: 0.6}}
"""
    return Engine(parse_policy(text, "<meaning>"), embedder=embedder)


class TestMeaningInTransitions:
    def test_a_dropped_instruction_without_facts_drifts(self, embedder: MiniLMEmbedder) -> None:
        """Facts alone allow the summary that drops 'keep the diff small...'; with both methods
        the engine refuses it as meaning_drift naming the task and the summary."""
        assert engine("facts", embedder).evaluate(summarized(DROPPED)).outcome == "allow"
        decision = engine("both", embedder).evaluate(summarized(DROPPED))
        assert decision.blocks
        assert decision.codes == ("meaning_drift",)
        assert decision.reasons[0].detail == {"parent": "task", "child": "sum", "lost": ["meaning"]}
        assert "task" in decision.restore

    def test_a_faithful_paraphrase_keeps_its_meaning(self, embedder: MiniLMEmbedder) -> None:
        """The task reworded sentence by sentence passes both methods."""
        decision = engine("both", embedder).evaluate(summarized(KEPT))
        assert decision.codes == ("transition_clean",)
