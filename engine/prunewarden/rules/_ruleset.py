"""Custom rules applied to a request: evaluated after the built-in guard, and only tightening
its verdict.

A rule that reads its check's per-item variable (collapse: ``canary``, staleness: ``span``) is
evaluated once per item and matches when any item matches.

Rules only tighten. A matched rule in ``enforce`` mode with effect ``deny``, ``halt`` or ``pin``
refuses; ``warn`` and ``audit`` add a reason and leave the outcome; nothing turns a refusal into an
allow. When a rule refuses what the guard allowed, the guard's allowing reasons (``authorized``)
are not listed among the refusal's reasons: they move into the first refusing reason's detail,
under ``guard``, so that a refused decision never reads as authorized. A rule that errors, times
out or gives something other than a bool counts as matched, with reason ``rule_error:<name>``
(fail closed). The rules of one request share one :class:`~prunewarden.rules._budget.Budget` of
CPU time; once it is spent, every rule left fails closed without running.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prunewarden.decision import HALT_ACTIONS, Action, Reason, Verdict
from prunewarden.inputs import ScoreRange
from prunewarden.limits import MAX_DECISION_RULE_MS
from prunewarden.rules._backend import check_backend
from prunewarden.rules._budget import Budget, Deadline
from prunewarden.rules._cache import ResultCache
from prunewarden.rules._evaluation import EvaluationError, evaluate_bool, evaluate_text
from prunewarden.rules._expression import Expression
from prunewarden.rules._flip import explain_rule
from prunewarden.rules._model import DEFAULT_CACHE_SIZE, Rule
from prunewarden.rules._native import (
    NativeExpression,
    compile_native,
    evaluate_native,
    native_type_name,
)
from prunewarden.rules._trace import trace
from prunewarden.rules._values import to_cel
from prunewarden.rules._variables import Variables

if TYPE_CHECKING:
    from prunewarden.inputs import Request


_PLURAL = {"canary": "canaries", "span": "spans"}


@dataclass(slots=True)
class _Outcome:
    matched: list[str]  # item ids (or [""] for a rule evaluated once)
    errors: list[tuple[str, str]]  # (item id, message)
    message: str = ""


class RuleSet:
    """The rules of one check, with their cache; shared by every thread using the engine."""

    def __init__(  # noqa: PLR0913 - the rules, their params and three keyword settings
        self,
        check: str,
        rules: Sequence[Rule],
        params: Mapping[str, Any],
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        backend: str | None = None,
        scores: ScoreRange | None = None,
    ) -> None:
        """``backend`` is the CEL runtime that evaluates the rules: ``"python"`` (cel-python) or
        ``"native"`` (cel-cpp, the ``cel-native`` extra; :class:`BackendUnavailableError` without
        it, whether or not there are rules), None for ``PRUNEWARDEN_CEL`` (else python).
        ``scores``: the range the rules' scores lie in (an explained rule offers no score
        outside it); None: [0, 1]."""
        self.scores = scores if scores is not None else ScoreRange(0.0, 1.0)
        self.check = check
        self.backend = check_backend(backend)
        self.rules = tuple(rule for rule in rules if rule.check == check)
        self.cache = ResultCache(cache_size)
        self._params = to_cel(dict(params))
        self._raw_params = dict(params)  # as the policy spells them, for traces
        # The native programs, by the identity of the expression they were compiled from.
        self._native: dict[int, NativeExpression] = {}
        if self.backend == "native":
            for rule in self.rules:
                for expression in (rule.when, rule.message_expression):
                    if expression is not None:
                        self._native[id(expression)] = compile_native(expression)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def apply(
        self, verdict: Verdict, request: Request, traces: list[dict[str, Any]] | None = None
    ) -> Verdict:
        """The guard's verdict, tightened by the rules. Never raises. ``traces``, when given,
        receives the trace of every rule, and each matched rule's reason its ``would_allow``
        (an explained decision; see ``_trace`` and ``_flip``)."""
        if not self.rules:
            return verdict
        variables = Variables(self.check, request, self._params, verdict.variables)
        shared = _SharedBudget()
        binding: list[Reason] = []
        advisory: list[Reason] = []
        actions: list[Action] = []
        for rule in self.rules:
            outcome = self._evaluate(rule, variables, shared)
            reasons = _reasons(rule, outcome)
            if traces is not None:
                traces.append(self._trace(rule, variables, outcome, shared))
                reasons = [self._explained(rule, reason) for reason in reasons]
            for reason in reasons:
                refuses = rule.mode == "enforce" and rule.effect != "warn"
                (binding if refuses else advisory).append(reason)
                if refuses:
                    actions.extend(_actions(rule, request))
        if not binding and not advisory:
            return verdict
        merged_actions = list(verdict.actions)
        for action in actions:
            if action not in merged_actions:
                merged_actions.append(action)
        if binding and not verdict.refused:
            # A rule refused what the guard allowed. A refusal carries no allowing reason: what
            # the guard found goes into the first refusing reason's detail, as ``guard``.
            kept = _everything(request) if verdict.kept is not None else None
            return Verdict(
                True,
                [*_with_guard(binding, verdict.reasons), *advisory],
                merged_actions,
                kept=kept,
                evicted=() if kept is not None else None,
            )
        return Verdict(
            verdict.refused,
            [*verdict.reasons, *binding, *advisory],
            merged_actions,
            kept=verdict.kept,
            evicted=verdict.evicted,
        )

    def _evaluate(self, rule: Rule, variables: Variables, shared: _SharedBudget) -> _Outcome:
        outcome = _Outcome([], [])
        deadline = _LazyDeadline(rule.timeout, shared)
        try:
            items: list[tuple[str, int | None]] = (
                [(item_id, i) for i, (item_id, _) in enumerate(variables.items())]
                if rule.per_item
                else [("", None)]
            )
        except Exception as exc:  # noqa: BLE001 - fail closed: a rule that cannot run matched
            outcome.errors.append(("", f"its variables could not be built ({type(exc).__name__})"))
            return outcome
        first_match: int | None = None
        for item_id, item in items:
            try:
                matched = self._condition(rule, variables, item, deadline)
            except EvaluationError as exc:
                outcome.errors.append((item_id, str(exc)))
                if deadline.started().expired():
                    break
                continue
            except Exception as exc:  # noqa: BLE001 - fail closed, as above
                reason = f"its variables could not be built ({type(exc).__name__}: {exc})"
                outcome.errors.append((item_id, reason[:200]))
                continue
            if matched:
                outcome.matched.append(item_id)
                if first_match is None:
                    first_match = item if item is not None else -1
        if outcome.matched:
            outcome.message = self._message(rule, variables, first_match, shared)
        return outcome

    def _trace(
        self, rule: Rule, variables: Variables, outcome: _Outcome, shared: _SharedBudget
    ) -> dict[str, Any]:
        """What decided ``rule``: the item it matched first (else its first item), each
        sub-expression's value on that item, the params it read and its cost."""
        out: dict[str, Any] = {
            "rule": rule.name,
            "effect": rule.effect,
            "mode": rule.mode,
            "matched": bool(outcome.matched),
            "reads": sorted(rule.when.reads),
            "params": self._params_read(rule),
            "traced_with": "cel-python",
        }
        if outcome.errors:
            out["errors"] = [error for _, error in outcome.errors]
        try:
            item: int | None = None
            if rule.per_item:
                ids = [item_id for item_id, _ in variables.items()]
                wanted = outcome.matched[0] if outcome.matched else (ids[0] if ids else None)
                item = ids.index(wanted) if wanted is not None else None
                out["items"] = {"count": len(ids), "matched": outcome.matched, "traced": wanted}
                if item is None:
                    return out
            deadline = Deadline(rule.timeout, shared.started())
            out.update(trace(rule.when, variables.cel(rule.when.reads, item), deadline))
        except Exception as exc:  # noqa: BLE001 - a trace never changes a decision
            out["trace_error"] = type(exc).__name__
        return out

    def _explained(self, rule: Rule, reason: Reason) -> Reason:
        """A matched rule's reason with what would have stopped it matching (``_flip``); a
        failed rule's (``rule_error:``) as it is: its error decided it."""
        if not reason.code.startswith("rule:"):
            return reason
        try:
            return explain_rule(reason, rule.when.tree, self._raw_params, self.scores)
        except Exception:  # noqa: BLE001 - an explanation never changes a decision
            return reason

    def _params_read(self, rule: Rule) -> dict[str, Any]:
        if "params" not in rule.when.reads:
            return {}
        fields = rule.when.reads["params"]
        return {
            name: value
            for name, value in self._raw_params.items()
            if fields is None or name in fields
        }

    def _condition(
        self, rule: Rule, variables: Variables, item: int | None, deadline: _LazyDeadline
    ) -> bool:
        reads = rule.when.reads
        shared_digest = variables.shared_digest(reads, item)
        if shared_digest is not None:
            key: tuple[Any, ...] = (rule.index, rule.name, shared_digest)
        else:
            key = (rule.index, rule.name, *variables.digest(reads, item))
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        try:
            matched = self._bool(rule.when, variables.cel(reads, item), deadline.started())
        except EvaluationError as exc:
            if str(exc) == "timed out":
                msg = f"timed out (timeout_ms: {rule.timeout * 1000:g})"
                raise EvaluationError(msg) from None
            raise
        self.cache.put(key, matched)
        return matched

    def _bool(
        self, expression: Expression, variables: Mapping[str, Any], deadline: Deadline
    ) -> bool:
        native = self._native.get(id(expression))
        if native is None:
            return evaluate_bool(expression, variables, deadline=deadline)
        value = evaluate_native(native, variables, deadline=deadline)
        if not isinstance(value, bool):
            raise EvaluationError(f"gave {native_type_name(value)}, not a bool")
        return value

    def _text(
        self, expression: Expression, variables: Mapping[str, Any], deadline: Deadline
    ) -> str:
        native = self._native.get(id(expression))
        if native is None:
            return evaluate_text(expression, variables, deadline=deadline)
        value = evaluate_native(native, variables, deadline=deadline)
        if not isinstance(value, str):
            raise EvaluationError(f"gave {native_type_name(value)}, not a string")
        return value

    def _message(
        self, rule: Rule, variables: Variables, item: int | None, shared: _SharedBudget
    ) -> str:
        if rule.message_expression is None:
            return rule.message or f"rule {rule.name!r} matched"
        position = None if item is None or item < 0 else item
        try:
            reads = rule.message_expression.reads
            return self._text(
                rule.message_expression,
                variables.cel(reads, position),
                Deadline(rule.timeout, shared.started()),
            )
        except Exception as exc:  # noqa: BLE001 - the rule matched; only its wording failed
            return f"rule {rule.name!r} matched (its message_expression failed: {exc})"


class _SharedBudget:
    """The decision's budget, started (one CPU-clock read) only when a rule is evaluated: a
    request whose every rule is answered from the cache reads no clock."""

    __slots__ = ("_budget",)

    def __init__(self) -> None:
        self._budget: Budget | None = None

    def started(self) -> Budget:
        if self._budget is None:
            self._budget = Budget(MAX_DECISION_RULE_MS / 1000)
        return self._budget


class _LazyDeadline:
    """A rule's deadline, started when the rule is first evaluated rather than looked up."""

    __slots__ = ("_deadline", "_seconds", "_shared")

    def __init__(self, seconds: float, shared: _SharedBudget) -> None:
        self._seconds = seconds
        self._shared = shared
        self._deadline: Deadline | None = None

    def started(self) -> Deadline:
        if self._deadline is None:
            self._deadline = Deadline(self._seconds, self._shared.started())
        return self._deadline


def _reasons(rule: Rule, outcome: _Outcome) -> list[Reason]:
    reasons = []
    noun = rule.per_item or ""
    base: dict[str, Any] = {"rule": rule.name, "effect": rule.effect, "mode": rule.mode}
    suffix = " (audit: not enforced)" if rule.mode == "audit" else ""
    if outcome.matched:
        detail = dict(base)
        message = outcome.message
        if noun:
            detail["items"] = outcome.matched
            message = f"{message} ({_PLURAL[noun]}: {_names(outcome.matched)})"
        reasons.append(Reason(f"rule:{rule.name}", message + suffix, detail))
    if outcome.errors:
        item_id, error = outcome.errors[0]
        detail = {**base, "error": error}
        where = f" on {noun} {item_id!r}" if noun and item_id else ""
        if noun:
            detail["items"] = [i for i, _ in outcome.errors]
        message = f"rule {rule.name!r} failed{where}: {error}; counted as matched"
        reasons.append(Reason(f"rule_error:{rule.name}", message + suffix, detail))
    return reasons


def _with_guard(binding: list[Reason], guard: Sequence[Reason]) -> list[Reason]:
    """The rules' refusing reasons, the first carrying the allowing guard's reasons in its
    detail (``guard``: code, message and detail of each)."""
    if not guard:
        return binding
    first = binding[0]
    detail = {**first.detail, "guard": [reason.to_dict() for reason in guard]}
    return [first.with_detail(detail), *binding[1:]]


def _actions(rule: Rule, request: Request) -> tuple[Action, ...]:
    if rule.effect == "halt":
        return HALT_ACTIONS
    if rule.effect == "pin":
        return (Action("pin", (request.segment.id,)),)  # type: ignore[union-attr]
    return ()


def _everything(request: Request) -> tuple[str, ...]:
    spans = getattr(request, "spans", ())
    return tuple(span.span_id for span in spans)


def _names(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
