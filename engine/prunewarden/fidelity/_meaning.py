"""The meaning method: each parent sentence needs a summary sentence within a cosine floor.

Sentences end at ``.``, ``!``, ``?`` or ``;`` followed by a space, or at a line break, so that a
version, a path or a decimal (``v2.3.1``, ``src/app.py``, ``0.5 s``) stays inside its sentence
and a clause after a semicolon counts on its own. Every sentence of one check is embedded in one
call to the :class:`Embedder`, so a batching embedder runs the model once per check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from prunewarden.decision import Reason

Pair = tuple[str, str]  # (id, text)

_BOUNDARY = re.compile(r"(?<=[.!?;])\s+|\n+")


@runtime_checkable
class Embedder(Protocol):
    """Embeds texts, one vector per text in order, in one batch (the meaning method's hook)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The vectors of ``texts``, in order."""
        ...  # pragma: no cover - a protocol


def sentences(text: str) -> list[str]:
    """The text's sentences, stripped, empty ones left out."""
    return [s.strip() for s in _BOUNDARY.split(text) if s.strip()]


def sentence_similarities(
    parents: Sequence[Pair], child_text: str, embedder: Embedder
) -> list[tuple[str, list[float]]]:
    """Per parent (in order), each of its sentences' best cosine to a sentence of the child."""
    mine = [sentences(text) for _, text in parents]
    theirs = sentences(child_text) or [child_text]
    vectors = embedder.embed([*theirs, *(s for found in mine for s in found)])
    if len(vectors) != len(theirs) + sum(map(len, mine)):
        msg = "the embedder returned a different number of vectors than texts"
        raise ValueError(msg)
    child_vectors = [_unit(v) for v in vectors[: len(theirs)]]
    at = len(theirs)
    found = []
    for (parent_id, _), own in zip(parents, mine, strict=True):
        best = [
            max(sum(a * b for a, b in zip(_unit(vector), c, strict=True)) for c in child_vectors)
            for vector in vectors[at : at + len(own)]
        ]
        at += len(own)
        found.append((parent_id, best))
    return found


def meaning_reasons(
    parents: Sequence[Pair], child: Pair, floor: float, embedder: Embedder
) -> list[Reason]:
    """``meaning_drift`` for each parent with a sentence no child sentence comes within
    ``floor`` of; the detail names ids and the kind lost (``meaning``), never text."""
    child_id, child_text = child
    reasons = []
    for parent_id, best in sentence_similarities(parents, child_text, embedder):
        drifted = sum(value < floor for value in best)
        if drifted:
            reasons.append(
                Reason(
                    "meaning_drift",
                    f"{drifted} sentence(s) of {parent_id} have no sentence of summary "
                    f"{child_id} within the embedding floor {floor:g}",
                    {"parent": parent_id, "child": child_id, "lost": ["meaning"]},
                )
            )
    return reasons


def _unit(vector: Sequence[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else list(vector)
