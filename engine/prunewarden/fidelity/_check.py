"""Whether a summary (the child) still says what its parents said: the facts method.

A parent's fact is kept when the child carries it after normalization; a negation is kept when
one clause of the child still negates every word the parent's negation governs. A child that is
an error message, a refusal or nothing at all keeps nothing. Reasons name the parent and child
ids and the fact kinds lost, never the text.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from prunewarden.decision import Reason
from prunewarden.fidelity._facts import FACT_KINDS, Facts, extract_facts
from prunewarden.fidelity._meaning import Embedder, meaning_reasons
from prunewarden.fidelity._negation import added_negations
from prunewarden.fidelity._numbers import NUMBER_WORDS, magnitude, spelled_numbers

Method = Literal["facts", "embedding", "both", "judge"]
# The harness's own entailment check (``method: judge``): whether ``child_text`` still says
# everything ``parent_text`` says. It sees both texts; its answer must be a bool.
Judge = Callable[[str, str], bool]
Scope = Literal["protected", "all"]
FidelityMode = Literal["enforce", "audit", "off"]
#: How a summary whose text cannot be read (an encrypted compaction item) is judged.
Opaque = Literal["keep_pinned", "refuse", "allow"]
#: The kind of a summary whose text cannot be read: nothing can tell what it kept.
OPAQUE_KIND = "opaque_summary"

# Anchored at the start: a summary that *is* an error or a refusal, not one that mentions one.
DEFAULT_ERROR_PATTERNS = (
    r"^\s*(?:\w+\.)*\w*(?:Error|Exception)\s*:",
    r"^\s*Traceback \(most recent call last\)",
    r"^\s*(?:error code|status code|http error|http)\s*:?\s*[45]\d\d\b",
    r"^\s*request failed with status code [45]\d\d\b",
    (
        r"^\s*(?:context_length_exceeded|rate_limit_exceeded|insufficient_quota|"
        r"invalid_request_error|overloaded_error|rate_limit_error|api_error|server_error)\b"
    ),
    r"^\s*\{\s*\"(?:error|detail|message)\"\s*:",
    (
        r"^\s*(?:error\s+)?(?:[45]\d\d\b\W*)?(?:internal server error|service unavailable|"
        r"bad gateway|gateway timeout|too many requests|rate limit(?:ed)? exceeded|"
        r"request timed out)"
    ),
    (
        r"^\s*(?:I['\u2019]m sorry|I am sorry|sorry|unfortunately)\b[^.\n]{0,80}\bI "
        r"(?:can(?:no|['\u2019])t|cannot|am unable to|['\u2019]m unable to|won['\u2019]t)\b"
    ),
    (
        r"^\s*I (?:can(?:no|['\u2019])t|cannot|am unable to|['\u2019]m unable to|won['\u2019]t) "
        r"(?:help|assist|comply|provide|summari[sz]e|do that|complete)"
    ),
    r"^\s*As an AI\b",
)

Pair = tuple[str, str]  # (id, text)

# Distinct parent texts whose facts are kept (a window's worth, and then some).
PARENT_CACHE_SIZE = 1024
_PARENTS: OrderedDict[bytes, Facts] = OrderedDict()
_PARENTS_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class FidelitySettings:
    """``spec.fidelity``, resolved: every field at its documented default unless set."""

    mode: FidelityMode = "enforce"
    method: Method = "facts"
    scope: Scope = "protected"
    kinds: frozenset[str] = frozenset(FACT_KINDS)
    min_kept_share: float = 1.0
    embedding_floor: float = 0.5
    error_patterns: tuple[str, ...] = DEFAULT_ERROR_PATTERNS
    opaque: Opaque = "keep_pinned"


@dataclass(frozen=True, slots=True)
class ParentFidelity:
    """One parent's facts in one child: how many counted, how many kept, which kinds lost."""

    parent: str
    facts: int
    kept: int
    lost: tuple[str, ...]  # kinds with at least one fact lost, in FACT_KINDS order

    @property
    def kept_share(self) -> float:
        return self.kept / self.facts if self.facts else 1.0


@dataclass(frozen=True, slots=True)
class FidelityResult:
    """The check of one child against its parents; ``reasons`` is empty when it is faithful."""

    child: str
    parents: tuple[ParentFidelity, ...]
    reasons: tuple[Reason, ...] = ()
    is_error: bool = False

    @property
    def refused(self) -> bool:
        return bool(self.reasons)

    @property
    def kept_share(self) -> float:
        """Facts kept over facts counted, across every parent (1.0 when none counted)."""
        facts = sum(p.facts for p in self.parents)
        return sum(p.kept for p in self.parents) / facts if facts else 1.0

    @property
    def lost(self) -> tuple[str, ...]:
        """Every kind lost from any parent, in :data:`FACT_KINDS` order."""
        kinds = {kind for p in self.parents for kind in p.lost}
        return tuple(kind for kind in FACT_KINDS if kind in kinds)


def check_fidelity(
    parents: Sequence[Pair],
    child: Pair,
    settings: FidelitySettings,
    *,
    embedder: Embedder | None = None,
    judge: Judge | None = None,
) -> FidelityResult:
    """Check ``child`` (id, text) against ``parents`` (id, text each) with the facts method
    (``settings.method`` ``facts`` or ``both``). The meaning method (``embedding``, ``both``)
    needs ``embedder``, the judge method (``judge``) ``judge``; without it, it raises
    :class:`LookupError`, which a guard turns into a refusal. Raises nothing else on any str
    input but what the judge raises (a judge answering other than a bool: :class:`TypeError`)."""
    child_id, child_text = child
    kinds = settings.kinds
    if is_error_text(child_text, settings.error_patterns):
        report = tuple(_all_lost(pid, parent_facts(text), kinds) for pid, text in parents)
        reasons = tuple(
            Reason(
                "summary_is_error",
                f"summary {child_id} of {p.parent} is empty, an error message or a refusal",
                {"parent": p.parent, "child": child_id, "lost": list(p.lost)},
            )
            for p in report
        )
        return FidelityResult(child_id, report, reasons, is_error=True)
    if settings.method == "judge":
        return _judged(parents, child, judge)
    reasons_list: list[Reason] = []
    report_list: list[ParentFidelity] = []
    if settings.method != "embedding":
        theirs = extract_facts(child_text)
        words = _words(theirs)
        read = [parent_facts(text) for _, text in parents]
        added = [0] * len(parents)
        if "negation" in kinds and theirs.by_kind.get("negation"):
            added = added_negations(
                [text for _, text in parents],
                frozenset().union(*(mine.by_kind.get("negation", ()) for mine in read)),
                theirs.by_kind["negation"],
            )
        for (parent_id, _), mine, more in zip(parents, read, added, strict=True):
            parent = _compare(parent_id, mine, theirs, words, kinds)
            if more:  # negations the summary added to what this parent affirms
                lost = {*parent.lost, "negation"}
                parent = ParentFidelity(
                    parent_id,
                    parent.facts + more,
                    parent.kept,
                    tuple(kind for kind in FACT_KINDS if kind in lost),
                )
            report_list.append(parent)
            reasons_list.extend(_reasons(parent, child_id, settings.min_kept_share))
    if settings.method != "facts":
        if embedder is None:
            msg = f"fidelity method {settings.method} needs an embedder and none was given"
            raise LookupError(msg)
        reasons_list.extend(meaning_reasons(parents, child, settings.embedding_floor, embedder))
    return FidelityResult(child_id, tuple(report_list), tuple(reasons_list))


def _judged(parents: Sequence[Pair], child: Pair, judge: Judge | None) -> FidelityResult:
    """The judge method: the harness's ``judge`` asked of each parent; a parent it does not see
    entailed is ``meaning_drift``, recorded with ``method: judge``."""
    if judge is None:
        msg = "fidelity method judge needs a judge and none was given"
        raise LookupError(msg)
    child_id, child_text = child
    reasons = []
    for parent_id, text in parents:
        entailed = judge(text, child_text)
        if not isinstance(entailed, bool):
            msg = f"the fidelity judge answered {type(entailed).__name__}, not a bool"
            raise TypeError(msg)
        if not entailed:
            reasons.append(
                Reason(
                    "meaning_drift",
                    f"summary {child_id} does not say what {parent_id} said, as the judge reads "
                    "them",
                    {
                        "parent": parent_id,
                        "child": child_id,
                        "lost": ["meaning"],
                        "method": "judge",
                    },
                )
            )
    return FidelityResult(child_id, (), tuple(reasons))


def parent_facts(text: str) -> Facts:
    """A parent's facts (``extract_facts(text, whole_text=False)``), kept by the SHA-256 of the
    text for the last :data:`PARENT_CACHE_SIZE` distinct texts: a parent is checked again for
    every summary that folds it, in every pass, and its facts depend on its text only. A digest,
    not the text, is the key, so the cache holds no text (only facts); two texts share an entry
    only if SHA-256 collides. Callers must not mutate the result."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    with _PARENTS_LOCK:
        facts = _PARENTS.get(digest)
        if facts is not None:
            _PARENTS.move_to_end(digest)
            return facts
    facts = extract_facts(text, whole_text=False)
    with _PARENTS_LOCK:
        _PARENTS[digest] = facts
        if len(_PARENTS) > PARENT_CACHE_SIZE:
            _PARENTS.popitem(last=False)
    return facts


def clear_parent_facts() -> None:
    """Forget every parent's facts (what a benchmark of a parent's first check needs)."""
    with _PARENTS_LOCK:
        _PARENTS.clear()


def is_error_text(text: str, patterns: tuple[str, ...] = DEFAULT_ERROR_PATTERNS) -> bool:
    """``text`` is empty, whitespace, or matches one of ``patterns`` (case-insensitive)."""
    return not text.strip() or any(p.search(text) for p in compile_patterns(patterns))


@functools.lru_cache(maxsize=64)
def compile_patterns(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """The error patterns compiled once per distinct tuple (a policy's, usually one)."""
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


_BOUNDS = frozenset("<>")
_TOKEN = re.compile(r"[\w@/~-][\w.@/~:-]*[\w/]|\w")


def _words(facts: Facts) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(facts.text))


class _Numbers:
    """A summary's numbers as a parent's number facts are looked up in: literally, by their
    value alone (a bare ``500`` keeps ``500 ms``), spelled out, or by magnitude (``0.5 s`` keeps
    ``500 ms``); the spelled and the magnitudes are read only when a literal lookup misses."""

    def __init__(self, theirs: Facts, tokens: tuple[str, ...], words: frozenset[str]) -> None:
        self._tokens, self._words = tokens, words
        self._fill(theirs.by_kind.get("number", frozenset()))
        self._spelled = False
        self._magnitudes: set[tuple[str, str, Fraction]] | None = None

    def _fill(self, numbers: frozenset[str]) -> None:
        self.numbers = numbers
        self.bases = {value.partition(" ")[0] for value in numbers if value[:1] not in _BOUNDS}

    def _literal(self, value: str) -> bool:
        number, _, unit = value.partition(" ")
        return value in self.numbers or (
            number[:1] not in _BOUNDS and (number in self.numbers if unit else number in self.bases)
        )

    def keep(self, value: str) -> bool:
        if self._literal(value):
            return True
        if not self._spelled:  # a number a summary spells out keeps the digits
            self._spelled = True
            words = self._words
            if not words.isdisjoint(NUMBER_WORDS) or any(
                word.partition("-")[0] in NUMBER_WORDS for word in words if "-" in word
            ):
                self._fill(self.numbers | spelled_numbers(self._tokens))
                if self._literal(value):
                    return True
        if self._magnitudes is None:
            self._magnitudes = {m for m in map(magnitude, self.numbers) if m is not None}
        return magnitude(value) in self._magnitudes


class ChildFacts:
    """A child's facts as a parent's facts are looked up in: :meth:`keeps` is the facts
    method's one test of one fact (shared by the check and by :func:`fact_ledger`)."""

    def __init__(self, theirs: Facts, tokens: tuple[str, ...]) -> None:
        self.theirs = theirs
        self.words = frozenset(tokens)
        self.literal = frozenset().union(*(v for k, v in theirs.by_kind.items() if k != "negation"))
        self.numbers = _Numbers(theirs, tokens, self.words)

    def keeps(self, kind: str, value: str) -> bool:
        """Whether the child still says the parent's fact ``value`` of ``kind``."""
        if kind == "negation":
            governed = set(value.split(" "))
            return any(governed <= span for span in self.theirs.negated)
        if kind == "number":
            return self.numbers.keep(value)
        words = self.words
        return (
            value in self.literal
            or value in words
            or (" " in value and value in self.theirs.text)
            or (kind == "flag" and value.lstrip("-") in words)
        )


def _compare(
    parent_id: str, mine: Facts, theirs: Facts, tokens: tuple[str, ...], kinds: frozenset[str]
) -> ParentFidelity:
    child = ChildFacts(theirs, tokens)
    facts = kept = 0
    lost: set[str] = set()
    for kind, values in mine.by_kind.items():
        if kind not in kinds:
            continue
        for value in values:
            facts += 1
            if child.keeps(kind, value):
                kept += 1
            else:
                lost.add(kind)
    return ParentFidelity(parent_id, facts, kept, tuple(k for k in FACT_KINDS if k in lost))


def fact_ledger(
    parent_text: str, child_text: str, kinds: frozenset[str] = frozenset(FACT_KINDS)
) -> dict[str, dict[str, list[str]]]:
    """Each fact of ``parent_text`` (by kind, in :data:`FACT_KINDS` order) as ``child_text``
    keeps it: ``kept`` (the same normalized fact, of the same kind), ``restated`` (kept another
    way: a number in other units or spelled out, a negation in other words, a fact read in the
    child's text) or ``lost``; the facts method's own test decides kept from lost."""
    theirs = extract_facts(child_text)
    child = ChildFacts(theirs, _words(theirs))
    mine = parent_facts(parent_text)
    ledger: dict[str, dict[str, list[str]]] = {}
    for kind in FACT_KINDS:
        values = mine.by_kind.get(kind)
        if kind not in kinds or not values:
            continue
        row: dict[str, list[str]] = {"kept": [], "restated": [], "lost": []}
        for value in sorted(values):
            if not child.keeps(kind, value):
                row["lost"].append(value)
            elif value in theirs.by_kind.get(kind, ()):
                row["kept"].append(value)
            else:
                row["restated"].append(value)
        ledger[kind] = row
    return ledger


def _all_lost(parent_id: str, mine: Facts, kinds: frozenset[str]) -> ParentFidelity:
    had = tuple(k for k in FACT_KINDS if k in kinds and k in mine.by_kind)
    return ParentFidelity(parent_id, mine.count(kinds), 0, had)


def _reasons(parent: ParentFidelity, child_id: str, min_kept_share: float) -> list[Reason]:
    reasons = []
    if "negation" in parent.lost:
        reasons.append(
            Reason(
                "negation_lost",
                f"summary {child_id} no longer negates what {parent.parent} negated",
                {"parent": parent.parent, "child": child_id, "lost": ["negation"]},
            )
        )
    others = [kind for kind in parent.lost if kind != "negation"]
    if others and parent.kept_share < min_kept_share:
        reasons.append(
            Reason(
                "fact_lost",
                f"summary {child_id} keeps {parent.kept} of {parent.facts} fact(s) of "
                f"{parent.parent} (at least {min_kept_share:g} required); lost: "
                f"{', '.join(others)}",
                {
                    "parent": parent.parent,
                    "child": child_id,
                    "lost": others,
                    "kept_share": round(parent.kept_share, 4),
                },
            )
        )
    return reasons
