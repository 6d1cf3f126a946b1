"""The static cost of rules: estimated at load from the variables' maxima and the params, bounded
by ``rules[].max_cost`` and ``spec.rule_cost_budget``, printed by ``policy show``."""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from prunewarden import PolicyError, parse_policy
from prunewarden.cli._main import run
from prunewarden.errors import ExitCode
from prunewarden.limits import MAX_ID_CHARS, MAX_IDS, MAX_INPUT_CHARS, MAX_MATCH_STEPS, MAX_SPANS
from prunewarden.rules import Cost, compile_expression, estimate_cost
from prunewarden.rules._cost import (
    CHARS_PER_UNIT,
    ITERATION_UNITS,
    SEARCHED_PER_UNIT,
    STEPS_PER_UNIT,
    size_of,
)
from prunewarden.rules._functions import CASEFOLD_GROWTH, LOWER_GROWTH
from prunewarden.rules._patterns import program_size
from prunewarden.rules._spec import _params_shape
from prunewarden.rules._variables import variable_shapes

HEADER = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: costs, version: 1.0.0}\n"
PARAMS = {"negations": ["never", "do not"], "definition": "^def [a-z]+$"}


def cost(source: str, check: str = "eviction", params: dict[str, Any] | None = None) -> Cost:
    given = PARAMS if params is None else params
    shapes = {**variable_shapes(check), "params": _params_shape(given)}
    expression = compile_expression(source, shapes, constants={"params": given})
    return estimate_cost(expression, shapes, {"params": given})


def policy(rules: str, extra: str = "") -> str:
    return HEADER + "spec:\n" + extra + "  params:\n    negations: [never, do not]\n" + rules


DEAR_RULE = """\
  rules:
    - name: dear
      check: eviction
      when: >-
        score < 0.5 &&
        candidates.exists(c, segment.text.contains(c))
      effect: deny
      message: dear
      max_cost: 100000
"""


class TestEstimate:
    def test_constant_work_costs_its_nodes(self) -> None:
        """A comparison of two scalars costs a few units and names no expensive path."""
        found = cost("score < 0.5")
        assert 1 < found.units < 10
        assert found.path == ()
        assert found.describe() == "constant work per node"

    def test_text_scan_is_priced_by_the_schema_maximum(self) -> None:
        """contains() on segment.text is priced by the text's maxLength (the input limit)."""
        found = cost("segment.text.contains('never')")
        segment = variable_shapes("eviction")["segment"]
        assert segment is not None
        assert size_of(segment["properties"]["text"]) == MAX_INPUT_CHARS
        assert found.units >= MAX_INPUT_CHARS // CHARS_PER_UNIT
        scan = f"segment.text.contains('never') ({MAX_INPUT_CHARS} characters scanned)"
        assert found.path == (scan,)
        assert (found.line, found.column) == (1, 1)

    def test_comprehension_multiplies_its_body(self) -> None:
        """exists() over candidates costs the body times the candidates' maxItems."""
        body = cost("'c' == segment.id").units
        found = cost("candidates.exists(c, c == segment.id)")
        assert found.units >= MAX_IDS * (ITERATION_UNITS + 1)
        assert found.units > MAX_IDS * body // 2
        assert found.path[0].startswith("candidates.exists(c, c == segment.id) (100000 items x")
        assert found.path[1] == f"c == segment.id ({MAX_ID_CHARS} characters or items compared)"

    def test_nested_expensive_path_is_named_in_order(self) -> None:
        """A scan inside a comprehension: the path names the loop, then the scan."""
        found = cost("score < 0.5 && candidates.exists(c, segment.text.contains(c))")
        assert found.units > MAX_IDS * (MAX_INPUT_CHARS // CHARS_PER_UNIT)
        assert [step.split(" (")[0] for step in found.path] == [
            "candidates.exists(c, segment.text.contains(c))",
            "segment.text.contains(c)",
        ]
        assert (found.line, found.column) == (1, 16)

    def test_params_are_priced_at_their_real_sizes(self) -> None:
        """contains_any over a param scans once per phrase the param really holds."""
        two = cost("contains_any(segment.text, params.negations)")
        five = cost(
            "contains_any(segment.text, params.negations)",
            params={"negations": ["a", "b", "c", "d", "e"]},
        )
        assert two.path == (
            "contains_any(segment.text, params.negations) (2 phrases in 67108864 characters)",
        )
        assert five.units > two.units

    def test_a_literal_pattern_is_priced_by_its_program(self) -> None:
        """matches() with a pattern known at load costs its RE2 steps on the text, capped by
        MAX_MATCH_STEPS (a longer search is refused at run time)."""
        short = cost("segment.kind.matches('^def')")
        long_text = cost("segment.text.matches(params.definition)")
        assert short.units < long_text.units
        assert long_text.units >= MAX_MATCH_STEPS // STEPS_PER_UNIT
        assert "RE2 steps" in short.describe()

    def test_a_conditional_costs_its_dearer_branch(self) -> None:
        """c ? a : b is priced with the dearer of a and b, not both."""
        dear = cost("segment.text.contains('x')").units
        found = cost("score < 0.5 ? segment.text.contains('x') : score > 0.1")
        assert dear < found.units < 2 * dear

    def test_a_filtered_list_feeds_the_next_comprehension(self) -> None:
        """candidates.filter(...) may keep every candidate: the comprehension chained after it
        is priced over all of them."""
        found = cost("candidates.filter(c, c.startsWith('a')).exists(d, d.contains('y'))")
        assert found.units > 2 * MAX_IDS * (1 + ITERATION_UNITS)
        assert found.path[0].startswith("candidates.filter(c, c.startsWith('a')).exist...")


class TestAdversarialInputs:
    """The prices of the work that depends on a text's content, held to the worst content."""

    def test_case_mappings_grow_no_character_beyond_the_priced_factor(self) -> None:
        """No character of Python's Unicode tables lowers to more than LOWER_GROWTH characters
        or casefolds to more than CASEFOLD_GROWTH, and some reach both: the factors are exact."""
        characters = [chr(c) for c in range(sys.maxunicode + 1)]
        assert max(len(c.lower()) for c in characters) == LOWER_GROWTH
        assert max(len(c.casefold()) for c in characters) == CASEFOLD_GROWTH

    def test_contains_any_is_priced_for_a_tripling_text_without_a_phrase(self) -> None:
        """contains_any on a text of U+0390 (each folds to three characters, no phrase found)
        is priced for the folding and one scan of the tripled text per phrase."""
        text = "\u0390" * MAX_INPUT_CHARS
        folded = len(text.casefold())
        assert folded == CASEFOLD_GROWTH * MAX_INPUT_CHARS
        found = cost("contains_any(segment.text, params.negations)")
        scans = len(PARAMS["negations"]) + 1  # the folding, then each phrase
        assert found.units >= scans * math.ceil(folded / CHARS_PER_UNIT)

    def test_lower_is_priced_for_a_doubling_text(self) -> None:
        """lower() on a text of U+0130 (each lowers to two characters) is priced for the
        doubled text it builds."""
        lowered = len(("\u0130" * MAX_INPUT_CHARS).lower())
        assert lowered == LOWER_GROWTH * MAX_INPUT_CHARS
        found = cost("lower(segment.text) == ''")
        assert found.units >= math.ceil(lowered / CHARS_PER_UNIT)

    def test_matches_is_priced_for_a_text_of_four_byte_characters(self) -> None:
        """A literal pattern on a text of 4-byte UTF-8 characters: the steps the run time
        charges for it (bytes + 1, times the program's size) are within the estimate."""
        pattern = "a[bc]+d"
        text = "\U00010400" * MAX_INPUT_CHARS
        size = program_size(pattern)
        assert size is not None
        charged = (len(text.encode("utf-8")) + 1) * size
        found = cost(f"segment.text.matches('{pattern}')")
        assert found.units >= math.ceil(min(charged, MAX_MATCH_STEPS) / STEPS_PER_UNIT)
        assert f"up to {min(charged, MAX_MATCH_STEPS)} RE2 steps" in found.describe()

    def test_in_is_priced_per_item_compared(self) -> None:
        """x in candidates is priced at SEARCHED_PER_UNIT items a unit over MAX_IDS ids (a
        missing id compares every one), dearer than the aggregates' rate."""
        found = cost("segment.id in candidates")
        assert found.units >= math.ceil(MAX_IDS / SEARCHED_PER_UNIT)
        assert found.describe().endswith(f"({MAX_IDS} items searched)")


class TestRuleCost:
    def test_every_compiled_rule_carries_its_estimate(self) -> None:
        """parse_policy gives each rule its estimated cost and max_cost."""
        loaded = parse_policy(policy(DEAR_RULE.replace("100000", "99999999999")))
        (rule,) = loaded.rules
        assert rule.max_cost == 99_999_999_999
        assert rule.cost is not None
        assert rule.cost.units > MAX_IDS * (MAX_INPUT_CHARS // CHARS_PER_UNIT)

    def test_a_per_item_rule_is_multiplied_by_its_items(self) -> None:
        """A rule reading span is evaluated per span: its cost is per span times MAX_SPANS."""
        rules = (
            "  rules:\n    - {name: s, check: staleness, when: 'span.rewrite_count > 3.0',"
            " effect: deny, message: m}\n"
        )
        (rule,) = parse_policy(policy(rules)).rules
        assert rule.cost is not None
        assert rule.cost.units == MAX_SPANS * cost("span.rewrite_count > 3.0", "staleness").units
        assert rule.cost.path[0].startswith(f"per span ({MAX_SPANS} spans x ")


class TestRefusal:
    def test_a_rule_over_its_max_cost_is_refused_with_the_path(self) -> None:
        """Over max_cost: one located problem at the expression, naming cost and path."""
        with pytest.raises(PolicyError) as info:
            parse_policy(policy(DEAR_RULE), "p.yaml")
        (problem,) = info.value.problems
        assert (problem.file, problem.line, problem.path) == ("p.yaml", 10, "$.spec.rules[0].when")
        assert problem.message.startswith("estimated worst-case cost ")
        assert "is over max_cost 100000; dearest: candidates.exists(c, " in problem.message
        assert "(at 1:16)" in problem.message

    def test_rules_over_the_policy_budget_are_refused(self) -> None:
        """The sum of the rules' estimates over spec.rule_cost_budget refuses the policy."""
        text = policy(DEAR_RULE.replace("100000", "99999999999"), "  rule_cost_budget: 1000\n")
        with pytest.raises(PolicyError) as info:
            parse_policy(text, "p.yaml")
        (problem,) = info.value.problems
        assert (problem.line, problem.path) == (5, "$.spec.rule_cost_budget")
        assert "over rule_cost_budget 1000; the dearest: dear (" in problem.message

    def test_within_budget_loads(self) -> None:
        """A cheap rule under its max_cost and the policy's budget loads."""
        rules = (
            "  rules:\n    - {name: c, check: eviction, when: 'score < 0.1', effect: deny,"
            " message: m, max_cost: 10}\n"
        )
        loaded = parse_policy(policy(rules, "  rule_cost_budget: 10\n"))
        assert [r.name for r in loaded.rules] == ["c"]

    def test_validate_exits_with_the_policy_code(self, tmp_path: Path) -> None:
        """prunewarden validate reports the refusal on stderr and exits 3."""
        path = tmp_path / "p.yaml"
        path.write_text(policy(DEAR_RULE), encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        assert run(["validate", str(path)], out, err) == ExitCode.POLICY
        assert "$.spec.rules[0].when: estimated worst-case cost" in err.getvalue()


class TestPolicyShow:
    @pytest.fixture
    def path(self, tmp_path: Path) -> Path:
        found = tmp_path / "p.yaml"
        found.write_text(policy(DEAR_RULE.replace("100000", "99999999999")), encoding="utf-8")
        return found

    def test_yaml_ends_with_each_rules_cost(self, path: Path) -> None:
        """policy show closes with one comment line per rule: cost, max_cost, path."""
        out, err = io.StringIO(), io.StringIO()
        assert run(["policy", "show", str(path)], out, err) == 0
        lines = out.getvalue().splitlines()
        heading = "# rules, estimated worst-case cost of one request (docs/rules.md#costs):"
        assert lines[-2] == heading
        assert lines[-1].startswith("#   dear: ")
        assert "(max_cost 99999999999): candidates.exists(c, " in lines[-1]

    def test_json_lists_rule_costs(self, path: Path) -> None:
        """policy show --format json gives rule_costs: name, cost, max_cost, path."""
        out, err = io.StringIO(), io.StringIO()
        assert run(["policy", "show", "--format", "json", str(path)], out, err) == 0
        (entry,) = json.loads(out.getvalue())["rule_costs"]
        assert entry["name"] == "dear"
        assert entry["max_cost"] == 99_999_999_999
        assert entry["cost"] > MAX_IDS
        assert entry["path"].startswith("candidates.exists(c, ")
