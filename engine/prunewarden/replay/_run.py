"""Replay: a recorded session run again under a policy, event by event.

Each trace gets one :class:`~prunewarden.session.Session` (its header's id and labels), and each
event the matching session call. What the session decides is written as one JSON line per event
(``decision`` or, for a pass, ``plan``), counted into a :class:`TraceSummary`, and logged by the
engine's audit sink when it has one. Nothing of a trace is held but the line being replayed and
the session's own bounded state, so a trace of any length replays in constant memory.

Traces are independent: :func:`run_jobs` replays them in worker processes and gives back the same
summaries, in the same order, as a serial run.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from prunewarden.audit import AuditLog, FsyncMode
from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import InputError, Problem
from prunewarden.limits import MAX_PROBLEMS, MAX_TRACE_LINE_BYTES
from prunewarden.planner import Plan
from prunewarden.policy import Policy
from prunewarden.replay._events import TraceEvent, TraceHeader
from prunewarden.replay._trace import TraceReader
from prunewarden.session import Session

Result = Decision | Plan | None


# --------------------------------------------------------------------------------------------
# One event


def apply_event(session: Session, event: TraceEvent) -> Result:
    """Make the session call an event stands for; None for a turn (it decides nothing)."""
    args = event.arguments()
    if event.type == "cycle":
        return session.observe_cycle(args["scores"], args.get("pinned", ()), cycle=event.cycle)
    if event.type == "turn":
        session.observe_turn(args["mean_relevance"], args["tokens"], turn=event.turn)
        return None
    if event.type == "eviction":
        return session.authorize(
            args["segment"],
            args["score"],
            args.get("perturbed_score"),
            args.get("eviction_candidates", ()),
        )
    if event.type == "transition":
        return session.verify(
            args["before"],
            args["after"],
            tombstones=args.get("tombstones", ()),
            applied_by=args.get("applied_by"),
            reported=args.get("reported"),
            canaries=args.get("canaries", ()),
        )
    options = {
        "turn": args.get("turn"),
        "tombstones": args.get("tombstones", ()),
        "recompute_budget": args.get("recompute_budget"),
    }
    if event.type == "prune":
        return session.prune(args["spans"], args["keep_top_k"], **options)
    return session.plan(
        args["segments"],
        free_tokens=args.get("free_tokens"),
        keep_top_k=args.get("keep_top_k"),
        **options,
    )


def apply_located(session: Session, reader: TraceReader, event: TraceEvent) -> Result:
    """:func:`apply_event`, with the session's refusal of the event's arguments located in the
    trace (``FILE:LINE:COL: JSON-PATH: message``)."""
    try:
        return apply_event(session, event)
    except InputError as exc:
        raise InputError(reader.explain(event, exc)) from None
    except (TypeError, ValueError) as exc:  # a value of a shape the session cannot take
        problem = Problem(reader.name, event.line, 1, "$", f"{type(exc).__name__}: {exc}")
        raise InputError(reader.explain(event, InputError([problem]))) from None


def decisions_of(result: Result) -> Sequence[Decision]:
    if result is None:
        return ()
    if isinstance(result, Plan):
        return result.decisions
    return (result,)


def event_record(trace: str, session_id: str, event: TraceEvent, result: Result) -> dict[str, Any]:
    """The line ``--decisions`` gets for one event: where it came from and what was decided."""
    record: dict[str, Any] = {
        "trace": trace,
        "session_id": session_id,
        "event": event.index,
        "line": event.line,
        "type": event.type,
        "cycle": event.cycle,
    }
    if isinstance(result, Plan):
        record["plan"] = result.to_dict()
    elif result is not None:
        record["decision"] = result.to_dict()
    return record


# --------------------------------------------------------------------------------------------
# One trace


@dataclass(frozen=True, slots=True)
class Halt:
    """The first halting decision of a trace: where, at which cycle, and why."""

    event: int
    line: int
    cycle: int | None
    reason: str
    enforced: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "line": self.line,
            "cycle": self.cycle,
            "reason": self.reason,
            "enforced": self.enforced,
        }


@dataclass(slots=True)
class TraceSummary:
    """What replaying one trace decided: counts by check, outcome and reason, and the first halt.

    A reason code counts once per decision that gives it. ``problems`` says why a malformed
    trace stopped (the events before the bad line were replayed and stand); ``failure`` names an
    internal error.
    """

    trace: str
    session_id: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    events: int = 0
    decisions: int = 0
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    reasons: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    first_halt: Halt | None = None
    problems: tuple[Problem, ...] = ()
    failure: str = ""

    @property
    def complete(self) -> bool:
        return not self.problems and not self.failure

    def add(self, event: TraceEvent, result: Result) -> None:
        self.events += 1
        for decision in decisions_of(result):
            self.decisions += 1
            by_outcome = self.outcomes.setdefault(decision.check, {})
            by_outcome[decision.outcome] = by_outcome.get(decision.outcome, 0) + 1
            codes = self.reasons.setdefault(decision.check, {}).setdefault(decision.outcome, {})
            for code in dict.fromkeys(decision.codes):
                codes[code] = codes.get(code, 0) + 1
            if decision.outcome == "halt" and self.first_halt is None:
                self.first_halt = Halt(
                    event.index, event.line, event.cycle, decision.codes[0], decision.enforced
                )

    def count(self, outcome: str) -> int:
        return sum(by_outcome.get(outcome, 0) for by_outcome in self.outcomes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "session_id": self.session_id,
            "labels": self.labels,
            "complete": self.complete,
            "events": self.events,
            "decisions": self.decisions,
            "outcomes": {outcome: self.count(outcome) for outcome in ("allow", "deny", "halt")},
            "checks": {
                check: {
                    outcome: {"count": count, "reasons": self.reasons[check][outcome]}
                    for outcome, count in sorted(by_outcome.items())
                }
                for check, by_outcome in sorted(self.outcomes.items())
            },
            "first_halt": self.first_halt.to_dict() if self.first_halt else None,
            "problems": [str(problem) for problem in self.problems],
            "failure": self.failure or None,
        }


Progress = Callable[[TraceReader], None]
OnEvent = Callable[[TraceHeader, TraceEvent, list[Result]], None]


@dataclass(slots=True)
class TraceRun:
    """How far a trace ran: its header once read, and why it stopped early, if it did."""

    header: TraceHeader | None = None
    problems: tuple[Problem, ...] = ()
    failure: str = ""


def run_trace(
    engines: Sequence[Engine],
    trace: str,
    on_event: OnEvent,
    *,
    progress: Progress | None = None,
    max_line_bytes: int = MAX_TRACE_LINE_BYTES,
) -> TraceRun:
    """Feed each event of ``trace`` to one new session per engine, in lockstep, and hand the
    results to ``on_event``. Never raises for a malformed trace or an internal error: a
    malformed line stops the run (what was replayed before it stands) and the rest of the file
    is checked for more problems."""
    run = TraceRun()
    try:
        reader = TraceReader(
            trace,
            scores=engines[0].policy.spec.scores,
            check_bodies=False,
            max_line_bytes=max_line_bytes,
        )
    except InputError as exc:
        run.problems = exc.problems
        return run
    with reader:
        header = run.header = reader.header
        sessions = [engine.session(header.session_id, header.labels) for engine in engines]
        event: TraceEvent | None = None
        try:
            for event in reader:
                on_event(header, event, [apply_located(s, reader, event) for s in sessions])
                if progress is not None:
                    progress(reader)
        except InputError as exc:
            rest = reader.rest_problems(MAX_PROBLEMS - len(exc.problems))
            run.problems = (*exc.problems, *rest)
        except Exception as exc:  # noqa: BLE001 - one broken trace must not stop the others
            where = f"{trace}:{event.line}" if event is not None else trace
            run.failure = f"{where}: internal error: {type(exc).__name__}: {exc}"
    return run


def replay_trace(
    engine: Engine,
    trace: str,
    *,
    out: IO[str] | None = None,
    progress: Progress | None = None,
    max_line_bytes: int = MAX_TRACE_LINE_BYTES,
) -> TraceSummary:
    """Replay one trace through a new session of ``engine``; write each event's record to
    ``out``. Never raises for a malformed trace or an internal error: the summary says."""
    summary = TraceSummary(trace)

    def record(header: TraceHeader, event: TraceEvent, results: list[Result]) -> None:
        (result,) = results
        summary.add(event, result)
        if out is not None and result is not None:
            line = event_record(trace, header.session_id, event, result)
            out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")

    run = run_trace([engine], trace, record, progress=progress, max_line_bytes=max_line_bytes)
    if run.header is not None:
        summary.session_id, summary.labels = run.header.session_id, run.header.labels
    summary.problems, summary.failure = run.problems, run.failure
    return summary


# --------------------------------------------------------------------------------------------
# Jobs: what a worker process needs to replay one trace


@dataclass(frozen=True, slots=True)
class AuditTarget:
    path: str
    fsync: FsyncMode = "batch"


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """Replay ``trace`` under ``policy``; write its event records to the file ``decisions``
    (appending) and its decisions to the audit log ``audit``.

    A job travels to a worker process pickled, the policy with it: the worker decides under the
    very policy the caller loaded (its extends chain resolved, its lock checked, its rules
    compiled), without reading any file again."""

    index: int
    trace: str
    policy: Policy
    decisions: str | None = None
    audit: AuditTarget | None = None


class SilentLogger:
    """No audit log asked for: the decisions file is the record, nothing else is logged."""

    def info(self, event: str, **fields: Any) -> None:
        pass

    exception = info


def run_replay_job(
    job: ReplayJob, out: IO[str] | None = None, progress: Progress | None = None
) -> TraceSummary:
    """Replay one job's trace; records go to ``out`` when given, else to ``job.decisions``."""
    policy = job.policy
    audit = AuditLog(job.audit.path, fsync=job.audit.fsync) if job.audit else None
    try:
        engine = Engine(policy, audit=audit) if audit else Engine(policy, logger=SilentLogger())
        if out is None and job.decisions is not None:
            with Path(job.decisions).open("a", encoding="utf-8") as sink:
                return replay_trace(engine, job.trace, out=sink, progress=progress)
        return replay_trace(engine, job.trace, out=out, progress=progress)
    finally:
        if audit is not None:
            audit.close()


# --------------------------------------------------------------------------------------------
# Parallel runs

_J = TypeVar("_J")
_R = TypeVar("_R")

# Where a worker process sends (job index, events read, bytes read); set by _start_worker.
_PROGRESS_QUEUE: Any = None
_REPORT_EVERY = 0.2  # seconds between a worker's progress messages


def _start_worker(progress_queue: Any) -> None:
    global _PROGRESS_QUEUE  # noqa: PLW0603 - one per worker process, set once
    _PROGRESS_QUEUE = progress_queue


class WorkerProgress:
    """In a worker process: reports (job index, events, bytes read) to the parent now and
    then, and once more when the job is done."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.sent = 0.0
        self.last: tuple[int, int, int] | None = None

    def __call__(self, reader: TraceReader) -> None:
        self.last = (self.index, reader.events, reader.bytes_read)
        now = time.monotonic()
        if now - self.sent >= _REPORT_EVERY:
            self.sent = now
            _PROGRESS_QUEUE.put(self.last)

    def done(self) -> None:
        """The last message: the parent reads it once the pool has joined its workers."""
        if self.last is not None:
            _PROGRESS_QUEUE.put(self.last)


def in_worker(index: int, work: Callable[[Progress | None], _R]) -> _R:
    """Run ``work`` in a worker process with a progress callback when the parent listens."""
    if _PROGRESS_QUEUE is None:
        return work(None)
    progress = WorkerProgress(index)
    try:
        return work(progress)
    finally:
        progress.done()


def run_jobs(
    work: Callable[[_J], _R],
    jobs: Sequence[_J],
    workers: int,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> list[_R]:
    """``[work(job) for job in jobs]`` in ``workers`` processes, results in job order.

    Workers are spawned, not forked: a fresh interpreter inherits no locks, threads or open
    audit files from the caller. ``on_progress(index, events, bytes)`` hears from ``work``
    through :func:`in_worker` (which every job must run through), the last counts of every job
    included.
    """
    context = multiprocessing.get_context("spawn")
    progress_queue = context.Queue() if on_progress is not None else None
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_start_worker,
        initargs=(progress_queue,),
    ) as pool:
        futures = [pool.submit(work, job) for job in jobs]
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=_REPORT_EVERY, return_when=FIRST_COMPLETED)
            _drain(progress_queue, on_progress)
        results = [future.result() for future in futures]
    # A result can arrive before the progress its worker queued last: a queue is fed by a
    # thread of its own. Workers flush their queue as they exit, and the pool has joined them
    # here, so this drain hears every job's final count (under load, one drain before missed it).
    _drain(progress_queue, on_progress)
    if progress_queue is not None:
        progress_queue.close()
        progress_queue.join_thread()
    return results


def _drain(progress_queue: Any, on_progress: Callable[[int, int, int], None] | None) -> None:
    """Hand every message already queued to ``on_progress``."""
    if progress_queue is None or on_progress is None:
        return
    while True:
        try:
            index, events, read = progress_queue.get_nowait()
        except queue.Empty:
            return
        on_progress(index, events, read)


def replay_in_worker(job: ReplayJob) -> TraceSummary:
    """The function worker processes run: one trace, progress reported to the parent."""
    return in_worker(job.index, lambda progress: run_replay_job(job, progress=progress))


def concatenate(parts: Sequence[str], out: IO[str]) -> None:
    """Copy the files ``parts`` to ``out`` in order, a block at a time, deleting each."""
    for part in parts:
        with Path(part).open(encoding="utf-8") as source:
            while block := source.read(1024 * 1024):
                out.write(block)
        os.unlink(part)  # noqa: PTH108 - next to the open above
