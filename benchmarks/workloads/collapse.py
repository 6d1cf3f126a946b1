"""Collapse at 40 / 200 / 1,000 / 10,000 entries per snapshot.

Each call decides three histories of three snapshots: one collapsed with its canary dropped
(halt, ``collapse_detected``), one homogeneous with a healthy canary (``canary_healthy``) and one
with a healthy spread (``spread_healthy``). The reference is the source document's
``detect_collapse``, with ``statistics.pstdev`` and ``statistics.median``, returning the verdict
instead of raising.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from benchmarks.common import default_engine, document_stages
from benchmarks.harness import Case, Verdict, Workload, register

SIZES = (40, 200, 1_000, 10_000)
# The target: at 200 entries, at most half the reference's time.
TARGETS = {200: 0.5}

# The source document's constants, which the bundled default policy carries.
SPREAD_FLOOR = 0.08
CANARY_MARGIN = 0.25
REQUIRED_CONSECUTIVE = 2


def reference(documents: Sequence[Mapping[str, Any]]) -> list[Verdict]:
    """The seed code: ``statistics.pstdev`` (exact, with fractions) and ``statistics.median``."""
    return [
        _detect_collapse(doc["history"], doc.get("baseline"), statistics.pstdev)
        for doc in documents
    ]


def fsum_pstdev(values: Sequence[float]) -> float:
    """The population standard deviation as the engine computes it (``math.fsum``, two
    passes): a reference written as well as the engine's own code."""
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum([(v - mean) ** 2 for v in values]) / len(values))


def fast_reference(documents: Sequence[Mapping[str, Any]]) -> list[Verdict]:
    """The seed code with :func:`fsum_pstdev` in place of ``statistics.pstdev``."""
    return [_detect_collapse(doc["history"], doc.get("baseline"), fsum_pstdev) for doc in documents]


def _detect_collapse(
    history: Sequence[Mapping[str, Any]],
    baseline: Mapping[str, float] | None,
    pstdev: Any,
) -> Verdict:
    if len(history) < REQUIRED_CONSECUTIVE + 1:
        return ("allow", ("insufficient_history",), None)
    recent = history[-REQUIRED_CONSECUTIVE:]
    spread_collapsed = all(pstdev(list(s["scores"].values())) < SPREAD_FLOOR for s in recent)
    if not spread_collapsed:
        return ("allow", ("spread_healthy",), None)
    last = recent[-1]
    pinned_ids = set(last.get("pinned", ()))
    if not pinned_ids:
        return ("halt", ("no_canary",), None)
    if baseline is None:
        baseline = history[0]["scores"]
    for pid in pinned_ids:
        if pid not in last["scores"] or pid not in baseline:
            return ("halt", ("canary_missing",), None)
    live = [v for k, v in last["scores"].items() if k not in pinned_ids]
    median_live = statistics.median(live) if live else None
    for pid in pinned_ids:
        score = last["scores"][pid]
        below_median = median_live is not None and score < median_live
        if below_median or baseline[pid] - score > CANARY_MARGIN:
            return ("halt", ("collapse_detected",), None)
    return ("allow", ("canary_healthy",), None)


def documents(entries: int) -> list[dict[str, Any]]:
    """Three histories with ``entries`` scores per snapshot (the pinned canary ``task`` among
    them), deterministic for a given size."""
    rng = random.Random(entries)
    ids = [f"turn-{i:05d}" for i in range(entries - 1)]

    def snapshot(cycle: int, canary: float, centre: float, width: float) -> dict[str, Any]:
        scores = {"task": canary}
        scores.update({i: round(centre + rng.uniform(-width, width), 4) for i in ids})
        return {"cycle": cycle, "scores": scores, "pinned": ["task"]}

    def history(*snapshots: dict[str, Any]) -> dict[str, Any]:
        return {"check": "collapse", "history": list(snapshots)}

    return [
        # The canary fell 0.9 -> 0.55 while the rest narrowed around 0.5.
        history(
            snapshot(1, 0.9, 0.5, 0.45), snapshot(2, 0.62, 0.5, 0.08), snapshot(3, 0.55, 0.5, 0.08)
        ),
        # Narrow, but the canary holds its rank and stays within the margin.
        history(
            snapshot(1, 0.85, 0.5, 0.45), snapshot(2, 0.7, 0.5, 0.08), snapshot(3, 0.7, 0.5, 0.08)
        ),
        # A wide spread: nothing to see.
        history(
            snapshot(1, 0.9, 0.5, 0.45), snapshot(2, 0.9, 0.5, 0.45), snapshot(3, 0.9, 0.5, 0.45)
        ),
    ]


def build(entries: int, fast: bool = False) -> Case:
    docs = documents(entries)
    engine = default_engine(f"collapse-{entries}")
    return Case(
        decisions=len(docs),
        engine=lambda: [engine.evaluate(d) for d in docs],
        reference=partial(fast_reference if fast else reference, docs),
        stages=document_stages(engine, docs),
    )


for _size in SIZES:
    register(
        Workload(
            f"collapse/{_size}",
            partial(build, _size),
            target=TARGETS.get(_size),
            description=f"3 histories of 3 snapshots x {_size} entries, engine.evaluate each",
        )
    )
register(
    Workload(
        "collapse/200/fsum-reference",
        partial(build, 200, fast=True),
        description="collapse/200 against the seed code with an fsum-based pstdev",
    )
)
