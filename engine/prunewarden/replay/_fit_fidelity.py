"""``prunewarden calibrate --fidelity``: fit the meaning method's floor to a team's own pairs.

PAIRS is JSON Lines, one (parents, summary) pair a line::

    {"parents": [{"id": "m1", "text": "..."}, ...], "summary": "...", "label": "faithful"}

``parents`` may also be a list of texts (ids ``p1``, ``p2``, ...); ``label`` is ``faithful`` (the
default: a summary the team accepts) or ``lossy`` (one it must refuse); other keys (``id``,
``class``) are kept for the report. A pair's *similarity* is what the meaning method compares with
``spec.fidelity.embedding_floor``: the lowest, over every parent sentence, of its best cosine to a
summary sentence (:func:`prunewarden.fidelity.sentence_similarities`).

The fitted floor is the largest, rounded down to 0.01, at which at most the target share of the
faithful pairs would be refused; the lossy pairs, when the file has any, are only reported. The
fit is written as a new version of the base policy (minor version bumped) that ``extends`` it and
states ``spec.fidelity``: ``method: both`` (the base's ``embedding`` stays) and the floor, with
``metadata.calibration`` naming the file's SHA-256, the counts, the date and the target.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from prunewarden._files import open_regular
from prunewarden.errors import InputError, Problem, describe_value
from prunewarden.fidelity import Embedder, sentence_similarities
from prunewarden.policy import Policy
from prunewarden.replay._fit import CalibrationError, _parse, bump_minor
from prunewarden.replay._fit_extends import base_outside

LABELS = ("faithful", "lossy")
_STEP = 100  # the floor is rounded down to 1 / _STEP


@dataclass(frozen=True, slots=True)
class FidelityPair:
    """One line of a pairs file."""

    line: int
    label: str
    parents: tuple[tuple[str, str], ...]
    summary: str
    extra: dict[str, Any]


@dataclass(frozen=True, slots=True)
class FidelityFit:
    """The fitted floor, each pair's similarity, and the new policy version."""

    floor: float
    largest_quiet_floor: float
    similarities: tuple[float, ...]  # in the order of the pairs
    policy: Policy
    text: str

    def refused(self, pairs: Sequence[FidelityPair], label: str) -> tuple[int, int]:
        """How many pairs of ``label`` the fitted floor refuses, of how many."""
        mine = [s for p, s in zip(pairs, self.similarities, strict=True) if p.label == label]
        return sum(s < self.floor for s in mine), len(mine)


def read_pairs(path: str) -> tuple[list[FidelityPair], str]:
    """The pairs of a JSON Lines file and its SHA-256; :class:`InputError` naming every bad line
    (file, line:column, JSON path, value)."""
    try:
        with open_regular(path) as stream:
            data = stream.read()
    except OSError as exc:
        raise InputError([Problem(path, 0, 0, "$", f"cannot read: {exc.strerror}")]) from None
    pairs, problems = [], []
    for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            document = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(Problem(path, number, exc.colno, "$", f"not JSON: {exc.msg}"))
            continue
        found = _pair(path, number, document)
        if isinstance(found, Problem):
            problems.append(found)
        else:
            pairs.append(found)
    if problems:
        raise InputError(problems)
    if not pairs:
        raise InputError([Problem(path, 1, 1, "$", "no pairs: one JSON object a line")])
    return pairs, hashlib.sha256(data).hexdigest()


def _pair(path: str, line: int, document: Any) -> FidelityPair | Problem:
    def problem(where: str, message: str) -> Problem:
        return Problem(path, line, 1, where, message)

    if not isinstance(document, dict):
        return problem("$", f"{describe_value(document)} is not an object")
    raw_parents = document.get("parents")
    if not isinstance(raw_parents, list) or not raw_parents:
        return problem("$.parents", f"{describe_value(raw_parents)} is not a non-empty list")
    parents = []
    for n, parent in enumerate(raw_parents):
        if isinstance(parent, str):
            parents.append((f"p{n + 1}", parent))
        elif (
            isinstance(parent, dict)
            and isinstance(parent.get("text"), str)
            and isinstance(parent.get("id", ""), str)
        ):
            parents.append((str(parent.get("id") or f"p{n + 1}"), parent["text"]))
        else:
            message = f"{describe_value(parent)} is neither a text nor {{id, text}}"
            return problem(f"$.parents[{n}]", message)
    summary = document.get("summary")
    if not isinstance(summary, str):
        return problem("$.summary", f"{describe_value(summary)} is not a string")
    label = document.get("label", "faithful")
    if label not in LABELS:
        return problem("$.label", f"{describe_value(label)} is not one of {', '.join(LABELS)}")
    extra = {k: v for k, v in document.items() if k not in {"parents", "summary", "label"}}
    return FidelityPair(line, label, tuple(parents), summary, extra)


def similarities(pairs: Sequence[FidelityPair], embedder: Embedder) -> list[float]:
    """Each pair's similarity: its parents' least-covered sentence's best cosine."""
    found = []
    for pair in pairs:
        by_parent = sentence_similarities(pair.parents, pair.summary, embedder)
        found.append(min((min(v) for _, v in by_parent if v), default=1.0))
    return found


def largest_quiet_floor(values: Sequence[float], rate: float) -> float:
    """The largest floor at which at most ``rate`` of ``values`` lie below it."""
    ordered = sorted(values)
    allowed = math.floor(rate * len(ordered) + 1e-9)
    return ordered[allowed] if allowed < len(ordered) else 1.0


def fit_fidelity(  # noqa: PLR0913 - the fit's inputs, each a command-line option
    base: Policy,
    base_ref: str,
    out: str,
    pairs: Sequence[FidelityPair],
    embedder: Embedder,
    *,
    source: tuple[str, str],
    rate: float,
    date: str,
) -> FidelityFit:
    """Fit the floor on the faithful ``pairs``; ``source`` is the file's (path, SHA-256)."""
    values = similarities(pairs, embedder)
    faithful = [v for p, v in zip(pairs, values, strict=True) if p.label == "faithful"]
    if not faithful:
        raise CalibrationError(f"{source[0]}: no faithful pairs to fit the floor to")
    largest = largest_quiet_floor(faithful, rate)
    floor = max(-1.0, min(1.0, math.floor(largest * _STEP) / _STEP))
    counts = {label: sum(p.label == label for p in pairs) for label in LABELS}
    results = {
        f"{label}_refused": sum(v < floor for p, v in zip(pairs, values, strict=True)
                                if p.label == label)
        for label in LABELS
    }  # fmt: skip
    calibration = {
        "base": base.identity.to_dict(),
        "date": date,
        "target_false_positive_rate": rate,
        "fidelity": {
            "pairs": {"file": source[0], "sha256": source[1], **counts},
            "embedding_floor": {"fitted": floor, "largest_quiet": round(largest, 6)},
            "results": results,
        },
    }
    method = "embedding" if base.spec.fidelity.method == "embedding" else "both"
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "extends": base_ref,
        "metadata": {
            "name": base.name,
            "version": bump_minor(base.version),
            "description": (
                f"{base.name}@{base.version} with the fidelity meaning method's floor fitted: "
                f"cosine {floor}. Fitted by prunewarden calibrate --fidelity on the pairs named "
                "in metadata.calibration."
            ),
            "calibration": calibration,
        },
        "spec": {"fidelity": {"method": method, "embedding_floor": floor}},
    }
    text = _header(base, base_ref) + yaml.safe_dump(
        document, sort_keys=False, allow_unicode=True, width=100
    )
    return FidelityFit(floor, largest, tuple(values), _parse(text, base, out), text)


def _header(base: Policy, base_ref: str) -> str:
    header = (
        f"# Written by prunewarden calibrate --fidelity from {base.name}@{base.version}. Review\n"
        "# it with `prunewarden policy diff` against the base, lock it, and run it as a shadow\n"
        "# first (docs/fidelity.md).\n"
    )
    if base_outside(base_ref):
        header += (
            "# Its base is outside this file's folder: load it with `prunewarden --base-dir DIR`,\n"
            "# DIR the folder of the base (calibrate printed the command).\n"
        )
    return header
