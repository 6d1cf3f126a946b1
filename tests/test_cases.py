"""Golden cases: ``tests/cases/<check>/<name>.yaml`` hold a policy, an input and the decision.

A case has ``description``, an optional ``policy`` (spec overrides merged into a minimal policy;
absent means the bundled default), ``input`` (the document) and ``expect``: ``outcome``, optional
``enforced``, ``reasons`` (every code, in order), and optional ``actions``, ``kept``, ``evicted``.

``tests/cases/plan/<name>.yaml`` hold a pruning pass: ``input`` is a window (``$defs/plan``) and
``expect`` the plan's ``evict``, ``tombstones``, ``pinned``, ``frozen`` and every ``decisions``
entry's ``check``, ``outcome`` and ``reasons``, in order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from prunewarden import Engine, Policy, RefusedError

CASES = Path(__file__).parent / "cases"
# plan/ holds passes; policy_check/ holds policy pairs for the analyzer (tests/analysis/).
CASE_FILES = sorted(
    p for p in CASES.glob("**/*.yaml") if p.parent.name != "plan" and "policy_check" not in p.parts
)
PLAN_CASE_FILES = sorted(CASES.glob("plan/*.yaml"))
PLAN_EXPECT_KEYS = {"evict", "tombstones", "pinned", "frozen", "decisions"}
CASE_KEYS = {"description", "policy", "input", "expect"}
EXPECT_KEYS = {"outcome", "enforced", "reasons", "actions", "kept", "evicted"}
DECISION_SCHEMA = Path(__file__).parents[1] / "schemas" / "decision.v1.schema.json"


def load_case(path: Path) -> dict[str, Any]:
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(case, dict), f"{path}: a case is a mapping"
    assert set(case) <= CASE_KEYS, f"{path}: unknown keys {set(case) - CASE_KEYS}"
    assert {"description", "input", "expect"} <= set(case), f"{path}: missing keys"
    assert set(case["expect"]) <= EXPECT_KEYS, f"{path}: unknown expect keys"
    assert {"outcome", "reasons"} <= set(case["expect"]), f"{path}: expect needs outcome, reasons"
    return case


def decision_errors(document: dict[str, Any]) -> list[str]:
    schema = yaml.safe_load(DECISION_SCHEMA.read_text(encoding="utf-8"))
    return [error.message for error in Draft202012Validator(schema).iter_errors(document)]


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda path: path.stem)
def test_case(path: Path, engine: Engine, make_policy: Callable[..., Policy]) -> None:
    """The case's input, under its policy, yields exactly the expected decision."""
    case = load_case(path)
    assert case["input"]["check"] == path.parent.name, "a case lives in its check's folder"
    if "policy" in case:
        engine = Engine(make_policy(**case["policy"]))
    decision = engine.evaluate(case["input"])
    expect = case["expect"]
    assert decision_errors(decision.to_dict()) == []

    assert decision.outcome == expect["outcome"]
    assert list(decision.codes) == expect["reasons"]
    if "enforced" in expect:
        assert decision.enforced is expect["enforced"]
    if "actions" in expect:
        assert [action.to_dict() for action in decision.actions] == expect["actions"]
    for field in ("kept", "evicted"):
        if field in expect:
            assert list(getattr(decision, field)) == expect[field], field

    if decision.blocks:
        with pytest.raises(RefusedError) as raised:
            engine.enforce(case["input"])
        assert raised.value.decision.codes == decision.codes
    else:
        assert engine.enforce(case["input"]).outcome == decision.outcome


@pytest.mark.parametrize("path", PLAN_CASE_FILES, ids=lambda path: path.stem)
def test_plan_case(path: Path, engine: Engine, make_policy: Callable[..., Policy]) -> None:
    """The case's window, under its policy, plans exactly the expected pass."""
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(case) <= CASE_KEYS, f"{path}: unknown keys {set(case) - CASE_KEYS}"
    assert set(case["expect"]) == PLAN_EXPECT_KEYS, f"{path}: expect needs {PLAN_EXPECT_KEYS}"
    if "policy" in case:
        engine = Engine(make_policy(**case["policy"]))
    plan = engine.plan(case["input"])
    expect = case["expect"]
    assert all(decision_errors(d.to_dict()) == [] for d in plan.decisions)
    for field in ("evict", "tombstones", "pinned"):
        assert list(getattr(plan, field)) == expect[field], field
    assert plan.frozen is expect["frozen"]
    assert [
        {"check": d.check, "outcome": d.outcome, "reasons": list(d.codes)} for d in plan.decisions
    ] == expect["decisions"]


class TestCaseCorpus:
    def test_every_check_has_cases(self) -> None:
        """There are at least 25 golden cases and every guard has some."""
        checks = Counter(path.parent.name for path in CASE_FILES)
        assert len(CASE_FILES) >= 25
        assert set(checks) == {"collapse", "eviction", "staleness", "transition"}
        assert min(checks.values()) >= 8

    def test_case_ids_are_unique(self) -> None:
        """Case ids are file stems, so stems must be unique across folders."""
        stems = Counter(path.stem for path in CASE_FILES)
        assert [stem for stem, count in stems.items() if count > 1] == []

    def test_every_outcome_is_covered(self) -> None:
        """The corpus covers allow and refusal for every check."""
        seen = {(path.parent.name, load_case(path)["expect"]["outcome"]) for path in CASE_FILES}
        assert seen == {
            ("collapse", "allow"),
            ("collapse", "halt"),
            ("eviction", "allow"),
            ("eviction", "deny"),
            ("staleness", "allow"),
            ("staleness", "deny"),
            ("transition", "allow"),
            ("transition", "deny"),
        }
