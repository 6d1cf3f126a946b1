"""What a test case expects of a decision: one checker per field, each returning what differed.

The checkers form a registry (``EXPECTATIONS``) in the order a failing case reports them. Each
takes the expected value and the observed evaluation and returns a :class:`Mismatch` (expected,
got, and a note saying exactly how they differ) or ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from prunewarden import _resources as resources
from prunewarden._json import JsonPath
from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import Problem, describe_value
from prunewarden.policy import Policy


class Locator(Protocol):
    """Puts a file, line and column on a problem at a path of some piece of data."""

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem: ...


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One expectation the decision did not meet: what was expected, what came, and how they
    differ."""

    field: str
    expected: Any
    got: Any
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.field}: expected {_show(self.expected)}, got {_show(self.got)}"
        return f"{text} ({self.detail})" if self.detail else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "expected": self.expected,
            "got": self.got,
            "message": str(self),
        }


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class Observed:
    """What a case's evaluation produced; the halt cycle is computed only when asked for."""

    def __init__(self, engine: Engine, document: dict[str, Any], decision: Decision) -> None:
        self.engine = engine
        self.document = document
        self.decision = decision
        self._halt: tuple[int | None, Decision | None] | None = None

    def halt(self) -> tuple[int | None, Decision | None]:
        """The cycle of the first halt along the growing history, and its decision.

        Prefix ``k`` is the document with the first ``k`` snapshots (baseline as given, or the
        first snapshot's scores as always); the first prefix whose outcome is ``halt`` (enforced
        or not) gives its last snapshot's cycle.
        """
        if self._halt is None:
            self._halt = (None, None)
            history = self.document.get("history", [])
            for k in range(1, len(history) + 1):
                decision = self.engine.evaluate({**self.document, "history": history[:k]})
                if decision.outcome == "halt":
                    self._halt = (history[k - 1]["cycle"], decision)
                    break
        return self._halt


Checker = Callable[[Any, Observed], Mismatch | None]


def _outcome(expected: str, seen: Observed) -> Mismatch | None:
    got = seen.decision.outcome
    return None if got == expected else Mismatch("outcome", expected, got, _primary(seen))


def _enforced(expected: bool, seen: Observed) -> Mismatch | None:
    got = seen.decision.enforced
    return None if got == expected else Mismatch("enforced", expected, got)


def _reasons(expected: list[str], seen: Observed) -> Mismatch | None:
    got = list(seen.decision.codes)
    return (
        None if got == expected else Mismatch("reasons", expected, got, _list_diff(expected, got))
    )


def _reasons_include(expected: list[str], seen: Observed) -> Mismatch | None:
    got = list(seen.decision.codes)
    missing = [code for code in expected if code not in got]
    if not missing:
        return None
    return Mismatch("reasons_include", expected, got, f"missing {_show(missing)}")


def _reasons_exclude(expected: list[str], seen: Observed) -> Mismatch | None:
    got = list(seen.decision.codes)
    present = [code for code in expected if code in got]
    if not present:
        return None
    return Mismatch("reasons_exclude", expected, got, f"present {_show(present)}")


def _kept(expected: list[str], seen: Observed) -> Mismatch | None:
    got = list(seen.decision.kept) if seen.decision.kept is not None else None
    if got == expected:
        return None
    return Mismatch("kept", expected, got, _list_diff(expected, got or []))


def _actions_include(expected: list[str | dict[str, Any]], seen: Observed) -> Mismatch | None:
    got = [action.to_dict() for action in seen.decision.actions]
    missing = [want for want in expected if not any(_action_matches(want, a) for a in got)]
    if not missing:
        return None
    return Mismatch("actions_include", expected, got, f"missing {_show(missing)}")


def _action_matches(want: str | dict[str, Any], got: dict[str, Any]) -> bool:
    if isinstance(want, str):
        return bool(got["action"] == want)
    return bool(got["action"] == want["action"] and got.get("ids") == want["ids"])


def _halt_at_cycle(expected: int | None, seen: Observed) -> Mismatch | None:
    got, decision = seen.halt()
    if got == expected:
        return None
    if decision is None:
        detail = "no prefix of the history halts"
    else:
        detail = f"first halt: {', '.join(decision.codes)}"
    return Mismatch("halt_at_cycle", expected, got, detail)


def _primary(seen: Observed) -> str:
    reasons = seen.decision.reasons
    return f"{reasons[0].code}: {reasons[0].message}" if reasons else ""


def _list_diff(expected: list[str], got: list[str]) -> str:
    missing = [item for item in expected if item not in got]
    extra = [item for item in got if item not in expected]
    parts = []
    if missing:
        parts.append(f"missing {_show(missing)}")
    if extra:
        parts.append(f"unexpected {_show(extra)}")
    return "; ".join(parts) or "same items, different order"


# The order in which a failing case reports what differed.
EXPECTATIONS: dict[str, Checker] = {
    "outcome": _outcome,
    "enforced": _enforced,
    "reasons": _reasons,
    "reasons_include": _reasons_include,
    "reasons_exclude": _reasons_exclude,
    "kept": _kept,
    "actions_include": _actions_include,
    "halt_at_cycle": _halt_at_cycle,
}

# Expectations that only mean something for one check.
_ONLY_FOR = {"kept": "staleness", "halt_at_cycle": "collapse"}


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The reason codes and actions decisions use (from ``decision.v1``), and the check each
    reason code belongs to (``any`` for the codes every guard may give)."""

    reasons: dict[str, str]
    actions: frozenset[str]


@cache
def vocabulary() -> Vocabulary:
    defs = resources.schema("decision")["$defs"]
    # Codes with a name of their own; rule:NAME and rule_error:NAME are patterns, checked
    # against the policy's rules instead.
    reasons = {
        entry["const"]: entry.get("description", "any:").split(":", 1)[0]
        for entry in defs["reason_code"]["oneOf"]
        if "const" in entry
    }
    actions = frozenset(entry["const"] for entry in defs["action"]["properties"]["action"]["oneOf"])
    return Vocabulary(reasons, actions)


def policy_rules(policy: Policy) -> dict[str, str]:
    """The policy's custom rules (``spec.rules``, where the policy format has them): each name
    with the check it belongs to."""
    rules = policy.document.get("spec", {}).get("rules") or []
    return {
        str(rule["name"]): str(rule.get("check", ""))
        for rule in rules
        if isinstance(rule, dict) and "name" in rule
    }


def expectation_problems(
    expect: dict[str, Any], document: dict[str, Any], policy: Policy, at: Locator
) -> list[Problem]:
    """What is wrong with ``expect`` for this input under this policy: unknown reason codes,
    rules or actions, and fields that do not apply to the input's check."""
    words = vocabulary()
    rules = set(policy_rules(policy))
    problems = []
    for field_name, check in _ONLY_FOR.items():
        if field_name in expect and document.get("check") != check:
            message = f"{field_name} applies to {check} inputs only, not {document.get('check')!r}"
            problems.append(at.problem((field_name,), message, at_key=True))
    for field_name in ("reasons", "reasons_include", "reasons_exclude"):
        for i, code in enumerate(expect.get(field_name, ())):
            prefix, _, rule = code.partition(":")
            if code not in words.reasons and not (
                prefix in ("rule", "rule_error") and rule in rules
            ):
                problems.append(at.problem((field_name, i), _unknown_code(code, policy, rules)))
    for i, want in enumerate(expect.get("actions_include", ())):
        name = want if isinstance(want, str) else want["action"]
        if name not in words.actions:
            names = ", ".join(sorted(words.actions))
            message = f"unknown action {name!r} (expected one of: {names})"
            problems.append(at.problem(("actions_include", i), message))
    return problems


def _unknown_code(code: str, policy: Policy, rules: set[str]) -> str:
    if code.startswith(("rule:", "rule_error:")):
        names = ", ".join(sorted(rules)) or "none"
        rule = code.partition(":")[2]
        return f"{policy.name}@{policy.version} has no rule {rule!r} (rules: {names})"
    return f"unknown reason code {describe_value(code)} (see schemas/decision.v1.schema.json)"
