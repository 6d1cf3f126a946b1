"""Numbers as a faithful summary may restate them: in other digits, in other units, spelled out,
and with the comparator that bounds them.

- **Digits.** Every Unicode decimal digit (full-width, Arabic-Indic, Devanagari, ...) reads as
  its ASCII digit, and compatibility forms (full-width letters and signs) as their plain form
  (NFKC), before any fact is read: a full-width ``500 ms`` is ``500 ms``.
- **Units.** A number with a unit of time, size or count is also compared by its magnitude in
  the dimension's base unit, exactly (fractions, no floating point): ``500 ms`` is ``0.5 s``,
  ``2 h`` is ``120 min``, ``10 k`` is ``10000``. The table is small and closed on purpose: a
  units library (``pint``) costs more to import than ``import prunewarden`` may take.
- **Spelled out.** ``twenty-five``, ``one hundred``, ``three thousand``, ``two hundred and
  fifty``, each with the unit after it (``five hundred milliseconds`` is ``500 ms``).
- **Comparators.** ``at most 3``, ``no more than 3``, ``up to 3``, ``<= 3`` are ``<= 3``; ``at
  least``, ``no less than``, ``>=`` are ``>= 3``; ``under``, ``below``, ``less than`` are ``< 3``;
  ``over``, ``above``, ``more than`` are ``> 3``: a number fact of its own, which only the same
  bound keeps.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from fractions import Fraction

# The unit names a number may carry, each with the one name facts use for it.
UNITS = {
    "ms": "ms", "msec": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "m": "min", "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d", "week": "wk", "weeks": "wk", "wk": "wk",
    "%": "%", "percent": "%", "pct": "%",
    "b": "b", "byte": "b", "bytes": "b",
    "kb": "kb", "kib": "kib", "mb": "mb", "mib": "mib", "gb": "gb", "gib": "gib",
    "tb": "tb", "k": "k", "x": "x",
    "token": "tok", "tokens": "tok", "tok": "tok",
    "usd": "usd", "eur": "eur", "$": "usd", "\u20ac": "eur",
    "rps": "rps", "qps": "qps", "req": "req", "requests": "req",
}  # fmt: skip

# Each unit's dimension and size in that dimension's base unit (what ``_UNITS`` names them).
_SIZES: dict[str, tuple[str, Fraction]] = {
    "ms": ("time", Fraction(1, 1000)),
    "s": ("time", Fraction(1)),
    "min": ("time", Fraction(60)),
    "h": ("time", Fraction(3600)),
    "d": ("time", Fraction(86400)),
    "wk": ("time", Fraction(604800)),
    "b": ("size", Fraction(1)),
    "kb": ("size", Fraction(10**3)),
    "mb": ("size", Fraction(10**6)),
    "gb": ("size", Fraction(10**9)),
    "tb": ("size", Fraction(10**12)),
    "kib": ("size", Fraction(2**10)),
    "mib": ("size", Fraction(2**20)),
    "gib": ("size", Fraction(2**30)),
    "k": ("count", Fraction(10**3)),
    "": ("count", Fraction(1)),
}

_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")


def ascii_text(text: str) -> str:
    """``text`` with compatibility forms folded (NFKC) and every decimal digit in ASCII; an
    ASCII text as it is."""
    if text.isascii():
        return text
    folded = unicodedata.normalize("NFKC", text)
    return _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.digit(m.group(0))), folded)


@functools.lru_cache(maxsize=4096)
def magnitude(value: str) -> tuple[str, str, Fraction] | None:
    """A normalized number fact (``500 ms``, ``<= 3``, ``1200``) as (comparator, dimension,
    magnitude in the base unit); None for a unit with no table entry (``%``, ``usd``, ``tok``)."""
    op = ""
    if value[:1] in {"<", ">"}:
        op, _, value = value.partition(" ")
    number, _, unit = value.partition(" ")
    size = _SIZES.get(unit)
    if size is None:
        return None
    try:
        amount = Fraction(number)
    except (ValueError, ZeroDivisionError):
        return None
    return op, size[0], amount * size[1]


# --- comparators -------------------------------------------------------------------------------

_BOUNDS = {
    "<=": "at most|no more than|not more than|up to|<=|\u2264",
    ">=": "at least|no less than|not less than|no fewer than|not fewer than|>=|\u2265",
    "<": "under|below|less than|fewer than|<",
    ">": "over|above|more than|greater than|>",
}
_OPERATOR = {
    " ".join(phrase.split()): op for op, phrases in _BOUNDS.items() for phrase in phrases.split("|")
}
# The last word of each phrase, which a number's preceding text is looked up by.
_LAST_WORDS = {phrase.split()[-1] for phrase in _OPERATOR}
_SYMBOLS = ("<=", ">=", "<", ">", "\u2264", "\u2265")
_SYMBOL_STARTS = frozenset("<>\u2264\u2265")


def bound_before(text: str, at: int) -> tuple[str, int] | None:
    """The comparator that bounds the number at ``text[at]`` (``at most 3``, ``<= 3``,
    ``<3``), as (operator, where the number starts), or None. Reads only the few characters
    before it: a text's numbers are found first, by the candidate scan."""
    if text[at] in _SYMBOL_STARTS:
        for symbol in _SYMBOLS:  # a symbol glued to its number ("<=3")
            if text.startswith(symbol, at):
                return _OPERATOR[symbol], at + len(symbol)
    if at < 2 or text[at - 1] not in " \t":
        return None
    last = text.rfind(" ", max(0, at - 16), at - 1)  # the word before the number
    if text[last + 1 : at - 1].lower().strip() not in _LAST_WORDS:
        return None
    start = max(0, at - 24)
    before = text[start:at].lower().split()
    whole = start == 0 or text[start - 1].isspace()  # the first word read is a whole word
    for size in (3, 2, 1):
        phrase = " ".join(before[-size:])
        if phrase in _OPERATOR and (size < len(before) or whole):
            return _OPERATOR[phrase], at
    return None


# --- numbers spelled out -----------------------------------------------------------------------


def _in_order(words: str) -> tuple[str, ...]:
    return tuple(words.split())


_ONES = _in_order(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
)
_TENS = _in_order("twenty thirty forty fifty sixty seventy eighty ninety")
_SMALL = {word: n for n, word in enumerate(_ONES)} | {w: 20 + 10 * n for n, w in enumerate(_TENS)}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}
_A = "a"
_JOINERS = frozenset({"and", _A})  # "one hundred and five", "a thousand"
NUMBER_WORDS = frozenset(_SMALL) | frozenset(_SCALES) | {"hundred"}


def spelled_numbers(tokens: Iterable[str]) -> set[str]:
    """The numbers spelled out in ``tokens`` (lower case, in order): each run of number words
    (``twenty-five``, ``one hundred and five``, ``a thousand``) as its digits, and with the unit
    token after it, if any, as ``<digits> <unit>``; each number word alone too."""
    found: set[str] = set()
    run: list[str] = []
    for token in (*tokens, ""):
        if token in NUMBER_WORDS:
            run.append(token)
            continue
        if "-" in token and all(part in NUMBER_WORDS for part in token.split("-")):
            run.extend(token.split("-"))
            continue
        if token in _JOINERS and (run or token == _A):
            run.append(token)
            continue
        if run:
            found.update(_run_values(run, token))
            run = []
    return found


def _run_values(run: list[str], following: str) -> set[str]:
    words = [w for w in run if w not in _JOINERS]
    values = {str(_SMALL[w]) for w in words if w in _SMALL}
    total = current = 0
    for i, word in enumerate(run):
        if word == _A:
            continue
        if word in _JOINERS:
            if i + 1 == len(run):
                break
            continue
        if word in _SMALL:
            current += _SMALL[word]
        elif word == "hundred":
            current = (current or 1) * 100
        else:
            total += (current or 1) * _SCALES[word]
            current = 0
    if words:
        whole = str(total + current)
        values.add(whole)
        unit = UNITS.get(following)
        if unit:
            values.add(f"{whole} {unit}")
    return values
