"""``policy check`` against the engine on random policy pairs: what the analysis claims about
every request holds on random requests, and it never reports a witness the engine disowns.

Bounded examples; ``PRUNEWARDEN_FUZZ_SCALE`` times more under ``make fuzz``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden import Engine, load_policy
from prunewarden.analysis import check_policies

SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))
KINDS = ("constraint", "definition", "negation", "plan")
THRESHOLDS = (0.0, 0.1, 0.2, 0.25, 0.3, 0.5)
# Conditions the analysis translates exactly, over the eviction variables and one param.
CONDITIONS = (
    "score < params.t",
    "perturbed_score != null && perturbed_score > params.t",
    "perturbed_score < params.t",
    "segment.kind == 'plan' && score <= params.t",
    "segment.tokens != null && segment.tokens > 100 && !segment.tombstone_written",
    "score - params.t >= 0.5 || segment.non_recoverable",
)

settings_strategy = st.fixed_dictionaries(
    {
        "mode": st.sampled_from(["enforce", "enforce", "audit", "off"]),
        "pinned_kinds": st.lists(st.sampled_from(KINDS), unique=True, max_size=3),
        "stability_delta": st.sampled_from(THRESHOLDS),
        "require_tombstone": st.booleans(),
        "require_perturbation": st.booleans(),
    }
)
rule_strategy = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "when": st.sampled_from(CONDITIONS),
            "effect": st.sampled_from(["deny", "pin", "warn"]),
            "t": st.sampled_from(THRESHOLDS),
        }
    ),
)
request_strategy = st.fixed_dictionaries(
    {
        "score": st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.2509765625, 0.3, 0.5, 0.75, 1.0]),
        "perturbed_score": st.sampled_from([None, 0.0, 0.05, 0.25, 0.5, 0.55, 1.0]),
        "kind": st.sampled_from([*KINDS, "turn"]),
        "non_recoverable": st.booleans(),
        "tombstone_written": st.booleans(),
        "tokens": st.sampled_from([None, 0, 101]),
        "pending": st.booleans(),
    }
)


def write_policy(folder: Path, name: str, eviction: dict[str, Any], rule: Any) -> Path:
    spec: dict[str, Any] = {"eviction": eviction}
    if rule is not None:
        spec["params"] = {"t": rule["t"]}
        spec["rules"] = [
            {
                "name": "r",
                "check": "eviction",
                "when": rule["when"],
                "effect": rule["effect"],
                "message": "m",
            }
        ]
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": name, "version": "1.0.0"},
        "spec": spec,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def request(values: dict[str, Any]) -> dict[str, Any]:
    segment: dict[str, Any] = {
        "id": "s",
        "kind": values["kind"],
        "non_recoverable": values["non_recoverable"],
        "tombstone_written": values["tombstone_written"],
        "score_dependencies": ["d"] if values["pending"] else [],
    }
    if values["tokens"] is not None:
        segment["tokens"] = values["tokens"]
    return {
        "check": "eviction",
        "segment": segment,
        "score": values["score"],
        "perturbed_score": values["perturbed_score"],
        "eviction_candidates": ["d"] if values["pending"] else [],
    }


class TestAgainstTheEngine:
    @settings(max_examples=25 * SCALE)
    @given(
        base=settings_strategy,
        base_rule=rule_strategy,
        overlay=settings_strategy,
        overlay_rule=rule_strategy,
        requests=st.lists(request_strategy, min_size=1, max_size=20),
    )
    def test_claims_hold_on_random_requests(
        self,
        *,
        tmp_path_factory: Any,
        base: dict[str, Any],
        base_rule: Any,
        overlay: dict[str, Any],
        overlay_rule: Any,
        requests: list[dict[str, Any]],
    ) -> None:
        """No request shows a difference the analysis ruled out, and every witness holds."""
        folder = tmp_path_factory.mktemp("pair")
        base_path = write_policy(folder, "base", base, base_rule)
        overlay_path = write_policy(folder, "overlay", overlay, overlay_rule)
        findings = check_policies([str(overlay_path)], str(base_path))
        codes = {f.code for f in findings}  # the collapse sections are equal: eviction only
        # The analysis never finds a witness the engine does not reproduce.
        assert not any("does not reproduce" in f.message for f in findings)
        engines = (Engine(load_policy(overlay_path)), Engine(load_policy(base_path)))
        for values in requests:
            mine, theirs = (engine.evaluate(request(values)).blocks for engine in engines)
            if theirs and not mine:
                assert "overlay-more-permissive" in codes, values
            if mine and not theirs:
                assert "overlay-more-restrictive" in codes, values


collapse_strategy = st.fixed_dictionaries(
    {
        "mode": st.sampled_from(["enforce", "enforce", "audit"]),
        "spread_floor": st.sampled_from([0.05, 0.08, 0.1, 0.2]),
        "consecutive_cycles": st.integers(1, 3),
        "canary_margin": st.sampled_from([0.1, 0.25, 0.4]),
        "on_insufficient_history": st.sampled_from(["allow", "halt"]),
        "min_live_entries": st.sampled_from([0, 3]),
        "on_too_few_entries": st.sampled_from(["allow", "halt"]),
    }
)
canary_rule_strategy = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "when": st.sampled_from(
                [
                    "canary.score != null && canary.score < params.t",
                    "spread != null && spread < params.t",
                    "median != null && median > params.t",
                ]
            ),
            "effect": st.sampled_from(["halt", "warn"]),
            "t": st.sampled_from([0.05, 0.3, 0.6]),
        }
    ),
)
GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.6, 0.9, 1.0)
snapshot_strategy = st.lists(st.sampled_from(GRID), min_size=1, max_size=4)
history_strategy = st.fixed_dictionaries(
    {
        "cycles": st.lists(snapshot_strategy, min_size=1, max_size=5),
        "canary": st.sampled_from(["scored", "unscored", "none"]),
        "canary_score": st.sampled_from(GRID),
        "baseline": st.one_of(st.none(), st.sampled_from(GRID)),
    }
)


def collapse_policy(folder: Path, name: str, settings: dict[str, Any], rule: Any) -> Path:
    spec: dict[str, Any] = {"collapse": settings}
    if rule is not None:
        spec["params"] = {"t": rule["t"]}
        spec["rules"] = [
            {"name": "r", "check": "collapse", "when": rule["when"], "effect": rule["effect"]}
        ]
        spec["rules"][0]["message"] = "m"
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": name, "version": "1.0.0"},
        "spec": spec,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def history(values: dict[str, Any]) -> dict[str, Any]:
    snapshots = []
    for number, scores in enumerate(values["cycles"], 1):
        snapshot: dict[str, Any] = {
            "cycle": number,
            "scores": {f"e{i}": score for i, score in enumerate(scores)},
        }
        if values["canary"] != "none":
            snapshot["pinned"] = ["canary"]
            if values["canary"] == "scored":
                snapshot["scores"]["canary"] = values["canary_score"]
        snapshots.append(snapshot)
    document: dict[str, Any] = {"check": "collapse", "history": snapshots}
    if values["baseline"] is not None:
        document["baseline"] = {"canary": values["baseline"]}
    return document


class TestCollapseAgainstTheEngine:
    @settings(max_examples=25 * SCALE)
    @given(
        base=collapse_strategy,
        overlay=collapse_strategy,
        rule=canary_rule_strategy,
        histories=st.lists(history_strategy, min_size=1, max_size=15),
    )
    def test_claims_hold_on_random_histories(
        self,
        *,
        tmp_path_factory: Any,
        base: dict[str, Any],
        overlay: dict[str, Any],
        rule: Any,
        histories: list[dict[str, Any]],
    ) -> None:
        """No history shows a collapse difference the analysis ruled out."""
        folder = tmp_path_factory.mktemp("pair")
        base_path = collapse_policy(folder, "base", base, None)
        overlay_path = collapse_policy(folder, "overlay", overlay, rule)
        findings = check_policies([str(overlay_path)], str(base_path))
        assert not any("does not reproduce" in f.message for f in findings)
        codes = {f.code for f in findings if f.witness is None or f.witness["check"] == "collapse"}
        engines = (Engine(load_policy(overlay_path)), Engine(load_policy(base_path)))
        for values in histories:
            mine, theirs = (engine.evaluate(history(values)).blocks for engine in engines)
            if theirs and not mine:
                assert "overlay-more-permissive" in codes, values
            if mine and not theirs:
                assert "overlay-more-restrictive" in codes, values
