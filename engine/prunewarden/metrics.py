"""Prometheus metrics of what an engine decides, kept by a decision hook.

``DecisionMetrics`` is a decision hook: pass it to an engine (``Engine(policy,
on_decision=metrics)``, or to a :class:`~prunewarden.ReloadingEngine`, which hands it to every
snapshot) and every decision counts, whatever the audit sink. Nothing wraps the engine's methods:
the engine calls the hook with each decision and its audit record, so the metrics and the audit
log count the same decisions. A pruning pass's totals come from its :class:`~prunewarden.Plan`
(:meth:`DecisionMetrics.observe_plan`), and reloads from the engine that reloads
(:meth:`DecisionMetrics.watch`).

The hook sits on the hot path of every decision, so it only adds to plain counts under one lock;
the counts become metric families when the registry is scraped (a custom collector, as
prometheus-client documents for values kept elsewhere). It also offers the engine's batch method,
:meth:`DecisionMetrics.observe_decisions`: a pruning pass of 200 decisions is counted with one
call, one lock and one loop, not 200 of each (a Python call and a lock round trip per decision
were most of what the metrics cost a pass). Counted one by one or as a pass, the counts are the
same: the single-decision hook is the batch of one.

Label sets are bounded: policies, versions, checks, outcomes, reason codes (the documented codes
and ``rule:<name>`` of the policy's rules), rule names, candidate versions. Session and segment
ids are never labels; the halted sessions are a gauge.

This module needs the ``prometheus`` extra (prometheus-client); ``import prunewarden`` never
imports it.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

try:
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - the message says what to install
    msg = "prunewarden.metrics needs prometheus-client: pip install 'prunewarden[prometheus]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from prunewarden.decision import Decision
    from prunewarden.pipeline import PassResult
    from prunewarden.planner import Plan
    from prunewarden.policy import Policy
    from prunewarden.reload import ReloadResult


class Reloading(Protocol):
    """What :meth:`DecisionMetrics.watch` reads of an engine that reloads."""

    @property
    def policy(self) -> Policy: ...

    def add_reload_hook(self, hook: Callable[[ReloadResult], object]) -> None: ...


DECISION_LABELS = ["policy", "policy_version", "check", "outcome", "reason", "enforced"]
# Seconds: a guard decides in tens of microseconds; a rule with a deadline may take milliseconds.
DURATION_BUCKETS = (
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.1,
    1.0,
)
RELOAD_RESULTS = ("reloaded", "unchanged", "failed")
AUDIT_UNAVAILABLE = "audit_unavailable"
RULE_ERROR = "rule_error:"
_FAILURES = (RULE_ERROR, AUDIT_UNAVAILABLE)
COLUMNS_VERSION = 3  # the record_version of a pass recorded as columns (audit-record.v3)


class _Timings:
    """One histogram's buckets (not cumulative), count and sum."""

    __slots__ = ("buckets", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)
        self.total = 0.0


class DecisionMetrics(Collector):
    """Prometheus metrics on ``registry`` (default: prometheus-client's global registry).

    Call it as a decision hook; thread-safe. One instance per registry: a second would register
    the same names again, which prometheus-client refuses.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = REGISTRY if registry is None else registry
        self._lock = threading.Lock()
        self._decisions: dict[tuple[str, ...], int] = {}
        self._timings: dict[str, _Timings] = {}
        self._evicted = 0
        self._freed = 0
        self._frozen: dict[str, int] = {}
        self._halted: set[str] = set()
        self._episodes = 0
        self._in_force: dict[str, tuple[str, str]] = {}  # policy name -> (version, digest)
        self._last_policy: object = None  # the identity last seen: most decisions share it
        self._reloads = dict.fromkeys(RELOAD_RESULTS, 0)
        self._audit_failures = 0
        self._rule_errors: dict[str, int] = {}
        self._disagreements: dict[str, int] = {}
        self.registry.register(self)

    # --- the hooks -----------------------------------------------------------------------------

    def __call__(self, decision: Decision, record: Mapping[str, Any]) -> None:
        """The decision hook: count one decision and its record."""
        self.observe_decisions((decision,), record)

    def observe_decisions(self, decisions: Sequence[Decision], record: Mapping[str, Any]) -> None:
        """The batch hook: count the decisions that share ``record`` (a pass's), in order, as
        calling the hook with each would; one lock and one loop for the whole pass."""
        seconds, bucket = _share(record)
        with self._lock:
            self._count(decisions, seconds, bucket)
            self._count_consequences(decisions, record.get("session_id"))

    def on_pass(self, result: PassResult) -> None:
        """The pass hook: count an eviction pass of ``Engine.authorize_pass`` from its columns,
        as :meth:`observe_decisions` would count its decisions, building none of them. A pass
        recorded decision by decision (a ``record_version`` 2 record: rules, a shadow...) has
        its decisions built already, and is counted through them."""
        record = result.record
        if record is None or record.get("record_version") != COLUMNS_VERSION:
            self.observe_decisions(list(result), record if record is not None else {})
            return
        # A version 3 record: one policy, the eviction check, no shadow, no session halt.
        policy = record["policy"]
        name, version = policy["name"], policy["version"]
        enforced = "true" if record["enforced"] else "false"
        refusal = record["refusal"]
        # A pass has a handful of distinct verdicts: counted in C first, then labelled.
        verdicts = Counter(zip(result.allowed, result.codes, strict=True))
        tally: dict[tuple[str, ...], int] = {}
        failures: list[tuple[str, int]] = []
        for (allowed, codes), count in verdicts.items():
            outcome = "allow" if allowed else refusal
            key = (name, version, "eviction", outcome, codes[0] if codes else "", enforced)
            tally[key] = tally.get(key, 0) + count
            failures.extend((code, count) for code in codes if code.startswith(_FAILURES))
        seconds, bucket = _share(record)
        with self._lock:
            self._in_force[name] = (version, policy["digest"])
            self._last_policy = None  # the next decision names its policy again
            counts = self._decisions
            for labels, count in tally.items():
                counts[labels] = counts.get(labels, 0) + count
                if seconds is not None:
                    self._time("eviction", seconds, bucket, count)
            for code, count in failures:
                self._count_failure(code, count)

    def observe_plan(self, plan: Plan) -> None:
        """Count one pruning pass: what it evicts and frees, or why it froze."""
        with self._lock:
            if plan.frozen:
                refusing = [d.reasons[0].code for d in plan.decisions if d.refused and d.reasons]
                reason = refusing[0] if refusing else "unknown"
                self._frozen[reason] = self._frozen.get(reason, 0) + 1
                return
            self._evicted += len(plan.evict)
            self._freed += plan.freed_tokens

    def observe_reload(self, result: ReloadResult) -> None:
        """Count one reload (what :meth:`watch` hands the reloading engine)."""
        outcome = "failed" if result.problems else "reloaded" if result.changed else "unchanged"
        with self._lock:
            self._reloads[outcome] += 1

    def watch(self, engine: Reloading) -> None:
        """Count ``engine``'s reloads (a :class:`~prunewarden.ReloadingEngine`, or anything
        with its ``policy`` and ``add_reload_hook``), and show the policy in force from now
        on."""
        engine.add_reload_hook(self.observe_reload)
        policy = engine.policy
        with self._lock:
            self._in_force[policy.name] = (policy.version, policy.digest)
            self._last_policy = None

    def _count(self, decisions: Sequence[Decision], seconds: float | None, bucket: int) -> None:
        """Each decision by its labels, and its share of the time in its check's histogram.

        The pass's decisions are tallied by label set first (a pass has a handful), then added:
        each check's histogram gets the same additions, in the same order, as one decision at a
        time would make, so its sum is the same float."""
        tally: dict[tuple[str, ...], int] = {}
        last = self._last_policy
        for decision in decisions:
            policy, reasons = decision.policy, decision.reasons
            if policy is not last:
                last = policy
                self._in_force[policy.name] = (policy.version, policy.digest)
            key = (
                policy.name,
                policy.version,
                decision.check,
                decision.outcome,
                reasons[0].code if reasons else "",
                "true" if decision.enforced else "false",
            )
            tally[key] = tally.get(key, 0) + 1
        self._last_policy = last
        counts = self._decisions
        for labels, count in tally.items():
            counts[labels] = counts.get(labels, 0) + count
            if seconds is not None:
                self._time(labels[2], seconds, bucket, count)

    def _time(self, check: str, seconds: float, bucket: int, count: int) -> None:
        timings = self._timings.get(check)
        if timings is None:
            timings = self._timings[check] = _Timings()
        timings.buckets[bucket] += count
        total = timings.total
        for _ in range(count):
            total += seconds
        timings.total = total

    def _count_consequences(self, decisions: Sequence[Decision], session_id: Any) -> None:
        """What the decisions say beyond their labels: failures, disagreements, halts."""
        for decision in decisions:
            for found in decision.reasons:
                if found.code.startswith(_FAILURES):
                    self._count_failure(found.code)
            shadow = decision.shadow
            if shadow is not None and not shadow.agrees_with(decision):
                version = shadow.policy.version
                self._disagreements[version] = self._disagreements.get(version, 0) + 1
            if decision.check == "collapse":
                self._note_halt(session_id, decision.blocks)

    def _count_failure(self, code: str, count: int = 1) -> None:
        if code == AUDIT_UNAVAILABLE:
            self._audit_failures += count
        else:
            rule = code.removeprefix(RULE_ERROR)
            self._rule_errors[rule] = self._rule_errors.get(rule, 0) + count

    def _note_halt(self, session_id: Any, blocks: bool) -> None:
        if not isinstance(session_id, str):
            self._episodes += blocks
        elif blocks and session_id not in self._halted:
            self._halted.add(session_id)
            self._episodes += 1
        elif not blocks:
            self._halted.discard(session_id)

    # --- the collector -------------------------------------------------------------------------

    def describe(self) -> list[Metric]:
        """The names this collector registers (what the registry checks for duplicates)."""
        return list(self._families(empty=True))

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            families = list(self._families(empty=False))
        yield from families

    def _families(self, *, empty: bool) -> Iterator[Metric]:
        yield from self._decision_families(empty=empty)
        yield from self._pass_families(empty=empty)
        yield from self._session_families(empty=empty)
        yield from self._engine_families(empty=empty)

    def _decision_families(self, *, empty: bool) -> Iterator[Metric]:
        """Decisions by their labels, and the time spent deciding them."""
        decisions = CounterMetricFamily(
            "prunewarden_decisions",
            "Decisions made, by policy version, check, outcome, primary reason and enforcement.",
            labels=DECISION_LABELS,
        )
        duration = HistogramMetricFamily(
            "prunewarden_decision_duration_seconds",
            "Time the engine spent deciding (guards, rules, shadow, the record), by check.",
            labels=["check"],
        )
        if not empty:
            for key, count in sorted(self._decisions.items()):
                decisions.add_metric(list(key), count)
            for check, timings in sorted(self._timings.items()):
                duration.add_metric([check], _cumulative(timings), timings.total)
        yield decisions
        yield duration

    def _pass_families(self, *, empty: bool) -> Iterator[Metric]:
        """What pruning passes planned: segments evicted, tokens freed, passes frozen."""
        evicted = CounterMetricFamily(
            "prunewarden_pass_evicted_segments", "Segments pruning passes planned to evict."
        )
        freed = CounterMetricFamily(
            "prunewarden_pass_freed_tokens", "Tokens pruning passes planned to free."
        )
        frozen = CounterMetricFamily(
            "prunewarden_pass_frozen",
            "Pruning passes frozen, by the reason of the refusing gate.",
            labels=["reason"],
        )
        if not empty:
            evicted.add_metric([], self._evicted)
            freed.add_metric([], self._freed)
            for reason, count in sorted(self._frozen.items()):
                frozen.add_metric([reason], count)
        yield evicted
        yield freed
        yield frozen

    def _session_families(self, *, empty: bool) -> Iterator[Metric]:
        """Sessions halted now, and the halts they entered."""
        halted = GaugeMetricFamily(
            "prunewarden_sessions_halted",
            "Sessions whose last collapse decision halted pruning (enforced).",
        )
        episodes = CounterMetricFamily(
            "prunewarden_halt_episodes",
            "Times a session entered a halt (a halting decision without a session is one).",
        )
        if not empty:
            halted.add_metric([], len(self._halted))
            episodes.add_metric([], self._episodes)
        yield halted
        yield episodes

    def _engine_families(self, *, empty: bool) -> Iterator[Metric]:
        """The policy in force and its reloads; what the audit log, the rules and the shadow
        failed or disagreed on."""
        info = GaugeMetricFamily(
            "prunewarden_policy_info",
            "The policy version in force per policy name (value 1).",
            labels=["name", "version", "digest"],
        )
        reloads = CounterMetricFamily(
            "prunewarden_policy_reloads",
            "Reloads that looked at changed policy files, by result.",
            labels=["result"],
        )
        audit_failures = CounterMetricFamily(
            "prunewarden_audit_write_failures",
            "Decisions refused because the audit log could not record them (audit_unavailable).",
        )
        rule_errors = CounterMetricFamily(
            "prunewarden_rule_errors",
            "Custom rules that failed to evaluate (rule_error), by rule.",
            labels=["rule"],
        )
        disagreements = CounterMetricFamily(
            "prunewarden_shadow_disagreements",
            "Decisions the shadow candidate would have made differently, by candidate version.",
            labels=["candidate_version"],
        )
        if not empty:
            for name, (version, digest) in sorted(self._in_force.items()):
                info.add_metric([name, version, digest], 1)
            for result, count in self._reloads.items():
                reloads.add_metric([result], count)
            audit_failures.add_metric([], self._audit_failures)
            for rule, count in sorted(self._rule_errors.items()):
                rule_errors.add_metric([rule], count)
            for version, count in sorted(self._disagreements.items()):
                disagreements.add_metric([version], count)
        yield info
        yield reloads
        yield audit_failures
        yield rule_errors
        yield disagreements


def _share(record: Mapping[str, Any]) -> tuple[float | None, int]:
    """Each decision's time under ``record`` (None: the record says none) and its bucket."""
    duration = record.get("duration_ns")
    if not isinstance(duration, int):
        return None, 0
    if record.get("kind") == "pass":
        # One record for the whole pass: each of its decisions took its share
        # (verdicts in a version 2 record, segments in a version 3 one, both in a version 3
        # plan's).
        decided = len(record.get("verdicts") or ()) + len(record.get("segments") or ())
        duration //= max(decided, 1)
    seconds = duration / 1e9
    return seconds, bisect.bisect_left(DURATION_BUCKETS, seconds)


def _cumulative(timings: _Timings) -> list[tuple[str, float]]:
    buckets, running = [], 0
    for bound, count in zip((*DURATION_BUCKETS, float("inf")), timings.buckets, strict=True):
        running += count
        buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
    return buckets


__all__ = ["AUDIT_UNAVAILABLE", "DecisionMetrics"]
