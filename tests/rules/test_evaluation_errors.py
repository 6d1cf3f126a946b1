"""Every failure of an evaluation is an EvaluationError with a short, clean message, and no
evaluation leaves its meter behind."""

from __future__ import annotations

import pytest
from celpy import celtypes
from prunewarden.rules import _budget
from prunewarden.rules._budget import Deadline
from prunewarden.rules._compiler import compile_expression
from prunewarden.rules._evaluation import EvaluationError, clean_message, evaluate, evaluate_text
from prunewarden.rules._values import to_cel
from prunewarden.rules._variables import variable_shapes


class Broken(celtypes.ListType):
    """A list whose size cannot be taken: a bug inside an evaluation, not a CEL error."""

    def __len__(self) -> int:
        msg = "a bug"
        raise RuntimeError(msg)


class TestNoMeterIsLeftBehind:
    def test_after_an_evaluation_no_meter_is_current(self) -> None:
        """Outside an evaluation the engine functions run unmetered: evaluating leaves none."""
        expression = compile_expression("size(candidates) > 1", variable_shapes("eviction"))
        value = evaluate(expression, {"candidates": to_cel(["a", "b"])}, deadline=Deadline(60.0))
        assert value == True  # noqa: E712 - a CEL bool
        assert _budget.current.get() is None

    def test_after_a_failed_evaluation_no_meter_is_current(self) -> None:
        """A failing evaluation leaves no meter behind either."""
        expression = compile_expression("size(candidates) > 1", variable_shapes("eviction"))
        with pytest.raises(EvaluationError):
            evaluate(expression, {"candidates": Broken([])}, deadline=Deadline(60.0))
        assert _budget.current.get() is None


class TestEveryFailureIsAnEvaluationError:
    def test_a_bug_in_the_evaluation_is_an_evaluation_error(self) -> None:
        """An unexpected exception inside the evaluation becomes an EvaluationError naming its
        type only, never a value or a traceback."""
        expression = compile_expression("size(candidates) > 1", variable_shapes("eviction"))
        with pytest.raises(EvaluationError) as raised:
            evaluate(expression, {"candidates": Broken([])}, deadline=Deadline(60.0))
        assert str(raised.value) == "the evaluator failed (RuntimeError)"

    def test_a_text_evaluation_giving_a_bool_fails(self) -> None:
        """An expression evaluated as text that gives a bool is an error, not a bool used as
        text."""
        expression = compile_expression("segment.tokens > 1", variable_shapes("eviction"))
        with pytest.raises(EvaluationError) as raised:
            evaluate_text(expression, {"segment": to_cel({"tokens": 2})}, deadline=Deadline(60.0))
        assert str(raised.value) == "gave bool, not a string"

    def test_a_text_rule_giving_text_returns_it(self) -> None:
        """A text expression that gives a string returns it (the control)."""
        expression = compile_expression(
            "segment.id + '!'", variable_shapes("eviction"), result="string"
        )
        text = evaluate_text(expression, {"segment": to_cel({"id": "s1"})}, deadline=Deadline(60.0))
        assert text == "s1!"


class TestMessagesAreOneShortLine:
    def test_a_message_of_160_characters_is_kept_whole(self) -> None:
        """A message of up to 160 characters is shown whole."""
        text = "x" * 160
        assert clean_message(ValueError(text)) == text

    def test_a_longer_message_is_cut_to_160_with_an_ellipsis(self) -> None:
        """A longer message is cut to 157 characters and '...': 160 in all."""
        text = "abcdefghij" * 20
        cleaned = clean_message(ValueError(text))
        assert cleaned == text[:157] + "..."
        assert len(cleaned) == 160

    def test_a_message_of_161_characters_is_cut(self) -> None:
        """One character over 160 is enough to cut the message."""
        text = "y" * 161
        assert clean_message(ValueError(text)) == "y" * 157 + "..."
