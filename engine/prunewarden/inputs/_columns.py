"""A staleness document decided over its columns: validated, hashed and read in one pass.

Every span of a staleness request is read for the same six values, and 200 spans typed one by one
(a ``Span`` each) cost several times what the guard's checks on them do. :func:`staleness_columns`
reads a document into parallel lists instead, checking on the way what ``input.v1`` and the
policy require -- with whole-list operations that run in C (types by ``set(map(type, ...))``,
bounds by ``min`` and ``max``) -- and hashing each span's text once, for the guard's binding
check, the record's subject and the input digest alike.

It answers only "yes, and here are the columns", or None. None is never an answer to the
caller: the engine then takes the general path (:func:`prunewarden.inputs.parse_request`),
which accepts or reports every problem located, exactly as before. So, as with the compiled
validator, the columns may refuse what the exact path accepts (an integral float where an
integer is expected, a lone surrogate in a text), never the reverse.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from prunewarden._json import ORJSON_CANONICAL, canonical_from, written_alike
from prunewarden.inputs._model import ScoreRange, Span, StalenessRequest, Turn, TurnStats
from prunewarden.limits import INTEGER_CEILING

_DOCUMENT_KEYS = frozenset(
    ("check", "spans", "keep_top_k", "turn", "turns", "tombstones", "recompute_budget")
)
_SPAN_KEYS = frozenset(("span_id", "text", "score", "text_sha256", "rewrite_count", "derived_from"))
_TURN_STATS_KEYS = frozenset(("spans_modified", "scores_invalidated"))
_TURN_KEYS = frozenset(("turn", "mean_relevance", "tokens"))
# input.v1's bounds: an id's length, and the longest lists.
ID_LENGTH = 256
MAX_IDS = 100_000
_MAX_TURNS = 10_000
_HEX = b"0123456789abcdef"
_NO_PARENTS: list[str] = []  # shared, never changed: most spans derive from nothing


@dataclass(frozen=True, slots=True)
class SpanColumns:
    """A request's spans as parallel lists, in input order: what the staleness guard reads."""

    ids: Sequence[str]
    texts: Sequence[str]
    scores: Sequence[float | None]
    declared: Sequence[str]  # each span's text_sha256: the hash its score is bound to
    rewrites: Sequence[int]
    derived: Sequence[Sequence[str]]
    # The SHA-256 (lower-case hex) of each text, "" where a text has none (a lone surrogate).
    digests: Sequence[str]

    def subject(self) -> list[dict[str, Any]]:
        """The spans as a record's subject names them: id, text length and hash."""
        return [
            {"span_id": span_id, "text_length": len(text), "text_sha256": digest}
            for span_id, text, digest in zip(self.ids, self.texts, self.digests, strict=True)
        ]

    @classmethod
    def of(cls, spans: Sequence[Span]) -> SpanColumns:
        """The columns of typed spans."""
        return cls(
            [span.span_id for span in spans],
            [span.text for span in spans],
            [span.score for span in spans],
            [span.text_sha256 for span in spans],
            [span.rewrite_count for span in spans],
            [span.derived_from for span in spans],
            [span.text_digest for span in spans],
        )


@dataclass(frozen=True, slots=True)
class StalenessColumns:
    """A staleness request read into columns; :meth:`request` types it when something needs the
    typed request (a rule, an explanation, a shadow policy)."""

    spans: SpanColumns
    keep_top_k: int
    turn: TurnStats | None
    turns: tuple[Turn, ...]
    tombstones: frozenset[str]
    recompute_budget: int | None

    @classmethod
    def of(cls, request: StalenessRequest) -> StalenessColumns:
        return cls(
            SpanColumns.of(request.spans),
            request.keep_top_k,
            request.turn,
            request.turns,
            request.tombstones,
            request.recompute_budget,
        )

    def request(self) -> StalenessRequest:
        c = self.spans
        return StalenessRequest(
            spans=tuple(
                Span(i, t, s, d, r, tuple(p), h)
                for i, t, s, d, r, p, h in zip(
                    c.ids,
                    c.texts,
                    c.scores,
                    c.declared,
                    c.rewrites,
                    c.derived,
                    c.digests,
                    strict=True,
                )
            ),
            keep_top_k=self.keep_top_k,
            turn=self.turn,
            turns=self.turns,
            tombstones=self.tombstones,
            recompute_budget=self.recompute_budget,
        )


@dataclass(frozen=True, slots=True)
class ReadStaleness:
    """What :func:`staleness_columns` read: the columns, and the input digest of version 3
    (``sha256:`` over the RFC 8785 form of :func:`hashed_text_document`)."""

    columns: StalenessColumns
    input_digest: str


def hashed_text_document(
    document: dict[str, Any], key: str, digests: Iterable[str]
) -> dict[str, Any]:
    """``document`` with the ``text`` of each item of its list ``key`` replaced by
    ``{"sha256": HEX}``, ``digests`` being those texts' SHA-256 (lower-case hex of their UTF-8
    bytes), in order; an item without a ``text`` stays as it is.

    What input digest version 3 of an audit record is computed over (docs/audit-log.md): each
    text was hashed once already (the staleness guard's binding check needs its hash), and
    hashing the document's bytes would read every text again. An object stands where the
    document has a string, so that no valid document digests like one whose texts are hashes.
    """
    items = [
        {**item, "text": {"sha256": digest}} if "text" in item else item
        for item, digest in zip(document[key], digests, strict=True)
    ]
    return {**document, key: items}


def staleness_columns(data: Any, scores: ScoreRange) -> ReadStaleness | None:
    """The columns of a valid staleness document under the policy's score range, or None when
    the document is not valid or not plainly so (the general path then decides)."""
    if type(data) is not dict or data.get("check") != "staleness":
        return None
    if not _DOCUMENT_KEYS.issuperset(data):
        return None
    try:
        return _read(data, scores.min, scores.max)
    except Exception:  # noqa: BLE001 - never an answer: the general path decides, or reports
        # A required member missing, a value of the wrong shape (KeyError, TypeError), a text
        # with no UTF-8 bytes (UnicodeError), or a value of a type whose truth or comparison
        # raises what it likes.
        return None


def _read(data: dict[str, Any], low: float, high: float) -> ReadStaleness | None:
    spans = data["spans"]
    columns = _span_columns(spans, low, high)
    rest = _request_fields(data, low, high) if columns is not None else None
    if columns is None or rest is None:
        return None
    hashed_document = hashed_text_document(data, "spans", columns.digests)
    # orjson refuses what JSON text cannot hold (subclasses, integers beyond 2**53 under
    # ORJSON_CANONICAL): the screen of every value not checked above.
    encoded = orjson.dumps(hashed_document, option=ORJSON_CANONICAL)
    # Every key of the document is ASCII and every float is a score or a mean relevance: when
    # orjson wrote those as RFC 8785 does, its output is the canonical form already.
    floats = [score for score in columns.scores if score is not None]
    floats += [turn.mean_relevance for turn in rest[2]]
    if not written_alike(floats):
        encoded = canonical_from(hashed_document, encoded)
    digest = "sha256:" + hashlib.sha256(encoded).hexdigest()
    return ReadStaleness(StalenessColumns(columns, *rest), digest)


def _span_columns(spans: Any, low: float, high: float) -> SpanColumns | None:
    if type(spans) is not list or len(spans) > MAX_IDS or not all_of_type(spans, dict):
        return None
    # Every member named in input.v1 (the required ones are read below, a KeyError otherwise).
    if not _SPAN_KEYS.issuperset(itertools.chain.from_iterable(spans)):
        return None
    ids = [span["span_id"] for span in spans]
    texts = [span["text"] for span in spans]
    scores = _optional_scores([span["score"] for span in spans], low, high)
    declared = [span["text_sha256"] for span in spans]
    rewrites = [span.get("rewrite_count", 0) for span in spans]
    derived = [span.get("derived_from", _NO_PARENTS) for span in spans]
    valid = (
        scores is not None
        and valid_ids(ids)
        and len(set(ids)) == len(ids)
        and all_of_type(texts, str)
        and all_of_type(declared, str)
        and _hashes(declared)
        and are_counts(rewrites)
        and _parents(derived)
    )
    if not valid or scores is None:
        return None
    # One hash per text, shared by the guard, the record's subject and the input digest. A text
    # holding a lone surrogate has no UTF-8 bytes: UnicodeError, and the general path.
    sha256 = hashlib.sha256
    digests = [sha256(text.encode()).hexdigest() for text in texts]
    return SpanColumns(ids, texts, scores, declared, rewrites, derived, digests)


def _request_fields(
    data: dict[str, Any], low: float, high: float
) -> tuple[int, TurnStats | None, tuple[Turn, ...], frozenset[str], int | None] | None:
    keep_top_k = data["keep_top_k"]
    # An optional member is absent or of its type: null is not a value input.v1 allows here.
    budget = data.get("recompute_budget")
    if not is_count(keep_top_k) or ("recompute_budget" in data and not is_count(budget)):
        return None
    stats = None
    if "turn" in data:
        turn = data["turn"]
        if type(turn) is not dict or turn.keys() != _TURN_STATS_KEYS:
            return None
        modified, invalidated = turn["spans_modified"], turn["scores_invalidated"]
        if not (is_count(modified) and is_count(invalidated)):
            return None
        stats = TurnStats(modified, invalidated)
    turns = _turns(data.get("turns", _NO_PARENTS), low, high)
    tombstones = data.get("tombstones", _NO_PARENTS)
    if turns is None or type(tombstones) is not list or not valid_ids(tombstones):
        return None
    if len(set(tombstones)) != len(tombstones):
        return None
    return keep_top_k, stats, turns, frozenset(tombstones), budget


def _turns(turns: Any, low: float, high: float) -> tuple[Turn, ...] | None:
    if type(turns) is not list or len(turns) > _MAX_TURNS or not all_of_type(turns, dict):
        return None
    if not all(turn.keys() == _TURN_KEYS for turn in turns):
        return None
    numbers = [turn["turn"] for turn in turns]
    tokens = [turn["tokens"] for turn in turns]
    means = [turn["mean_relevance"] for turn in turns]
    if not (are_counts(numbers) and are_counts(tokens) and are_scores(means, low, high)):
        return None
    if not all(earlier < later for earlier, later in itertools.pairwise(numbers)):
        return None
    return tuple(Turn(n, float(m), t) for n, m, t in zip(numbers, means, tokens, strict=True))


# --- whole-list checks -------------------------------------------------------------------------


def all_of_type(values: list[Any], kind: type) -> bool:
    """Every value of exactly this type (no subclass: orjson's screen refuses those too)."""
    return not values or set(map(type, values)) == {kind}


def valid_ids(values: list[Any]) -> bool:
    """input.v1's ``id``: strings of 1 to 256 characters; at most 100,000 of them."""
    if not values:
        return True
    if len(values) > MAX_IDS or not all_of_type(values, str):
        return False
    lengths = list(map(len, values))
    return min(lengths) >= 1 and max(lengths) <= ID_LENGTH


def is_count(value: Any) -> bool:
    """A JSON Schema ``integer`` with ``minimum: 0`` (an integral float takes the exact path)."""
    return type(value) is int and 0 <= value < INTEGER_CEILING


def are_counts(values: list[Any]) -> bool:
    return not values or (
        all_of_type(values, int) and min(values) >= 0 and max(values) < INTEGER_CEILING
    )


def are_scores(values: list[Any], low: float, high: float) -> bool:
    """Scores: ints or floats (never a bool), within the policy's range, none NaN."""
    if not values:
        return True
    if not set(map(type, values)) <= {float, int}:
        return False
    # min() and max() may step over a NaN; a sum of numbers within a finite range is NaN only
    # if one of them is.
    return low <= min(values) and max(values) <= high and not math.isnan(sum(values))


def _optional_scores(values: list[Any], low: float, high: float) -> list[float | None] | None:
    """Span scores (a number or null) as the typed request holds them: floats, or None."""
    kinds = set(map(type, values))
    if not kinds <= {float, int, type(None)}:
        return None
    present = values if type(None) not in kinds else [v for v in values if v is not None]
    if not are_scores(present, low, high):
        return None
    if int not in kinds:
        return values
    return [None if v is None else float(v) for v in values]


def _hashes(declared: list[str]) -> bool:
    """Each ``text_sha256`` empty or 64 lower-case hex digits (``^([0-9a-f]{64})?$``)."""
    if not set(map(len, declared)) <= {0, 64}:
        return False
    joined = "".join(declared)
    return joined.isascii() and not joined.encode("ascii").translate(None, _HEX)


def _parents(derived: list[Any]) -> bool:
    """Each ``derived_from`` a list of unique ids."""
    given = [parents for parents in derived if parents]
    if not given:
        return all_of_type(derived, list)
    if not all_of_type(derived, list) or not valid_ids(list(itertools.chain.from_iterable(given))):
        return False
    return all(len(set(parents)) == len(parents) <= MAX_IDS for parents in given)
