"""The facts of a text, deterministically: what a faithful summary must still say.

One scan of the text with one compiled alternation finds the literal facts (URLs, dates and
times, paths, flags, numbers with their units, identifiers), longest kind first, so a URL is
not also read as a path nor a version as numbers. Backticked and quoted text are read apart,
and negations clause by clause. Every value is normalized as it is read (case, whitespace,
number formats, unit names), so that comparing two texts' facts is comparing sets.

Every pattern is compiled once, here: a check runs on every summary and must stay far under a
millisecond for a 2,000-token parent.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prunewarden.fidelity._negation import QUOTED, negated_clauses, prepare
from prunewarden.fidelity._numbers import UNITS, ascii_text, bound_before

# The fact kinds, in the order reasons list them.
FACT_KINDS = (
    "number",
    "identifier",
    "date",
    "path",
    "flag",
    "url",
    "code",
    "quoted",
    "negation",
)

_UNITS = UNITS


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _trie(words: set[str]) -> str:
    """An alternation of ``words`` as a trie (``ms(?:ec)?|s(?:ec)?``), the longer word first: the
    regex engine tries alternatives one by one, so a flat list of sixty units is sixty tries
    after every number, a trie a few."""
    root: _Node = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _alternation(root)


_Node = dict[str, "_Node"]


def _alternation(node: _Node) -> str:
    branches = [
        re.escape(char) + _alternation(child) for char, child in sorted(node.items()) if char
    ]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    return f"(?:{body})?" if "" in node else body


_UNIT_ALTERNATION = _trie({unit for unit in _UNITS if unit not in {"$", "\u20ac"}})


_MONTHS = {
    name: name[:3]
    for name in _word_set(
        "january february march april may june july august september october november december"
    )
} | {short: short for short in _word_set("jan feb mar apr jun jul aug sep sept oct nov dec")}
_MONTH_ALTERNATION = _trie(set(_MONTHS))
# A month's name after a day joins it only capitalized: "2 may fail" holds no date.
_CAPITAL_MONTHS = "|".join(sorted((m.capitalize() for m in _MONTHS), key=len, reverse=True))
_MONTH_NUMBERS = {
    month: number
    for number, month in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
} | {"sept": 9}
_CLOCK = re.compile(r"(?P<h>\d{1,2})(?P<rest>:\d{2}(?::\d{2})?)(?:\s?(?P<half>[ap])\.?m\.?)?")

# Most words of prose hold no fact. A first, cheap scan keeps only the tokens that may: those
# with a digit, an underscore, a slash or one of % $ \u20ac @ ~, a capital letter after the first
# (``UTC``, ``getUserName``), a leading dash, a dot before a letter (``config.yaml``,
# ``os.path``), or a month's name and a day; each with the unit
# words and numbers right after it (so "500 ms" and "May 3, 2024" stay together). Only those,
# one a line, meet the full alternation below. The scan is anchored on the whitespace before a
# token, so that the regex engine skips from one to the next without trying a match inside
# words (the text is given a leading space).
_TRIGGER = r"\d_/%$\u20ac@~"
# A word's plain characters, read first by a small class (most of prose), then the rest of the
# word by the complement of the triggers: the same tokens as the complement alone, sooner.
_PLAIN = r"a-z,;:!?'\"()"
_FOUND = rf"(?:[{_TRIGGER}A-Z]|\.[a-z])"
_CANDIDATES = re.compile(
    rf"""\s(
        (?=-|[A-Z]?+[{_PLAIN}]*+(?:{_FOUND}|[^\s{_TRIGGER}A-Z.{_PLAIN}][^\s{_TRIGGER}A-Z.]*+{_FOUND})
          |(?=[ADFJMNOS])(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?[\ \t]+\d)
        \S+(?:[\ \t]+(?:(?i:{_UNIT_ALTERNATION}|[ap]\.?m\.?)\b|(?:{_CAPITAL_MONTHS})\b|\d\S*))*
    )""",
    re.VERBOSE,
)

# How far into a token a digit or underscore may come for the token to read as an identifier
# (``eu-west-1``): a bound, so that a long run of dotted or dashed words, where this is tried at
# every word, costs linear time, not quadratic.
_RUN = 64

# One alternation, longest and most specific kind first; each match is one fact. Spaces inside
# a fact are [ \t]: the candidates are joined one a line, and a fact never spans two. A branch
# that runs over a whole token starts only where a token does (a lookbehind, not \b), so that
# a long token is not scanned again from every boundary inside it (a dotted version too: from
# every number of ``1.2.3.4...`` it would be quadratic in the run's length).
_LITERALS = re.compile(
    rf"""
    (?<!\w)  # no fact starts inside a word: one test there instead of every branch
    (?:(?P<url>\b(?:https?|ftp|s3|gs|file)://[^\s<>"'`)\]]+)
  | (?P<date>\b\d{{4}}-\d{{2}}-\d{{2}}
        (?:[T\ ]\d{{1,2}}:\d{{2}}(?::\d{{2}}(?:\.\d+)?)?(?:Z|[+-]\d{{2}}:?\d{{2}})?)?
      | \b(?=[adfjmnos])(?:{_MONTH_ALTERNATION})\.?[\ \t]+\d{{1,2}}(?:st|nd|rd|th)?
        (?:,?[\ \t]+\d{{4}})?\b
      | \b\d{{1,2}}(?:st|nd|rd|th)?[\ \t]+(?:{_MONTH_ALTERNATION})\.?(?:,?[\ \t]+\d{{4}})?\b
      | \b\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:[\ \t]?[ap]\.?m\.?\b)?)
  | (?P<path>(?:~|\.{{1,2}})?/(?:[\w.@-]++/?)++ | (?<![\w.@-])[\w.@-]++/(?:[\w.@-]++/?)*+
      | (?<![\w.@-])[\w-]++\.(?:py|js|ts|tsx|jsx|json|ya?ml|md|txt|toml|cfg|ini|sh|go|rs|java|rb|c|h
                    |cpp|sql|csv|log|lock|env|html|css|xml|conf)\b)
  | (?P<flag>(?<![\w-])--?[A-Za-z][\w-]*(?:=[^\s,;]+)?)
  | (?P<number>(?<![\w.,-])[$\u20ac]?[-+]?\d[\d,]*+(?:\.\d+)?+(?![\w.]\d)
        (?:[\ \t]?(?:{_UNIT_ALTERNATION})\b|%)?)
  | (?P<identifier>(?-i:
        (?<![\w.])\d++(?:\.\d++){{2,}}\b
      | \b(?=[A-Za-z][\w.-]{{0,{_RUN}}}?[\d_])[A-Za-z]\w*(?:[.-]\w+)*
      | \b[A-Z][a-z0-9]+[A-Z]\w* | \b[a-z]+[A-Z]\w* | \b[A-Z]{{2,}}[a-z]\w*
      | \b[A-Z]{{2,}}s?\b
      | \b[a-z]\w+(?:\.[a-z]\w+)+\b)))
    """,
    re.VERBOSE | re.IGNORECASE,
)
# What a candidate starts with when a comparator may bound it: a number, or a comparator glued.
_BOUNDED = frozenset("0123456789$\u20ac+-<>\u2264\u2265")
_GLUED = frozenset("<>\u2264\u2265")
_BOUND_ENDS = frozenset("tnorweTNORWE=<>\u2264\u2265")
# The number after a comparator (``at most 3 retries``), as the alternation reads numbers.
_NUMBER_AT = re.compile(
    rf"[$\u20ac]?[-+]?\d[\d,]*(?:\.\d+)?(?![\w.]\d)(?:[\ \t]?(?:{_UNIT_ALTERNATION})\b|%)?",
    re.IGNORECASE,
)
_CODE = re.compile(r"`([^`\n]{1,400})`")
_QUOTED = QUOTED
_ORDINAL = re.compile(r"(?<=\d)(?:st|nd|rd|th)\b")
# Shouted words of prose that are not acronyms.
_PROSE_CAPITALS = _word_set(
    "a all always an and any are as at be but by do does for from if important in is it must "
    "never no not note of on only or please should so the then this to use warning we when "
    "will with you ok this that these those what why how yes stop do not dont done see here "
    "there new now"
)


@dataclass(frozen=True, slots=True)
class Facts:
    """A text's facts, normalized: ``by_kind`` maps each kind of :data:`FACT_KINDS` found to
    its values (a negation's value is the governed words, stemmed, joined by spaces);
    ``text`` is the whole text normalized, for facts a summary may keep without quoting (a
    parent's is not needed: :func:`check_fidelity` leaves it empty); ``negated`` holds, per
    span that negates something (:mod:`._negation`), the stemmed words it negates."""

    by_kind: dict[str, frozenset[str]]
    text: str
    negated: tuple[frozenset[str], ...]

    def count(self, kinds: frozenset[str] | None = None) -> int:
        return sum(len(v) for k, v in self.by_kind.items() if kinds is None or k in kinds)


def extract_facts(text: str, *, whole_text: bool = True) -> Facts:
    """The facts of ``text`` (see :class:`Facts`); deterministic, never raises on any str.
    ``whole_text=False`` leaves ``Facts.text`` and ``Facts.negated`` empty (what a parent
    needs: its facts only), which is cheaper."""
    text = ascii_text(text)
    found: dict[str, set[str]] = {}
    padded = " " + text
    found_candidates = list(_CANDIDATES.finditer(padded))
    candidates = "\n".join(match.group(1) for match in found_candidates)
    # Each distinct (kind, literal) is normalized once, here and across calls: texts of one
    # conversation repeat the same ports, paths and names.
    for kind, raw in {(str(m.lastgroup), m.group(0)) for m in _LITERALS.finditer(candidates)}:
        value = _normalized(kind, raw)
        if value:
            found.setdefault(kind, set()).add(value)
    for match in _CODE.finditer(text):
        found.setdefault("code", set()).add(normalize_text(match.group(1)))
    quotations = list(_QUOTED.finditer(text))
    for match in quotations:
        quoted = normalize_text(match.group(1) or match.group(2) or match.group(3) or "")
        if quoted:
            found.setdefault("quoted", set()).add(quoted)
    bounds = set(_bounds(padded, found_candidates))
    if bounds:
        found.setdefault("number", set()).update(bounds)
    negations, negated = _negations(text, quotations, whole_text=whole_text)
    if negations:
        found["negation"] = negations
    by_kind = {kind: frozenset(values) for kind, values in found.items() if values}
    return Facts(by_kind, normalize_text(text) if whole_text else "", tuple(negated))


def _negations(
    text: str, quotations: list[re.Match[str]], *, whole_text: bool
) -> tuple[set[str], list[frozenset[str]]]:
    """What the text's negations govern, and (``whole_text``) the words each span negates."""
    negations: set[str] = set()
    negated: list[frozenset[str]] = []
    for spans in negated_clauses(prepare(text, [match.span() for match in quotations])):
        for span in spans:
            negations.update(span.negations)
            if whole_text and any(span.negated):
                negated.append(span.polar(negated=True))
    return negations, negated


def _bounds(padded: str, candidates: list[re.Match[str]]) -> Iterator[str]:
    """The bounded numbers among the candidates (``<= 3`` for ``at most 3``), each comparator
    read from the few characters before its number."""
    for match in candidates:
        at = match.start(1)
        # a comparator's last word ends in one of these letters (most, than, to, under, below,
        # above), or a symbol is glued to the number
        first = padded[at]
        after_word = at < 2 or padded[at - 2] in _BOUND_ENDS
        if first not in _GLUED and not (first in _BOUNDED and after_word):
            continue
        bound = bound_before(padded, at)
        number = _NUMBER_AT.match(padded, bound[1]) if bound is not None else None
        if bound is not None and number is not None:
            yield f"{bound[0]} {_normalized('number', number.group(0))}"


def normalize_text(text: str) -> str:
    """Lower case, one space between words, no space at the ends."""
    return " ".join(text.split()).lower()


@functools.lru_cache(maxsize=16384)
def _normalized(kind: str, raw: str) -> str:
    """``raw``, a literal of ``kind`` as the alternation read it, normalized ("" for none)."""
    return _NORMALIZE[kind](raw)


def _identifier(word: str) -> str:
    """The pattern already holds only code tokens; a shouted word of prose is no acronym."""
    if word.isalpha() and word.isupper() and word.lower() in _PROSE_CAPITALS:
        return ""
    return word.lower()


# A number as the alternation reads it: the number, then its unit or sign, if any.
_NUMBER_PARTS = re.compile(r"([$\u20ac]?[-+]?\d[\d,]*(?:\.\d+)?)[\ \t]?(.*)", re.DOTALL)


def _number(raw: str) -> str:
    parts = _NUMBER_PARTS.fullmatch(raw)
    if parts is None:  # not reachable from the alternation; kept as read
        return raw.lower()
    number, unit = parts.group(1), parts.group(2)
    currency = number[:1] in {"$", "\u20ac"}
    digits = number.lstrip("$\u20ac").replace(",", "").lstrip("+")
    if "." in digits:
        digits = digits.rstrip("0").rstrip(".")
    if currency:
        unit = number[:1]
    return f"{digits} {_UNITS[unit.lower()]}" if unit else digits


def _date(raw: str) -> str:
    """ISO dates as they are; ``May 3rd, 2024`` and ``3 May 2024`` as ``2024-05-03`` (``may 3``
    without a year); ``2:30 pm`` as ``14:30``."""
    value = raw.lower()
    clock = _CLOCK.fullmatch(value)
    if clock is not None:
        hours, rest, half = int(clock["h"]), clock["rest"], clock["half"]
        if half is not None:
            hours = hours % 12 + (12 if half.startswith("p") else 0)
        return f"{hours}{rest}"
    words = _ORDINAL.sub("", value.replace(",", " ").replace(".", " ")).split()
    named = [_MONTHS.get(word, word) for word in words]
    months = [m for m in named if m in _MONTH_NUMBERS]
    days = [w for w in named if w.isdigit() and len(w) <= 2]
    years = [w for w in named if w.isdigit() and len(w) == 4]
    if months and days and years:
        return f"{years[0]}-{_MONTH_NUMBERS[months[0]]:02d}-{int(days[0]):02d}"
    return " ".join(named)


_NORMALIZE: dict[str, Callable[[str], str]] = {
    "identifier": _identifier,
    "number": _number,
    "date": _date,
    "url": lambda raw: raw.rstrip(".,;:!?").rstrip("/").lower(),
    "path": lambda raw: raw.rstrip(".").rstrip("/").lower() or "/",
    "flag": str.lower,
}
