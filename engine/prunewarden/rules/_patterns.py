"""CEL's ``matches``, replaced so that one search is bounded before it starts and says nothing.

cel-python's own ``matches`` calls ``re2.search(pattern, text)`` with RE2's defaults: a search
that cannot be interrupted (RE2 falls back from its DFA to its NFA when the DFA runs out of
memory, and ``[ab]*a[ab]{1000}c`` over a megabyte took ten seconds under a 100 ms budget), and a
pattern that fails to compile printed on stderr, where a pattern taken from the input (segment
text) bypassed every redaction.

Here a pattern is compiled once (a small cache) with a bounded memory and logging off, and each
search is priced at its worst case — the UTF-8 bytes searched times the size of the compiled
program, what the NFA steps through — and refused when that exceeds
:data:`~prunewarden.limits.MAX_MATCH_STEPS`. The DFA usually finishes far sooner; the price is
what makes the slow path safe.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import celpy.celtypes as ct
import re2
from celpy.evaluation import CELEvalError

from prunewarden.limits import MAX_MATCH_MEMORY_BYTES, MAX_MATCH_PATTERN_CHARS, MAX_MATCH_STEPS
from prunewarden.rules import _budget as budget
from prunewarden.rules._values import type_name

# Patterns kept compiled; each holds at most MAX_MATCH_MEMORY_BYTES, so the cache holds at most
# 64 MiB however many patterns an input brings.
_PATTERN_CACHE_SIZE = 64


def _options() -> Any:
    options = re2.Options()
    options.max_mem = MAX_MATCH_MEMORY_BYTES
    options.log_errors = False  # RE2 would print the pattern (perhaps segment text) on stderr
    return options


_OPTIONS = _options()


@lru_cache(maxsize=_PATTERN_CACHE_SIZE)
def compile_pattern(pattern: str) -> Any:
    """The compiled pattern, or a message (str) saying why it cannot be used, never quoting it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error:
        return "matches() was given an invalid or too large RE2 pattern"


def program_size(pattern: str) -> int | None:
    """The size of ``pattern``'s compiled RE2 program, None when it is not a usable pattern."""
    if len(pattern) > MAX_MATCH_PATTERN_CHARS:
        return None
    compiled = compile_pattern(pattern)
    return None if isinstance(compiled, str) else int(compiled.programsize)


def matches(text: Any, pattern: Any) -> Any:
    """Whether RE2 ``pattern`` matches anywhere in ``text``; its worst case priced first."""
    if not isinstance(text, str) or not isinstance(pattern, str):
        kinds = f"{type_name(text)} and {type_name(pattern)}"
        return CELEvalError(f"matches() takes a string and a pattern, not {kinds}", TypeError, None)
    if len(pattern) > MAX_MATCH_PATTERN_CHARS:  # before copying it into the cache's key
        message = f"matches() takes a pattern of at most {MAX_MATCH_PATTERN_CHARS} characters"
        return CELEvalError(message, ValueError, None)
    compiled = compile_pattern(str(pattern))
    if isinstance(compiled, str):
        return CELEvalError(compiled, ValueError, None)
    steps = (_utf8_size(text, MAX_MATCH_STEPS // compiled.programsize) + 1) * compiled.programsize
    if steps > MAX_MATCH_STEPS:
        message = (
            f"matches() on {len(text)} characters could take at least {steps} steps, more than "
            f"MAX_MATCH_STEPS ({MAX_MATCH_STEPS}); refused before it ran"
        )
        raise budget.BudgetExceededError(message)
    budget.check()
    found = compiled.search(text) is not None
    budget.check()
    return ct.BoolType(found)


def _utf8_size(text: str, enough: int) -> int:
    """The bytes RE2 searches (it reads UTF-8): exact when it matters, without encoding a text
    that is clearly within ``enough`` bytes or clearly beyond it (a character is 1 to 4 bytes)."""
    if text.isascii() or len(text) > enough or 4 * len(text) <= enough:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))
