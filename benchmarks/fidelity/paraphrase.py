"""Rewording that keeps every fact: a lexicon of synonyms and a handful of sentence shapes.

A paraphrase here changes the words around the facts and the shape of the sentence, never a
fact: code-like tokens (anything with a digit, an underscore, a dot, a slash, an ``=``, a
backtick or a quote inside, ``ALLCAPS`` and ``CamelCase``) are copied as they are, and a negation
is reworded only into another negation.
"""

from __future__ import annotations

import random
import re

# A token a paraphrase copies unchanged: a code span or quoted value, anything with a digit or a
# code character, a word joined to another by a dot, colon or hyphen, an acronym, CamelCase.
_CODE = re.compile(r"[\d_/=@`'#$]|\w[.:-]\w|[A-Z]{2,}|^[A-Z][a-z]+[A-Z]")
_TOKEN = re.compile(r"`[^`]*`|\S+")


# What issue 27 counts as a fact: numbers, code tokens, acronyms, CamelCase, paths, flags, quoted
# or backticked text; not a plain hyphenated word ("two-bedroom") nor a possessive ("inn's").
_FACT = re.compile(r"[\d_/=@`#$]|^'.*'$|^-\w|[A-Z]{2,}|^[A-Z][a-z]+[A-Z]")


def protected_spans(sentence: str, *, facts_only: bool = False) -> list[tuple[int, int]]:
    """Where the sentence's code-like tokens are (with ``facts_only``, its facts)."""
    shape = _FACT if facts_only else _CODE
    spans = []
    for found in _TOKEN.finditer(sentence):
        token = found.group(0).rstrip(".,;:")
        if shape.search(token):
            spans.append((found.start(), found.start() + len(token)))
    return spans


# Phrase -> rewordings. Longer phrases first: each is tried on the text around the facts.
LEXICON: dict[str, tuple[str, ...]] = {
    "find out why": ("work out why", "figure out why"),
    "leaves the harbour": ("departs from the harbour",),
    "the crossing takes": ("the crossing lasts",),
    "return ferries run": ("ferries back go", "the return boats sail"),
    "inn costs": ("inn comes to", "inn is priced at"),
    "tickets cost": ("fares come to",),
    "is about": ("is roughly", "is around"),
    "about ": ("roughly ", "around "),  # only right before a number: the end of a plain span
    "bring": ("take", "carry"),
    "near the pier": ("by the pier", "close to the pier"),
    "mostly flat": ("largely flat",),
    "closes at": ("shuts at",),
    "takes reservations": ("accepts bookings",),
    "forecast": ("weather outlook",),
    "book": ("reserve",),
    "add": ("include", "put"),
    "pack": ("take along",),
    "the failure is": ("what fails is",),
    "waiting for": ("while awaiting",),
    "locally": ("on a developer machine",),
    "in a row": ("consecutively",),
    "sometimes": ("at times", "occasionally"),
    "removes the race": ("eliminates the race",),
    "also": ("as well",),
    "too tight": ("too short",),
    "replace": ("swap out",),
    "open a pull request": ("raise a pull request",),
    "open the pull request": ("raise the pull request",),
    "review asked for": ("the reviewer requested",),
    "help me": ("I want to",),
    "equal weights of": ("the same weight of",),
    "let it rest": ("leave it to rest",),
    "until combined": ("until it comes together",),
    "apart": ("between them",),
    "has grown by about half": ("has risen by around half",),
    "overnight": ("through the night",),
    "at least": ("no less than",),
    "expect": ("anticipate",),
    "build": ("set up", "create"),
    "net income": ("take-home pay",),
    "average": ("come to on average",),
    "automatically": ("by standing order",),
    "comparing": ("that compares",),
    "highlight": ("mark",),
    "total": ("add up to",),
    "remaining": ("leftover",),
    "need": ("require",),
    "tolerate": ("cope with",),
    "loosened": ("loose",),
    "deeply": ("thoroughly",),
    "rather than": ("instead of",),
    "the main pest": ("the biggest pest",),
    "keep a notebook": ("keep a log",),
    "organise": ("plan", "arrange"),
    "the cheapest quote": ("the lowest offer",),
    "quotes": ("offers", "estimates"),
    "reserve parking": ("book parking",),
    "tell": ("inform",),
    "schedule": ("plan",),
    "photograph": ("take photos of",),
    "make a": ("draw up a",),
    "study": ("practise",),
    "listen to": ("play",),
    "each morning": ("every morning",),
    "before the trip": ("ahead of the trip",),
    "write a": ("draft a",),
    "asks for": ("requires", "calls for"),
    "i built": ("I created", "I wrote"),
    "mention": ("bring up", "point out"),
    "keep the letter": ("hold the letter",),
    "close by": ("end by",),
    "should connect": ("ought to link",),
    "use a plain": ("write in a plain",),
    "remove": ("cut",),
    "fix the": ("repair the",),
    "so that": ("so",),
    "after each change": ("after every change",),
    "the generated files": ("the files generated",),
    "once the tests pass": ("when the tests are green",),
    "the failing case": ("the test that fails",),
    "which expects": ("expecting",),
    "roll back": ("revert",),
    "started failing": ("began failing",),
    "rose from": ("climbed from",),
    "hold open transactions": ("have transactions in flight",),
    "should pass": ("ought to pass",),
    "post an update": ("give an update",),
    "fell back to": ("dropped back to",),
    "write the postmortem": ("file the postmortem",),
    "move the": ("migrate the",),
    "before the sprint ends": ("by the end of the sprint",),
    "it has to finish": ("it must be done",),
    "send them to": ("route them to",),
    "a run takes": ("one run lasts",),
    "go through": ("run through",),
    "on every task": ("for each task",),
    "was added": ("was introduced",),
    "drops by more than": ("falls by over",),
    "keep the old": ("leave the old",),
}

# A negation reworded only into another negation, in one pass (no rewording of a rewording).
NEGATIONS: dict[str, tuple[str, ...]] = {
    "Do not": ("Don't", "Never"),
    "do not": ("don't", "must not"),
    "Never": ("Do not ever", "Don't ever"),
    "never": ("at no point", "not ever"),
    "must not": ("must never", "cannot"),
}
_NEGATION = re.compile(r"\b(Do not|do not|Never|never|must not)\b")

_IMPERATIVE = re.compile(
    r"^(?!Return ferries)(Add|Address|Alert|Bake|Book|Bump|Close|Cool|Do|Export|Feed|Fix|Get|"
    r"Harvest|Highlight|"
    r"Keep|Learn|Listen|Make|Measure|Mention|Mix|Move|Mulch|Open|Organise|Pack|Partition|Plan|"
    r"Plant|Post|Practise|Preheat|Proofread|Put|Register|Replace|Return|Review|Roll|Rotate|Run|"
    r"Schedule|Set|Shape|Sow|Study|Tell|Transfer|Use|Water|Write|Find|Help|Cancel|Dig|Migrate)"
    r"\b(?! \w+ed\b)"
)
_TAIL = re.compile(
    r"^(?P<head>.{12,}?),?\s(?P<tail>(?:on|in|at|before|after|by|every|each|within|for|from|"
    r"during|until)\s(?:(?! and | so | to | that )[^,;]){3,40})\.$"
)
_FRAMES_IMPERATIVE = ("The plan is to {s}", "Next step: {s}", "We agreed to {s}", "To do: {s}")
_FRAMES_STATEMENT = ("Noted that {s}", "It turned out that {s}", "As established, {s}")
_FRAMES_RULE = ("Rule: {s}", "Remember: {s}", "Constraint: {s}")


# Capitalized words that stay so inside a sentence.
_NAMES = frozenset(
    {
        "I",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
        "Spanish",
        "Seville",
        "Python",
        "Airflow",
        "Whole",
    }
)


def _lower_first(text: str) -> str:
    first = text.split(" ", 1)[0]
    if first.istitle() and first.isalpha() and first not in _NAMES:
        return text[0].lower() + text[1:]
    return text


def _upper_first(text: str) -> str:
    if not text or not text.split(" ", 1)[0].isalpha():
        return text  # an identifier keeps its case
    return text[0].upper() + text[1:]


def _reword_plain(text: str, rng: random.Random) -> str:
    text = _NEGATION.sub(lambda found: rng.choice(NEGATIONS[found.group(0)]), text)
    for phrase, options in LEXICON.items():
        end = "$" if phrase.endswith(" ") else r"\b"
        pattern = re.compile(rf"\b{re.escape(phrase)}{end}", re.IGNORECASE)

        def swap(found: re.Match[str], options: tuple[str, ...] = options) -> str:
            if rng.random() > 0.8:  # a fifth of the matches stay as they are
                return found.group(0)
            choice = rng.choice(options)
            return _upper_first(choice) if found.group(0)[0].isupper() else choice

        text = pattern.sub(swap, text)
    return text


def reword(sentence: str, rng: random.Random) -> str:
    """The sentence with the words around its facts replaced by synonyms."""
    out, at = [], 0
    for start, end in protected_spans(sentence):
        out.append(_reword_plain(sentence[at:start], rng))
        out.append(sentence[start:end])
        at = end
    out.append(_reword_plain(sentence[at:], rng))
    return "".join(out)


def reshape(sentence: str, rng: random.Random) -> str:
    """The sentence in another shape: its trailing time or place fronted, two clauses split, an
    instruction or a statement framed as a note."""
    body = sentence.rstrip(".")
    shapes: list[str] = []
    tail = _TAIL.match(sentence)
    if tail and not re.search(r"[;:,]|ed$|\bnot\b", tail["head"] + ";" * (";" in sentence)):
        shapes.append(f"{_upper_first(tail['tail'])}, {_lower_first(tail['head'])}.")
    if "; " in body:
        first, second = body.split("; ", 1)
        shapes.append(f"{first}. {_upper_first(second)}.")
        shapes.append(f"{first}, and {second}.")
    if sentence.startswith(("Do not", "Never")):
        shapes = [rng.choice(_FRAMES_RULE).format(s=body) + "."]
    elif _IMPERATIVE.match(sentence):
        frame = rng.choice(_FRAMES_IMPERATIVE)
        shapes.append(frame.format(s=_lower_first(body)) + ".")
    else:
        frame = rng.choice(_FRAMES_STATEMENT)
        shapes.append(frame.format(s=_lower_first(body)) + ".")
    return rng.choice(shapes)


def _framed(sentence: str) -> bool:
    frames = (*_FRAMES_IMPERATIVE, *_FRAMES_STATEMENT, *_FRAMES_RULE)
    return ". " in sentence or sentence.startswith(tuple(f.split("{", 1)[0] for f in frames))


def paraphrase(sentences: list[str], rng: random.Random, *, join: bool = True) -> list[str]:
    """Each sentence reworded and reshaped; with ``join``, now and then two neighbours joined
    into one."""
    rewritten = [reword(reshape(s, rng), rng) for s in sentences]
    if not join:
        return rewritten
    joined: list[str] = []
    for sentence in rewritten:
        # Joined only when neither is framed as a note: a run-on of frames reads as no summary.
        if joined and not _framed(sentence) and not _framed(joined[-1]) and rng.random() < 0.25:
            joined[-1] = f"{joined[-1].rstrip('.')}, and {_lower_first(sentence)}"
        else:
            joined.append(sentence)
    return joined
