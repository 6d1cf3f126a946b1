"""Hypothesis strategies for CEL expressions of the subset rules accept, over eviction's
variables, and for the inputs they read.

The grammar is typed (bool, number, string, list of strings), so most of what it draws compiles;
it reaches what the shipped rules use and where CEL implementations are known to differ: null
operands behind a guard and without one, ``&&``/``||`` absorbing errors, ``?:``, int and double
mixed, division by zero, string concatenation and ``string(double)``, Unicode case traps in
``lower``/``contains_any``/``matches``, comprehensions over ``candidates``, metadata lookups.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

TRAP_NUMBERS = (0.0, -0.0, 1.0, 2.0, 0.5, 0.3, 1e21, -1e21, 1e-7, 2.0**53, 123456789.0, 1e6)
TRAP_TEXTS = ("", "never", "NEVER", "İstanbul", "straße", "STRASSE", "ﬃ", "Σίσυφος", "\u212a", "ǅ")
PATTERNS = ("^n", "(?i)never", "\\\\w+$", "[a-z]{2}", "ß|ss", "\\\\p{Lu}", "^$")
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
_ARITHMETIC = ("+", "-", "*", "/")
_DEPTH = 3


def _string_literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _number_literal(value: float) -> str:
    text = repr(value)
    return text if ("." in text or "e" in text) else f"{text}.0"


def _leaf_numbers() -> st.SearchStrategy[str]:
    return st.one_of(
        st.just("score"),
        st.sampled_from(TRAP_NUMBERS).map(_number_literal),
        st.integers(-3, 300).map(str),  # an int: mixed with doubles in comparisons
        st.sampled_from(("size(candidates)", "size(segment.text)", "size(segment.metadata)")),
    )


def _leaf_strings() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(("segment.text", "segment.kind", "segment.id")),
        st.sampled_from(TRAP_TEXTS).map(_string_literal),
    )


def _leaf_bools() -> st.SearchStrategy[str]:
    return st.sampled_from(
        (
            "true",
            "false",
            "segment.non_recoverable",
            "segment.tombstone_written",
            "has(segment.metadata.a)",
            "perturbed_score != null",
            "segment.tokens == null",
        )
    )


def numbers(depth: int = _DEPTH) -> st.SearchStrategy[str]:
    """A number-valued expression (int or double)."""
    if depth <= 0:
        return _leaf_numbers()
    inner = numbers(depth - 1)
    return st.one_of(
        _leaf_numbers(),
        st.tuples(inner, st.sampled_from(_ARITHMETIC), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        inner.map(lambda n: f"-({n})"),
        st.sampled_from(("perturbed_score", "segment.tokens", "segment.metadata.a")),
        inner.map(lambda n: f"abs({n})"),
        st.sampled_from(
            ("double(size(candidates))", "mean([score, 0.5])", "count_below([score], 0.5)")
        ),
    )


def strings(depth: int = _DEPTH) -> st.SearchStrategy[str]:
    """A string-valued expression."""
    if depth <= 0:
        return _leaf_strings()
    inner = strings(depth - 1)
    return st.one_of(
        _leaf_strings(),
        st.tuples(inner, inner).map(lambda t: f"({t[0]} + {t[1]})"),
        inner.map(lambda s: f"lower({s})"),
        numbers(depth - 1).map(lambda n: f"string({n})"),
        bools(depth - 1).map(lambda b: f"({b} ? segment.kind : segment.id)"),
    )


def bools(depth: int = _DEPTH) -> st.SearchStrategy[str]:
    """A bool-valued expression: what a rule's ``when`` is."""
    if depth <= 0:
        return _leaf_bools()
    inner, text, number = bools(depth - 1), strings(depth - 1), numbers(depth - 1)
    return st.one_of(
        _leaf_bools(),
        st.tuples(number, st.sampled_from(_COMPARISONS), number).map(" ".join),
        st.tuples(text, st.sampled_from(("==", "!=", "<")), text).map(" ".join),
        st.tuples(text, st.sampled_from(("contains", "startsWith", "endsWith")), text).map(
            lambda t: f"{t[0]}.{t[1]}({t[2]})"
        ),
        st.tuples(text, st.sampled_from(PATTERNS)).map(lambda t: f"{t[0]}.matches('{t[1]}')"),
        st.tuples(text, st.lists(text, min_size=1, max_size=3)).map(
            lambda t: f"contains_any({t[0]}, [{', '.join(t[1])}])"
        ),
        st.tuples(inner, st.sampled_from(("&&", "||")), inner).map(lambda t: f"({' '.join(t)})"),
        inner.map(lambda b: f"!({b})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        text.map(lambda s: f"{s} in candidates"),
        st.tuples(st.sampled_from(("exists", "all", "exists_one")), text).map(
            lambda t: f"candidates.{t[0]}(c, c == {t[1]} || c.startsWith('s'))"
        ),
        number.map(lambda n: f"perturbed_score != null && perturbed_score < {n}"),
    )


def _texts() -> st.SearchStrategy[str]:
    # No U+0000 and no lone surrogate: the native backend fails closed on either (cel-cpp takes
    # UTF-8 C strings), where cel-python reads them; a JSON input cannot carry a lone surrogate.
    plain = st.text(st.characters(exclude_characters="\x00", codec="utf-8"), max_size=8)
    return st.one_of(st.sampled_from(TRAP_TEXTS), plain)


def _trap_numbers() -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(TRAP_NUMBERS), st.integers(-5, 5).map(float))


def eviction_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """Values of eviction's variables, with nulls and the traps above."""
    metadata = st.dictionaries(
        st.sampled_from(("a", "b")), st.one_of(st.none(), _trap_numbers(), _texts()), max_size=2
    )
    segment = st.fixed_dictionaries(
        {
            "id": _texts(),
            "kind": _texts(),
            "text": _texts(),
            "non_recoverable": st.booleans(),
            "score_dependencies": st.lists(_texts(), max_size=2),
            "tombstone_written": st.booleans(),
            "tokens": st.one_of(st.none(), _trap_numbers()),
            "metadata": metadata,
        }
    )
    return st.fixed_dictionaries(
        {
            "segment": segment,
            "score": _trap_numbers(),
            "perturbed_score": st.one_of(st.none(), _trap_numbers()),
            "candidates": st.lists(_texts(), max_size=3),
            "params": st.just({}),
        }
    )
