"""Which reason codes and rules a policy's test cases exercised, and which they never did.

The reason codes are those of ``schemas/decision.v1.schema.json``; a code counts only where the
policy can produce it from some input document (a guard that is off gives only
``check_disabled``; ``no_tombstone`` needs ``require_tombstone``; the fail-closed codes are the
engine's own business). Rules are the policy's ``spec.rules``, exercised by a decision carrying
``rule:<name>``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from prunewarden.inputs import CHECKS
from prunewarden.policy import Policy
from prunewarden.suites._expectations import Vocabulary, policy_rules, vocabulary
from prunewarden.suites._run import SuiteResult

# Reason codes no valid input document reaches: they are the engine's fail-closed paths,
# tested by its own unit tests, not by policy suites.
FAIL_CLOSED = {
    "internal_error": "fail-closed path: a guard failed",
    "audit_unavailable": "fail-closed path: the decision could not be logged",
    # Not fail-closed, but equally out of a single document's reach: it needs a session's state.
    "pruning_halted": "session state: a halted collapse guard seen by Session or replay",
    "session_state_unavailable": "fail-closed path: a session's state could not be saved",
    # Decided by a pruning pass over an eviction group, never by one eviction document.
    "group_member_refused": "pruning pass: another member of the segment's eviction group was "
    "refused",
    # Written by a coding agent's compaction hook about its own run, never by a document.
    "compaction_recorded": "compaction hook: PreCompact recorded the window",
    "compaction_blocked": "compaction hook: PreCompact blocked by spec.compaction",
    "compaction_restored": "compaction hook: a judged compaction's repair given again",
}


@dataclass(frozen=True, slots=True)
class Coverage:
    """Which reason codes and rules a policy's decisions exercised, and which they never did."""

    policy: Policy
    sources: tuple[str, ...]
    reasons: dict[str, int]
    not_applicable: dict[str, str]
    rules: dict[str, int]

    @property
    def never_exercised(self) -> list[str]:
        return [code for code, count in self.reasons.items() if not count]

    @property
    def rules_never_exercised(self) -> list[str]:
        return [name for name, count in self.rules.items() if not count]

    @property
    def exercised(self) -> int:
        return sum(1 for count in (*self.reasons.values(), *self.rules.values()) if count)

    @property
    def total(self) -> int:
        return len(self.reasons) + len(self.rules)

    @property
    def percent(self) -> float:
        """Reason codes and rules exercised, over those the policy can produce (100 when none)."""
        return 100.0 * self.exercised / self.total if self.total else 100.0


def applicable_reasons(policy: Policy, words: Vocabulary | None = None) -> dict[str, str | None]:
    """Each reason code of ``decision.v1``, with ``None`` when the policy can produce it from some
    input document, or why it cannot."""
    words = words or vocabulary()
    spec = policy.spec
    off = [check for check in CHECKS if getattr(spec, check).mode == "off"]
    conditions = {
        "check_disabled": None if off else "no guard is off in this policy",
        "perturbation_missing": (
            None if spec.eviction.require_perturbation else "require_perturbation is false"
        ),
        "no_tombstone": (
            None
            if spec.eviction.require_tombstone or spec.transition.require_tombstones
            else "require_tombstone and transition.require_tombstones are false"
        ),
        "unscored_removal": (
            None if spec.transition.require_scores else "transition.require_scores is false"
        ),
        "too_few_entries": None if spec.collapse.min_live_entries else "min_live_entries is 0",
        **dict.fromkeys(
            ("fact_lost", "negation_lost", "summary_is_error"),
            None if spec.fidelity.mode != "off" else "spec.fidelity is off",
        ),
        "summary_opaque": (
            None
            if spec.fidelity.mode != "off" and spec.fidelity.opaque != "allow"
            else "spec.fidelity is off or its opaque is allow"
        ),
        "meaning_drift": (
            None
            if spec.fidelity.mode != "off" and spec.fidelity.method != "facts"
            else "spec.fidelity is off or its method is facts"
        ),
        **FAIL_CLOSED,
    }
    out: dict[str, str | None] = {}
    for code, check in words.reasons.items():
        if check in off:
            out[code] = f"the {check} guard is off"
        else:
            out[code] = conditions.get(code)
    return out


def applicable_rules(policy: Policy) -> list[str]:
    """The policy's rules, but those of a guard that is off (they never run)."""
    return [
        name
        for name, check in policy_rules(policy).items()
        if check not in CHECKS or getattr(policy.spec, check).mode != "off"
    ]


def measure_coverage(results: Iterable[SuiteResult]) -> list[Coverage]:
    """Coverage per policy (by digest), in the order the policies first appear.

    A case exercises the reason codes of the decision on its input document; skipped cases
    exercise nothing.
    """
    words = vocabulary()
    by_digest: dict[str, tuple[Policy, list[str], dict[str, int], dict[str, int]]] = {}
    for result in results:
        policy = result.suite.policy
        if policy.digest not in by_digest:
            by_digest[policy.digest] = (policy, [], {}, dict.fromkeys(applicable_rules(policy), 0))
        _, sources, codes, rules = by_digest[policy.digest]
        if result.suite.policy_source not in sources:
            sources.append(result.suite.policy_source)
        for case in result.results:
            for code in case.decision.codes if case.decision else ():
                codes[code] = codes.get(code, 0) + 1
                prefix, _, rule = code.partition(":")
                if prefix == "rule" and rule in rules:
                    rules[rule] += 1
    report = []
    for policy, sources, codes, rules in by_digest.values():
        applicable = applicable_reasons(policy, words)
        reasons = {code: codes.get(code, 0) for code, why in applicable.items() if why is None}
        skipped = {code: why for code, why in applicable.items() if why is not None}
        report.append(Coverage(policy, tuple(sources), reasons, skipped, rules))
    return report
