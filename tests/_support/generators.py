"""Hypothesis strategies for input documents: valid ones, and valid ones with one thing wrong.

Mutations favour the edges the validators decide on: ids of 0, 1, 256 and 257 characters, scores
just outside the range, integral floats where integers belong, booleans where numbers belong,
non-finite numbers, duplicates, unknown fields, decreasing cycles.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st
from prunewarden.limits import MAX_ID_CHARS, MAX_KIND_CHARS

ids = st.text(alphabet="abcdefgh-_0123456789é", min_size=1, max_size=8)
scores_in_range = st.floats(0.0, 1.0) | st.sampled_from([0, 1, 0.0, 1.0, 0.5])
sha_hex = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Values JSON text can carry, chosen at the validators' edges.
edge_values = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        1,
        -1,
        2,
        0.0,
        -0.0,
        1.0,
        3.0,
        0.5,
        -1e-300,
        1.0000000000000002,
        1e300,
        2**63,
        10**400,
        "",
        "x",
        "a" * MAX_ID_CHARS,
        "a" * (MAX_ID_CHARS + 1),
        "k" * MAX_KIND_CHARS,
        "k" * (MAX_KIND_CHARS + 1),
        "0" * 64,
        "0" * 64 + "\n",
        "A" * 64,
        "\n",
        "collapse",
        [],
        ["a"],
        ["a", "a"],
        ["", "b"],
        [1],
        {},
        {"a": 0.5},
        {"": 0.5},
        {"a": True},
    ]
)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
json_values = st.recursive(
    json_scalars | edge_values,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def collapse_documents(draw: st.DrawFn) -> dict[str, Any]:
    entries = draw(st.lists(ids, min_size=1, max_size=6, unique=True))
    cycles = sorted(draw(st.sets(st.integers(0, 50), min_size=0, max_size=4)))
    history = []
    for cycle in cycles:
        snapshot: dict[str, Any] = {
            "cycle": cycle,
            "scores": {e: draw(scores_in_range) for e in entries},
        }
        if draw(st.booleans()):
            snapshot["pinned"] = draw(st.lists(st.sampled_from(entries), unique=True, max_size=2))
        history.append(snapshot)
    document: dict[str, Any] = {"check": "collapse", "history": history}
    if draw(st.booleans()):
        document["baseline"] = {e: draw(scores_in_range) for e in entries[:2]}
    return document


@st.composite
def eviction_documents(draw: st.DrawFn) -> dict[str, Any]:
    segment: dict[str, Any] = {
        "id": draw(ids),
        "kind": draw(st.sampled_from(["turn", "constraint", "summary", "negation"])),
    }
    for name, values in (
        ("text", st.text(max_size=10)),
        ("non_recoverable", st.booleans()),
        ("score_dependencies", st.lists(ids, unique=True, max_size=3)),
        ("tombstone_written", st.booleans()),
        ("tokens", st.integers(0, 500)),
        ("metadata", st.dictionaries(st.text(max_size=4), json_values, max_size=3)),
    ):
        if draw(st.booleans()):
            segment[name] = draw(values)
    document: dict[str, Any] = {"check": "eviction", "segment": segment}
    document["score"] = draw(scores_in_range)
    if draw(st.booleans()):
        document["perturbed_score"] = draw(st.none() | scores_in_range)
    if draw(st.booleans()):
        document["eviction_candidates"] = draw(st.lists(ids, unique=True, max_size=4))
    return document


@st.composite
def staleness_documents(draw: st.DrawFn) -> dict[str, Any]:
    span_ids = draw(st.lists(ids, unique=True, max_size=5))
    spans = []
    for span_id in span_ids:
        text = draw(st.text(max_size=12))
        span: dict[str, Any] = {
            "span_id": span_id,
            "text": text,
            "score": draw(st.none() | scores_in_range),
            "text_sha256": draw(st.sampled_from([sha256(text), "", sha256(text + "x")])),
        }
        if draw(st.booleans()):
            span["rewrite_count"] = draw(st.integers(0, 4))
        if draw(st.booleans()):
            span["derived_from"] = draw(st.lists(ids, unique=True, max_size=2))
        spans.append(span)
    document: dict[str, Any] = {
        "check": "staleness",
        "spans": spans,
        "keep_top_k": draw(st.integers(0, 6)),
    }
    if draw(st.booleans()):
        modified = draw(st.integers(0, 4))
        document["turn"] = {
            "spans_modified": modified,
            "scores_invalidated": draw(st.integers(0, 4)),
        }
    if draw(st.booleans()):
        turns = sorted(draw(st.sets(st.integers(0, 30), max_size=4)))
        document["turns"] = [
            {"turn": t, "mean_relevance": draw(scores_in_range), "tokens": draw(st.integers(0, 9))}
            for t in turns
        ]
    if draw(st.booleans()):
        document["tombstones"] = draw(st.lists(ids, unique=True, max_size=2))
    if draw(st.booleans()):
        document["recompute_budget"] = draw(st.integers(0, 5))
    return document


valid_documents = collapse_documents() | eviction_documents() | staleness_documents()


@st.composite
def window_segments(draw: st.DrawFn, seg_id: str) -> dict[str, Any]:
    eviction = draw(eviction_documents())
    segment = {**eviction["segment"], "id": seg_id, "score": eviction["score"]}
    if "perturbed_score" in eviction:
        segment["perturbed_score"] = eviction["perturbed_score"]
    if draw(st.booleans()):
        segment["text_sha256"] = sha256(segment.get("text", ""))
    if draw(st.booleans()):
        segment["rewrite_count"] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        segment["derived_from"] = draw(st.lists(ids, unique=True, max_size=2))
    return segment


@st.composite
def plan_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A pruning-pass window: segments as the eviction documents have them, bound like spans,
    with the gates' optional parts taken from the other generators."""
    segments = [
        draw(window_segments(seg_id)) for seg_id in draw(st.lists(ids, unique=True, max_size=4))
    ]
    target = draw(st.sampled_from(["free_tokens", "keep_top_k"]))
    document: dict[str, Any] = {"segments": segments, target: draw(st.integers(0, 600))}
    if draw(st.booleans()):
        collapse = draw(collapse_documents())
        document.update({k: v for k, v in collapse.items() if k != "check"})
    staleness = draw(staleness_documents())
    for name in ("turn", "turns", "tombstones", "recompute_budget"):
        if name in staleness:
            document[name] = staleness[name]
    if draw(st.booleans()):
        document["session_id"] = draw(ids)
    if draw(st.booleans()):
        document["labels"] = draw(st.dictionaries(ids, st.text(max_size=5), max_size=2))
    return document


# What a document built in Python could hold besides: not JSON, but a Mapping is accepted.
non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
python_values = st.sampled_from(
    [
        Decimal("0.5"),
        Decimal("NaN"),
        complex(0.5, 0),
        ("a", "b"),
        (),
        OrderedDict(a=0.5),
        10**5000,
        -(10**5000),
        b"a",
    ]
)


def paths(document: Any) -> list[tuple[Any, ...]]:
    """Every path into a document, the root included."""
    out: list[tuple[Any, ...]] = [()]
    if isinstance(document, dict):
        for key, value in document.items():
            out += [(key, *rest) for rest in paths(value)]
    elif isinstance(document, list):
        for i, value in enumerate(document):
            out += [(i, *rest) for rest in paths(value)]
    return out


def replace(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, *rest = path
    if isinstance(document, dict):
        return {**document, head: replace(document[head], tuple(rest), value)}
    copy = list(document)
    copy[head] = replace(document[head], tuple(rest), value)
    return copy


def _delete(document: Any, path: tuple[Any, ...]) -> Any:
    head, *rest = path
    if rest:
        inner = _delete(document[head], tuple(rest))
        return replace(document, (head,), inner)
    if isinstance(document, dict):
        return {k: v for k, v in document.items() if k != head}
    return [v for i, v in enumerate(document) if i != head]


STRING_EDGES = [
    "",
    "x",
    "a" * MAX_ID_CHARS,
    "a" * (MAX_ID_CHARS + 1),
    "k" * MAX_KIND_CHARS,
    "k" * (MAX_KIND_CHARS + 1),
    "0" * 64,
    "0" * 64 + "\n",
    "A" * 64,
    "collapse",
]
NUMBER_EDGES = [
    -1,
    0,
    2,
    -0.0,
    0.5,
    1.0,
    3.0,
    2.5,
    -1e-300,
    1.0000000000000002,
    0.7500000000000001,
    1e300,
    2**63,
    10**400,
]
CONTAINER_EDGES = [[], ["a", "a"], ["", "b"], ["a" * (MAX_ID_CHARS + 1)], [1], {}, {"": 0.5}]
OTHER_EDGES = [None, True, False, "0.5", 5, ["a"], {"a": 0.5}]


def edges_for(value: Any) -> list[Any]:
    """Values at the edge of what the validators accept where ``value`` stands."""
    if isinstance(value, str):
        return STRING_EDGES + OTHER_EDGES
    if isinstance(value, int | float) and not isinstance(value, bool):
        return NUMBER_EDGES + OTHER_EDGES
    return CONTAINER_EDGES + OTHER_EDGES + NUMBER_EDGES[:3] + STRING_EDGES[:2]


@st.composite
def mutated(  # noqa: PLR0911
    draw: st.DrawFn,
    values: st.SearchStrategy[Any] = json_values,
    documents: st.SearchStrategy[Any] = valid_documents,
) -> Any:
    """A valid document (from ``documents``) with at most one change: a value replaced (by one
    at the edge of what is accepted there, or by ``values``), a key renamed, removed or added,
    or an item of a list duplicated."""
    document = draw(documents)
    every = paths(document)
    containers = [p for p in every if isinstance(_get(document, p), dict | list)]
    # Half the time a list or object: there are few of them, and most rules are about them.
    where = draw(st.sampled_from(containers) | st.sampled_from(every))
    target = _get(document, where)
    operation = draw(
        st.sampled_from(["keep", "edge", "edge", "replace", "rename", "delete", "add", "duplicate"])
    )
    match operation:
        case "edge":
            return replace(document, where, draw(st.sampled_from(edges_for(target))))
        case "replace":
            return replace(document, where, draw(values))
        case "rename" if isinstance(target, dict) and target:
            old = draw(st.sampled_from(sorted(target)))
            new = draw(st.sampled_from(STRING_EDGES) | st.text(max_size=4))
            renamed = {(new if k == old else k): v for k, v in target.items()}
            return replace(document, where, renamed)
        case "delete" if where:
            return _delete(document, where)
        case "add" if isinstance(target, dict):
            key = draw(st.sampled_from(STRING_EDGES) | st.text(max_size=4))
            return replace(document, where, {**target, key: draw(values)})
        case "duplicate" if isinstance(target, list) and target:
            item = draw(st.sampled_from(target))
            at = draw(st.integers(0, len(target)))
            return replace(document, where, [*target[:at], item, *target[at:]])
        case _:
            pass
    return document


def _get(document: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        document = document[part]
    return document
