"""Budgets that hold: a hostile rule or input fails closed quickly and in bounded memory.

Time bounds here are generous on purpose (seconds where the work takes tens of milliseconds):
they tell "refused before the work" from "ran the work to its end", not how fast a machine is.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
from prunewarden import Decision, Engine, PolicyError, parse_policy
from prunewarden.limits import MAX_MATCH_PATTERN_CHARS, MAX_MATCH_STEPS, MAX_RULE_ALLOCATION
from prunewarden.rules import _ruleset
from prunewarden.rules._budget import Budget, Deadline
from prunewarden.rules._compiler import compile_expression
from prunewarden.rules._evaluation import EvaluationError, evaluate
from prunewarden.rules._values import to_cel
from prunewarden.rules._variables import variable_shapes

HEADER = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: budget, version: 1.0.0}\n"
# Far above what the refusals take (milliseconds), far below what the work they refuse took
# (seconds to minutes): a loaded two-core machine stays well inside.
CPU_BOUND_SECONDS = 3.0
SLOW_PATTERN = "[ab]*a[ab]{1000}c"  # sends RE2 from its DFA to its NFA on long a/b text


class NullLogger:
    def info(self, event: str, **fields: Any) -> None:
        pass


def engine(when: str, params: dict[str, Any], *, timeout_ms: int = 100) -> Engine:
    rule = {
        "name": "hostile",
        "check": "eviction",
        "when": when,
        "effect": "deny",
        "message": "m",
        "timeout_ms": timeout_ms,
    }
    spec = {"params": params or {"unused": 1}, "rules": [rule]}
    return Engine(parse_policy(HEADER + "spec: " + json.dumps(spec) + "\n"), logger=NullLogger())


def document(text: str, **segment: Any) -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": "s1", "kind": "turn", "text": text, "tombstone_written": True, **segment},
        "score": 0.5,
        "perturbed_score": 0.5,
        "eviction_candidates": ["s1"],
    }


def random_ab(size: int) -> str:
    """``size`` random characters a and b, made fast (the byte's low bit picks the letter)."""
    table = bytes(0x61 + (i & 1) for i in range(256))
    rng = random.Random(19)  # noqa: S311 - test data, not secrets
    return rng.randbytes(size).translate(table).decode("ascii")


def timed(e: Engine, doc: dict[str, Any]) -> tuple[Decision, float]:
    """The decision and the CPU time this process spent on it: a bound on CPU time holds on a
    loaded machine, where wall time would measure the other processes too."""
    started = time.process_time()
    decision = e.evaluate(doc)
    return decision, time.process_time() - started


class TestMatches:
    def test_a_slow_pattern_is_refused_before_it_runs(self) -> None:
        """A search whose worst case exceeds MAX_MATCH_STEPS fails closed at once, not after
        RE2's NFA has run for seconds and its result been used (allow)."""
        e = engine("segment.text.matches(params.re)", {"re": SLOW_PATTERN})
        decision, seconds = timed(e, document(random_ab(1_000_000)))
        assert decision.outcome == "deny"
        assert decision.codes[0] == "rule_error:hostile"
        error = decision.reasons[0].detail["error"]
        assert error.startswith("matches() on 1000000 characters could take")
        assert f"MAX_MATCH_STEPS ({MAX_MATCH_STEPS})" in error
        assert seconds < CPU_BOUND_SECONDS

    def test_a_pattern_from_the_input_is_priced_too(self) -> None:
        """A pattern taken from the segment's metadata is bounded like one from params."""
        e = engine("segment.text.matches(segment.metadata.re)", {})
        doc = document(random_ab(200_000), metadata={"re": SLOW_PATTERN})
        decision, seconds = timed(e, doc)
        assert decision.codes[0] == "rule_error:hostile"
        assert "MAX_MATCH_STEPS" in decision.reasons[0].detail["error"]
        assert seconds < CPU_BOUND_SECONDS

    def test_a_search_is_priced_by_the_bytes_re2_reads(self) -> None:
        """RE2 reads UTF-8: 6000 three-byte characters cost 18000 bytes of steps, over the
        limit where 6000 ASCII characters are within it."""
        e = engine("segment.text.matches(params.re)", {"re": SLOW_PATTERN})
        priced = e.evaluate(document("\u20ac" * 6000))
        assert priced.codes[0] == "rule_error:hostile"
        assert "MAX_MATCH_STEPS" in priced.reasons[0].detail["error"]
        assert e.evaluate(document("b" * 6000)).outcome == "allow"

    def test_an_invalid_pattern_prints_nothing(self, capfd: pytest.CaptureFixture[str]) -> None:
        """A pattern that does not compile fails closed and never reaches stderr, where RE2
        printed it (it may be segment text) past every redaction."""
        private = "(the private text of a segment"
        e = engine("segment.text.matches(segment.metadata.re)", {})
        decision = e.evaluate(document("hello", metadata={"re": private}))
        assert decision.codes[0] == "rule_error:hostile"
        assert decision.reasons[0].detail["error"] == (
            "matches() was given an invalid or too large RE2 pattern"
        )
        assert private not in json.dumps(decision.to_dict())
        assert capfd.readouterr() == ("", "")

    def test_a_long_pattern_is_refused(self) -> None:
        """A pattern over MAX_MATCH_PATTERN_CHARS is an error, whatever it says."""
        e = engine("segment.text.matches(segment.metadata.re)", {})
        decision = e.evaluate(document("x", metadata={"re": "x" * (MAX_MATCH_PATTERN_CHARS + 1)}))
        assert decision.codes[0] == "rule_error:hostile"
        assert "at most 8192 characters" in decision.reasons[0].detail["error"]

    @pytest.mark.parametrize(
        ("text", "outcome"),
        [("buf refers to the old buffer", "deny"), ("the buffer is old", "allow")],
    )
    def test_ordinary_patterns_match_as_before(self, text: str, outcome: str) -> None:
        """matches keeps RE2's meaning: search anywhere, flags inline."""
        pattern = r"(?i)\b(refers to|is defined as|means)\b"
        e = engine("segment.text.matches(params.re)", {"re": pattern})
        decision = e.evaluate(document(text))
        assert decision.outcome == outcome
        assert not any(code.startswith("rule_error") for code in decision.codes)

    def test_a_slow_pattern_over_params_is_refused_at_load(self) -> None:
        """The load-time trial evaluates on the real params: an over-budget search there is a
        problem of the rule, not a pass."""
        spec = {
            "params": {"re": SLOW_PATTERN, "blob": random_ab(100_000)},
            "rules": [
                {
                    "name": "r",
                    "check": "eviction",
                    "when": "params.blob.matches(params.re)",
                    "effect": "deny",
                    "message": "m",
                }
            ],
        }
        with pytest.raises(PolicyError) as info:
            parse_policy(HEADER + "spec: " + json.dumps(spec) + "\n")
        (problem,) = info.value.problems
        assert problem.path == "$.spec.rules[0].when"
        assert problem.message.startswith("over its budget on a sample input: matches() on")


class TestEngineFunctions:
    def test_contains_any_stops_inside_its_loop(self) -> None:
        """A thousand phrases over 12 MB fail closed at the rule's timeout, not after seconds
        of scanning with the result used (allow)."""
        needles = [f"zz{i:04d}zz" for i in range(1024)]
        e = engine("contains_any(segment.text, params.needles)", {"needles": needles})
        decision, seconds = timed(e, document(random_ab(12_000_000)))
        assert decision.outcome == "deny"
        assert decision.codes[0] == "rule_error:hostile"
        assert decision.reasons[0].detail["error"] == "timed out (timeout_ms: 100)"
        assert seconds < CPU_BOUND_SECONDS

    def test_contains_any_still_finds_a_phrase(self) -> None:
        """Within its budget contains_any answers as before, ignoring case."""
        e = engine("contains_any(segment.text, params.n)", {"n": ["zz", "NEVER"]})
        assert e.evaluate(document("you must never do that")).codes[0] == "rule:hostile"
        assert e.evaluate(document("fine")).outcome == "allow"

    def test_a_result_computed_past_the_deadline_is_not_used(self) -> None:
        """The budget is checked after the last node: an expression whose one call ran past
        its deadline fails, whatever that call returned."""
        expression = compile_expression(
            "contains_any(segment.text, candidates)", variable_shapes("eviction")
        )
        values = {
            "segment": to_cel({"text": random_ab(4_000_000)}),
            "candidates": to_cel([f"zz{i}" for i in range(1024)]),
        }
        with pytest.raises(EvaluationError, match="timed out"):
            evaluate(expression, values, deadline=Deadline(0.01))


class TestDecisionBudget:
    def test_rules_share_one_budget(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Once a decision's rules have spent MAX_DECISION_RULE_MS together, every rule left
        fails closed, each within its own generous timeout_ms."""
        monkeypatch.setattr(_ruleset, "MAX_DECISION_RULE_MS", 50)
        rules = [
            {
                "name": f"slow-{i}",
                "check": "eviction",
                "when": "candidates.exists(c, c == 'never-there')",
                "effect": "deny",
                "message": "m",
                "timeout_ms": 10_000,
            }
            for i in range(3)
        ]
        policy = parse_policy(HEADER + "spec: " + json.dumps({"rules": rules}) + "\n")
        doc = document("x")
        doc["eviction_candidates"] = [f"c{i}" for i in range(20_000)]
        decision, seconds = timed(Engine(policy, logger=NullLogger()), doc)
        errors = [r.detail["error"] for r in decision.reasons if r.code.startswith("rule_error")]
        assert decision.outcome == "deny"
        assert errors == ["timed out (the decision's rules spent their 50 ms)"] * 3
        assert seconds < CPU_BOUND_SECONDS

    def test_a_rule_deadline_inside_a_spent_budget_is_expired(self) -> None:
        """A rule's own deadline counts as spent when its decision's budget is."""
        budget = Budget(0.0)
        spin_until = time.thread_time() + 0.01
        while time.thread_time() < spin_until:
            pass
        deadline = Deadline(10.0, budget)
        assert deadline.expired()
        assert str(deadline.exceeded()) == "timed out (the decision's rules spent their 0 ms)"


# Run in a child process so its peak resident memory is its own; the address-space cap keeps a
# regression from taking the machine's memory with it.
MEMORY_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    from prunewarden import Engine, parse_policy

    class Null:
        def info(self, event, **fields):
            pass

    rule = {"name": "grow", "check": "eviction", "effect": "deny", "message": "m",
            "when": "size(candidates.map(c, c + segment.text)) > 0", "timeout_ms": 10000}
    head = "apiVersion: prunewarden/v1\\nkind: Policy\\nmetadata: {name: m, version: 1.0.0}\\n"
    engine = Engine(parse_policy(head + "spec: " + json.dumps({"rules": [rule]})), logger=Null())
    document = {"check": "eviction", "score": 0.5, "perturbed_score": 0.5,
                "segment": {"id": "s", "kind": "turn", "text": "a" * 20_000_000,
                            "tombstone_written": True},
                "eviction_candidates": [f"c{i}" for i in range(10_000)]}
    decision = engine.evaluate(document)
    # This process's own high-water mark. ru_maxrss would not do: Linux keeps it across exec,
    # so it reports the test runner's size whenever that is the larger.
    with open("/proc/self/status") as status:
        (peak,) = [int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:")]
    reason = decision.reasons[0]
    print(json.dumps({"code": reason.code, "error": reason.detail.get("error"), "peak": peak}))
    """
)


class TestAllocation:
    def test_per_element_concatenation_fails_closed_in_bounded_memory(self) -> None:
        """Concatenating 20 MB of text per candidate stops at MAX_RULE_ALLOCATION, with the
        process's peak memory a few hundred megabytes, not gigabytes."""
        result = subprocess.run(
            [sys.executable, "-c", MEMORY_PROBE],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        found = json.loads(result.stdout)
        assert found["code"] == "rule_error:grow"
        assert found["error"] == (
            f"created more than {MAX_RULE_ALLOCATION} characters and list items "
            "(MAX_RULE_ALLOCATION)"
        )
        assert found["peak"] < 1 << 30

    @pytest.mark.parametrize(
        "when",
        [
            "size(candidates.map(c, lower(segment.text))) > 0",
            "size(candidates.map(c, string(segment.text))) > 0",
            "size(candidates.map(c, candidates + candidates)) > 0",
        ],
    )
    def test_every_growing_function_is_charged(self, when: str) -> None:
        """lower, string and list concatenation count against the allocation budget too."""
        doc = document("a" * 2_000_000)
        doc["eviction_candidates"] = [f"c{i}" for i in range(40)]
        if "candidates +" in when:
            doc["segment"]["text"] = "x"
            doc["eviction_candidates"] = [f"c{i}" for i in range(12_000)]
        decision = engine(when, {}, timeout_ms=10_000).evaluate(doc)
        assert decision.codes[0] == "rule_error:hostile"
        assert "MAX_RULE_ALLOCATION" in decision.reasons[0].detail["error"]
