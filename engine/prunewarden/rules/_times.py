"""CEL's ``duration``, ``timestamp`` and the time-zone accessors, priced by their text first.

cel-python parses a duration with a Python regular expression and a sum over every component,
and a timestamp or a time zone with pendulum: one call each, which no check of the budget can
interrupt. A rule like ``duration(segment.text) > duration("1h")`` over ten megabytes of input
ran 7.7 s of CPU under a 100 ms ``timeout_ms`` before its deadline was next read. As ``matches``
is priced before it runs (``_patterns``), a text here is priced by its length and refused when
it exceeds :data:`~prunewarden.limits.MAX_TIME_TEXT_CHARS`: no valid duration, timestamp or zone
name is anywhere near that long.

A text that does not parse gives an error value naming the function, never the text, which may
be a segment's (cel-python's own messages quote it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celpy.evaluation import CELEvalError, base_functions

from prunewarden.limits import MAX_TIME_TEXT_CHARS
from prunewarden.rules import _budget as budget

# The accessors of a timestamp that take an optional time-zone name.
_ZONE_ACCESSORS = (
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
)


def _priced(name: str, what: str) -> Callable[..., Any]:
    """cel-python's ``name``, refusing a text argument over MAX_TIME_TEXT_CHARS before it is
    parsed; ``what`` names the text in messages ("text", "time zone")."""

    def function(*args: Any) -> Any:
        texts = [value for value in args if isinstance(value, str)]
        for value in texts:
            if len(value) > MAX_TIME_TEXT_CHARS:
                message = (
                    f"{name}() on a {what} of {len(value)} characters, more than "
                    f"MAX_TIME_TEXT_CHARS ({MAX_TIME_TEXT_CHARS}); refused before it ran"
                )
                raise budget.BudgetExceededError(message)
        budget.check()
        try:
            return base_functions[name](*args)
        except (ValueError, TypeError, OverflowError, OSError) as exc:
            if not texts:  # not a text: cel-python's own message says which overload is missing
                raise
            # OSError: a zone name too long for a file name; the others: what does not parse.
            message = f"{name}() could not use its {what} ({type(exc).__name__})"
            return CELEvalError(message, type(exc), None)

    function.__name__ = name
    return function


TIME_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "duration": _priced("duration", "text"),
    "timestamp": _priced("timestamp", "text"),
    **{name: _priced(name, "time zone") for name in _ZONE_ACCESSORS},
}
