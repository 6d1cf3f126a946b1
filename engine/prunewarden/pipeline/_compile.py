"""Policy -> one check pipeline per guard.

A pipeline binds a guard to its settings and mode, and turns the guard's verdict into a
:class:`Decision` naming the policy. It is the one place that knows what ``audit`` and ``off`` mean,
and the place where an error inside a guard becomes a refusal instead of a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import prunewarden.rules
from prunewarden._identity import PolicyIdentity, PolicySource
from prunewarden._values import replace_value
from prunewarden.decision import Action, Decision, Reason, Stamp, Verdict
from prunewarden.fidelity import Embedder, Judge
from prunewarden.guards import GUARDS, Guard, TransitionGuardSettings, staleness
from prunewarden.inputs import CHECKS, Check, Request, ScoreRange
from prunewarden.inputs._columns import StalenessColumns
from prunewarden.pipeline import _calibration as calibrated
from prunewarden.policy import Calibration, Mode, Policy
from prunewarden.rules import DEFAULT_CACHE_SIZE

if TYPE_CHECKING:
    from prunewarden.rules import RuleSet

UNIT_SCORES = ScoreRange(0.0, 1.0)  # spec.scores when a policy names none


@dataclass(frozen=True, slots=True)
class Pipeline:
    check: Check
    mode: Mode
    settings: Any
    guard: Guard
    policy: PolicyIdentity
    rules: RuleSet | None = field(default=None, compare=False)  # spec.rules of this check
    sources: tuple[PolicySource, ...] = ()  # the policy's files, named by every decision
    calibration: Calibration | None = None  # spec.scores.calibration (pipeline._calibration)
    # The range the guard judges scores on: spec.scores, or [0, 1] under a calibration; what
    # an explained refusal offers lies within it.
    scores: ScoreRange = UNIT_SCORES

    def decide(
        self, request: Request, stamp: Stamp | None = None, *, explain: bool = False
    ) -> Decision:
        """The decision on a validated request; ``stamp`` places it in a pruning pass.
        ``explain``: each refusing reason of the guard carries ``would_allow``, and the decision
        carries an ``explanation`` with a trace of every rule (the default path computes
        neither)."""
        traces: list[dict[str, Any]] | None = [] if explain else None
        if self.mode == "off":
            verdict = self.guard.when_off(self.settings, request)
        else:
            raw = request
            try:
                if self.calibration is not None:
                    request = calibrated.calibrate(self.calibration, raw)
                verdict = self.guard.evaluate(self.settings, request)
                if explain:
                    verdict = self.guard.explain(self.settings, request, verdict, self.scores)
            except Exception as exc:  # noqa: BLE001 - fail closed: any guard error refuses
                verdict = self._failed(exc)
            if self.rules:
                # After the guard's verdict: rules only tighten, and never raise.
                verdict = self.rules.apply(verdict, request, traces)
            if self.calibration is not None:
                verdict = self._annotate(verdict, raw, request)
        decision = self.to_decision(verdict, stamp)
        if traces is None:
            return decision
        return replace_value(decision, explanation=self._explanation(traces))

    @property
    def plain(self) -> bool:
        """Nothing but the guard decides: no rule and no calibration, so a request's columns
        are all a decision needs (:meth:`decide_staleness`)."""
        return not self.rules and self.calibration is None

    def decide_staleness(self, columns: StalenessColumns) -> Decision:
        """:meth:`decide` of a staleness request read into columns, for a :attr:`plain`
        pipeline: the same guard (:func:`prunewarden.guards.staleness.evaluate_columns`, which
        ``decide`` reaches through the typed request), without typing every span."""
        if self.mode == "off":
            return self.to_decision(staleness.unguarded_columns(self.settings, columns))
        try:
            verdict = staleness.evaluate_columns(self.settings, columns)
        except Exception as exc:  # noqa: BLE001 - fail closed: any guard error refuses
            verdict = self._failed(exc)
        return self.to_decision(verdict)

    def _failed(self, exc: Exception) -> Verdict:
        return Verdict(
            True,
            [
                Reason(
                    "internal_error",
                    f"the {self.check} guard failed ({type(exc).__name__}: {exc}); refusing",
                    {"error": type(exc).__name__},
                )
            ],
        )

    def _explanation(self, traces: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "rules": traces,
            "rule_backend": self.rules.backend if self.rules else None,
        }

    def _annotate(self, verdict: Verdict, raw: Request, judged: Request) -> Verdict:
        """Every reason names the scale its scores were judged on (fail closed: a record that
        cannot be built refuses)."""
        assert self.calibration is not None  # noqa: S101 - only called with one
        recent = getattr(self.settings, "consecutive_cycles", 1)
        try:
            detail = calibrated.record(self.calibration, raw, judged, recent)
        except Exception as exc:  # noqa: BLE001 - fail closed
            reason = Reason(
                "internal_error",
                f"the calibrated scores could not be recorded ({type(exc).__name__}: {exc}); "
                "refusing",
                {"error": type(exc).__name__},
            )
            return Verdict(True, [reason])
        verdict.reasons = calibrated.annotate(verdict.reasons, detail)
        return verdict

    def to_decision(self, verdict: Verdict, stamp: Stamp | None = None) -> Decision:
        if stamp is not None:
            return Decision(
                check=self.check,
                outcome=self.guard.refusal if verdict.refused else "allow",
                enforced=self.mode == "enforce",
                reasons=tuple(verdict.reasons),
                actions=tuple(verdict.actions),
                policy=self.policy,
                decision_id=stamp.decision_id,
                evaluated_at=stamp.evaluated_at,
                kept=verdict.kept,
                evicted=verdict.evicted,
                sources=self.sources,
                pass_id=stamp.pass_id,
                index=stamp.position,
            )
        return Decision(
            check=self.check,
            outcome=self.guard.refusal if verdict.refused else "allow",
            enforced=self.mode == "enforce",
            reasons=tuple(verdict.reasons),
            actions=tuple(verdict.actions),
            policy=self.policy,
            kept=verdict.kept,
            evicted=verdict.evicted,
            sources=self.sources,
        )

    def refuse(
        self, reason: Reason, actions: tuple[Action, ...] = (), stamp: Stamp | None = None
    ) -> Decision:
        """A refusal decided outside the guard (the log could not be written, ...)."""
        return self.to_decision(Verdict(True, [reason], list(actions)), stamp)


def compile_policy(
    policy: Policy,
    *,
    rule_cache_size: int = DEFAULT_CACHE_SIZE,
    cel: str | None = None,
    embedder: Embedder | None = None,
    judge: Judge | None = None,
) -> dict[Check, Pipeline]:
    """One pipeline per check, bound to the policy's settings, rules and identity; ``cel``
    names the CEL backend that evaluates the rules; ``embedder`` is what the fidelity check's
    meaning method embeds with, ``judge`` what its judge method asks (None: none, and that method
    refuses)."""
    params = policy.document["spec"].get("params", {})
    return {
        check: Pipeline(
            check=check,
            mode=getattr(policy.spec, check).mode,
            settings=_settings(policy, check, embedder, judge),
            guard=GUARDS[check],
            policy=policy.identity,
            # Through the package (its names resolve on use): the CEL runtime loads with the
            # first policy that has rules, and a policy without rules never loads it.
            rules=(
                prunewarden.rules.RuleSet(
                    check,
                    policy.rules,
                    params,
                    cache_size=rule_cache_size,
                    backend=cel,
                    scores=judged_scores(policy),
                )
                if policy.rules
                else None  # as an empty RuleSet: nothing to apply
            ),
            sources=policy.sources,
            calibration=policy.spec.calibration,
            scores=judged_scores(policy),
        )
        for check in CHECKS
    }


def judged_scores(policy: Policy) -> ScoreRange:
    """The score range the guards and rules judge on: ``spec.scores``, or [0, 1] when the
    policy calibrates its scores onto it."""
    if policy.spec.calibration is not None:
        return UNIT_SCORES
    return policy.spec.scores


def _settings(
    policy: Policy, check: Check, embedder: Embedder | None = None, judge: Judge | None = None
) -> Any:
    """What a check's guard is given: its section of the policy; the transition guard also gets
    the eviction section and guard, which ``require_scores`` asks (guards never import one
    another, so the pipeline binds them), and ``spec.fidelity``."""
    if check == "transition":
        return TransitionGuardSettings(
            policy.spec.transition,
            policy.spec.eviction,
            GUARDS["eviction"].evaluate,
            policy.spec.fidelity,
            embedder,
            judge,
        )
    return getattr(policy.spec, check)
