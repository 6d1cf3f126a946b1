"""Custom rules: loading, effects, fail-closed evaluation, the cache and threads."""

from __future__ import annotations

import hashlib
import io
import json
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from prunewarden import Decision, Engine, InputError, PolicyError, parse_policy
from prunewarden._resources import schema
from prunewarden.cli._main import run
from prunewarden.inputs._model import ScoreRange
from prunewarden.inputs._parse import parse_request
from prunewarden.rules import _budget as budget_module
from prunewarden.rules import _variables as variables_module
from prunewarden.rules._variables import build_variables

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "inputs"
DECISION = Draft202012Validator(schema("decision"))
HEADER = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: rules, version: 1.0.0}\n"


@pytest.fixture(autouse=True, params=["python", "native"])
def cel_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on both CEL backends: the engines it builds read PRUNEWARDEN_CEL."""
    backend = str(request.param)
    monkeypatch.setenv("PRUNEWARDEN_CEL", backend)
    return backend


class NullLogger:
    def info(self, event: str, **fields: Any) -> None:
        pass


def policy_text(rules: str = "", params: str = "", extra: str = "") -> str:
    spec = "spec:\n"
    if params:
        spec += "  params:\n" + textwrap.indent(textwrap.dedent(params).strip(), "    ") + "\n"
    if rules:
        spec += "  rules:\n" + textwrap.indent(textwrap.dedent(rules).strip(), "    ") + "\n"
    if spec == "spec:\n" and not extra:
        spec = "spec: {}\n"
    return HEADER + spec + extra


# The tests here are about what rules decide, not how long they may take: on a busy machine, or
# with eight threads taking turns at the GIL, a rule of a millisecond can be stalled past the
# 100 ms default and fail closed as rule_error. A rule stating its own timeout_ms keeps it (the
# timeout tests state 1 ms).
GENEROUS_TIMEOUT_MS = 10_000  # the schema's maximum


def engine(rules: str = "", params: str = "", **kwargs: Any) -> Engine:
    """An engine on ``rules``, each without a timeout_ms given GENEROUS_TIMEOUT_MS."""
    if rules:
        listed = yaml.safe_load(textwrap.dedent(rules))
        for rule in listed:
            rule.setdefault("timeout_ms", GENEROUS_TIMEOUT_MS)
        rules = yaml.safe_dump(listed, sort_keys=False)
    return Engine(parse_policy(policy_text(rules, params)), logger=NullLogger(), **kwargs)


def problems(rules: str, params: str = "", extra: str = "") -> list[str]:
    with pytest.raises(PolicyError) as info:
        parse_policy(policy_text(rules, params, extra), "p.yaml")
    return [str(p) for p in info.value.problems]


def example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return loaded


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def segment_doc(
    text: str = "turn text", *, seg_id: str = "s1", kind: str = "turn"
) -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": seg_id, "kind": kind, "text": text, "tombstone_written": True},
        "score": 0.1,
        "perturbed_score": 0.12,
        "eviction_candidates": [seg_id],
    }


def spans_doc(*spans: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "check": "staleness",
        "spans": [
            {
                "span_id": span_id,
                "text": f"text of {span_id}",
                "score": 0.5,
                "text_sha256": sha(f"text of {span_id}"),
                "derived_from": parents,
            }
            for span_id, parents in spans
        ],
        "keep_top_k": 1,
    }


def decide(e: Engine, document: dict[str, Any]) -> Decision:
    decision = e.evaluate(document)
    DECISION.validate(decision.to_dict())
    return decision


PIN_NEGATIONS = """
- name: pin-negations
  check: eviction
  when: contains_any(segment.text, params.negations)
  effect: pin
  message: the segment states a negation
"""
NEGATIONS = "negations: [never, do not, must not]"


class TestLoading:
    def test_rules_compile_and_keep_their_order(self) -> None:
        """A valid rule list loads into compiled rules, in order."""
        policy = parse_policy(policy_text(PIN_NEGATIONS, NEGATIONS))
        assert [r.name for r in policy.rules] == ["pin-negations"]
        assert policy.rules[0].mode == "enforce"
        assert policy.rules[0].timeout == 0.1

    def test_every_rule_problem_is_reported_together_and_located(self) -> None:
        """Syntax, unknown names and schema problems of several rules come at once, sorted."""
        found = problems(
            """
            - name: one
              check: eviction
              when: score < < 0.2
              effect: deny
              message: m
            - name: two
              check: eviction
              when: scroe < 0.2
              effect: deny
              message: m
            - name: Three
              check: eviction
              when: score < 0.2
              effect: deny
              message: m
            """
        )
        assert found[0].startswith(
            "p.yaml:8:13: $.spec.rules[0].when: syntax error: unexpected '<' (at 1:9)\n"
            "    | score < < 0.2\n    |         ^"
        )
        assert found[1].startswith(
            "p.yaml:13:13: $.spec.rules[1].when: unknown variable 'scroe' (known: candidates"
        )
        assert found[2].startswith("p.yaml:16:13: $.spec.rules[2].name: 'Three' is not valid")
        assert len(found) == 3

    @pytest.mark.parametrize(
        ("rules", "expected"),
        [
            (
                "- {name: a, check: eviction, when: 'true', effect: halt, message: m}",
                (
                    "$.spec.rules[0].effect: effect 'halt' does not apply to eviction rules "
                    "(use one of: deny, pin, warn)"
                ),
            ),
            (
                "- {name: a, check: collapse, when: 'true', effect: pin, message: m}",
                "$.spec.rules[0].effect: effect 'pin' does not apply to collapse rules",
            ),
            (
                "- {name: a, check: eviction, when: 'true', effect: deny}",
                "$.spec.rules[0]: give exactly one of message and message_expression",
            ),
            (
                (
                    "- {name: a, check: eviction, when: 'true', effect: deny, message: m,"
                    " message_expression: '\"m\"'}"
                ),
                "$.spec.rules[0]: give exactly one of message and message_expression",
            ),
            (
                (
                    "- {name: a, check: eviction, when: 'true', effect: deny, message: m}\n"
                    "- {name: a, check: eviction, when: 'false', effect: deny, message: m}"
                ),
                "$.spec.rules[1].name: duplicate rule name 'a' (first at rules[0])",
            ),
            (
                (
                    "- {name: a, check: eviction, when: 'score < params.flor', effect: deny,"
                    " message: m}"
                ),
                "unknown field 'flor' of 'params' (known: floor)",
            ),
            (
                (
                    "- {name: a, check: staleness, when: 'segment.kind == \"x\"', effect: deny,"
                    " message: m}"
                ),
                "unknown variable 'segment' (known: keep_top_k, params, recompute_budget, span,",
            ),
            (
                "- {name: a, check: eviction, when: 'score', effect: deny, message: m}",
                "$.spec.rules[0].when: must give a bool, but gives double on a sample input",
            ),
            (
                (
                    "- {name: a, check: eviction, when: 'true', effect: deny,"
                    " message_expression: 'score'}"
                ),
                "$.spec.rules[0].message_expression: must give a string, but gives double",
            ),
            (
                (
                    "- {name: a, check: eviction, when: 'true', effect: deny, message: m,"
                    " timeout_ms: 0}"
                ),
                "$.spec.rules[0].timeout_ms: 0 is less than the minimum of 1",
            ),
        ],
    )
    def test_rule_problems(self, rules: str, expected: str) -> None:
        """Each kind of rule problem gets a precise, located message."""
        found = problems(rules, "floor: 0.3")
        assert any(expected in f for f in found), found

    def test_params_are_validated(self) -> None:
        """Param names are identifiers and values are scalars or lists of them."""
        found = problems("", "Bad-Name: 1\nnested: {a: 1}")
        assert any("$.spec.params" in f and "Bad-Name" in f for f in found)
        assert any("$.spec.params.nested" in f for f in found)

    def test_rule_problems_come_with_other_schema_problems(self) -> None:
        """A bad threshold and a bad rule are reported in the same run."""
        found = problems(
            "- {name: a, check: eviction, when: 'scroe > 1.0', effect: deny, message: m}",
            extra="  collapse: {spread_floor: -1}\n",
        )
        assert len(found) == 2

    def test_validate_exits_three_on_rule_problems(self, tmp_path: Path) -> None:
        """prunewarden validate reports rule problems like any other policy problem."""
        bad = tmp_path / "bad.yaml"
        bad.write_text(
            policy_text("- {name: a, check: eviction, when: 'score <', effect: deny, message: m}")
        )
        out, err = io.StringIO(), io.StringIO()
        assert run(["validate", str(bad)], out, err) == 3
        assert err.getvalue().startswith(f"{bad}:6:")
        assert "syntax error: unexpected end of expression" in err.getvalue()


class TestDigest:
    def test_rules_and_params_are_covered(self) -> None:
        """Adding a rule or changing a param changes the digest."""
        base = parse_policy(policy_text()).digest
        with_rule = parse_policy(policy_text(PIN_NEGATIONS, NEGATIONS)).digest
        other_param = parse_policy(policy_text(PIN_NEGATIONS, "negations: [never]")).digest
        assert len({base, with_rule, other_param}) == 3

    def test_empty_sections_and_spelled_defaults_do_not_change_it(self) -> None:
        """rules: [] and params: {} are no rules; mode and timeout defaults; 1 == 1.0."""
        base = parse_policy(policy_text()).digest
        empty = parse_policy(HEADER + "spec:\n  rules: []\n  params: {}\n").digest
        assert base == empty
        rule = "- {name: a, check: eviction, when: 'score < params.x', effect: deny, message: m}"
        explicit = rule[:-1] + ", mode: enforce, timeout_ms: 100}"
        spaced = rule.replace("'score < params.x'", "'  score < params.x  '")
        digests = {
            parse_policy(policy_text(rule, "x: 1")).digest,
            parse_policy(policy_text(explicit, "x: 1.0")).digest,
            parse_policy(policy_text(spaced, "x: 1")).digest,
        }
        assert len(digests) == 1

    def test_the_bundled_default_policy_has_no_rules(self) -> None:
        """A policy without rules keeps the document it had before rules existed."""
        policy = parse_policy(policy_text())
        assert "rules" not in policy.document["spec"]
        assert "params" not in policy.document["spec"]


EFFECTS = [
    # Each case: rules, document, outcome, codes, actions.
    (
        PIN_NEGATIONS,
        segment_doc("Never emit local time"),
        "deny",
        ["rule:pin-negations"],
        [{"action": "pin", "ids": ["s1"]}],
    ),
    (PIN_NEGATIONS, segment_doc("emit UTC"), "allow", ["authorized"], []),
    (
        PIN_NEGATIONS,
        segment_doc("Do not use buf", kind="definition"),
        "deny",
        ["pinned", "rule:pin-negations"],
        [{"action": "pin", "ids": ["s1"]}],
    ),
    (
        "- {name: low-score, check: eviction, when: 'score < 0.2', effect: deny, message: low}",
        segment_doc(),
        "deny",
        ["rule:low-score"],
        [],
    ),
    (
        "- {name: note, check: eviction, when: 'score < 0.2', effect: warn, message: low}",
        segment_doc(),
        "allow",
        ["authorized", "rule:note"],
        [],
    ),
    (
        (
            "- {name: trial, check: eviction, when: 'score < 0.2', effect: deny, message: low,"
            " mode: audit}"
        ),
        segment_doc(),
        "allow",
        ["authorized", "rule:trial"],
        [],
    ),
    (
        "- {name: other-check, check: staleness, when: 'true', effect: deny, message: m}",
        segment_doc(),
        "allow",
        ["authorized"],
        [],
    ),
    (
        (
            "- {name: canary-floor, check: collapse, when: 'canary.score < params.floor',"
            " effect: halt, message: canary below the floor}"
        ),
        {
            "check": "collapse",
            "history": [
                {"cycle": 1, "scores": {"task": 0.9, "a": 0.1}, "pinned": ["task"]},
                {"cycle": 2, "scores": {"task": 0.2, "a": 0.5}, "pinned": ["task"]},
            ],
        },
        "halt",
        ["rule:canary-floor"],
        [{"action": "halt_pruning"}, {"action": "freeze_buffer"}, {"action": "escalate"}],
    ),
    (
        (
            "- {name: many-parents, check: staleness, when: 'size(span.derived_from) > 1',"
            " effect: deny, message: too many parents}"
        ),
        spans_doc(("a", ["b", "c"]), ("b", []), ("c", [])),
        "deny",
        ["rule:many-parents"],
        [],
    ),
]


class TestEffects:
    @pytest.mark.parametrize(("rules", "document", "outcome", "codes", "actions"), EFFECTS)
    def test_effects(
        self,
        rules: str,
        document: dict[str, Any],
        outcome: str,
        codes: list[str],
        actions: list[dict[str, Any]],
    ) -> None:
        """deny, pin, halt refuse; warn and audit only add their reason; rules of other checks
        stay out."""
        decision = decide(engine(rules, NEGATIONS + "\nfloor: 0.3"), document)
        assert decision.outcome == outcome
        assert list(decision.codes) == codes
        assert [a.to_dict() for a in decision.actions] == actions

    def test_a_refusal_carries_no_allowing_reason(self) -> None:
        """A rule denying what the guard authorized: the decision lists only refusing reasons;
        the guard's authorized reason is kept in the rule reason's detail, under guard."""
        rule = "- {name: low, check: eviction, when: 'score < 0.2', effect: deny, message: low}"
        decision = decide(engine(rule), segment_doc())
        assert decision.outcome == "deny"
        assert decision.codes == ("rule:low",)
        (guard,) = decision.reasons[0].detail["guard"]
        assert guard["code"] == "authorized"
        assert decision.reasons[0].detail["rule"] == "low"

    def test_audit_rule_says_so(self) -> None:
        """An audit rule's reason is marked as not enforced."""
        rule = "- {name: t, check: eviction, when: 'true', effect: deny, message: m, mode: audit}"
        reason = decide(engine(rule), segment_doc()).reasons[-1]
        assert reason.detail == {"rule": "t", "effect": "deny", "mode": "audit"}
        assert reason.message == "m (audit: not enforced)"

    def test_per_item_rule_names_its_items(self) -> None:
        """A span rule runs once per span and lists the spans it matched."""
        rule = (
            "- {name: big, check: staleness, when: 'size(span.derived_from) > 0', effect: deny,"
            " message_expression: '\"derived span \" + span.span_id'}"
        )
        decision = decide(engine(rule), spans_doc(("a", ["c"]), ("b", ["c"]), ("c", [])))
        reason = decision.reasons[0]
        assert reason.code == "rule:big"
        assert reason.detail["items"] == ["a", "b"]
        assert reason.message == "derived span a (spans: a, b)"
        assert (decision.kept, decision.evicted) == (("a", "b", "c"), ())

    def test_a_rule_without_items_does_not_match(self) -> None:
        """A canary rule on a snapshot without pinned entries has nothing to test."""
        rule = "- {name: c, check: collapse, when: 'canary.score < 2.0', effect: halt, message: m}"
        document = {"check": "collapse", "history": [{"cycle": 1, "scores": {"a": 0.5}}]}
        assert decide(engine(rule), document).codes == ("insufficient_history",)

    def test_changing_the_yaml_changes_the_decision(self) -> None:
        """Add, change, remove a rule: the decision follows, with no code change."""
        document = segment_doc("we must not drop this")
        assert decide(engine(), document).outcome == "allow"
        assert decide(engine(PIN_NEGATIONS, NEGATIONS), document).outcome == "deny"
        assert decide(engine(PIN_NEGATIONS, "negations: [never]"), document).outcome == "allow"

    def test_guard_off_runs_no_rules(self) -> None:
        """A guard in mode off allows, whatever its rules say."""
        text = policy_text(PIN_NEGATIONS, NEGATIONS, extra="  eviction: {mode: 'off'}\n")
        e = Engine(parse_policy(text), logger=NullLogger())
        assert decide(e, segment_doc("never")).codes == ("check_disabled",)


class TestFailClosed:
    @pytest.mark.parametrize(
        ("when", "error"),
        [
            (
                "segment.metadata.owner == 'x'",
                {"python": "no such member in mapping: 'owner'", "native": "Key not found in map"},
            ),
            ("mean(candidates.map(c, 0.5)) > 0.0", "mean() of an empty list"),
            ("segment.metadata.flag", "gave string, not a bool"),
        ],
    )
    def test_runtime_error_refuses(
        self, when: str, error: str | dict[str, str], cel_backend: str
    ) -> None:
        """A rule that errors or gives a non-bool counts as matched: rule_error, refusal."""
        rule = f"- {{name: r, check: eviction, when: {json.dumps(when)}, effect: deny, message: m}}"
        document = segment_doc()
        document["eviction_candidates"] = []
        if "flag" in when:
            document["segment"]["metadata"] = {"flag": "yes"}
        decision = decide(engine(rule), document)
        assert decision.outcome == "deny"
        assert decision.codes[0] == "rule_error:r"
        expected = error if isinstance(error, str) else error[cel_backend]
        assert expected in decision.reasons[0].detail["error"]
        assert "activation" not in decision.reasons[0].message

    def test_timeout_refuses(self) -> None:
        """A rule past its timeout counts as matched, with the timeout named."""
        rule = (
            "- {name: slow, check: staleness, when: 'spans.exists(s, s.text == \"x\")',"
            " effect: deny, message: m, timeout_ms: 1}"
        )
        document = spans_doc(*[(f"s{i}", []) for i in range(3000)])
        decision = decide(engine(rule), document)
        assert decision.outcome == "deny"
        assert decision.reasons[0].code == "rule_error:slow"
        assert decision.reasons[0].detail["error"] == "timed out (timeout_ms: 1)"

    def test_a_failing_warn_rule_does_not_refuse(self) -> None:
        """warn stays advisory even when it fails."""
        rule = (
            "- {name: w, check: eviction, when: 'segment.metadata.x == 1', effect: warn,"
            " message: m}"
        )
        decision = decide(engine(rule), segment_doc())
        assert (decision.outcome, decision.codes) == ("allow", ("authorized", "rule_error:w"))

    def test_failing_message_expression_keeps_the_match(self) -> None:
        """A message that cannot be worded does not undo the match."""
        rule = (
            "- {name: r, check: eviction, when: 'true', effect: deny,"
            " message_expression: 'segment.metadata.who'}"
        )
        reason = decide(engine(rule), segment_doc()).reasons[0]
        assert reason.code == "rule:r"
        assert "its message_expression failed" in reason.message

    def test_recursion_limit_is_unchanged(self) -> None:
        """Loading and evaluating rules leaves the process-wide recursion limit alone."""
        before = sys.getrecursionlimit()
        decide(engine(PIN_NEGATIONS, NEGATIONS), segment_doc("never"))
        assert sys.getrecursionlimit() == before


RULE_BODIES = st.sampled_from(
    [
        "'true'",
        "'false'",
        "'score < 0.5'",
        "'segment.metadata.missing == 1'",  # errors at run time
        "'contains_any(segment.text, [\"never\"])'",
    ]
)
RULE_SPECS = st.lists(
    st.tuples(
        RULE_BODIES, st.sampled_from(["deny", "pin", "warn"]), st.sampled_from(["enforce", "audit"])
    ),
    max_size=4,
)
EVICTIONS = sorted(EXAMPLES.glob("eviction-*.json"))


class TestTightenOnly:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(specs=RULE_SPECS, name=st.sampled_from(EVICTIONS), text=st.sampled_from(["", "never"]))
    def test_adding_rules_never_turns_a_refusal_into_an_allow(
        self, specs: list[tuple[str, str, str]], name: Path, text: str
    ) -> None:
        """Whatever rules are added, a refusal stays a refusal and its reasons stay; an allow
        becomes a refusal only through an enforcing deny or pin rule."""
        rules = "\n".join(
            f"- {{name: r{i}, check: eviction, when: {body}, effect: {effect}, message: m,"
            f" mode: {mode}}}"
            for i, (body, effect, mode) in enumerate(specs)
        )
        document = json.loads(name.read_text())
        document["segment"]["text"] = text
        without = decide(engine(), document)
        with_rules = decide(engine(rules), document)
        if without.refused:
            assert with_rules.refused
            assert set(without.codes) <= set(with_rules.codes)
        binding = {
            f"r{i}"
            for i, (_, effect, mode) in enumerate(specs)
            if effect != "warn" and mode == "enforce"
        }
        fired = {code.split(":", 1)[1] for code in with_rules.codes if code.startswith("rule")}
        if with_rules.refused and not without.refused:
            assert fired & binding


class TestCache:
    RULES = """
    - name: negation
      check: eviction
      when: contains_any(segment.text, ["never"])
      effect: pin
      message: m
    - {name: low, check: eviction, when: 'score < 0.05', effect: deny, message: m}
    """

    def test_unchanged_values_are_not_evaluated_again(self) -> None:
        """The second evaluation of the same segment hits the cache for every rule."""
        e = engine(self.RULES)
        cache = e._pipelines["eviction"].rules.cache  # type: ignore[union-attr]
        first = decide(e, segment_doc("never"))
        assert (cache.hits, cache.misses) == (0, 2)
        second = decide(e, segment_doc("never"))
        assert (cache.hits, cache.misses) == (2, 2)
        assert first.codes == second.codes

    def test_rules_reading_only_the_segment_share_one_digest(self) -> None:
        """Rules reading only the segment and its scores are keyed by one digest of all of it,
        computed once per request: any change to the segment misses for each of them."""
        e = engine(self.RULES)
        cache = e._pipelines["eviction"].rules.cache  # type: ignore[union-attr]
        decide(e, segment_doc("never", kind="turn"))
        decide(e, segment_doc("never", kind="turn"))
        assert (cache.hits, cache.misses) == (2, 2)
        changed = decide(e, segment_doc("fine now", kind="turn"))
        assert (cache.hits, cache.misses) == (2, 4)
        assert "rule:negation" not in changed.codes

    def test_the_shared_digest_is_computed_once_per_request(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two rules reading only the segment: one digest per segment, not one per rule."""
        computed: list[object] = []
        real = variables_module._digest

        def counting(value: object) -> bytes:
            computed.append(value)
            return real(value)

        monkeypatch.setattr(variables_module, "_digest", counting)
        e = engine(self.RULES)
        decide(e, segment_doc("never"))
        assert len(computed) == 1

    def test_rules_reading_candidates_keep_their_own_key(self) -> None:
        """A rule reading the candidates is keyed by what it reads: a segment change it does
        not read still hits."""
        rule = (
            "- {name: c, check: eviction, when: 'size(candidates) > 3', effect: deny, message: m}"
        )
        e = engine(rule)
        cache = e._pipelines["eviction"].rules.cache  # type: ignore[union-attr]
        decide(e, segment_doc("one"))
        decide(e, segment_doc("two"))
        assert (cache.hits, cache.misses) == (1, 1)

    def test_a_request_answered_from_the_cache_reads_no_cpu_clock(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The decision's budget and the rules' deadlines start only when a rule is evaluated."""
        e = engine(self.RULES)
        decide(e, segment_doc("never"))
        reads: list[float] = []
        real = budget_module._thread_cpu

        def counted() -> float:
            reads.append(0)
            return real()

        monkeypatch.setattr(budget_module, "_thread_cpu", counted)
        decide(e, segment_doc("never"))
        assert reads == []

    def test_per_item_results_are_cached_per_item(self) -> None:
        """Spans unchanged between two prune requests are not evaluated again."""
        rule = (
            "- {name: p, check: staleness, when: 'size(span.derived_from) > 2', effect: deny,"
            " message: m}"
        )
        e = engine(rule)
        cache = e._pipelines["staleness"].rules.cache  # type: ignore[union-attr]
        decide(e, spans_doc(("a", ["x"]), ("b", ["y"]), ("c", ["z"])))
        decide(e, spans_doc(("a", ["x"]), ("b", ["y"]), ("d", ["w"])))
        assert (cache.hits, cache.misses) == (2, 4)
        # The key holds what the rule reads (derived_from), not which span it is.
        decide(e, spans_doc(("e", ["x"])))
        assert (cache.hits, cache.misses) == (3, 4)

    def test_errors_and_timeouts_are_not_cached(self) -> None:
        """A failure is evaluated again next time (a timeout depends on load, not values)."""
        rule = (
            "- {name: r, check: eviction, when: 'segment.metadata.x == 1', effect: deny,"
            " message: m}"
        )
        e = engine(rule)
        cache = e._pipelines["eviction"].rules.cache  # type: ignore[union-attr]
        decide(e, segment_doc())
        decide(e, segment_doc())
        assert (cache.misses, len(cache)) == (2, 0)

    def test_the_cache_is_bounded_and_can_be_off(self) -> None:
        """Least recently used entries go first; size 0 caches nothing."""
        small = engine(self.RULES, rule_cache_size=3)
        for i in range(5):
            decide(small, segment_doc(f"text {i}"))
        assert len(small._pipelines["eviction"].rules.cache) == 3  # type: ignore[union-attr]
        off = engine(self.RULES, rule_cache_size=0)
        decide(off, segment_doc())
        decide(off, segment_doc())
        off_cache = off._pipelines["eviction"].rules.cache  # type: ignore[union-attr]
        assert (off_cache.hits, len(off_cache)) == (0, 0)


class TestThreads:
    RULES = textwrap.dedent(TestCache.RULES) + (
        "- {name: parents, check: staleness, when: 'size(span.derived_from) > 1',"
        " effect: deny, message: m}\n"
    )

    def test_concurrent_evaluation_matches_sequential(self) -> None:
        """Eight threads sharing one engine and its cache decide exactly as one thread does."""
        documents = [segment_doc(f"never {i % 7}" if i % 3 else f"ok {i % 5}") for i in range(60)]
        documents += [
            spans_doc(("a", ["b", "c"] if i % 2 else []), ("b", []), ("c", [])) for i in range(20)
        ]
        expected = [decide(engine(self.RULES, rule_cache_size=0), d).codes for d in documents]
        shared = engine(self.RULES, rule_cache_size=16)
        with ThreadPoolExecutor(max_workers=8) as pool:
            for _ in range(3):
                got = list(pool.map(lambda d: shared.evaluate(d).codes, documents))
                assert got == expected


class TestVariables:
    @pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.json")))
    def test_built_variables_match_their_schema(self, name: str) -> None:
        """What rules see is what rule-variables.v1 documents, for every example input."""
        document = example(name)
        if document["check"] == "eviction":
            document["segment"]["metadata"] = {"owner": "team-a", "tags": ["x"]}
        check, request = parse_request(document, ScoreRange(0.0, 1.0))
        variables = build_variables(check, request)
        variables["params"] = {}
        validator = Draft202012Validator(schema("rule-variables"))
        validator.validate({check: variables})
        assert set(variables) == set(schema("rule-variables")["$defs"][check]["properties"]) - (
            {"canary", "span"} - set(variables)
        )


class TestDocumentation:
    def test_every_example_condition_in_the_docs_compiles(self) -> None:
        """The conditions shown in docs/rules.md load under some check."""
        text = (ROOT / "docs" / "rules.md").read_text()
        examples = text.split("## Examples", 1)[1]
        conditions = [
            line.split("when:", 1)[1].strip()
            for line in examples.splitlines()
            if line.startswith("when:")
        ]
        assert len(conditions) >= 6
        params = "low_score: 0.2\nnegations: [never]\ncanary_floor: 0.3"
        for condition in conditions:
            loaded = []
            for check, effect in (
                ("eviction", "deny"),
                ("collapse", "halt"),
                ("staleness", "deny"),
            ):
                rule = (
                    f"- {{name: r, check: {check}, when: {json.dumps(condition)},"
                    f" effect: {effect}, message: m}}"
                )
                try:
                    loaded.append(parse_policy(policy_text(rule, params)))
                except PolicyError:
                    continue
            assert loaded, condition

    def test_engine_functions_work_as_methods(self) -> None:
        """scores.mean() is mean(scores)."""
        rule = (
            "- {name: r, check: collapse, when: 'scores.mean() == mean(scores)', effect: halt,"
            " message: m}"
        )
        document = {"check": "collapse", "history": [{"cycle": 1, "scores": {"a": 0.2, "b": 0.4}}]}
        assert decide(engine(rule), document).codes[0] == "rule:r"


CONTENT_PINS = ROOT / "examples" / "policies" / "content-pins.yaml"


class TestContentPinsExample:
    def test_cli_pins_the_untagged_constraint(self, tmp_path: Path) -> None:
        """The default policy lets the untagged UTC constraint go; content-pins refuses it."""
        document = str(EXAMPLES / "eviction-untagged-negation.json")
        log = str(tmp_path / "audit.jsonl")
        out, err = io.StringIO(), io.StringIO()
        assert run(["evaluate", "--audit-log", log, document], out, err) == 0
        out = io.StringIO()
        code = run(
            ["evaluate", "--policy", str(CONTENT_PINS), "--audit-log", log, document], out, err
        )
        decision = json.loads(out.getvalue())
        assert code == 1
        assert decision["reasons"][0]["code"] == "rule:pin-negations"
        assert decision["actions"] == [{"action": "pin", "ids": ["turn-03"]}]
        records = [json.loads(line) for line in Path(log).read_text().splitlines()]
        reasons = records[-1]["reasons"]
        assert [r["code"] for r in reasons] == ["rule:pin-negations"]
        assert [r["code"] for r in reasons[0]["detail"]["guard"]] == ["authorized"]

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        name=st.sampled_from(sorted(EXAMPLES.glob("*.json"))),
        path=st.lists(st.integers(0, 50), max_size=4),
        value=st.none()
        | st.booleans()
        | st.floats(0, 1)
        | st.text(max_size=12)
        | st.lists(st.text(max_size=4), max_size=12)
        | st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3),
    )
    def test_any_document_decides_or_is_an_input_error(
        self, content_pins: Engine, name: Path, path: list[int], value: Any
    ) -> None:
        """With rules in play, a mutated example still gives a schema-valid decision or an
        InputError, never another exception."""
        document: Any = json.loads(name.read_text())
        target = document
        for step in path[:-1]:
            if isinstance(target, dict) and target:
                target = target[sorted(target)[step % len(target)]]
            elif isinstance(target, list) and target:
                target = target[step % len(target)]
        if path and isinstance(target, dict) and target:
            target[sorted(target)[path[-1] % len(target)]] = value
        try:
            decision = content_pins.evaluate(document)
        except InputError as exc:
            problems = exc.problems
        else:
            DECISION.validate(decision.to_dict())
            return
        assert problems


@pytest.fixture(scope="module")
def content_pins() -> Engine:
    return Engine.from_file(CONTENT_PINS, logger=NullLogger())


class TestSchemaCommand:
    def test_schema_prints_the_rule_variables(self) -> None:
        """prunewarden schema rule-variables prints the variables' schema."""
        out, err = io.StringIO(), io.StringIO()
        assert run(["schema", "rule-variables"], out, err) == 0
        assert set(json.loads(out.getvalue())["properties"]) == {
            "collapse",
            "eviction",
            "staleness",
            "transition",
        }
