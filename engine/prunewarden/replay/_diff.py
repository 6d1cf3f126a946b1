"""Policy impact: the same traces under two policies, and every decision that changes.

Both policies replay each trace in lockstep, one session each, so decisions pair up by
``(trace, event)`` and nothing but the current line is held. A change is classified by what
differs first (the outcome, whether it binds, the reasons, the kept or evicted set, for a pass
whether it froze and what it evicts) and grouped by check, kind and reason, with the first
example of each group. A trace whose first halt moved gets one more change of its own.

Every change is written to ``changes`` as it is found (a file, so that a long trace with many
changes does not grow memory); the summary keeps counts and first examples only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import Problem
from prunewarden.planner import Plan
from prunewarden.policy import Policy
from prunewarden.replay._events import TraceEvent, TraceHeader
from prunewarden.replay._run import (
    Halt,
    Progress,
    Result,
    SilentLogger,
    TraceSummary,
    in_worker,
    run_trace,
)

# Group key: (check, kind, from, to, reason). ``from`` and ``to`` name the states of a
# transition (allow -> deny, frozen -> planned) and are empty for other kinds, whose examples
# differ in them (a halt moving from one cycle to another, one kept set for another).
GroupKey = tuple[str, str, str, str, str]


@dataclass(slots=True)
class Group:
    count: int
    first: dict[str, Any]


@dataclass(slots=True)
class TraceDiff:
    """How one trace's decisions changed between the base and the candidate policy."""

    trace: str
    session_id: str | None = None
    events: int = 0
    compared: int = 0
    changed: int = 0
    base_halt: Halt | None = None
    candidate_halt: Halt | None = None
    groups: dict[GroupKey, Group] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    failure: str = ""

    @property
    def complete(self) -> bool:
        return not self.problems and not self.failure

    def add(self, change: dict[str, Any]) -> None:
        self.changed += 1
        transition = change["kind"] != "halt moved"
        key: GroupKey = (
            change["check"],
            change["kind"],
            change["from"] if transition else "",
            change["to"] if transition else "",
            change["reason"],
        )
        group = self.groups.get(key)
        if group is None:
            self.groups[key] = Group(1, change)
        else:
            group.count += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "session_id": self.session_id,
            "complete": self.complete,
            "events": self.events,
            "compared": self.compared,
            "changed": self.changed,
            "base_first_halt": self.base_halt.to_dict() if self.base_halt else None,
            "candidate_first_halt": self.candidate_halt.to_dict() if self.candidate_halt else None,
            "problems": [str(problem) for problem in self.problems],
            "failure": self.failure or None,
        }


def diff_trace(
    base: Engine,
    candidate: Engine,
    trace: str,
    *,
    changes: IO[str] | None = None,
    progress: Progress | None = None,
) -> TraceDiff:
    """Replay ``trace`` under both engines in lockstep; write each change to ``changes``.

    Never raises for a malformed trace or an internal error: the result says.
    """
    found = TraceDiff(trace)
    halts = (TraceSummary(trace), TraceSummary(trace))  # for their first halts

    def pair(header: TraceHeader, event: TraceEvent, results: list[Result]) -> None:
        found.events += 1
        for summary, result in zip(halts, results, strict=True):
            if summary.first_halt is None:
                summary.add(event, result)
        if results[0] is not None:
            found.compared += 1
            change = compare(event, results[0], results[1])
            if change is not None:
                _record(found, changes, {"trace": trace, "session_id": header.session_id, **change})

    run = run_trace([base, candidate], trace, pair, progress=progress)
    found.problems, found.failure = run.problems, run.failure
    found.base_halt, found.candidate_halt = halts[0].first_halt, halts[1].first_halt
    if run.header is not None:
        found.session_id = run.header.session_id
        moved = halt_moved(trace, run.header.session_id, found.base_halt, found.candidate_halt)
        if moved is not None and found.complete:
            _record(found, changes, moved)
    return found


def _record(found: TraceDiff, changes: IO[str] | None, change: dict[str, Any]) -> None:
    found.add(change)
    if changes is not None:
        changes.write(json.dumps(change, ensure_ascii=False, separators=(",", ":")) + "\n")


# --------------------------------------------------------------------------------------------
# Comparing two results


def view(result: Decision | Plan) -> dict[str, Any]:
    """What a result decides, without what differs between any two runs or policies (ids,
    times, the policy's identity, the wording of messages)."""
    if isinstance(result, Plan):
        return {
            "frozen": result.frozen,
            "target_met": result.target_met,
            "evict": list(result.evict),
            "tombstones": list(result.tombstones),
            "pinned": list(result.pinned),
            "unscoreable": list(result.unscoreable),
            "recompute": list(result.recompute),
            "freed_tokens": result.freed_tokens,
            "decisions": [view(decision) for decision in result.decisions],
        }
    out: dict[str, Any] = {
        "check": result.check,
        "outcome": result.outcome,
        "enforced": result.enforced,
        "reasons": list(result.codes),
        "actions": [action.to_dict() for action in result.actions],
    }
    if result.kept is not None:
        out["kept"] = list(result.kept)
        out["evicted"] = list(result.evicted or ())
    return out


class _Change(NamedTuple):
    check: str
    kind: str
    was: str  # the state changed from, for kinds that are transitions (else "")
    now: str
    reason: str
    summary: str


def compare(event: TraceEvent, base: Result, candidate: Result) -> dict[str, Any] | None:
    """The change between two results for one event, or None when they decide the same."""
    if base is None or candidate is None:
        return None
    before, after = view(base), view(candidate)
    if before == after:
        return None
    if isinstance(base, Plan) and isinstance(candidate, Plan):
        found = _plan_change(base, candidate, before, after)
    elif isinstance(base, Decision) and isinstance(candidate, Decision):
        found = _decision_change(base, candidate, before, after)
    else:  # pragma: no cover - the same event gives the same kind of result
        found = _Change("?", "result", "", "", "", "a different kind of result")
    return {
        "event": event.index,
        "line": event.line,
        "type": event.type,
        "cycle": event.cycle,
        "check": found.check,
        "kind": found.kind,
        "from": found.was,
        "to": found.now,
        "reason": found.reason,
        "summary": found.summary,
        "base": before,
        "candidate": after,
    }


def _decision_change(
    base: Decision, candidate: Decision, before: Mapping[str, Any], after: Mapping[str, Any]
) -> _Change:
    check = base.check
    verdicts = f"{_verdict(base)} -> {_verdict(candidate)}"
    if base.outcome != candidate.outcome:
        # The reason is what refuses: the candidate's new refusal, or the base's lifted one.
        refusing = candidate if candidate.refused else base
        return _Change(
            check, "outcome", base.outcome, candidate.outcome, refusing.codes[0], verdicts
        )
    if base.enforced != candidate.enforced:
        was, now = _binding(base), _binding(candidate)
        return _Change(check, "enforced", was, now, base.codes[0], f"{verdicts}, {was} -> {now}")
    if base.codes != candidate.codes:
        gained = [code for code in candidate.codes if code not in base.codes]
        lost = [code for code in base.codes if code not in candidate.codes]
        reason = (gained or lost or list(candidate.codes))[0]
        return _Change(check, "reasons", "", "", reason, verdicts)
    for name in ("kept", "evicted", "actions"):
        if before.get(name) != after.get(name):
            summary = f"{name} {_short(before.get(name))} -> {_short(after.get(name))}"
            return _Change(check, name, "", "", base.codes[0], summary)
    return _Change(check, "decision", "", "", base.codes[0], verdicts)  # pragma: no cover


def _plan_change(
    base: Plan, candidate: Plan, before: Mapping[str, Any], after: Mapping[str, Any]
) -> _Change:
    reason = _first_reason(base.decisions, candidate.decisions)
    if base.frozen != candidate.frozen:
        summary = f"{_plan_state(base)} -> {_plan_state(candidate)}"
        return _Change("plan", "frozen", _state(base), _state(candidate), reason, summary)
    for name in ("evict", "tombstones", "target_met", "unscoreable", "recompute"):
        if before[name] != after[name]:
            summary = f"{name} {_short(before[name])} -> {_short(after[name])}"
            return _Change("plan", name, "", "", reason, summary)
    return _Change("plan", "decisions", "", "", reason, "the plan's decisions differ")


def _first_reason(base: Sequence[Decision], candidate: Sequence[Decision]) -> str:
    """The reason behind the first decision that differs: what refuses on either side."""
    for one, other in zip(base, candidate, strict=False):
        if view(one) != view(other):
            refusing = other if other.refused else one
            return refusing.codes[0]
    longer = base if len(base) > len(candidate) else candidate
    extra = longer[min(len(base), len(candidate)) :]
    return extra[0].codes[0] if extra else ""


def halt_moved(
    trace: str, session_id: str | None, base: Halt | None, candidate: Halt | None
) -> dict[str, Any] | None:
    """A change of its own when the trace's first halt comes at another cycle (or not at all);
    it points at the earlier of the two halts."""
    was, now = _halt_at(base), _halt_at(candidate)
    if was == now:
        return None
    halts = [halt for halt in (base, candidate) if halt is not None]
    first = min(halts, key=lambda halt: halt.event)
    return {
        "trace": trace,
        "session_id": session_id,
        "event": first.event,
        "line": first.line,
        "type": "cycle",
        "cycle": first.cycle,
        "check": "collapse",
        "kind": "halt moved",
        "from": was,
        "to": now,
        "reason": first.reason,
        "summary": f"first halt {was} -> {now}",
        "base": base.to_dict() if base else None,
        "candidate": candidate.to_dict() if candidate else None,
    }


def _halt_at(halt: Halt | None) -> str:
    if halt is None:
        return "none"
    return f"at cycle {halt.cycle}" if halt.cycle is not None else f"at event {halt.event}"


def _verdict(decision: Decision) -> str:
    return f"{decision.outcome} [{', '.join(decision.codes)}]"


def _binding(decision: Decision) -> str:
    return "enforced" if decision.enforced else "not enforced"


def _state(plan: Plan) -> str:
    return "frozen" if plan.frozen else "planned"


def _plan_state(plan: Plan) -> str:
    if plan.frozen:
        refusals = [d.codes[0] for d in plan.decisions if d.refused]
        return f"frozen [{', '.join(refusals)}]"
    return f"planned, evict {_short(list(plan.evict))}"


def _short(value: Any, limit: int = 60) -> str:
    text = f"[{', '.join(map(str, value))}]" if isinstance(value, list) else str(value)
    return text if len(text) <= limit else text[: limit - 4] + "...]"


# --------------------------------------------------------------------------------------------
# Jobs


@dataclass(frozen=True, slots=True)
class DiffJob:
    """Diff ``trace`` between two policies; append its changes to the file ``changes``."""

    index: int
    trace: str
    base: Policy
    candidate: Policy
    changes: str


def run_diff_job(
    job: DiffJob, changes: IO[str] | None = None, progress: Progress | None = None
) -> TraceDiff:
    """Diff one job's trace; changes go to ``changes`` when given, else to ``job.changes``."""
    base = Engine(job.base, logger=SilentLogger())
    candidate = Engine(job.candidate, logger=SilentLogger())
    if changes is not None:
        return diff_trace(base, candidate, job.trace, changes=changes, progress=progress)
    with Path(job.changes).open("a", encoding="utf-8") as sink:
        return diff_trace(base, candidate, job.trace, changes=sink, progress=progress)


def diff_in_worker(job: DiffJob) -> TraceDiff:
    """The function worker processes run: one trace, progress reported to the parent."""
    return in_worker(job.index, lambda progress: run_diff_job(job, progress=progress))
