"""Counterfactuals: each alternative in a refusing reason's ``would_allow``, applied to the
request or the policy it names, flips that reason and leaves every other refusing reason.

The guards are driven with typed requests and settings (the default policy's, varied), so that
an alternative is applied exactly as the guard reads it. ``PRUNEWARDEN_FUZZ_SCALE`` multiplies
the examples.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from prunewarden._values import replace_value
from prunewarden.decision import Verdict
from prunewarden.fidelity import FidelitySettings
from prunewarden.fidelity._check import Method
from prunewarden.guards import GUARDS, TransitionGuardSettings
from prunewarden.guards.staleness import text_sha256
from prunewarden.inputs import (
    CollapseRequest,
    EvictionRequest,
    Segment,
    Snapshot,
    Span,
    StalenessRequest,
    TransitionRequest,
    TransitionSegment,
    Turn,
    derive_edit,
)
from prunewarden.inputs._model import TurnStats
from prunewarden.policy import CusumSettings, load_builtin_policy

SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))
EXAMPLES = settings(max_examples=150 * SCALE)
SPEC = load_builtin_policy("default").spec
_INDEXED = re.compile(r"^(\w+)\[(\d+)\]\.(\w+)(?:\.(.+))?$")

Case = tuple[Any, Any]  # (settings, request)


def judged(check: str, case: Case) -> Verdict:
    """The guard's verdict on ``case``, explained."""
    guard = GUARDS[check]
    guard_settings, request = case
    return guard.explain(guard_settings, request, guard.evaluate(guard_settings, request))


def refusing_codes(check: str, case: Case) -> set[str]:
    verdict = GUARDS[check].evaluate(*case)
    return {reason.code for reason in verdict.reasons} if verdict.refused else set()


def chosen(change: dict[str, Any]) -> list[Any]:
    """The values an alternative allows that the test tries: both ends of an interval, the
    bound itself otherwise (``>`` a hair above it)."""
    value = change["value"]
    if change["op"] == "in":
        return [value[0], value[1]]
    if change["op"] == ">":
        return [math.nextafter(value, math.inf)]
    if change["op"] == "!=":
        return [0.5]  # any score
    return [value]


def apply(case: Case, change: dict[str, Any], value: Any) -> Case:
    """``case`` with ``change`` made (``value`` one that it allows), and every ``and`` with it."""
    guard_settings, request = case
    field: str = change["field"]
    if field.startswith("spec."):
        guard_settings = _set_setting(guard_settings, field.split(".")[2:], change["op"], value)
    else:
        request = _set_input(request, field, change["op"], value)
    case = (guard_settings, request)
    for more in change.get("and", ()):
        case = apply(case, more, chosen(more)[0])
    return case


def _set_setting(guard_settings: Any, path: list[str], op: str, value: Any) -> Any:
    if len(path) == 2:
        section = getattr(guard_settings, path[0])
        return replace(guard_settings, **{path[0]: replace(section, **{path[1]: value})})
    name = path[0]
    if op == "excludes":
        return replace(guard_settings, **{name: getattr(guard_settings, name) - {value}})
    return replace(guard_settings, **{name: value})


def _set_input(request: Any, field: str, op: str, value: Any) -> Any:
    indexed = _INDEXED.match(field)
    if indexed:
        name, position, attribute, key = indexed.groups()
        items = list(getattr(request, name))
        item = items[int(position)]
        if key is not None:  # history[i].scores.<id>
            item = replace_value(item, scores={**item.scores, key: value})
        else:
            item = replace_value(item, **{attribute: value})
        items[int(position)] = item
        return replace_value(request, **{name: tuple(items)})
    head, _, attribute = field.partition(".")
    values = value if isinstance(value, list) else [value]
    if attribute:  # segment.<field>, turn.<field>
        inner = getattr(request, head)
        current = getattr(inner, attribute)
        if op == "excludes":
            value = tuple(v for v in current if v not in values)
        return replace_value(request, **{head: replace_value(inner, **{attribute: value})})
    current = getattr(request, head)
    if op == "excludes":
        return replace_value(request, **{head: frozenset(current) - set(values)})
    if op == "contains":
        return replace_value(request, **{head: frozenset(current) | set(values)})
    return replace_value(request, **{head: value})


def check_counterfactuals(check: str, case: Case, *, independent: bool = True) -> None:
    """Every alternative of every refusing reason flips that reason; with ``independent``
    reasons (eviction, staleness), the others stay."""
    verdict = judged(check, case)
    assume(verdict.refused)
    before = {reason.code for reason in verdict.reasons}
    for reason in verdict.reasons:
        assert isinstance(reason.detail["would_allow_text"], str)
        for alternative in reason.detail["would_allow"]:
            for value in chosen(alternative):
                after = refusing_codes(check, apply(case, alternative, value))
                assert reason.code not in after, (reason.code, alternative, value)
                if independent:
                    others = before - {reason.code}
                    assert others <= after | _dependent(reason.code), (alternative, after)


def _dependent(code: str) -> set[str]:
    """Reasons a counterfactual may end along with its own: a poisoned span is not checked for
    its binding, and a binding fixed for one span fixes both of its findings."""
    return (
        {"unbound_score", "hash_mismatch"} if code in {"unbound_score", "hash_mismatch"} else set()
    )


# --- strategies ---------------------------------------------------------------------------------

unit = st.floats(0, 1, allow_nan=False)


@st.composite
def eviction_cases(draw: st.DrawFn) -> Case:
    guard_settings = replace(
        SPEC.eviction,
        pinned_kinds=frozenset(draw(st.sets(st.sampled_from(["constraint", "system"])))),
        stability_delta=draw(unit),
        require_tombstone=draw(st.booleans()),
        require_perturbation=draw(st.booleans()),
    )
    segment = Segment(
        id="s",
        kind=draw(st.sampled_from(["turn", "constraint", "system"])),
        text="ran the migration",
        non_recoverable=draw(st.booleans()),
        score_dependencies=tuple(draw(st.sets(st.sampled_from(["a", "b", "c"])))),
        tombstone_written=draw(st.booleans()),
        tokens=None,
    )
    request = EvictionRequest(
        segment,
        draw(unit),
        draw(st.none() | unit),
        frozenset(draw(st.sets(st.sampled_from(["a", "b", "c", "s"])))),
    )
    return guard_settings, request


TEXTS = ["alpha", "beta", "gamma"]


@st.composite
def staleness_cases(draw: st.DrawFn) -> Case:
    guard_settings = replace(
        SPEC.staleness,
        max_rewrites_without_recompute=draw(st.integers(0, 3)),
        drift_tolerance=draw(unit),
        drift_consecutive_turns=draw(st.integers(1, 3)),
    )
    count = draw(st.integers(1, 4))
    spans = []
    for i in range(count):
        text = draw(st.sampled_from(TEXTS))
        binding = draw(st.sampled_from(["bound", "stale", "none"]))
        declared = {
            "bound": text_sha256(text),
            "stale": text_sha256(text + "!"),
            "none": "",
        }[binding]
        spans.append(
            Span(
                span_id=f"s{i}",
                text=text,
                score=draw(st.none() | unit),
                text_sha256=declared,
                rewrite_count=draw(st.integers(0, 4)),
                derived_from=tuple(draw(st.sets(st.sampled_from(["p1", "p2", "s0"])))),
            )
        )
    turns = tuple(
        Turn(turn=i, mean_relevance=draw(unit), tokens=draw(st.integers(1, 10_000)))
        for i in range(draw(st.integers(0, 4)))
    )
    stats = draw(
        st.none() | st.builds(TurnStats, st.integers(0, 3), st.integers(0, 3)),
    )
    request = StalenessRequest(
        spans=tuple(spans),
        keep_top_k=2,
        turn=stats,
        turns=turns,
        tombstones=frozenset(draw(st.sets(st.sampled_from(["p1"])))),
        recompute_budget=None,
    )
    return guard_settings, request


@st.composite
def collapse_cases(draw: st.DrawFn) -> Case:
    guard_settings = replace(
        SPEC.collapse,
        spread_floor=draw(unit),
        consecutive_cycles=draw(st.integers(1, 3)),
        canary_margin=draw(unit),
        on_insufficient_history=draw(st.sampled_from(["allow", "halt"])),
        min_live_entries=draw(st.integers(0, 5)),
        on_too_few_entries=draw(st.sampled_from(["allow", "halt"])),
    )
    ids = ["c", "k", "a", "b", "d"][: draw(st.integers(1, 5))]
    canaries = tuple(draw(st.sets(st.sampled_from(["c", "k"]))) & set(ids))
    history = tuple(
        Snapshot(
            cycle=cycle,
            scores={i: draw(unit) for i in ids if draw(st.integers(0, 9)) > 0},
            pinned=tuple(sorted(canaries)),
        )
        for cycle in range(draw(st.integers(1, 5)))
    )
    return guard_settings, CollapseRequest(history, None)


# --- the properties ----------------------------------------------------------------------------


class TestEviction:
    @EXAMPLES
    @given(eviction_cases())
    def test_each_alternative_flips_its_reason_alone(self, case: Case) -> None:
        """Every eviction refusal's alternatives flip that reason and leave the others."""
        check_counterfactuals("eviction", case)

    def test_unstable_score_reads_as_the_issue_shows(self) -> None:
        """|score - perturbed| 0.31 > 0.25 names the delta and the stable interval."""
        segment = Segment("s", "turn", "x", False, (), True, None)
        request = EvictionRequest(segment, 0.44, 0.75, frozenset({"s"}))
        reason = judged("eviction", (SPEC.eviction, request)).reasons[0]
        assert reason.code == "unstable_score"
        fields = [(c["field"], c["op"]) for c in reason.detail["would_allow"]]
        assert fields == [("spec.eviction.stability_delta", ">="), ("perturbed_score", "in")]
        low, high = reason.detail["would_allow"][1]["value"]
        assert (round(low, 6), round(high, 6)) == (0.19, 0.69)
        assert reason.detail["would_allow_text"] == (
            "|\u0394| 0.31 > 0.25: allowed at stability_delta \u2265 0.31 or a perturbed "
            "score in [0.19, 0.69]"
        )

    def test_pinned_kind_offers_only_unpinning(self) -> None:
        """A pinned kind: no score allows it; the one alternative unpins the kind."""
        segment = Segment("s", "constraint", "x", False, (), True, None)
        request = EvictionRequest(segment, 0.1, 0.1, frozenset({"s"}))
        reason = judged("eviction", (SPEC.eviction, request)).reasons[0]
        assert reason.detail["would_allow"] == [
            {"field": "spec.eviction.pinned_kinds", "op": "excludes", "value": "constraint"}
        ]
        assert reason.detail["would_allow_text"].startswith(
            "kind 'constraint' is pinned: no score allows it"
        )


class TestStaleness:
    @EXAMPLES
    @given(staleness_cases())
    def test_each_alternative_flips_its_reason_alone(self, case: Case) -> None:
        """Every staleness refusal's alternatives flip that reason and leave the others."""
        check_counterfactuals("staleness", case)


class TestCollapse:
    @EXAMPLES
    @given(collapse_cases())
    def test_each_alternative_flips_the_halt(self, case: Case) -> None:
        """Every collapse refusal's alternatives flip it (collapse reports one reason)."""
        check_counterfactuals("collapse", case, independent=False)

    @pytest.mark.parametrize("mode", ["relative", "cusum"])
    @EXAMPLES
    @given(case=collapse_cases())
    def test_each_alternative_flips_the_halt_in_other_floor_modes(
        self, mode: str, case: Case
    ) -> None:
        """The relative floor and the cusum test are inverted as the guard computes them."""
        guard_settings, request = case
        guard_settings = replace(
            guard_settings,
            spread_floor_mode=mode,
            relative_first_cycles=2 if mode == "relative" else 0,
            cusum=CusumSettings() if mode == "cusum" else None,
        )
        check_counterfactuals("collapse", (guard_settings, request), independent=False)


# --- transitions: the edit is derived again from the windows each alternative changes ---------


def _transition_settings(require_tombstones: bool, require_scores: bool) -> Any:
    transition = replace(
        SPEC.transition, require_tombstones=require_tombstones, require_scores=require_scores
    )
    return TransitionGuardSettings(transition, SPEC.eviction, GUARDS["eviction"].evaluate)


def _window_segment(  # noqa: PLR0917 - one field of the document each
    segment_id: str,
    kind: str,
    text: str,
    score: float | None,
    declared: str,
    group: str | None = None,
    derived_from: tuple[str, ...] = (),
) -> TransitionSegment:
    segment = Segment(segment_id, kind, text, False, (), False, None)
    return TransitionSegment(
        segment_id, segment, score, score, declared, text_sha256(text), derived_from, group
    )


@st.composite
def transition_cases(draw: st.DrawFn) -> Case:
    before = []
    for i in range(draw(st.integers(1, 5))):
        text = f"text {i}"
        score = draw(st.none() | unit)
        before.append(
            _window_segment(
                f"m{i}",
                draw(st.sampled_from(["turn", "constraint"])),
                text,
                score,
                text_sha256(text) if score is not None else "",
                group=draw(st.sampled_from([None, "g1"])),
            )
        )
    after = []
    for segment in before:
        fate = draw(st.sampled_from(["keep", "keep", "rewrite", "drop"]))
        if fate == "keep":
            after.append(segment)
        elif fate == "rewrite":
            text = segment.segment.text + " rewritten"
            declared = draw(st.sampled_from([text_sha256(text), segment.text_sha256, ""]))
            after.append(
                _window_segment(
                    segment.id, segment.segment.kind, text, segment.score, declared, segment.group
                )
            )
    if draw(st.booleans()):
        parents = tuple(draw(st.sets(st.sampled_from([s.id for s in before] + ["ghost"]))))
        after.append(_window_segment("sum", "summary", "a summary", None, "", None, parents))
    tombstones = frozenset(draw(st.sets(st.sampled_from([s.id for s in before]))))
    reported = draw(st.none() | st.builds(TurnStats, st.integers(0, 3), st.integers(0, 3)))
    request = TransitionRequest(
        before=tuple(before),
        after=tuple(after),
        tombstones=tombstones,
        applied_by=None,
        reported=reported,
        canaries=frozenset(draw(st.sets(st.sampled_from(["m0"])))),
        session_id=None,
        labels={},
        edit=derive_edit(tuple(before), tuple(after), tombstones),
        halt=draw(st.sampled_from([None, {"check": "collapse", "cycle": 3}])),
    )
    return _transition_settings(draw(st.booleans()), draw(st.booleans())), request


def apply_transition(case: Case, change: dict[str, Any]) -> Case:
    """``case`` with ``change`` (and its ``and``) made, and the edit derived again."""
    guard_settings, request = case
    field, value = change["field"], change["value"]
    if field.startswith("spec.transition."):
        name = field.removeprefix("spec.transition.")
        transition = replace(guard_settings.transition, **{name: value})
        guard_settings = replace(guard_settings, transition=transition)
    elif field == "tombstones":
        request = replace_value(request, tombstones=request.tombstones | set(value))
    elif field.startswith("spec.fidelity."):
        name = field.removeprefix("spec.fidelity.")
        if change["op"] == "excludes":
            dropped = set(value if isinstance(value, list) else [value])
            value = guard_settings.fidelity.kinds - dropped
        guard_settings = replace(
            guard_settings, fidelity=replace(guard_settings.fidelity, **{name: value})
        )
    elif field == "after":  # put the segments of before back, as they were (restore, verbatim)
        back = {s.id: s for s in request.before if s.id in set(value)}
        kept = tuple(back.pop(s.id, s) for s in request.after)
        request = replace_value(request, after=kept + tuple(back.values()))
    elif field.startswith("reported."):
        name = field.removeprefix("reported.")
        request = replace_value(request, reported=replace_value(request.reported, **{name: value}))
    else:
        request = _set_input(request, field, change["op"], value)
    request = replace_value(
        request, edit=derive_edit(request.before, request.after, request.tombstones)
    )
    case = (guard_settings, request)
    for more in change.get("and", ()):
        case = apply_transition(case, more)
    return case


class TestTransition:
    @EXAMPLES
    @given(transition_cases())
    def test_each_alternative_flips_its_reason(self, case: Case) -> None:
        """Every transition refusal's alternatives flip that reason. Putting segments back or
        recording them can end several findings on the same ids, so only the flip is held."""
        verdict = judged("transition", case)
        assume(verdict.refused)
        for reason in verdict.reasons:
            assert isinstance(reason.detail["would_allow_text"], str)
            for alternative in reason.detail["would_allow"]:
                after = refusing_codes("transition", apply_transition(case, alternative))
                assert reason.code not in after, (reason.code, alternative)


# --- fidelity: each finding names its parent and child, and its alternatives flip that one ----

PARENTS = [
    "Listen on port 8443.",
    "All timestamps must be UTC; never emit local time.",
    "Deploy to eu-west-1 with --dry-run.",
    "Looked at the logs.",
]
CHILDREN = [
    "Port 8443; timestamps UTC, never local time; eu-west-1 with --dry-run.",
    "Port 8443; timestamps UTC; emit local time.",
    "Deployed somewhere.",
    "",
    "I'm sorry, but I can't help with that.",
    "Port 8443.",
]


@functools.cache
def minilm() -> Any:
    """The bundled embedder, loaded once (the texts above are embedded once each)."""
    from prunewarden.scoring.embed import MiniLMEmbedder  # noqa: PLC0415 - only when drawn

    return MiniLMEmbedder()


@st.composite
def fidelity_cases(draw: st.DrawFn) -> Case:
    """Parents with facts and a negation, kept, dropped or rewritten, and a summary of some;
    fidelity enforced with either scope, either method and a varied share and floor."""
    before = [
        _window_segment(f"m{i}", draw(st.sampled_from(["turn", "constraint"])), text, None, "")
        for i, text in enumerate(draw(st.lists(st.sampled_from(PARENTS), min_size=1, max_size=3)))
    ]
    after = []
    for segment in before:
        fate = draw(st.sampled_from(["keep", "rewrite", "drop"]))
        if fate == "keep":
            after.append(segment)
        elif fate == "rewrite":
            text = draw(st.sampled_from(CHILDREN))
            after.append(_window_segment(segment.id, segment.segment.kind, text, None, ""))
    parents = tuple(draw(st.sets(st.sampled_from([s.id for s in before]), min_size=1)))
    after.append(
        _window_segment("sum", "summary", draw(st.sampled_from(CHILDREN)), None, "", None, parents)
    )
    tombstones = frozenset(s.id for s in before)
    request = TransitionRequest(
        before=tuple(before),
        after=tuple(after),
        tombstones=tombstones,
        applied_by=None,
        reported=None,
        canaries=frozenset(draw(st.sets(st.sampled_from(["m0", "m1"])))),
        session_id=None,
        labels={},
        edit=derive_edit(tuple(before), tuple(after), tombstones),
        halt=None,
    )
    method: Method = draw(st.sampled_from(["facts", "facts", "both"]))
    fidelity = FidelitySettings(
        mode="enforce",
        method=method,
        scope=draw(st.sampled_from(["protected", "all"])),
        min_kept_share=draw(st.sampled_from([1.0, 0.5])),
        embedding_floor=draw(st.sampled_from([0.5, 0.8])),
    )
    guard_settings = replace(
        _transition_settings(require_tombstones=False, require_scores=False),
        fidelity=fidelity,
        embedder=minilm() if method == "both" else None,
    )
    return guard_settings, request


def fidelity_findings(case: Case) -> set[tuple[str, str, str]]:
    """The refusing fidelity findings of ``case``: (code, parent, child)."""
    verdict = GUARDS["transition"].evaluate(*case)
    if not verdict.refused:
        return set()
    return {
        (r.code, r.detail["parent"], r.detail["child"])
        for r in verdict.reasons
        if r.code in FIDELITY_CODES
    }


FIDELITY_CODES = {"fact_lost", "negation_lost", "meaning_drift", "summary_is_error"}


class TestFidelity:
    @settings(max_examples=60 * SCALE, deadline=None)
    @given(fidelity_cases())
    def test_each_alternative_flips_its_finding(self, case: Case) -> None:
        """Every fidelity finding is explained, and each of its alternatives (the parent put
        back, the share, the kinds, the floor) ends that finding: same code, parent, child."""
        verdict = judged("transition", case)
        found = [r for r in verdict.reasons if r.code in FIDELITY_CODES]
        assume(verdict.refused and found)
        for reason in found:
            assert isinstance(reason.detail["would_allow_text"], str)
            assert reason.detail["would_allow"], reason.code
            finding = (reason.code, reason.detail["parent"], reason.detail["child"])
            for alternative in reason.detail["would_allow"]:
                after = fidelity_findings(apply_transition(case, alternative))
                assert finding not in after, (finding, alternative)

    def test_a_lost_negation_reads_as_the_remedy(self) -> None:
        """The seed's UTC constraint summarized without its negation: restore it, or stop
        counting negations; no share allows it."""
        utc = _window_segment("c1", "constraint", PARENTS[1], None, "")
        summary = _window_segment("s1", "summary", CHILDREN[1], None, "", None, ("c1",))
        request = TransitionRequest(
            (utc,), (summary,), frozenset({"c1"}), None, None, frozenset(), None, {},
            derive_edit((utc,), (summary,), frozenset({"c1"})),
        )  # fmt: skip
        guard_settings = replace(
            _transition_settings(require_tombstones=False, require_scores=False),
            fidelity=FidelitySettings(),
        )
        (reason,) = judged("transition", (guard_settings, request)).reasons
        assert reason.code == "negation_lost"
        assert reason.detail["would_allow"] == [
            {"field": "after", "op": "contains", "value": ["c1"]},
            {"field": "spec.fidelity.kinds", "op": "excludes", "value": "negation"},
        ]
        assert reason.detail["would_allow_text"] == (
            "summary s1 no longer negates what c1 negated: allowed once c1 is restored, or "
            "with negations not counted"
        )

    def test_an_error_summary_has_no_policy_alternative(self) -> None:
        """A refusal stored as the summary: only putting the parent back allows it."""
        parent = _window_segment("c1", "constraint", PARENTS[0], None, "")
        summary = _window_segment("s1", "summary", CHILDREN[4], None, "", None, ("c1",))
        request = TransitionRequest(
            (parent,), (summary,), frozenset({"c1"}), None, None, frozenset(), None, {},
            derive_edit((parent,), (summary,), frozenset({"c1"})),
        )  # fmt: skip
        guard_settings = replace(
            _transition_settings(require_tombstones=False, require_scores=False),
            fidelity=FidelitySettings(),
        )
        (reason,) = judged("transition", (guard_settings, request)).reasons
        assert reason.code == "summary_is_error"
        assert reason.detail["would_allow"] == [
            {"field": "after", "op": "contains", "value": ["c1"]}
        ]
        assert "no policy value allows it" in reason.detail["would_allow_text"]
