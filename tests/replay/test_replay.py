"""Replaying traces: each seed observation caught at its event, healthy sessions quiet, decisions
recorded, malformed traces located, memory flat however long the trace."""

from __future__ import annotations

import importlib.util
import io
import json
import statistics
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prunewarden import AuditLog, Engine
from prunewarden.decision import Decision
from prunewarden.planner import Plan
from prunewarden.replay._events import TraceEvent, TraceHeader
from prunewarden.replay._run import Result, SilentLogger, TraceSummary, replay_trace, run_trace
from prunewarden.replay._trace import TraceReader, check_trace
from prunewarden.session import Session

EngineFactory = Callable[..., Engine]

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "examples" / "traces"


def load_examples_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_traces", ROOT / "examples" / "make_traces.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_traces = load_examples_module()


def quiet(engine: Engine) -> Engine:
    return Engine(engine.policy, logger=SilentLogger())


def results_of(engine: Engine, trace: Path) -> list[tuple[TraceEvent, Result]]:
    """Every event of a trace with what the session decided on it."""
    found: list[tuple[TraceEvent, Result]] = []

    def keep(header: TraceHeader, event: TraceEvent, results: list[Result]) -> None:
        del header
        found.append((event, results[0]))

    run = run_trace([quiet(engine)], str(trace), keep)
    assert (run.problems, run.failure) == ((), "")
    return found


def decisions(result: Result) -> list[Decision]:
    if result is None:
        return []
    return list(result.decisions) if isinstance(result, Plan) else [result]


def refusals(found: list[tuple[TraceEvent, Result]], check: str) -> list[TraceEvent]:
    """The events where a decision of ``check`` refused (a plan: its own decisions)."""
    return [
        event
        for event, result in found
        if any(d.check == check and d.refused for d in decisions(result))
    ]


# --------------------------------------------------------------------------------------------
# The seeds' observations


def first_halt_by_the_rule(trace: Path, floor: float, cycles: int, margin: float) -> int | None:
    """The seed's two-signal rule, computed from the trace's scores on its own: the first cycle
    where the spread stayed below ``floor`` for ``cycles`` cycles and a canary fell below the
    median of the rest or more than ``margin`` below its first score."""
    snapshots = []
    with TraceReader(trace) as reader:
        snapshots = [e.fields for e in reader if e.type == "cycle"]
    baseline = snapshots[0]["scores"]
    for n in range(cycles, len(snapshots)):
        recent = snapshots[n - cycles + 1 : n + 1]
        if not all(statistics.pstdev(s["scores"].values()) < floor for s in recent):
            continue
        last = snapshots[n]
        live = [v for k, v in last["scores"].items() if k not in last["pinned"]]
        for canary in last["pinned"]:
            score = last["scores"][canary]
            if score < statistics.median(live) or baseline[canary] - score > margin:
                return int(last.get("cycle", n + 1))
    return None


@dataclass(frozen=True)
class Seed:
    """A trace, the guard that must catch it, and the event where it must be caught."""

    trace: str
    check: str
    caught_at: Callable[[TraceEvent], bool]
    reasons: tuple[str, ...]


SEEDS = [
    Seed(
        "collapse-narrowing.jsonl",
        "collapse",
        lambda e: e.type == "cycle" and e.cycle == 12,
        ("collapse_detected",),
    ),
    Seed(
        "eviction-utc-constraint.jsonl",
        "eviction",
        lambda e: e.type == "eviction" and e.fields["segment"]["id"] == "turn-03",
        ("pinned",),
    ),
    Seed(
        "eviction-buf-definition.jsonl",
        "eviction",
        lambda e: e.type == "eviction" and e.fields["segment"]["id"] == "turn-09",
        ("pinned",),
    ),
    Seed(
        "staleness-summary-orphans.jsonl",
        "staleness",
        lambda e: e.type == "prune" and "turn" in e.fields,
        ("orphaned_parent", "invalidation_gap"),
    ),
    Seed(
        "staleness-paraphrase-drift.jsonl",
        "staleness",
        lambda e: e.type == "prune" and e.turn == 3,
        ("relevance_inflation",),
    ),
]


class TestSeedObservations:
    @pytest.mark.parametrize("seed", SEEDS, ids=[s.trace.removesuffix(".jsonl") for s in SEEDS])
    def test_caught_at_the_right_event(self, engine: Engine, seed: Seed) -> None:
        """Under the default policy the first refusal of the guard is at the observation's
        event (not earlier), with the observation's reasons."""
        found = results_of(engine, TRACES / seed.trace)
        (expected,) = [event for event, _ in found if seed.caught_at(event)]
        first = refusals(found, seed.check)[0]
        assert first.index == expected.index
        result = {e.index: r for e, r in found}[first.index]
        (decision,) = [d for d in decisions(result) if d.check == seed.check]
        assert sorted(decision.codes) == sorted(seed.reasons)
        assert decision.blocks

    @pytest.mark.parametrize("seed", SEEDS, ids=[s.trace.removesuffix(".jsonl") for s in SEEDS])
    def test_missed_with_the_guard_off(self, engine_with: EngineFactory, seed: Seed) -> None:
        """With the guard's mode off, the same trace goes through without one refusal of it."""
        found = results_of(engine_with(**{seed.check: {"mode": "off"}}), TRACES / seed.trace)
        assert refusals(found, seed.check) == []
        (event,) = [event for event, _ in found if seed.caught_at(event)]
        result = {e.index: r for e, r in found}[event.index]
        assert [d.codes for d in decisions(result) if d.check == seed.check] == [
            ("check_disabled",)
        ]

    @pytest.mark.parametrize(
        ("spec", "halt"),
        [
            ({}, (0.08, 2, 0.25)),
            ({"spread_floor": 0.05}, (0.05, 2, 0.25)),
            ({"spread_floor": 0.12, "canary_margin": 0.15}, (0.12, 2, 0.15)),
            ({"consecutive_cycles": 3}, (0.08, 3, 0.25)),
        ],
        ids=["default", "lower-floor", "stricter", "three-cycles"],
    )
    def test_halt_cycle_follows_the_rule(
        self, engine_with: EngineFactory, spec: dict[str, Any], halt: tuple[float, int, float]
    ) -> None:
        """The first halt of the narrowing trace is the cycle the seed's rule names, whatever
        the thresholds."""
        trace = TRACES / "collapse-narrowing.jsonl"
        summary = replay_trace(quiet(engine_with(collapse=spec)), str(trace))
        expected = first_halt_by_the_rule(trace, *halt)
        assert expected is not None
        assert summary.first_halt is not None
        assert summary.first_halt.cycle == expected

    def test_a_halt_holds_and_freezes_the_pass(self, engine: Engine) -> None:
        """After the halt, the pass the harness asks for is frozen with pruning_halted."""
        found = results_of(engine, TRACES / "collapse-narrowing.jsonl")
        (plan,) = [r for _, r in found if isinstance(r, Plan)]
        assert plan.frozen
        assert plan.evict == ()
        assert [d.codes[0] for d in plan.decisions] == ["pruning_halted"]

    @pytest.mark.parametrize("trace", ["healthy-session.jsonl", "healthy-homogeneous.jsonl"])
    def test_healthy_traces_refuse_nothing(self, engine: Engine, trace: str) -> None:
        """In a healthy session no guard fires."""
        found = results_of(engine, TRACES / trace)
        assert [d for _, r in found for d in decisions(r) if d.refused] == []
        assert sum(len(decisions(r)) for _, r in found) > 5

    def test_each_pass_evicts_what_the_recording_dropped(self, engine: Engine) -> None:
        """The healthy session was recorded under the default policy: each pass's plan evicts
        exactly the turns missing from the next cycle."""
        found = results_of(engine, TRACES / "healthy-session.jsonl")
        cycles = [set(e.fields["scores"]) for e, _ in found if e.type == "cycle"]
        plans = [r for _, r in found if isinstance(r, Plan)]
        assert len(plans) == len(cycles)
        for before, after, plan in zip(cycles, cycles[1:], plans, strict=False):
            assert set(plan.evict) == before - after
            assert plan.target_met
            assert plan.tombstones == plan.evict

    @pytest.mark.parametrize(
        ("free_tokens", "evicted"), [(10, ("other",)), (15, ("other", "call", "result"))]
    )
    def test_a_traced_pass_keeps_its_groups(
        self, engine: Engine, tmp_path: Path, free_tokens: int, evicted: tuple[str, ...]
    ) -> None:
        """A pass line's eviction groups replay as groups: the pair ranks by its higher score
        and goes together."""
        segment = {"kind": "turn", "tokens": 10, "text": "", "text_sha256": EMPTY_SHA256}
        window = [
            {**segment, "id": "call", "score": 0.125, "perturbed_score": 0.125, "group": "t1"},
            {**segment, "id": "other", "score": 0.25, "perturbed_score": 0.25},
            {**segment, "id": "result", "score": 0.375, "perturbed_score": 0.375, "group": "t1"},
        ]
        lines = [
            {"type": "session", "trace_version": 1, "session_id": "grouped"},
            {"type": "pass", "segments": window, "free_tokens": free_tokens},
        ]
        trace = tmp_path / "grouped.jsonl"
        trace.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        (plan,) = [r for _, r in results_of(engine, trace) if isinstance(r, Plan)]
        assert plan.evict == evicted


EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# --------------------------------------------------------------------------------------------
# Replay: summaries, records, the audit log


class TestReplay:
    def test_summary_counts_by_check_outcome_and_reason(self, engine: Engine) -> None:
        """Counts add up per check and outcome; each reason once per decision giving it."""
        summary = replay_trace(quiet(engine), str(TRACES / "staleness-summary-orphans.jsonl"))
        assert (summary.session_id, summary.events, summary.decisions) == (
            "seed-002-summary-orphans",
            4,
            2,
        )
        assert summary.outcomes == {"staleness": {"allow": 1, "deny": 1}}
        assert summary.reasons["staleness"]["deny"] == {"invalidation_gap": 1, "orphaned_parent": 1}
        assert summary.first_halt is None
        assert summary.complete

    def test_records_one_line_per_decided_event(self, engine: Engine) -> None:
        """Turns decide nothing and get no line; a pass gets its plan; every line names the
        trace, session, event, line and cycle."""
        out = io.StringIO()
        trace = str(TRACES / "collapse-narrowing.jsonl")
        replay_trace(quiet(engine), trace, out=out)
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [line["type"] for line in lines] == ["cycle"] * 12 + ["pass"] + ["cycle"] * 2
        first, plan = lines[0], lines[12]
        assert (first["trace"], first["session_id"], first["event"], first["line"]) == (
            trace,
            "seed-000-narrowing",
            1,
            2,
        )
        assert first["decision"]["check"] == "collapse"
        assert plan["cycle"] == 12
        assert plan["plan"]["frozen"] is True

    def test_the_audit_log_names_the_session(self, engine: Engine, tmp_path: Path) -> None:
        """Decisions go to the audit log with the header's session id and labels."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            replay_trace(
                Engine(engine.policy, audit=audit), str(TRACES / "eviction-buf-definition.jsonl")
            )
        records = [json.loads(line) for line in log.read_text().splitlines()]
        decided = [r for r in records if r["kind"] == "decision"]
        assert len(decided) == 2
        assert {r["session_id"] for r in decided} == {"seed-001-buf-definition"}
        assert decided[0]["labels"]["seed"] == "001"

    def test_a_malformed_line_stops_the_trace_keeping_what_came_before(
        self, engine: Engine, tmp_path: Path
    ) -> None:
        """Events before the bad line are replayed and recorded; the problem is located; later
        bad lines are reported too."""
        lines = (TRACES / "staleness-paraphrase-drift.jsonl").read_text().splitlines()
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join([*lines[:4], '{"type": "turn"', *lines[4:], "[]"]) + "\n")
        out = io.StringIO()
        summary = replay_trace(quiet(engine), str(bad), out=out)
        assert len(out.getvalue().splitlines()) == 1
        assert summary.events == 3
        assert [(p.line, p.column) for p in summary.problems] == [(5, 16), (11, 1)]
        assert not summary.complete

    def test_a_value_the_policy_refuses_is_located(
        self, engine_with: EngineFactory, tmp_path: Path
    ) -> None:
        """A score outside the policy's range is refused by the session and located in the
        line that carries it."""
        trace = tmp_path / "t.jsonl"
        trace.write_text(
            '{"type": "session", "trace_version": 1, "session_id": "s"}\n'
            '{"type": "cycle", "scores": {"task": 0.9, "t": 7}, "pinned": ["task"]}\n'
        )
        summary = replay_trace(quiet(engine_with()), str(trace))
        (problem,) = summary.problems
        assert str(problem) == (
            f"{trace}:2:48: $.scores.t: 7 is outside the policy's score range [0.0, 1.0]"
        )
        wide = replay_trace(quiet(engine_with(scores={"min": 0, "max": 10})), str(trace))
        assert wide.complete

    def test_an_internal_error_is_reported_not_raised(
        self, engine: Engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A bug while replaying a trace becomes the summary's failure, naming the line."""

        def broken(self: Session, *args: Any, **kwargs: Any) -> Decision:
            raise RuntimeError("boom")

        monkeypatch.setattr(Session, "authorize", broken)
        trace = str(TRACES / "eviction-buf-definition.jsonl")
        summary = replay_trace(quiet(engine), trace)
        assert summary.failure == f"{trace}:32: internal error: RuntimeError: boom"
        assert summary.events == 30


json_scalars = (
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.text(max_size=4)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)


def mutate(value: Any, path: list[int], replacement: Any) -> Any:
    """Replace the value at a path of indexes (modulo each container's size)."""
    if not path:
        return replacement
    head, *rest = path
    if isinstance(value, dict) and value:
        key = list(value)[head % len(value)]
        return {**value, key: mutate(value[key], rest, replacement)}
    if isinstance(value, list) and value:
        i = head % len(value)
        return [*value[:i], mutate(value[i], rest, replacement), *value[i + 1 :]]
    return replacement


class TestProperties:
    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        trace=st.sampled_from(sorted(TRACES.glob("*.jsonl"))),
        change=st.tuples(st.integers(0, 50), st.lists(st.integers(0, 20), max_size=5), json_values),
    )
    def test_a_mutated_trace_is_replayed_or_located(
        self, engine: Engine, tmp_path: Path, trace: Path, change: tuple[int, list[int], Any]
    ) -> None:
        """Any value anywhere in a trace gives decisions or located problems, never an
        exception or an internal error; what came before a bad line stands."""
        line, path, replacement = change
        lines = trace.read_text().splitlines()
        n = line % len(lines)
        lines[n] = json.dumps(mutate(json.loads(lines[n]), path, replacement))
        mutated = tmp_path / "mutated.jsonl"
        mutated.write_text("\n".join(lines) + "\n")
        summary = replay_trace(quiet(engine), str(mutated))
        assert summary.failure == ""
        for problem in summary.problems:
            assert problem.file == str(mutated)
            assert 1 <= problem.line <= len(lines)
        if summary.problems:
            assert summary.problems[0].line == n + 1
            assert summary.events <= n


# --------------------------------------------------------------------------------------------
# Memory


def mixed_trace(path: Path, events: int) -> None:
    """Cycles, turns and evictions, each with its own ids, ``events`` of them."""

    def lines() -> Iterator[dict[str, Any]]:
        yield {"type": "session", "trace_version": 1, "session_id": "long"}
        for i in range(events):
            if i % 3 == 0:
                scores = {"task": 0.9, "a": 0.2 + 0.001 * (i % 100), "b": 0.6}
                yield {"type": "cycle", "scores": scores, "pinned": ["task"]}
            elif i % 3 == 1:
                yield {"type": "turn", "mean_relevance": 0.5, "tokens": 1000}
            else:
                segment = {"id": f"s{i}", "kind": "turn", "tombstone_written": True}
                yield {"type": "eviction", "segment": segment, "score": 0.1, "perturbed_score": 0.1}

    make_traces.write(path, lines())


class TestBoundedMemory:
    def test_peak_does_not_grow_with_trace_length(self, engine: Engine, tmp_path: Path) -> None:
        """Replaying 5000 events (records written) peaks at about what 500 events do."""

        def peak(events: int) -> tuple[int, TraceSummary]:
            trace = tmp_path / f"{events}.jsonl"
            mixed_trace(trace, events)
            with (tmp_path / f"{events}.out").open("w") as out:
                tracemalloc.start()
                try:
                    summary = replay_trace(quiet(engine), str(trace), out=out)
                    return tracemalloc.get_traced_memory()[1], summary
                finally:
                    tracemalloc.stop()

        (small, short), (large, long) = peak(500), peak(5_000)
        assert (short.events, long.events) == (500, 5_000)
        assert large < small * 1.25 + 32 * 1024, (small, large)


class TestExampleTraces:
    def test_the_generator_reproduces_the_committed_traces(self, tmp_path: Path) -> None:
        """examples/make_traces.py is deterministic and the committed traces are its output."""
        make_traces.main(["--dir", str(tmp_path)])
        written = sorted(path.name for path in tmp_path.iterdir())
        assert written == sorted(path.name for path in TRACES.glob("*.jsonl"))
        for name in written:
            assert (tmp_path / name).read_text() == (TRACES / name).read_text(), name

    def test_every_example_trace_is_valid_in_full(self) -> None:
        """Each example trace passes the reader's full check."""
        for trace in sorted(TRACES.glob("*.jsonl")):
            assert check_trace(trace) == [], trace

    def test_a_synthetic_trace_has_the_size_asked_for(self, tmp_path: Path) -> None:
        """--synthetic writes a cycle, a turn and a pass per turn over the window size given,
        then a prune and an eviction."""
        out = tmp_path / "big.jsonl"
        make_traces.main(["--synthetic", "--turns", "5", "--segments", "12", "--out", str(out)])
        with TraceReader(out) as reader:
            events = list(reader)
        assert [e.type for e in events[:3]] == ["cycle", "turn", "pass"]
        assert len(events) == 5 * 3 + 2
        assert [e.type for e in events[-2:]] == ["prune", "eviction"]
        assert all(len(e.fields["segments"]) == 12 for e in events if e.type == "pass")
