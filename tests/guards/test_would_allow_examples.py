"""The explanation of every refusing reason the example input documents get under the default
policy, exactly: each alternative (field, operator, value) and the sentence. The property tests
(test_would_allow.py) show an alternative flips its reason; these pin which alternatives are
offered and how they are worded, so an explainer that drops or rewords one fails here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prunewarden import Engine, load_policy

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "examples" / "inputs"

EXPLAINED: dict[tuple[str, str], tuple[list[dict[str, Any]], str]] = {
    ("collapse-seed-narrowing.json", "collapse_detected"): (
        [
            {"field": "spec.collapse.spread_floor", "op": "<=", "value": 0.0666805951919142},
            {"field": "history[4].scores.task", "op": ">=", "value": 0.65},
        ],
        (
            "spread 0.06668 < floor 0.08 for 2 "
            "cycles and canary 0.6 fell from 0.9 "
            "by > 0.25: allowed at spread_floor ≤ "
            "0.06668, or task ≥ 0.65"
        ),
    ),
    ("eviction-buf-definition.json", "pinned"): (
        [{"field": "spec.eviction.pinned_kinds", "op": "excludes", "value": "definition"}],
        (
            "kind 'definition' is pinned: no score allows "
            "it; write a tombstone and summarize, or unpin "
            "the kind"
        ),
    ),
    ("eviction-unscoreable.json", "unscoreable"): (
        [
            {"field": "eviction_candidates", "op": "excludes", "value": ["turn-21"]},
            {"field": "segment.score_dependencies", "op": "excludes", "value": ["turn-21"]},
        ],
        (
            "scored against turn-21, also slated for "
            "eviction: allowed once they leave "
            "eviction_candidates (decide them first), or "
            "once the score no longer depends on them"
        ),
    ),
    ("eviction-unscoreable.json", "unstable_score"): (
        [
            {"field": "spec.eviction.stability_delta", "op": ">=", "value": 0.38},
            {"field": "perturbed_score", "op": "in", "value": [0.0, 0.37]},
        ],
        "|Δ| 0.38 > 0.25: allowed at stability_delta ≥ 0.38 or a perturbed score in [0, 0.37]",
    ),
    ("eviction-utc-constraint.json", "pinned"): (
        [{"field": "spec.eviction.pinned_kinds", "op": "excludes", "value": "constraint"}],
        (
            "kind 'constraint' is pinned: no score allows "
            "it; write a tombstone and summarize, or unpin "
            "the kind"
        ),
    ),
    ("staleness-paraphrase-drift.json", "relevance_inflation"): (
        [
            {"field": "spec.staleness.drift_tolerance", "op": ">=", "value": 0.11764705882352934},
            {"field": "spec.staleness.drift_consecutive_turns", "op": ">=", "value": 4},
        ],
        (
            "relevance rose more than 5% "
            "while tokens fell for 2 "
            "turn(s): allowed at "
            "drift_tolerance ≥ 0.1176 or "
            "drift_consecutive_turns ≥ 4"
        ),
    ),
    ("staleness-summary-orphans.json", "orphaned_parent"): (
        [{"field": "tombstones", "op": "contains", "value": ["m01", "m02", "m03"]}],
        "parents m01, m02, m03 are gone unrecorded: allowed once tombstones name them",
    ),
    ("staleness-summary-orphans.json", "invalidation_gap"): (
        [{"field": "turn.scores_invalidated", "op": ">=", "value": 30}],
        "1 of 30 modified span(s) invalidated: allowed once the rewrite invalidates ≥ 30 score(s)",
    ),
    ("transition-trim-dropped-task.json", "pinned_removed"): (
        [
            {"field": "tombstones", "op": "contains", "value": ["m1"]},
            {"field": "after", "op": "contains", "value": ["m1"]},
        ],
        (
            "pinned m1 left unrecorded: no "
            "score allows it; allowed once a "
            "tombstone names each (summarize "
            "them), or once they are restored"
        ),
    ),
    ("transition-trim-dropped-task.json", "group_split"): (
        [{"field": "after", "op": "contains", "value": ["m2"]}],
        (
            "group(s) c1 split: allowed once the "
            "members that left are restored, or "
            "once the whole group leaves"
        ),
    ),
    ("transition-trim-dropped-task.json", "no_tombstone"): (
        [
            {"field": "tombstones", "op": "contains", "value": ["m1", "m2"]},
            {"field": "spec.transition.require_tombstones", "op": "==", "value": False},
        ],
        (
            "m1, m2 removed unrecorded: allowed "
            "once tombstones name them, or at "
            "require_tombstones false"
        ),
    ),
}


@pytest.fixture(scope="module")
def explained() -> dict[tuple[str, str], tuple[list[dict[str, Any]], str]]:
    """Every explained reason of every example input, keyed by (input file, reason code)."""
    engine = Engine(load_policy(ROOT / "policies" / "default.yaml"))
    found = {}
    for path in sorted(INPUTS.glob("*.json")):
        decision = engine.evaluate(json.loads(path.read_text(encoding="utf-8")), explain=True)
        for reason in decision.reasons:
            if "would_allow" in reason.detail:
                found[path.name, reason.code] = (
                    reason.detail["would_allow"],
                    reason.detail["would_allow_text"],
                )
    return found


class TestExampleExplanations:
    def test_every_refusing_reason_of_the_examples_is_explained_as_pinned(
        self, explained: dict[tuple[str, str], tuple[list[dict[str, Any]], str]]
    ) -> None:
        """The example inputs' explained reasons are exactly the ones listed, no more."""
        assert sorted(explained) == sorted(EXPLAINED)

    @pytest.mark.parametrize("key", sorted(EXPLAINED), ids="/".join)
    def test_alternatives_and_sentence(
        self,
        explained: dict[tuple[str, str], tuple[list[dict[str, Any]], str]],
        key: tuple[str, str],
    ) -> None:
        """Each reason offers exactly these alternatives, in this order, with this sentence."""
        assert explained[key] == EXPLAINED[key]
