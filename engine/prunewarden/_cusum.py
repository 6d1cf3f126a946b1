"""The capped CUSUM of the collapse guard's cusum spread test, as pure arithmetic on spreads.

With n = ``consecutive_cycles``, k the slack, h the threshold and s_c a cycle's spread (floored at
:data:`SPREAD_FLOOR` before logs), each judged cycle c (c >= n + 1, counted from the session's
first cycle) adds u_c = ln(R_c / s_c) - k, at most h / n, to a sum floored at 0:
S_c = max(0, S_{c-1} + min(u_c, h / n)). The reference R_c is the geometric mean of the spreads
of the session's first min(first_cycles, J_c - n) judgeable cycles E_c (cycles with at least
``min_live_entries`` entries; J_c of them up to c), shrunk toward a prior: ln R_c =
(w * mu + sum ln s_e) / (w + |E_c|). A cycle too small to judge (a buffer of two entries can
spread 0) stays out of the reference, as it stays out of the sum. Signal A holds when S_c >= h
and each of the last n increments was positive; the cap makes sure no single cycle can raise it.

With ``reference.mode: tracking`` the reference follows the session's healthy drift: once the
early reference is complete (|E_c| = first_cycles), each judged cycle that adds no evidence
(u_c <= 0, so ln s_c >= ln R - k) moves it: ln R <- ln R + a * min(ln s_c - ln R, k), with a
the ``rate``. A cycle that adds evidence leaves it where it was, so a squeeze is judged against
the spread before it and a collapse is never followed; one cycle moves it by at most a * k.
The tracked ln R and the number of cycles that moved it live in the track (and in a session's
state).

A session advances a :class:`CusumTrack` one cycle at a time and keeps it; a stateless document
recomputes it over its history with :func:`replay`. Both go through :func:`advance`, so they agree.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

SPREAD_FLOOR = 1e-6  # a spread of 0 has no logarithm; below this, every spread is alike


@dataclass(frozen=True, slots=True)
class CusumParameters:
    """What the arithmetic reads of a policy (``spec.collapse`` and its ``cusum`` block)."""

    consecutive_cycles: int
    slack: float
    threshold: float
    first_cycles: int
    prior_log_spread: float
    prior_weight: float
    reference_mode: str = "early"  # or "tracking"
    rate: float = 0.0  # the tracking reference's a

    @property
    def tracking(self) -> bool:
        return self.reference_mode == "tracking"

    @property
    def early_cycles(self) -> int:
        """How many first judgeable spreads a session keeps: the reference's, and the judged
        window's beyond them (which tell how many judgeable cycles came before it)."""
        return self.first_cycles + self.consecutive_cycles

    @property
    def cap(self) -> float:
        """The most one cycle can add: h / n."""
        return self.threshold / self.consecutive_cycles


@dataclass(frozen=True, slots=True)
class Step:
    """One judged cycle's evidence."""

    cycle: int
    log_reference: float
    reference_cycles: int  # |E_c|
    log_ratio: float  # ln(R_c / s_c)
    increment: float  # u_c = log_ratio - k, before the cap

    def to_dict(self) -> dict[str, float | int]:
        return {"cycle": self.cycle, "log_ratio": self.log_ratio, "increment": self.increment}


@dataclass(frozen=True, slots=True)
class CusumTrack:
    """The sum S after the last judged cycle and the run: the last (at most n) steps since the
    last reset (a cycle with too few entries resets it, and leaves S as it was); under the
    tracking reference, the tracked ln R (None until the early reference is complete) and how
    many cycles moved it."""

    total: float = 0.0
    run: tuple[Step, ...] = ()
    tracked: float | None = None
    updates: int = 0

    def signal(self, parameters: CusumParameters) -> bool:
        """Signal A: S reached the threshold and each of the last n increments was positive."""
        n = parameters.consecutive_cycles
        return (
            self.total >= parameters.threshold
            and len(self.run) >= n
            and all(step.increment > 0 for step in self.run[-n:])
        )

    def reset_run(self) -> CusumTrack:
        return CusumTrack(self.total, (), self.tracked, self.updates)


def log_spread(spread: float) -> float:
    return math.log(max(spread, SPREAD_FLOOR))


def log_reference(
    parameters: CusumParameters, early_spreads: Sequence[float], judgeable: int
) -> tuple[float, int]:
    """ln R_c for a cycle that is the session's ``judgeable``-th judgeable one, from the spreads
    of its first judgeable cycles, and how many of them it used (those before the judged
    window). With no prior weight and no early cycle (a session that lost them), the prior
    alone."""
    before_window = judgeable - parameters.consecutive_cycles
    used = early_spreads[: max(0, min(parameters.first_cycles, before_window))]
    weight = parameters.prior_weight + len(used)
    if weight <= 0:
        return parameters.prior_log_spread, 0
    own = math.fsum(log_spread(spread) for spread in used)
    return (parameters.prior_weight * parameters.prior_log_spread + own) / weight, len(used)


def advance(
    track: CusumTrack,
    parameters: CusumParameters,
    cycle: int,
    spread: float,
    reference: tuple[float, int],
) -> CusumTrack:
    """The track after one judged cycle of spread ``spread`` against ``reference`` (ln R_c and
    |E_c|, from :func:`log_reference`; under the tracking reference, the tracked ln R once
    there is one)."""
    tracking = parameters.tracking
    own = log_spread(spread)
    log_ref = track.tracked if tracking and track.tracked is not None else reference[0]
    log_ratio = log_ref - own
    increment = log_ratio - parameters.slack
    total = max(0.0, track.total + min(increment, parameters.cap))
    step = Step(cycle, log_ref, reference[1], log_ratio, increment)
    run = (*track.run, step)[-parameters.consecutive_cycles :]
    if not tracking or reference[1] < parameters.first_cycles:
        return CusumTrack(total, run, track.tracked, track.updates)
    if increment > 0:  # evidence of a squeeze: the reference stays where it was
        return CusumTrack(total, run, log_ref, track.updates)
    k = parameters.slack
    moved = log_ref + parameters.rate * min(own - log_ref, k)  # own >= log_ref - k here
    return CusumTrack(total, run, moved, track.updates + 1)


def replay(
    parameters: CusumParameters,
    cycles: Sequence[tuple[int, float, bool]],
) -> CusumTrack:
    """The track after ``cycles`` (each ``(cycle, spread, judgeable)``, the session's first
    cycle first): the first n cycles only make the reference; a cycle that is not judgeable
    (too few entries) leaves S as it was and resets the run."""
    last = deque(tracks(parameters, cycles), maxlen=1)
    return last[0] if last else CusumTrack()


def tracks(
    parameters: CusumParameters,
    cycles: Sequence[tuple[int, float, bool]],
) -> Iterator[CusumTrack]:
    """The track after each of ``cycles``, as :func:`replay` computes the last."""
    spreads = [spread for _, spread, judgeable in cycles if judgeable][: parameters.early_cycles]
    track = CusumTrack()
    judged = 0
    for ordinal, (cycle, spread, judgeable) in enumerate(cycles, start=1):
        judged += judgeable
        if ordinal <= parameters.consecutive_cycles:
            pass
        elif not judgeable:
            track = track.reset_run()
        else:
            reference = log_reference(parameters, spreads, judged)
            track = advance(track, parameters, cycle, spread, reference)
        yield track


def references(
    parameters: CusumParameters, cycles: Sequence[tuple[int, float, bool]]
) -> list[float | None]:
    """For each cycle after the first n, as :func:`tracks` judges it: the ln R it is judged
    against, or None where it is not judgeable (the run resets). What does not depend on the
    slack, so that :func:`signal_at` can try many: the early reference only (a tracking
    reference moves with the sum, so with the slack)."""
    spreads = [spread for _, spread, judgeable in cycles if judgeable][: parameters.early_cycles]
    found: list[float | None] = []
    judged = 0
    for ordinal, (_, _, judgeable) in enumerate(cycles, start=1):
        judged += judgeable
        if ordinal > parameters.consecutive_cycles:
            found.append(log_reference(parameters, spreads, judged)[0] if judgeable else None)
    return found


def signal_at(
    parameters: CusumParameters,
    judged: Sequence[tuple[float | None, float]],
    slack: float,
) -> bool:
    """Signal A of the track :func:`replay` gives, for ``judged`` (each cycle after the first n:
    its reference from :func:`references` and its spread) under ``slack``: the same arithmetic
    as :func:`advance` and :meth:`CusumTrack.signal`, without building the track."""
    n, cap = parameters.consecutive_cycles, parameters.cap
    total, run = 0.0, deque[float](maxlen=n)
    for reference, spread in judged:
        if reference is None:
            run.clear()
            continue
        increment = (reference - log_spread(spread)) - slack
        total = max(0.0, total + min(increment, cap))
        run.append(increment)
    return total >= parameters.threshold and len(run) >= n and all(i > 0 for i in run)
