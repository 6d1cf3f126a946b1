"""What a plot shows, gathered without drawing: the series of a trace replayed under policies.

A trace is replayed once more for its plot, through sessions that log nothing, and the values
the guards judged are kept per cycle and per turn: the spread of the cycle's scores and the floor
it was held against (on the scale the guard judges, so a calibrated policy plots its calibrated
spread), each pinned canary's score against the median of the other entries, the outcome of the
collapse decision, and per turn the mean relevance and tokens with the drift signal's steps. The
series hold one value per cycle and turn, not the scores themselves.

Nothing here imports matplotlib: the series are plain values, tested on their own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prunewarden._identity import PolicyIdentity
from prunewarden._stats import median, pstdev
from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import Problem
from prunewarden.planner import Plan
from prunewarden.policy import Policy
from prunewarden.replay import SilentLogger, TraceEvent, TraceHeader, compare, run_trace

EventResult = Decision | Plan | None  # what a session call gives for one event
MAX_CANARIES = 3  # canaries drawn per trace; more would hide the median they are compared with


@dataclass(frozen=True, slots=True)
class CyclePoint:
    """One cycle as the collapse guard judged it under one policy."""

    cycle: int
    spread: float
    floor: float | None  # None while a relative floor has no early spreads yet
    canaries: dict[str, float]
    median_others: float | None
    outcome: str
    enforced: bool

    @property
    def halted(self) -> bool:
        return self.outcome == "halt"


@dataclass(frozen=True, slots=True)
class TurnPoint:
    """One turn, and whether it continued the drift signal (tokens fell while mean relevance
    rose by more than the tolerance): ``inflating`` when the last ``drift_consecutive_turns``
    steps all did, the staleness guard's relevance-inflation finding."""

    turn: int
    mean_relevance: float
    tokens: int
    drifting: bool
    inflating: bool


@dataclass(frozen=True, slots=True)
class EventPoint:
    """A decided event: each policy's outcome, and whether their decisions differ."""

    event: int
    line: int
    check: str
    outcomes: tuple[str, ...]
    differs: bool


@dataclass(slots=True)
class PolicySeries:
    """What one policy judged along a trace, cycle by cycle."""

    identity: PolicyIdentity
    floor_mode: str
    cycles: list[CyclePoint] = field(default_factory=list)


@dataclass(slots=True)
class TraceSeries:
    """A trace's series under one policy (replay) or two (base and candidate: diff)."""

    trace: str
    policies: list[PolicySeries]
    session_id: str | None = None
    turns: list[TurnPoint] = field(default_factory=list)
    events: list[EventPoint] = field(default_factory=list)
    problems: tuple[Problem, ...] = ()
    failure: str = ""

    @property
    def differing(self) -> list[EventPoint]:
        return [event for event in self.events if event.differs]


class _Judge:
    """One policy's view of the cycles: its scale, its floor, its canaries' context."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.settings = policy.spec.collapse
        self.early: list[float] = []
        self.series = PolicySeries(policy.identity, self.settings.spread_floor_mode)

    def scaled(self, scores: Mapping[str, float]) -> dict[str, float]:
        scale = self.policy.spec.calibration
        if scale is None:
            return {key: float(value) for key, value in scores.items()}
        return {key: scale.apply(float(value)) for key, value in scores.items()}

    def add(self, event: TraceEvent, decision: Decision) -> None:
        arguments = event.arguments()
        scores = self.scaled(arguments["scores"])
        spread = pstdev(scores.values()) if scores else 0.0
        if len(self.early) < self.settings.relative_first_cycles:
            self.early.append(spread)
        pinned = [key for key in arguments.get("pinned", ()) if key in scores]
        others = [value for key, value in scores.items() if key not in pinned]
        point = CyclePoint(
            cycle=event.cycle if event.cycle is not None else len(self.series.cycles) + 1,
            spread=spread,
            floor=self.floor(decision),
            canaries={key: scores[key] for key in pinned[:MAX_CANARIES]},
            median_others=median(others) if others else None,
            outcome=decision.outcome,
            enforced=decision.enforced,
        )
        self.series.cycles.append(point)

    def floor(self, decision: Decision) -> float | None:
        """The floor the guard held this cycle against: as its reason says where it judged the
        spread, else the floor it would hold (absolute, or relative to the early spreads)."""
        for reason in decision.reasons:
            judged = reason.detail.get("spread_floor")
            if isinstance(judged, int | float):
                return float(judged)
        if self.settings.spread_floor_mode != "relative":
            return self.settings.spread_floor
        if not self.early:
            return None
        return self.settings.spread_floor * math.fsum(self.early) / len(self.early)


class _Turns:
    """The drift signal, step by step, under the (first) policy's staleness settings."""

    def __init__(self, policy: Policy) -> None:
        self.settings = policy.spec.staleness
        self.points: list[TurnPoint] = []
        self.run = 0  # consecutive drifting steps so far

    def add(self, event: TraceEvent) -> None:
        arguments = event.arguments()
        relevance, tokens = float(arguments["mean_relevance"]), int(arguments["tokens"])
        before = self.points[-1] if self.points else None
        drifting = before is not None and (
            tokens < before.tokens
            and relevance > before.mean_relevance
            and relevance - before.mean_relevance
            > self.settings.drift_tolerance * abs(before.mean_relevance)
        )
        self.run = self.run + 1 if drifting else 0
        number = event.turn if event.turn is not None else len(self.points) + 1
        inflating = self.run >= self.settings.drift_consecutive_turns
        self.points.append(TurnPoint(number, relevance, tokens, drifting, inflating))


def outcome_of(result: Decision | Plan) -> str:
    """A decision's outcome; a pass: ``frozen`` (refused) or ``planned``."""
    if isinstance(result, Plan):
        return "frozen" if result.frozen else "planned"
    return result.outcome


def collect_series(policies: Sequence[Policy], trace: str) -> TraceSeries:
    """Replay ``trace`` under each policy in lockstep, logging nothing, and gather its series.

    Never raises for a malformed trace: the series hold what came before the bad line, and
    ``problems`` says why it stopped.
    """
    engines = [Engine(policy, logger=SilentLogger()) for policy in policies]
    judges = [_Judge(policy) for policy in policies]
    turns = _Turns(policies[0])
    series = TraceSeries(trace, [judge.series for judge in judges])

    def gather(header: TraceHeader, event: TraceEvent, results: list[EventResult]) -> None:  # noqa: ARG001
        if event.type == "turn":
            turns.add(event)
            return
        decided = [result for result in results if result is not None]
        if len(decided) != len(results):  # pragma: no cover - every other event decides
            return
        if event.type == "cycle":
            for judge, result in zip(judges, decided, strict=True):
                if isinstance(result, Decision):
                    judge.add(event, result)
        differs = len(decided) > 1 and compare(event, decided[0], decided[1]) is not None
        check = _check_of(decided[0])
        outcomes = tuple(outcome_of(result) for result in decided)
        series.events.append(EventPoint(event.index, event.line, check, outcomes, differs))

    run = run_trace(engines, trace, gather)
    series.turns = turns.points
    series.problems, series.failure = run.problems, run.failure
    if run.header is not None:
        series.session_id = run.header.session_id
    return series


def _check_of(result: Decision | Plan) -> str:
    if isinstance(result, Plan):
        return "plan"
    return result.check


def identity_label(identity: PolicyIdentity) -> str:
    """``name@version sha256:0123456789ab``: how a plot's title names a policy."""
    return f"{identity.name}@{identity.version} {identity.digest[:19]}"
