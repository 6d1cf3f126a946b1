"""Negations and what they govern: the one reading of a text's negations that both a parent and
a summary get.

A text is read clause by clause (a clause ends at ``.``, ``;``, ``:``, ``!`` or ``?`` before a
space, or at a line break), and a clause span by span (a comma ends a span). Within a span, a
**run** of negators (``not``, ``never``, ``no``, ``n't``, ``without``, ``avoid``, ...), together
with the verbs that invert what follows them when negated (``forget``, ``skip``, ``fail``,
``omit``, ...), negates when it holds an odd number of them: "never emit local time" negates,
"do not forget to emit local time" and "never skip emitting local time" do not. A run governs
the content words after it, up to the next run, a "but" or the end of the span, and, when a
form of *be* stands beside it or a participle follows it (a passive: "local time is never
emitted", "local time never emitted"), the words before it too (back to a "but"). A
word's **polarity** is whether a negating run governs it.

- What a negation *is* (the ``negation`` facts): the first :data:`GOVERNED_WORDS` content words
  a negating run governs after it, stemmed, up to a preposition ("without a tz argument on line
  88" is held to *tz argument*).
- What a summary *still negates*: per span, its negated words; a parent's negation is kept when
  one span of the summary negates every word it governs, so "Always emit local time, not UTC"
  does not keep "never emit local time" (its ``not`` governs *UTC*).
- What a text *affirms*: per span, its words no run negates; a summary's negation of what its
  parent affirms is a negation it added.

The negators inside a quotation are the quotation's, not the text's ('the rule "never emit
local time" is dropped' negates nothing), and the ``no`` of a comparator (``no more than``) is
a bound (:mod:`._numbers`), not a negation.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

# A negation governs at most this many content words, up to the next comma: enough for "emit
# local time", few enough that a summary compressing the rest of the clause does not lose it.
GOVERNED_WORDS = 3

_CLAUSE_MARKS = (". ", "; ", ": ", "! ", "? ", ".\t", "\n")
CLAUSE_END = re.compile(r"[.;:!?\n](?:(?<=\n)|(?=\s|$))")
# Searched in the prepared text (lower case, with a leading space, contractions spelled out),
# each anchored on the character before its word, so that the regex engine skips ahead: only the
# clauses these find are read word by word.
_NEGATOR = re.compile(
    r"[\s(\"'*_\[](?:n(?:othing|obody|owhere|one|ot|o|ever|either|or)|cannot|without|avoid"
    r"|forbid(?:den)?|prohibit(?:ed)?|disallow(?:ed)?)\b"
)
_CONTRACTION = re.compile(r"n't\b")
# Text in double, curly or single quotes; an apostrophe inside a word ("don't") opens nothing.
QUOTED = re.compile(
    r"\"([^\"\n]{1,400})\"|\u201c([^\u201d\n]{1,400})\u201d|'(?<!\w')([^'\n]{1,400})'(?!\w)"
)
_TOKEN = re.compile(r"[\w/.-]*\w/?|,")


def _words(words: str) -> frozenset[str]:
    return frozenset(words.split())


NEGATORS = _words(
    "nothing nobody nowhere none not no never neither nor cannot without avoid forbid forbidden "
    "prohibit prohibited disallow disallowed"
)
# Verbs that say "not" of what follows them: negated, they negate nothing ("never skip X").
_INVERTERS = _words(
    "forget forgets forgot forgotten forgetting skip skips skipped skipping fail fails failed "
    "failing omit omits omitted omitting neglect neglects neglected neglecting refrain refrains "
    "cease ceases ceased stop stops stopped stopping miss misses missed missing lack lacks avoid "
    "avoids avoided avoiding"
)
# Words between two negators of one run that do not end it ("it is not true that ... never").
_BRIDGES = _words("true case correct so ever")
_COPULAS = _words("is are was were be been being am")
# A comparator's negator is a bound (``no more than 3``: :mod:`._numbers`), not a negation.
_BOUND_NEGATORS = _words("no not")
_BOUNDS = {(word, "than") for word in _words("more less fewer later earlier greater longer")}
# Words that end the words a negation is held to (not what its run governs): what follows them
# is where or when, which a summary may front ("On line 88, ... without a tz argument").
_PREPOSITIONS = _words(
    "on at in for from by after before during within under over via per into onto across "
    "through about between when while if unless because until since"
)
# Words that end what a run governs: what follows them is said anew ("..., but always ...").
_RESETS = _words("but always instead however")
STOPWORDS = _words(
    "a an the and or but of to in on at by for from with as is are was were be been being it "
    "its this that these those any all some ever must should shall may might will would can "
    "could do does did done have has had so such then than there here their they them we you "
    "i he she our your please just also very only more less under over into onto within inside "
    "outside across through about above below after before between during per via up down out "
    "off again instead ca wo am"
)


@dataclass(frozen=True, slots=True)
class Span:
    """One span's content words (stemmed, in order), each with whether a run negates it, and
    the negations it holds (what each negating run governs after it)."""

    words: tuple[str, ...]
    negated: tuple[bool, ...]
    negations: tuple[str, ...]

    def polar(self, *, negated: bool) -> frozenset[str]:
        return frozenset(w for w, n in zip(self.words, self.negated, strict=True) if n is negated)


def prepare(text: str, quotations: Sequence[tuple[int, int]] = ()) -> str:
    """The text as negations are read in: lower case, a leading space, ``\u2019`` as ``'``,
    ``n't`` as `` not``, and the negators inside ``quotations`` (spans of ``text``) blanked."""
    lowered = " " + text.lower()
    if quotations and len(lowered) == len(text) + 1:  # lower case kept every offset
        parts, last = [], 0
        for start, end in quotations:
            quoted = lowered[start + 1 : end + 1]
            parts += [lowered[last : start + 1], _NEGATOR.sub(_blank_negator, quoted)]
            last = end + 1
        lowered = "".join([*parts, lowered[last:]])
    lowered = lowered.replace("\u2019", "'")
    if "n't" in lowered:
        lowered = _CONTRACTION.sub(" not", lowered)
    return lowered


def _blank_negator(match: re.Match[str]) -> str:
    """A negator inside a quotation blanked: its words still count, its negations do not."""
    return match.group(0)[0] + " " * (len(match.group(0)) - 1)


def negated_clauses(lowered: str) -> list[list[Span]]:
    """The spans of every clause of a prepared text that holds a negator, in order. Linear in
    the text: each clause is found once, from the negator that opens it."""
    clauses: list[list[Span]] = []
    end = 0
    for match in _NEGATOR.finditer(lowered):
        at = match.start() + 1
        if at < end:
            continue
        start = _clause_start(lowered, end, at)
        following = CLAUSE_END.search(lowered, at)
        end = following.end() if following is not None else len(lowered)
        clauses.append(read_clause(lowered, start, end))
    return clauses


def _clause_start(lowered: str, floor: int, at: int) -> int:
    """Where the clause holding ``at`` starts (no sooner than ``floor``): looked for backwards
    in growing windows, so that a negator far from the previous one costs its clause, not the
    distance."""
    window = 256
    while True:
        low = max(floor, at - window)
        found = max(lowered.rfind(mark, low, at) for mark in _CLAUSE_MARKS)
        if found >= 0:
            return found + (1 if lowered[found] == "\n" else 2)
        if low == floor:
            return floor
        window *= 4


# Each word that is not a content word, by what it does (a later role overrides an earlier).
_NEGATES, _INVERTS, _BRIDGES_RUN, _BE, _ENDS, _PLACES, _SKIPPED = range(7)
_ROLES: dict[str, int] = {}
for _role, _members in (
    (_SKIPPED, STOPWORDS),
    (_PLACES, _PREPOSITIONS),
    (_ENDS, _RESETS),
    (_BE, _COPULAS),
    (_BRIDGES_RUN, _BRIDGES),
    (_INVERTS, _INVERTERS),
    (_NEGATES, NEGATORS),
):
    _ROLES.update(dict.fromkeys(_members, _role))
_COMMA = ","
_ROLES[_COMMA] = _SKIPPED


def read_clause(lowered: str, start: int, end: int) -> list[Span]:  # noqa: C901, PLR0912, PLR0915
    """The spans of ``lowered[start:end]``, each word's polarity and each run's negation."""
    spans: list[Span] = []
    words: list[str] = []
    negated: list[bool] = []
    negations: list[str] = []
    count = 0  # negators (and, after one, inverters) in the open run; 0: no run open
    bridged: list[str] = []  # bridge words inside the open run, content if the run ends
    polarity = False  # what the last run said of the words after it
    runs = 0  # runs closed in this span
    governed: list[str] | None = None  # the open negation's words, while it gathers them
    copula = False  # a form of *be* since the last content word
    since = 0  # the first word a passive may reach back to: none before a "but"
    tokens = _TOKEN.findall(lowered, start, end)
    tokens.append(",")  # the last span ends as any other
    for at, token in enumerate(tokens):
        role = _ROLES.get(token)
        if role is not None:
            if token == _COMMA:  # ends the span; a run open here governs nothing ("No, the ...")
                if governed:
                    negations.append(" ".join(governed))
                if words:
                    spans.append(Span(tuple(words), tuple(negated), tuple(negations)))
                words, negated, negations, bridged = [], [], [], []
                polarity, runs, governed, copula, count, since = False, 0, None, False, 0, 0
            elif role == _NEGATES or (count and role == _INVERTS):
                if token not in _BOUND_NEGATORS or tuple(tokens[at + 1 : at + 3]) not in _BOUNDS:
                    count += 1
            elif count and role == _BRIDGES_RUN:
                bridged.append(token)
            elif role == _BE:
                copula = True
            elif role == _ENDS and not count:
                if governed:
                    negations.append(" ".join(governed))
                polarity, governed, since, runs = False, None, len(words), 0
            elif role == _PLACES and governed:  # "without a tz argument | on line 88"
                negations.append(" ".join(governed))
                governed = None
            if count or not (role == _INVERTS or (role == _BRIDGES_RUN and token not in STOPWORDS)):
                continue  # an inverter or a bridge outside a run is a word like any other
        if count:  # this word closes the open run
            if governed:
                negations.append(" ".join(governed))
            polarity = count % 2 == 1
            passive = copula or token.endswith("ed")  # "is never emitted", "never emitted"
            if polarity and passive and not runs:  # the words before it are governed too
                negated[since:] = [True] * (len(negated) - since)
            governed = [] if polarity else None
            count, runs = 0, runs + 1
            for word in bridged:
                words.append(stem(word))
                negated.append(polarity)
            bridged = []
        stemmed = stem(token.rstrip("/") or token)
        words.append(stemmed)
        negated.append(polarity)
        copula = False
        if governed is not None:
            governed.append(stemmed)
            if len(governed) == GOVERNED_WORDS:
                negations.append(" ".join(governed))
                governed = None
    return spans


@functools.lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """A crude, deterministic stem: enough that ``emitted`` meets ``emit``, ``timestamps``
    ``timestamp``, ``modified`` ``modify`` and ``directly`` ``direct``; a paraphrase with other
    words is the embedding method's to judge."""
    if word.endswith("/") or not word.isalpha():
        return word
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 2 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    if word.endswith("ly") and len(word) >= 6:  # "directly" meets "direct"; "apply" stays
        word = word[:-2]
    if word.endswith("i") and len(word) > 2:  # "modified", "modifies" meet "modify"
        word = word[:-1] + "y"
    if word.endswith("e") and len(word) > 2:  # "use" and "used" meet at "us"
        word = word[:-1]
    if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]
    return word


Polarities = tuple[tuple[frozenset[str], frozenset[str]], ...]  # per span: (affirmed, negated)


def polarities(text: str, governed: frozenset[str]) -> Polarities:
    """Per span of the clauses of ``text`` that may hold every word of ``governed``, the words
    it affirms and the words it negates. Only the clauses around each occurrence of the rarest
    looking word (its stem but the last letter, as a substring) are read, so a long parent
    costs its few matching clauses, not its length."""
    lowered = prepare(text, [m.span() for m in QUOTED.finditer(text)])
    anchor = max(governed, key=len)
    needle = anchor[:-1] if len(anchor) > 3 else anchor
    found: Polarities = ()
    read_from = 0
    at = lowered.find(needle)
    while at >= 0:
        if at >= read_from:
            start = _clause_start(lowered, read_from, at)
            following = CLAUSE_END.search(lowered, at)
            read_from = following.end() if following is not None else len(lowered)
            found += tuple(
                (span.polar(negated=False), span.polar(negated=True))
                for span in read_clause(lowered, start, read_from)
            )
        at = lowered.find(needle, max(at + 1, read_from))
    return found


def added_negations(
    parents: Sequence[str], parent_negations: frozenset[str], negations: frozenset[str]
) -> list[int]:
    """Per parent text, how many of a summary's ``negations`` deny what that parent affirms:
    every word the negation governs stands in one span of the parent, affirmed, and no span of
    any parent negates them all. Parents are read only for a negation of the summary that is
    none of the parents' own (``parent_negations``)."""
    counts = [0] * len(parents)
    for negation in negations - parent_negations:
        governed = frozenset(negation.split(" "))
        spans = [polarities(text, governed) for text in parents]
        if any(governed <= negated for one in spans for _, negated in one):
            continue  # a parent negates it: the summary's negation is that parent's
        for i, one in enumerate(spans):
            counts[i] += any(governed <= affirmed for affirmed, _ in one)
    return counts
