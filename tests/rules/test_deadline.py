"""A rule's deadline holds to its last check, and a spent budget cannot be swallowed.

The deadlines here expire on command (after a given number of reads), not by the clock, so each
test says exactly which check must stop the evaluation.
"""

from __future__ import annotations

from typing import Any

import pytest
from celpy import celtypes
from prunewarden.limits import MAX_RULE_ALLOCATION
from prunewarden.rules import _budget
from prunewarden.rules._budget import BudgetExceededError, Deadline, DeadlineExceededError, Meter
from prunewarden.rules._compiler import compile_expression
from prunewarden.rules._evaluation import EvaluationError, evaluate
from prunewarden.rules._expression import Expression
from prunewarden.rules._values import to_cel
from prunewarden.rules._variables import variable_shapes


class CountedDeadline(Deadline):
    """A deadline that counts its reads and expires from read number ``expires_at`` (1-based)
    on; never, when None."""

    def __init__(self, expires_at: int | None = None) -> None:
        super().__init__(60.0)
        self.expires_at = expires_at
        self.reads = 0

    def expired(self) -> bool:
        self.reads += 1
        return self.expires_at is not None and self.reads >= self.expires_at


def expression() -> Expression:
    return compile_expression(
        "segment.tokens < 5 && size(candidates) > 1", variable_shapes("eviction")
    )


def variables() -> dict[str, Any]:
    return {"segment": to_cel({"tokens": 2}), "candidates": to_cel(["a", "b"])}


class FlagDeadline(Deadline):
    """A deadline spent from the moment ``spent`` is set, by whatever the evaluation runs."""

    def __init__(self) -> None:
        super().__init__(60.0)
        self.spent = False

    def expired(self) -> bool:
        return self.spent


class Tripwire(celtypes.ListType):
    """A list that spends its deadline when its size is taken: in ``1 < size(c)`` the last
    work of the evaluation, after the evaluator's last check between nodes."""

    deadline: FlagDeadline

    def __len__(self) -> int:
        self.deadline.spent = True
        return super().__len__()


class Counted(celtypes.ListType):
    """A list that counts how often its size is taken."""

    sized = 0

    def __len__(self) -> int:
        self.sized += 1
        return super().__len__()


class TestTheFinalCheck:
    def test_a_value_finished_past_the_deadline_is_refused(self) -> None:
        """A deadline that runs out during the last step, after every check between nodes,
        still fails the evaluation: the value computed past it is not returned."""
        expression = compile_expression("1 < size(candidates)", variable_shapes("eviction"))
        deadline = FlagDeadline()
        candidates = Tripwire([celtypes.StringType("a"), celtypes.StringType("b")])
        candidates.deadline = deadline
        with pytest.raises(EvaluationError, match="timed out"):
            evaluate(expression, {"candidates": candidates}, deadline=deadline)
        assert deadline.spent

    def test_within_the_deadline_the_value_is_returned(self) -> None:
        """The same expression on a plain list is evaluated (the control)."""
        expression = compile_expression("1 < size(candidates)", variable_shapes("eviction"))
        value = evaluate(expression, {"candidates": to_cel(["a", "b"])}, deadline=FlagDeadline())
        assert value == True  # noqa: E712 - a CEL bool

    def test_the_evaluation_stops_at_the_next_node(self) -> None:
        """A deadline spent during the evaluation stops it at the next node: the work after it
        is not done (the check between nodes, not only the final one)."""
        expression = compile_expression(
            "size(candidates) > 1 && size(segment.metadata.list) > 1", variable_shapes("eviction")
        )
        deadline = FlagDeadline()
        first = Tripwire([celtypes.StringType("a"), celtypes.StringType("b")])
        first.deadline = deadline
        later = Counted([celtypes.StringType("c"), celtypes.StringType("d")])
        segment = celtypes.MapType(
            {
                celtypes.StringType("metadata"): celtypes.MapType(
                    {celtypes.StringType("list"): later}
                )
            }
        )
        with pytest.raises(EvaluationError, match="timed out"):
            evaluate(expression, {"candidates": first, "segment": segment}, deadline=deadline)
        assert later.sized == 0

    def test_a_deadline_spent_before_the_start_is_refused(self) -> None:
        """A deadline already spent refuses before any node is visited."""
        deadline = CountedDeadline(expires_at=1)
        with pytest.raises(EvaluationError, match="timed out"):
            evaluate(expression(), variables(), deadline=deadline)
        assert deadline.reads == 1


class TestBudgetErrorsCannotBeSwallowed:
    def test_code_catching_exception_does_not_catch_a_spent_budget(self) -> None:
        """An engine function (or cel-python) wrapping its work in ``except Exception`` cannot
        turn a spent budget into a value: the error passes through it."""

        def careless() -> str:
            try:
                _budget.check()
            except Exception:  # noqa: BLE001 - the careless code under test
                return "swallowed"
            return "ran on"

        token = _budget.current.set(Meter(CountedDeadline(expires_at=1)))
        try:
            with pytest.raises(DeadlineExceededError):
                careless()
        finally:
            _budget.current.reset(token)

    def test_an_allocation_past_the_limit_passes_except_exception(self) -> None:
        """The allocation meter's error passes ``except Exception`` too."""

        def careless() -> str:
            try:
                _budget.allocate(MAX_RULE_ALLOCATION + 1)
            except Exception:  # noqa: BLE001 - the careless code under test
                return "swallowed"
            return "ran on"

        token = _budget.current.set(Meter(CountedDeadline()))
        try:
            with pytest.raises(BudgetExceededError, match="MAX_RULE_ALLOCATION"):
                careless()
        finally:
            _budget.current.reset(token)
