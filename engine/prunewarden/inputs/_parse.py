"""Input documents: validated against ``input.v1`` and the policy, then typed.

A malformed document is an :class:`InputError`, never a decision. A document the compiled
validator accepts (:mod:`prunewarden.inputs._validation`) is typed at once; any other takes the
exact path, the schema and the checks beyond it (:mod:`prunewarden.inputs._checks`), which is
slower but says what is wrong and where.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prunewarden._schemas import capped, problems_of, validator
from prunewarden._source import Parsed, locate
from prunewarden.errors import InputError, Problem
from prunewarden.inputs._checks import Found, oversized, plan_problems, request_problems, unreadable
from prunewarden.inputs._edits import derive_edit
from prunewarden.inputs._model import (
    Check,
    CollapseRequest,
    EvictionRequest,
    PlanRequest,
    Request,
    ScoreRange,
    Segment,
    Snapshot,
    Span,
    StalenessRequest,
    TransitionRequest,
    TransitionSegment,
    Turn,
    TurnStats,
    WindowSegment,
)
from prunewarden.inputs._validation import accepts_encoded, accepts_plan
from prunewarden.limits import MAX_PROBLEMS


def parse_request(
    data: Any, scores: ScoreRange, *, filename: str = "<input>", text: str | None = None
) -> tuple[Check, Request]:
    """Validate ``data`` and return its check and typed request, or raise :class:`InputError`.

    ``text`` is the document's source, used only to put line and column on errors.
    """
    check, request, _ = parse_request_encoded(data, scores, filename=filename, text=text)
    return check, request


def parse_request_encoded(
    data: Any, scores: ScoreRange, *, filename: str = "<input>", text: str | None = None
) -> tuple[Check, Request, bytes | None]:
    """:func:`parse_request`, and the bytes its fast path serialized ``data`` to (orjson under
    :data:`prunewarden._json.ORJSON_CANONICAL`; None after the exact path), from which the
    record's input digest is finished without serializing the document again."""
    encoded = accepts_encoded(data, scores)
    if encoded is not None:
        check: Check = data["check"]
        return check, _BUILDERS[check](data), encoded
    return (*parse_request_exact(data, scores, filename=filename, text=text), None)


def parse_request_exact(
    data: Any, scores: ScoreRange, *, filename: str = "<input>", text: str | None = None
) -> tuple[Check, Request]:
    """The exact path of :func:`parse_request`: JSON Schema and the semantic checks, slower,
    able to say what is wrong and where. Taken whenever the fast path is not sure."""
    found = _invalid(data, None, lambda: request_problems(data, scores), filename, text)
    if not found:
        check: Check = data["check"]
        return check, _BUILDERS[check](data)
    raise found


def parse_plan(
    data: Any, scores: ScoreRange, *, filename: str = "<input>", text: str | None = None
) -> PlanRequest:
    """Validate a pruning-pass document (``$defs/plan`` of input.v1) and type it, or raise
    :class:`InputError`."""

    if accepts_plan(data, scores):
        return _plan(data)
    return parse_plan_exact(data, scores, filename=filename, text=text)


def parse_plan_exact(
    data: Any, scores: ScoreRange, *, filename: str = "<input>", text: str | None = None
) -> PlanRequest:
    """The exact path of :func:`parse_plan`: JSON Schema and the semantic checks."""

    found = _invalid(data, "plan", lambda: plan_problems(data, scores), filename, text)
    if found:
        raise found
    return _plan(data)


def _invalid(
    data: Any,
    definition: str | None,
    relations: Callable[[], Iterator[Found]],
    filename: str,
    text: str | None,
) -> InputError | None:
    """None when ``data`` is valid; else the error listing its problems (at most
    :data:`~prunewarden.limits.MAX_PROBLEMS`), located in ``text``.

    What could not even be reported on, and lists over their limit, are refused first. The
    schema runs once (a large document takes seconds); positions are only computed for a
    failure.
    """
    refused = refused_unchecked(data, definition)
    if refused:
        located = _locate(data, filename, text)
        return InputError([located.problem(path, message) for path, message in refused])
    errors = list(
        itertools.islice(validator("input", definition).iter_errors(data), MAX_PROBLEMS + 1)
    )
    found = [] if errors else list(itertools.islice(relations(), MAX_PROBLEMS + 1))
    if not errors and not found:
        return None
    located = _locate(data, filename, text)
    problems = problems_of(errors, located)
    problems += capped((located.problem(path, message) for path, message in found), filename)
    return InputError(problems or [Problem(filename, 0, 0, "$", "invalid input document")])


def refused_unchecked(data: Any, definition: str | None) -> list[Found]:
    """What is refused before the schema runs: values that cannot be reported on, and lists and
    objects over their size limit (``definition``: ``"plan"``, or None for a request). A
    document made from another (a trace line) is pre-checked by the same rules. The sizes come
    first: they look at a few lists, where the other walks every value."""
    return oversized(data, definition) or unreadable(data)


def _locate(data: Any, filename: str, text: str | None) -> Parsed:
    located = locate(text, filename) if text is not None else Parsed(data, filename)
    located.data = data
    return located


def _int_or_none(value: Any) -> int | None:
    # JSON Schema's "integer" admits 3.0; the guards index and slice with it.
    return None if value is None else int(value)


def _floats(scores: Mapping[str, Any]) -> dict[str, float]:
    if list(map(type, scores.values())).count(float) == len(scores):
        return dict(scores)  # a C-level copy: the common case, tens of thousands of scores
    return {entry: float(value) for entry, value in scores.items()}


def _snapshots(data: dict[str, Any]) -> tuple[Snapshot, ...]:
    return tuple(
        Snapshot(int(s["cycle"]), _floats(s["scores"]), tuple(s.get("pinned", ())))
        for s in data["history"]
    )


def _collapse(data: dict[str, Any]) -> CollapseRequest:
    baseline = data.get("baseline")
    return CollapseRequest(_snapshots(data), _floats(baseline) if baseline is not None else None)


def _segment(seg: dict[str, Any]) -> Segment:
    # Positional, in the model's field order: built once per segment of every window.
    get = seg.get
    tokens = get("tokens")
    return Segment(
        seg["id"],
        seg["kind"],
        get("text", ""),
        get("non_recoverable", False),
        tuple(get("score_dependencies", ())),
        get("tombstone_written", False),
        None if tokens is None else int(tokens),
        get("metadata", {}),
    )


def _eviction(data: dict[str, Any]) -> EvictionRequest:
    return eviction_request(data, frozenset(data.get("eviction_candidates", ())))


def eviction_request(data: Mapping[str, Any], candidates: frozenset[str]) -> EvictionRequest:
    """The typed request of a valid eviction document (or item of a pass) and the ids slated
    for eviction with it."""
    perturbed = data.get("perturbed_score")
    return EvictionRequest(
        _segment(data["segment"]),
        float(data["score"]),
        float(perturbed) if perturbed is not None else None,
        candidates,
    )


def _span(s: dict[str, Any], span_id: str) -> Span:
    """A typed span, its text hashed once: the guard's binding check and the record's subject
    share the digest."""
    get = s.get
    score = s["score"]
    text = get("text", "")
    return Span(
        span_id,
        text,
        None if score is None else float(score),
        get("text_sha256", ""),
        int(get("rewrite_count", 0)),
        tuple(get("derived_from", ())),
        text_digest(text),
    )


def text_digest(text: str) -> str:
    """The lower-case hex SHA-256 of ``text``'s UTF-8 bytes; "" for a text holding a lone
    surrogate, which has none (the guard then fails on it, closed, as it always did)."""
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        return ""
    return hashlib.sha256(encoded).hexdigest()


def _turn_stats(data: dict[str, Any]) -> TurnStats | None:
    turn = data.get("turn")
    if turn is None:
        return None
    return TurnStats(int(turn["spans_modified"]), int(turn["scores_invalidated"]))


def _turns(data: dict[str, Any]) -> tuple[Turn, ...]:
    return tuple(
        Turn(int(t["turn"]), float(t["mean_relevance"]), int(t["tokens"]))
        for t in data.get("turns", ())
    )


def _staleness(data: dict[str, Any]) -> StalenessRequest:
    return StalenessRequest(
        spans=tuple(_span(s, s["span_id"]) for s in data["spans"]),
        keep_top_k=int(data["keep_top_k"]),
        turn=_turn_stats(data),
        turns=_turns(data),
        tombstones=frozenset(data.get("tombstones", ())),
        recompute_budget=_int_or_none(data.get("recompute_budget")),
    )


def _plan(data: dict[str, Any]) -> PlanRequest:
    segments = tuple(
        WindowSegment(
            _segment(s),
            float(s["score"]),
            float(s["perturbed_score"]) if s.get("perturbed_score") is not None else None,
            _span(s, s["id"]),
            s.get("group"),
        )
        for s in data["segments"]
    )
    baseline = data.get("baseline")
    return PlanRequest(
        segments=segments,
        free_tokens=_int_or_none(data.get("free_tokens")),
        keep_top_k=_int_or_none(data.get("keep_top_k")),
        history=_snapshots(data) if "history" in data else None,
        baseline=_floats(baseline) if baseline is not None else None,
        turn=_turn_stats(data),
        turns=_turns(data),
        tombstones=frozenset(data.get("tombstones", ())),
        recompute_budget=_int_or_none(data.get("recompute_budget")),
        session_id=data.get("session_id"),
        labels=dict(data.get("labels", {})),
    )


def _transition_segment(s: dict[str, Any]) -> TransitionSegment:
    get = s.get
    score, perturbed = get("score"), get("perturbed_score")
    return TransitionSegment(
        s["id"],
        _segment(s),
        None if score is None else float(score),
        None if perturbed is None else float(perturbed),
        get("text_sha256", ""),
        text_digest(get("text", "")),
        tuple(get("derived_from", ())),
        get("group"),
        tuple(get("tombstone_for", ())),
        int(get("rewrite_count", 0)),
    )


def _transition(data: dict[str, Any]) -> TransitionRequest:
    before = tuple(_transition_segment(s) for s in data["before"])
    after = tuple(_transition_segment(s) for s in data["after"])
    tombstones = frozenset(data.get("tombstones", ()))
    reported = data.get("reported")
    return TransitionRequest(
        before=before,
        after=after,
        tombstones=tombstones,
        applied_by=data.get("applied_by"),
        reported=None
        if reported is None
        else TurnStats(int(reported["spans_modified"]), int(reported["scores_invalidated"])),
        canaries=frozenset(data.get("canaries", ())),
        session_id=data.get("session_id"),
        labels=dict(data.get("labels", {})),
        edit=derive_edit(before, after, tombstones),
    )


_BUILDERS: dict[Check, Callable[[dict[str, Any]], Request]] = {
    "collapse": _collapse,
    "eviction": _eviction,
    "staleness": _staleness,
    "transition": _transition,
}
