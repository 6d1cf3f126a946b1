"""Shadow policies: a candidate evaluated beside the active policy on real traffic.

``Engine(active, shadow=candidate)`` decides every request under the active policy, as always,
and then under the candidate. The caller gets the active decision and nothing else changes for
it; the decision's record carries the candidate's identity, outcome, reasons and actions beside
the active ones, and whether the two agree, so a team sees what the candidate would have done
before it enforces anything.

The candidate never touches the active decision: whatever goes wrong while it evaluates (a
request its score range refuses, an error in a guard or a rule) is recorded as the shadow's
``error``, never raised.
"""

from __future__ import annotations

from typing import Any

from prunewarden.decision import ShadowResult
from prunewarden.errors import InputError
from prunewarden.fidelity import Embedder, Judge
from prunewarden.inputs import Check, Request, ScoreRange, parse_request
from prunewarden.pipeline._compile import compile_policy
from prunewarden.policy import Policy
from prunewarden.rules import DEFAULT_CACHE_SIZE


class Shadow:
    """A candidate policy, compiled once; :meth:`evaluate` never raises."""

    def __init__(
        self,
        policy: Policy,
        *,
        rule_cache_size: int = DEFAULT_CACHE_SIZE,
        cel: str | None = None,
        embedder: Embedder | None = None,
        judge: Judge | None = None,
    ) -> None:
        self.policy = policy
        self._pipelines = compile_policy(
            policy, rule_cache_size=rule_cache_size, cel=cel, embedder=embedder, judge=judge
        )

    def evaluate(  # noqa: PLR0913 - the request as the active policy parsed it, and its source
        self,
        check: Check,
        request: Request,
        data: Any,
        active_scores: ScoreRange,
        *,
        filename: str = "<input>",
        text: str | None = None,
    ) -> ShadowResult:
        """Decide ``request`` under the candidate. The active policy's parse of the document is
        reused when both accept the same score range; otherwise the document is checked
        against the candidate's."""
        policy = self.policy
        try:
            if policy.spec.scores != active_scores:
                check, request = parse_request(
                    data, policy.spec.scores, filename=filename, text=text
                )
            decision = self._pipelines[check].decide(request)
        except InputError as exc:
            first = exc.problems[0] if exc.problems else "invalid input document"
            return self._failed(f"the candidate refuses the input: {first}")
        except Exception as exc:  # noqa: BLE001 - the candidate must never reach the caller
            return self._failed(f"the candidate failed ({type(exc).__name__}: {exc})")
        return ShadowResult(
            policy.identity,
            policy.sources,
            decision.outcome,
            decision.enforced,
            decision.reasons,
            decision.actions,
        )

    def _failed(self, message: str) -> ShadowResult:
        return ShadowResult(self.policy.identity, self.policy.sources, error=message)
