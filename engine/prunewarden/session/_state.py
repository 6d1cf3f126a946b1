"""A session's history as one immutable value, and as the document ``session-state.v4``.

A :class:`History` is everything a session keeps between calls: the last few snapshots and
turns (sized by the policy's windows), each canary's baseline, the spreads of the first cycles,
the segments a custom rule pinned, the cusum spread test's sum and run, the halt in force, and
the ids it has seen pinned in a transition (which stay pinned, whatever a later edit claims).
The session swaps in a new value on every change, so a snapshot of it (``Session.state()``) is
always whole, and a store can write exactly what a decision saw.

A history kept under one policy can be carried over to another (a reload, or a restore after a
deploy): :func:`fit_history` keeps each part the new policy's windows can use and says why it
drops the others. The halt is never dropped: only a later cycle that passes the collapse guard
lifts it. Rule pins always are: each was authorized by a rule of the policy that made it, so the
new policy's rules decide those segments afresh.

Only the current version is read: a document of a version written before the first release
(1 to 3) is refused with one problem naming its version (:func:`read_state`). A field added to
version 4 later is optional, read with ``document.get`` and its default where the state is
typed, so a version 4 document written before it still reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from prunewarden import _schemas
from prunewarden._cusum import CusumTrack, Step, advance, log_reference
from prunewarden._identity import PolicyIdentity
from prunewarden._json import canonical_digest
from prunewarden._source import Parsed
from prunewarden.errors import Problem, SessionStateError
from prunewarden.inputs import ScoreRange, Snapshot, Turn
from prunewarden.limits import MAX_ENTRIES
from prunewarden.policy import Calibration, Policy
from prunewarden.scoring import text_sha256

STATE_VERSION = 4
# Written before the first release, and no longer read.
RETIRED_VERSIONS = (1, 2, 3)
STATE_FILENAME = "<session-state>"
PARTS = ("snapshots", "baseline", "early_spreads", "turns", "halt")


@dataclass(frozen=True, slots=True)
class Halt:
    """The enforced collapse decision that halted pruning, as the gate names it."""

    decision_id: str
    code: str
    cycle: int | None
    policy: str  # the digest of the policy that halted

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision_id": self.decision_id,
            "code": self.code,
            "cycle": self.cycle,
            "policy": self.policy,
        }


@dataclass(frozen=True, slots=True)
class RulePins:
    """The segments custom rules pinned, each bound to the text that was pinned, under the
    policy (by digest) whose rules pinned them."""

    policy: str | None = None
    segments: Mapping[str, str] = field(default_factory=dict)  # id -> text digest

    def holds(self, segment_id: str, text: str) -> bool:
        """The segment was pinned with this very text."""
        pinned = self.segments.get(segment_id)
        return pinned is not None and pinned == _pin_digest(text)

    def with_pins(self, policy: str, pins: Mapping[str, str], limit: int = MAX_ENTRIES) -> RulePins:
        """These pins and ``pins`` (id -> text) made under ``policy``; past ``limit``, the
        earliest pins are forgotten (such a segment is decided again, and pinned again)."""
        segments = dict(self.segments) if self.policy == policy else {}
        for segment_id, text in pins.items():
            segments.pop(segment_id, None)
            segments[segment_id] = _pin_digest(text)
        for segment_id in list(segments)[: max(len(segments) - limit, 0)]:
            del segments[segment_id]
        return RulePins(policy, segments)


def _pin_digest(text: str) -> str:
    """A pinned text as the state names it: the binding hash a scorer writes, prefixed."""
    return "sha256:" + text_sha256(text)


@dataclass(frozen=True, slots=True)
class History:
    """What a session has kept so far; replaced whole on every change."""

    snapshots: tuple[Snapshot, ...] = ()
    # Each canary's score when first seen pinned, for the session's whole life.
    baseline: Mapping[str, float] = field(default_factory=dict)
    # A relative spread floor's reference: the spreads of the first cycles, on ``spread_scale``.
    early_spreads: tuple[float, ...] = ()
    spread_scale: Calibration | None = None
    cycles_seen: int = 0
    turns: tuple[Turn, ...] = ()
    rule_pins: RulePins = field(default_factory=RulePins)
    halt: Halt | None = None
    # The cusum spread test's sum and run, valid under the settings ``cusum_basis`` names.
    cusum: CusumTrack = field(default_factory=CusumTrack)
    cusum_basis: str | None = None
    # Every id seen pinned in a transition's before (a pinned kind, non_recoverable), oldest
    # first: pinned by id from then on, so relabelling it between two edits unpins nothing.
    seen_pinned: tuple[str, ...] = ()

    def with_seen_pinned(self, ids: Iterable[str], limit: int = MAX_ENTRIES) -> History:
        """This history having seen ``ids`` pinned; past ``limit``, the earliest are forgotten."""
        known = set(self.seen_pinned)
        new = [i for i in dict.fromkeys(ids) if i not in known]
        if not new:
            return self
        return replace(self, seen_pinned=(*self.seen_pinned, *new)[-limit:])


def cusum_basis(policy: Policy) -> str | None:
    """What a cusum track is only valid under: the policy's cusum settings, the consecutive
    cycles and minimum entries that decide which cycles count, and the scale spreads are
    measured on (None: the policy has no cusum spread test)."""
    collapse = policy.spec.collapse
    if collapse.cusum is None:
        return None
    scale = policy.spec.calibration
    return canonical_digest(
        {
            "cusum": collapse.cusum.to_dict(),
            "consecutive_cycles": collapse.consecutive_cycles,
            "min_live_entries": collapse.min_live_entries,
            "scale": scale.to_dict() if scale is not None else None,
        }
    )


@dataclass(frozen=True, slots=True)
class Fitted:
    """A history carried over to a policy: what was kept, and why the rest was dropped."""

    history: History
    kept: tuple[str, ...]
    dropped: Mapping[str, str]


def remember_baseline(
    baseline: Mapping[str, float], snapshot: Snapshot, limit: int = MAX_ENTRIES
) -> dict[str, float]:
    """The baselines after ``snapshot``: a canary pinned for the first time gets its score now;
    every other keeps the one it had, pinned now or not. Past ``limit`` canaries, those not
    pinned now are forgotten, the earliest first."""
    updated = dict(baseline)
    for canary in snapshot.pinned:
        if canary not in updated and canary in snapshot.scores:
            updated[canary] = snapshot.scores[canary]
    if len(updated) > limit:
        pinned = set(snapshot.pinned)
        spare = [c for c in updated if c not in pinned][: len(updated) - limit]
        for canary in spare:
            del updated[canary]
    return updated


def advance_cusum(
    history: History,
    policy: Policy,
    snapshot: Snapshot,
    early: tuple[float, ...],
    spread: Callable[[Snapshot], float],
) -> tuple[CusumTrack | None, str | None]:
    """The cusum track after ``snapshot`` (its spread on the judged scale by ``spread``, the
    session's first judgeable spreads ``early``, this cycle's included when it is one), and the
    basis it is valid under; (None, None) without
    the cusum spread test. What :func:`prunewarden._cusum.replay` computes over the session's
    whole history, one cycle at a time."""
    basis = cusum_basis(policy)
    settings = policy.spec.collapse
    parameters = settings.cusum_parameters()
    if basis is None or parameters is None:
        return None, None
    track = history.cusum if history.cusum_basis == basis else CusumTrack()
    ordinal = history.cycles_seen + 1
    if ordinal <= settings.consecutive_cycles:
        return track, basis
    if len(snapshot.scores) < settings.min_live_entries:
        return track.reset_run(), basis
    reference = log_reference(parameters, early, len(early))
    return advance(track, parameters, snapshot.cycle, spread(snapshot), reference), basis


def state_document(
    history: History, policy: PolicyIdentity, session_id: str | None, labels: Mapping[str, str]
) -> dict[str, Any]:
    """The ``session-state.v4`` document of a history (JSON values only)."""
    return {
        "state_version": STATE_VERSION,
        "session_id": session_id,
        "labels": dict(labels),
        # The content the history was kept under, not the bundle it came in: a state moves
        # between revisions of one content unchanged.
        "policy": {"name": policy.name, "version": policy.version, "digest": policy.digest},
        "cycles_seen": history.cycles_seen,
        "snapshots": [
            {"cycle": s.cycle, "scores": dict(s.scores), "pinned": list(s.pinned)}
            for s in history.snapshots
        ],
        "baseline": dict(history.baseline),
        "early_spreads": {
            "scale": history.spread_scale.to_dict() if history.spread_scale else None,
            "values": list(history.early_spreads),
        },
        "turns": [
            {"turn": t.turn, "mean_relevance": t.mean_relevance, "tokens": t.tokens}
            for t in history.turns
        ],
        "rule_pins": {
            "policy": history.rule_pins.policy,
            "segments": dict(history.rule_pins.segments),
        },
        "halt": history.halt.to_dict() if history.halt is not None else None,
        "cusum": _cusum_document(history),
        "seen_pinned": list(history.seen_pinned),
    }


def _cusum_document(history: History) -> dict[str, Any]:
    """The cusum part of the state: with a tracking reference, its ln R and how many cycles
    moved it (absent under the early reference, as in documents written before it)."""
    track = history.cusum
    document: dict[str, Any] = {
        "basis": history.cusum_basis,
        "sum": track.total,
        "run": [_step_document(step) for step in track.run],
    }
    if track.tracked is not None:
        document["reference"] = {"log_reference": track.tracked, "updates": track.updates}
    return document


def _step_document(step: Step) -> dict[str, Any]:
    return {
        "cycle": step.cycle,
        "log_reference": step.log_reference,
        "reference_cycles": step.reference_cycles,
        "log_ratio": step.log_ratio,
        "increment": step.increment,
    }


@dataclass(frozen=True, slots=True)
class RestoredState:
    """A validated state document, typed."""

    history: History
    policy: PolicyIdentity
    session_id: str | None
    labels: dict[str, str]


def read_state(document: Any, filename: str = STATE_FILENAME) -> RestoredState:
    """Validate a ``session-state.v4`` document and type it, or raise
    :class:`SessionStateError` with every problem located (one, naming the version, for a
    version written before the first release)."""
    parsed = Parsed(document, filename)
    version = document.get("state_version") if isinstance(document, Mapping) else None
    if type(version) is int and version in RETIRED_VERSIONS:
        message = (
            f"session-state version {version} was written before the first release and is no "
            f"longer read (only version {STATE_VERSION}): delete the state and start the session "
            "afresh"
        )
        raise SessionStateError([Problem(filename, 0, 0, "$.state_version", message)])
    schema = _schemas.validator("session-state")
    problems = _schemas.problems_of(schema.iter_errors(document), parsed)
    if not problems:
        problems = list(_order_problems(document, filename))
    if problems:
        raise SessionStateError(problems)
    spreads = document["early_spreads"]
    scale = spreads["scale"]
    halt = document["halt"]
    pins = document["rule_pins"]
    cusum = document["cusum"]
    tracked = cusum.get("reference")
    history = History(
        snapshots=tuple(
            Snapshot(s["cycle"], dict(s["scores"]), tuple(s.get("pinned", ())))
            for s in document["snapshots"]
        ),
        baseline=dict(document["baseline"]),
        early_spreads=tuple(float(v) for v in spreads["values"]),
        spread_scale=Calibration(scale["low"], scale["high"]) if scale is not None else None,
        cycles_seen=document["cycles_seen"],
        turns=tuple(Turn(t["turn"], t["mean_relevance"], t["tokens"]) for t in document["turns"]),
        rule_pins=RulePins(pins["policy"], dict(pins["segments"])),
        halt=Halt(halt["decision_id"], halt["code"], halt["cycle"], halt["policy"])
        if halt is not None
        else None,
        cusum=CusumTrack(
            float(cusum["sum"]),
            tuple(
                Step(
                    r["cycle"],
                    float(r["log_reference"]),
                    r["reference_cycles"],
                    float(r["log_ratio"]),
                    float(r["increment"]),
                )
                for r in cusum["run"]
            ),
            float(tracked["log_reference"]) if tracked is not None else None,
            tracked["updates"] if tracked is not None else 0,
        ),
        cusum_basis=cusum["basis"],
        seen_pinned=tuple(document["seen_pinned"]),
    )
    return RestoredState(
        history,
        PolicyIdentity(**document["policy"]),
        document["session_id"],
        dict(document["labels"]),
    )


def _order_problems(document: Mapping[str, Any], filename: str) -> Iterable[Problem]:
    for name, key in (("snapshots", "cycle"), ("turns", "turn")):
        numbers = [entry[key] for entry in document[name]]
        for index in range(1, len(numbers)):
            if numbers[index] <= numbers[index - 1]:
                message = f"{numbers[index]} does not follow {key} {numbers[index - 1]}"
                yield Problem(filename, 0, 0, f"$.{name}[{index}].{key}", message)
    if len(document["snapshots"]) > document["cycles_seen"]:
        message = "fewer cycles seen than snapshots kept"
        yield Problem(filename, 0, 0, "$.cycles_seen", message)


def fit_history(history: History, policy: Policy) -> Fitted:
    """``history`` as ``policy`` can use it: each window cut to the policy's size, and each part
    the policy cannot use dropped, with the reason. The halt always carries over; rule pins
    only to the policy that made them."""
    spec = policy.spec
    dropped: dict[str, str] = {}
    snapshots = history.snapshots[-(spec.collapse.consecutive_cycles + 1) :]
    outside = _outside(spec.scores, (v for s in snapshots for v in s.scores.values()))
    if outside:
        dropped["snapshots"] = outside
        snapshots = ()
    baseline = history.baseline
    outside = _outside(spec.scores, baseline.values())
    if outside:
        dropped["baseline"] = outside
        baseline = {}
    early, scale = _fit_early_spreads(history, policy, dropped)
    track, basis = history.cusum, cusum_basis(policy)
    if history.cusum_basis != basis:
        if track != CusumTrack():
            dropped["cusum"] = (
                "the cusum sum was accumulated under other cusum settings: it starts again at 0"
            )
        track = CusumTrack()
    turns = history.turns[-(spec.staleness.drift_consecutive_turns + 1) :]
    outside = _outside(spec.scores, (t.mean_relevance for t in turns))
    if outside:
        dropped["turns"] = outside
        turns = ()
    pins = history.rule_pins
    if pins.segments and pins.policy != policy.digest:
        dropped["rule_pins"] = (
            f"{len(pins.segments)} segment(s) pinned by rules of another policy: "
            "this policy's rules decide them afresh"
        )
        pins = RulePins()
    fitted = replace(
        history,
        snapshots=snapshots,
        baseline=baseline,
        early_spreads=early,
        spread_scale=scale,
        turns=turns,
        rule_pins=pins,
        cusum=track,
        cusum_basis=basis,
    )
    kept = tuple(part for part in PARTS if part not in dropped)
    return Fitted(fitted, kept, dropped)


def _fit_early_spreads(
    history: History, policy: Policy, dropped: dict[str, str]
) -> tuple[tuple[float, ...], Calibration | None]:
    """The first spreads the policy's spread test reads (relative floor or cusum reference),
    and their scale; dropped (with the reason in ``dropped``) when they cannot serve it."""
    spec = policy.spec
    early, scale = history.early_spreads, history.spread_scale
    early_cycles = spec.collapse.early_cycles
    if not early_cycles:
        return early, scale
    # the cusum reference keeps judgeable cycles only: fewer than the cycles seen is no loss
    needed = min(history.cycles_seen, early_cycles) if spec.collapse.cusum is None else 0
    if scale != spec.calibration:
        dropped["early_spreads"] = "the early spreads were measured on another calibration"
    elif len(early) < needed:
        setting = (
            "relative_to.first_cycles"
            if spec.collapse.spread_floor_mode == "relative"
            else "cusum.reference.first_cycles"
        )
        dropped["early_spreads"] = (
            f"{needed} early spreads are needed ({setting}), {len(early)} were kept"
        )
    if "early_spreads" in dropped:
        early, scale = (), spec.calibration
    return early[:early_cycles], scale


def refuse_dropped(fitted: Fitted, policy: Policy, filename: str = STATE_FILENAME) -> None:
    """Raise :class:`SessionStateError` when a restore would drop part of the state the new
    policy needs (rule pins are not: their segments are decided again)."""
    needed = {part: why for part, why in fitted.dropped.items() if part in PARTS}
    if not needed:
        return
    identity = f"{policy.name}@{policy.version}"
    raise SessionStateError(
        [
            Problem(filename, 0, 0, f"$.{part}", f"cannot be used under {identity}: {why}")
            for part, why in needed.items()
        ]
    )


def _outside(scores: ScoreRange, values: Iterable[float]) -> str | None:
    for value in values:
        if not scores.min <= value <= scores.max:
            return f"{value!r} is outside the policy's score range [{scores.min}, {scores.max}]"
    return None
