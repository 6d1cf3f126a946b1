"""Eviction: never let a self-scored number delete a segment the scorer cannot re-derive.

Every failed condition is reported, in a fixed order; the first is the primary reason. Each comes
with the remediation that would make the eviction admissible.
"""

from __future__ import annotations

from collections.abc import Iterator

from prunewarden.decision import Action, Reason, Verdict
from prunewarden.inputs import EvictionRequest
from prunewarden.policy import EvictionSettings


def evaluate(settings: EvictionSettings, request: EvictionRequest) -> Verdict:
    findings = list(_findings(settings, request))
    if not findings:
        reason = Reason(
            "authorized",
            f"segment {request.segment.id!r} is scoreable, stable and tombstoned",
            _margin(settings, request),
        )
        return Verdict(False, [reason])
    actions: list[Action] = []
    for _, action in findings:
        if action not in actions:
            actions.append(action)
    return Verdict(True, [reason for reason, _ in findings], actions)


def _margin(s: EvictionSettings, r: EvictionRequest) -> dict[str, object]:
    """What an allowed eviction rested on, so the log alone can re-derive it."""
    detail: dict[str, object] = {
        "segment": r.segment.id,
        "score": r.score,
        "perturbed_score": r.perturbed_score,
        "stability_delta": s.stability_delta,
    }
    if r.perturbed_score is not None:
        detail["delta"] = abs(r.score - r.perturbed_score)
    return detail


def _findings(s: EvictionSettings, r: EvictionRequest) -> Iterator[tuple[Reason, Action]]:
    seg = r.segment
    own = (seg.id,)
    if seg.kind in s.pinned_kinds or seg.non_recoverable:
        why = f"kind {seg.kind!r}" if seg.kind in s.pinned_kinds else "non-recoverable"
        yield (
            Reason(
                "pinned",
                f"segment {seg.id!r} is pinned ({why}); score {r.score:.2f} cannot authorize "
                "deleting a non-recoverable disambiguator",
                {"segment": seg.id, "kind": seg.kind, "non_recoverable": seg.non_recoverable},
            ),
            Action("pin", own),
        )

    pending = sorted({d for d in seg.score_dependencies if d in r.eviction_candidates} - {seg.id})
    if pending:
        yield (
            Reason(
                "unscoreable",
                f"segment {seg.id!r} was scored against segments also slated for eviction: "
                f"{', '.join(pending)}",
                {"segment": seg.id, "dependencies": pending},
            ),
            Action("resolve_dependencies_first", tuple(pending)),
        )

    if r.perturbed_score is None:
        if s.require_perturbation:
            yield (
                Reason(
                    "perturbation_missing",
                    f"segment {seg.id!r} has no perturbed score, so its stability is unknown",
                    {"segment": seg.id},
                ),
                Action("rescore", own),
            )
    elif abs(r.score - r.perturbed_score) > s.stability_delta:
        yield (
            Reason(
                "unstable_score",
                f"segment {seg.id!r} score moved {r.score:.2f} -> {r.perturbed_score:.2f} under "
                f"perturbation, more than {s.stability_delta}",
                {
                    "segment": seg.id,
                    "score": r.score,
                    "perturbed_score": r.perturbed_score,
                    "delta": abs(r.score - r.perturbed_score),
                    "stability_delta": s.stability_delta,
                },
            ),
            Action("rescore", own),
        )

    if s.require_tombstone and not seg.tombstone_written:
        yield (
            Reason(
                "no_tombstone",
                f"segment {seg.id!r} has no tombstone; its eviction would be undetectable",
                {"segment": seg.id},
            ),
            Action("write_tombstone", own),
        )
