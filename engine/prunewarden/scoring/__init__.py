"""What a scorer is to prunewarden: a window in, each segment's score and perturbed score out.

The eviction guard trusts a low score only when a perturbed window scores the segment about the
same; a scorer names the perturbation it used, so that a record can say what "perturbed" meant.
:func:`bind_scores` writes a scorer's answer into window segments (score, perturbed score, the
SHA-256 of the text scored, the perturbation in ``metadata``), ready for a pruning pass.

The package needs no scorer library: a real one lives in an extra (:mod:`prunewarden.scoring.embed`,
``prunewarden[embed]``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Perturbation:
    """How a perturbed score was measured: ``kind`` (``leave_one_out``, ...) and the ids the
    perturbed window left out (empty when there was nothing to leave out)."""

    kind: str
    removed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "removed": list(self.removed)}


@dataclass(frozen=True, slots=True)
class Scores(Mapping[str, tuple[float, float]]):
    """``{id: (score, perturbed_score)}``, with the perturbation each perturbed score used."""

    by_id: Mapping[str, tuple[float, float]]
    perturbations: Mapping[str, Perturbation] = field(default_factory=dict)

    def __getitem__(self, key: str) -> tuple[float, float]:
        return self.by_id[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_id)

    def __len__(self) -> int:
        return len(self.by_id)


@runtime_checkable
class Scorer(Protocol):
    """Scores every segment of a window (``id`` and ``text`` each, in window order) against
    the task; a segment missing from the answer is not scored."""

    def score(self, segments: Sequence[Mapping[str, Any]], task: str) -> Scores:
        """Each segment's ``(score, perturbed_score)`` and the perturbation used."""
        ...  # pragma: no cover - a protocol


class RecencyScorer:
    """The baseline a plain ``trim_messages`` applies, as a scorer: the newest segment scores
    ``high``, the oldest ``low``, evenly between. Nothing is perturbed (the perturbed score is
    the score, ``kind: none``): use it to try a policy, or where no relevance model exists."""

    def __init__(self, low: float = 0.1, high: float = 0.9) -> None:
        self.low = low
        self.high = high

    def score(self, segments: Sequence[Mapping[str, Any]], task: str) -> Scores:
        """Scores by position only; ``task`` is not read."""
        del task
        last = max(len(segments) - 1, 1)
        values: dict[str, tuple[float, float]] = {}
        for i, segment in enumerate(segments):
            score = round(self.low + (self.high - self.low) * i / last, 6)
            values[str(segment["id"])] = (score, score)
        return Scores(values, dict.fromkeys(values, Perturbation("none")))


def text_sha256(text: str) -> str:
    """The ``text_sha256`` that binds a score to the text it was computed against."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def bind_scores(segments: Iterable[Mapping[str, Any]], scores: Scores) -> list[dict[str, Any]]:
    """Window segments carrying their scores: ``score``, ``perturbed_score``, ``text_sha256``
    of the text scored, and ``metadata.perturbation``. A segment the scorer left out keeps what
    it had (unbound, the staleness gate freezes the pass on it)."""
    bound = []
    for segment in segments:
        out = dict(segment)
        found = scores.get(str(out["id"]))
        if found is not None:
            out["score"], out["perturbed_score"] = found
            out["text_sha256"] = text_sha256(str(out.get("text", "")))
            perturbation = scores.perturbations.get(str(out["id"]))
            if perturbation is not None:
                metadata = dict(out.get("metadata") or {})
                metadata["perturbation"] = perturbation.to_dict()
                out["metadata"] = metadata
        bound.append(out)
    return bound


__all__ = ["Perturbation", "RecencyScorer", "Scorer", "Scores", "bind_scores", "text_sha256"]
