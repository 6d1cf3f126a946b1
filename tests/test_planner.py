"""The pruning-pass planner: gates, classification, dependency order, target, tombstones."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden import AuditLog, Decision, Engine, InputError, Policy, load_policy
from prunewarden.audit import decision_rows, input_digest
from prunewarden.cli._main import run
from prunewarden.decision import Reason, Verdict
from prunewarden.inputs import Check, Request, parse_plan
from prunewarden.planner import PassInputs, Plan, plan_pass
from prunewarden.planner._log import PassLog
from structlog.testing import capture_logs

EngineFactory = Callable[..., Engine]
PolicyFactory = Callable[..., Policy]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seg(
    seg_id: str, score: float, *, kind: str = "turn", tokens: int = 100, **extra: Any
) -> dict[str, Any]:
    """A bound, stable segment: perturbed score equal to its score, text hash matching."""
    text = extra.pop("text", f"text of {seg_id}")
    return {
        "id": seg_id,
        "kind": kind,
        "text": text,
        "tokens": tokens,
        "score": score,
        "perturbed_score": extra.pop("perturbed_score", score),
        "text_sha256": sha(text),
        **extra,
    }


class DiscardLogger:
    """A decision logger that keeps nothing: a large pass measures the planner, not logging."""

    def info(self, event: str, **fields: Any) -> None:
        """Drop the record."""


@pytest.fixture
def quiet_engine() -> Engine:
    return Engine.default(logger=DiscardLogger())


WINDOW = [
    seg("task", 0.125, kind="constraint"),
    seg("a", 0.25),
    seg("b", 0.125),
    seg("c", 0.75),
    seg("d", 0.5),
]


class TestTarget:
    def test_lowest_scores_first_until_free_tokens(self, engine: Engine) -> None:
        """Pinned segments are skipped; the lowest scoreable go first until the target."""
        plan = engine.plan({"segments": WINDOW, "free_tokens": 200})
        assert plan.evict == ("b", "a")
        assert plan.pinned == ("task",)
        assert plan.target_met
        assert plan.freed_tokens == 200
        assert not plan.frozen

    def test_keep_top_k_counts_every_segment(self, engine: Engine) -> None:
        """keep_top_k: evict until at most k segments remain, pinned ones included."""
        plan = engine.plan({"segments": WINDOW, "keep_top_k": 3})
        assert plan.evict == ("b", "a")
        assert plan.target_met

    def test_unreachable_target_is_reported(self, engine: Engine) -> None:
        """When every evictable segment is not enough, target_met is false."""
        plan = engine.plan({"segments": WINDOW, "free_tokens": 10_000})
        assert plan.evict == ("b", "a", "d", "c")
        assert not plan.target_met

    def test_zero_target_evicts_nothing(self, engine: Engine) -> None:
        """A target already met evicts nothing."""
        plan = engine.plan({"segments": WINDOW, "free_tokens": 0})
        assert (plan.evict, plan.target_met) == ((), True)

    def test_equal_scores_go_in_window_order(self, engine: Engine) -> None:
        """Ties keep the window's order."""
        window = [seg("x", 0.5), seg("y", 0.5), seg("z", 0.5)]
        assert engine.plan({"segments": window, "free_tokens": 200}).evict == ("x", "y")


class TestAuthorization:
    def test_tombstones_are_planned_for_every_eviction(self, engine: Engine) -> None:
        """With require_tombstone, the plan writes a tombstone for each segment it evicts."""
        window = [*WINDOW[:2], {**WINDOW[2], "tombstone_written": True}]
        plan = engine.plan({"segments": window, "free_tokens": 200})
        assert plan.evict == ("b", "a")
        assert plan.tombstones == ("a",)

    def test_no_tombstones_when_the_policy_does_not_require_them(
        self, engine_with: EngineFactory
    ) -> None:
        """require_tombstone: false plans no tombstones."""
        plan = engine_with(eviction={"require_tombstone": False}).plan(
            {"segments": WINDOW, "free_tokens": 200}
        )
        assert plan.tombstones == ()

    def test_unstable_segment_is_skipped_for_the_next(self, engine: Engine) -> None:
        """A refused pick (unstable score) is logged and the next lowest is tried."""
        window = [seg("u", 0.0625, perturbed_score=0.5), *WINDOW[1:]]
        plan = engine.plan({"segments": window, "free_tokens": 200})
        assert plan.evict == ("b", "a")
        refused = [d for d in plan.decisions if d.refused]
        assert [d.codes for d in refused] == [("unstable_score",)]

    def test_a_plan_is_one_record_of_every_decision(self, engine: Engine) -> None:
        """The staleness gate and each authorization are verdicts of one pass record, in order,
        with what the plan may do."""
        logged = Engine(engine.policy, logger=structlog.get_logger())
        with capture_logs() as logs:
            plan = logged.plan({"segments": WINDOW, "free_tokens": 200, "session_id": "s9"})
        (record,) = logs
        assert (record["event"], record["pass"], record["session_id"]) == ("pass", "plan", "s9")
        # Its evictions as columns (record_version 3), the staleness gate first.
        assert [v["check"] for v in record["verdicts"]] == ["staleness"]
        assert (record["verdict_indices"], record["check"]) == ([0], "eviction")
        assert len(record["segments"]) == 2
        assert [d.decision_id for d in plan.decisions] == [
            f"{record['pass_id']}-{i}" for i in range(3)
        ]
        assert record["plan"]["evict"] == list(plan.evict)

    def test_audit_mode_refusals_do_not_block(self, engine_with: EngineFactory) -> None:
        """In audit mode a refused pick is still evicted: callers proceed."""
        window = [seg("u", 0.0625, perturbed_score=0.5), *WINDOW[1:]]
        plan = engine_with(eviction={"mode": "audit"}).plan(
            {"segments": window, "free_tokens": 100}
        )
        assert plan.evict == ("u",)


PIN_NEVER = [
    {
        "name": "pin-never",
        "check": "eviction",
        "when": "segment.text.contains('never')",
        "effect": "pin",
        "message": "states a negation",
    }
]


class TestRulePins:
    def test_a_rule_pin_sticks_for_the_session(self, make_policy: PolicyFactory) -> None:
        """A segment a rule pinned is refused once, then pinned in later passes (no decision
        again), while its text is unchanged."""
        window = [seg("n", 0.0625, text="never log tokens"), *WINDOW[1:]]
        heard: list[Decision] = []
        engine = Engine(make_policy(rules=PIN_NEVER), on_decision=lambda d, _: heard.append(d))
        session = engine.session("s")
        first = session.plan(window, free_tokens=100)
        refused = [d for d in first.decisions if d.refused]
        assert [d.codes for d in refused] == [("rule:pin-never",)]
        assert first.pinned == ("n",)
        assert first.evict == ("b",)
        heard.clear()
        second = session.plan(window, free_tokens=100)
        assert second.pinned == ("n",)
        assert second.evict == ("b",)
        assert [d.outcome for d in heard if d.check == "eviction"] == ["allow"]

    def test_changed_text_is_decided_again(self, engine_with: EngineFactory) -> None:
        """A pinned id whose text changed is no longer pinned by the earlier pass."""
        session = engine_with(rules=PIN_NEVER).session("s")
        session.plan([seg("n", 0.0625, text="never log tokens"), *WINDOW[1:]], free_tokens=100)
        plan = session.plan([seg("n", 0.0625, text="log tokens"), *WINDOW[1:]], free_tokens=100)
        assert plan.evict == ("n",)
        assert plan.pinned == ()

    def test_another_session_decides_afresh(self, engine_with: EngineFactory) -> None:
        """The pin belongs to the session that saw it refused."""
        engine = engine_with(rules=PIN_NEVER)
        window = [seg("n", 0.0625, text="never log tokens"), *WINDOW[1:]]
        engine.session("one").plan(window, free_tokens=100)
        plan = engine.session("two").plan(window, free_tokens=100)
        assert [d.codes for d in plan.decisions if d.refused] == [("rule:pin-never",)]


class TestPassInputs:
    """The planner decides through what its caller hands it, and needs no Session."""

    @staticmethod
    def inputs(
        engine: Engine, pins: dict[str, str], gate: Verdict | None = None, *, explain: bool = False
    ) -> tuple[PassInputs, list[str]]:
        """PassInputs over ``engine``'s decide step; the checks it decided, in order."""
        binding = engine.session_binding
        decided: list[str] = []

        def decide(
            check: Check,
            request: Request,
            document: Any,
            gate: Verdict | None = None,
            *,
            in_pass: PassLog | None = None,
            explain: bool = False,
        ) -> Decision:
            decided.append(check)
            return binding.decide(
                check, request, document, gate=gate, in_pass=in_pass, explain=explain
            )

        inputs = PassInputs(
            eviction=binding.policy.spec.eviction,
            pinned_by_rule=lambda segment_id, text: pins.get(segment_id) == text,
            gate=lambda _check: gate,
            decide=decide,
            pin_by_rule=pins.update,
            explain=explain,
        )
        return inputs, decided

    @staticmethod
    def plan(engine: Engine, inputs: PassInputs, window: list[dict[str, Any]]) -> Plan:
        document = {"segments": window, "free_tokens": 100}
        request = parse_plan(document, engine.policy.spec.scores)
        return plan_pass(inputs, request, document, PassLog())

    def test_a_pass_on_inputs_alone_plans_as_the_engine_does(self, engine: Engine) -> None:
        """plan_pass on PassInputs (no Session) evicts and pins what Engine.plan does."""
        inputs, decided = self.inputs(engine, {})
        plan = self.plan(engine, inputs, WINDOW)
        expected = engine.plan({"segments": WINDOW, "free_tokens": 100})
        assert (plan.evict, plan.pinned) == (expected.evict, expected.pinned)
        assert decided == ["staleness", "eviction"]

    def test_an_explained_pass_explains_each_decision(self, engine: Engine) -> None:
        """PassInputs(explain=True): the decide step is asked to explain every decision."""
        inputs, decided = self.inputs(engine, {}, explain=True)
        plan = self.plan(engine, inputs, WINDOW)
        assert decided == ["staleness", "eviction"]
        assert all(d.explanation is not None for d in plan.decisions)

    def test_an_explained_pass_decides_no_eviction_over_columns(self, engine: Engine) -> None:
        """PassInputs(explain=True) with the engine's columns: the columns give no
        would_allow, so every eviction still goes to the decide step, explained (a refused one
        says what would allow it)."""
        assert engine.passes.columnar is not None
        inputs, decided = self.inputs(engine, {}, explain=True)
        inputs = dataclasses.replace(inputs, columnar=engine.passes.columnar)
        window = [*WINDOW, seg("u", 0.0625, perturbed_score=0.9)]
        plan = self.plan(engine, inputs, window)
        evictions = [d for d in plan.decisions if d.check == "eviction"]
        assert decided.count("eviction") == len(evictions) == 2
        assert all(d.explanation is not None for d in plan.decisions)
        (refused,) = [d for d in plan.decisions if d.check == "eviction" and d.blocks]
        assert refused.codes == ("unstable_score",)
        assert "would_allow" in refused.reasons[0].detail

    def test_rule_pins_go_to_the_caller_and_come_back(self, make_policy: PolicyFactory) -> None:
        """A segment a rule pins is handed to pin_by_rule, and pinned_by_rule keeps it pinned
        in the next pass without a decision."""
        engine = Engine(make_policy(rules=PIN_NEVER))
        pins: dict[str, str] = {}
        inputs, decided = self.inputs(engine, pins)
        window = [seg("n", 0.0625, text="never log tokens"), *WINDOW[1:]]
        first = self.plan(engine, inputs, window)
        assert pins == {"n": "never log tokens"}
        assert first.pinned == ("n",)
        decided.clear()
        second = self.plan(engine, inputs, window)
        assert second.pinned == ("n",)
        assert decided == ["staleness", "eviction"]  # b only: n is not decided again

    def test_the_gate_freezes_the_pass(self, engine: Engine) -> None:
        """A refusal from the caller's gate stands in for the staleness guard: nothing moves."""
        halted = Verdict(True, [Reason("pruning_halted", "halted", {})])
        inputs, _ = self.inputs(engine, {}, gate=halted)
        plan = self.plan(engine, inputs, WINDOW)
        assert plan.frozen
        assert plan.evict == ()
        assert plan.decisions[0].codes == ("pruning_halted",)


class TestPassCandidates:
    def test_rules_see_the_segments_chosen_so_far(self, engine_with: EngineFactory) -> None:
        """A rule reading candidates sees the picks before it and the segment itself."""
        rule = {
            "name": "three-per-pass",
            "check": "eviction",
            "when": "size(candidates) > 3",
            "effect": "deny",
            "message": "at most three evictions in one pass",
        }
        window = [seg(f"s{i}", i / 16) for i in range(6)]
        plan = engine_with(rules=[rule]).plan({"segments": window, "keep_top_k": 0})
        assert plan.evict == ("s0", "s1", "s2")
        assert [d.outcome for d in plan.decisions[1:]] == ["allow"] * 3 + ["deny"] * 3

    def test_the_record_digests_the_window_it_logs(self, tmp_path: Path) -> None:
        """input_digest is the digest of the plan document; the verdicts name each pick."""
        window = [seg("u", 0.0625, perturbed_score=0.5), *WINDOW]
        document = {"segments": window, "keep_top_k": 0}
        log_path = tmp_path / "audit.jsonl"
        with AuditLog(log_path, inputs=[]) as audit:  # the whole document, nothing erased
            plan = Engine.default(audit=audit).plan(document)
        assert plan.evict == ("b", "a", "d", "c")
        (record,) = [json.loads(line) for line in log_path.read_text().splitlines()][1:]
        rows = decision_rows(record)
        picks = [r["subject"]["segment"]["id"] for r in rows if r["check"] == "eviction"]
        assert picks == ["u", "b", "a", "d", "c"]
        assert record["input"] == document
        assert record["input_digest"] == input_digest(document)

    def test_a_pass_keeps_no_copy_of_the_candidates_per_pick(self, quiet_engine: Engine) -> None:
        """A pass of n picks holds memory in proportion to n, not n squared: no decision keeps
        its own copy of the candidates chosen before it. (How long a pass takes, up to 100k
        segments, is measured by benchmarks/pass_scale.py, not here.)"""
        peaks = {size: self.peak_while_planning(quiet_engine, size) for size in (1_000, 4_000)}
        # Four times the segments: linear memory is about four times the peak; a copy per pick
        # would be sixteen times.
        assert peaks[4_000] < 6 * peaks[1_000]

    @staticmethod
    def peak_while_planning(engine: Engine, size: int) -> int:
        scores = {f"s{i}": (i * 7919 % size) / size for i in range(size)}
        window = [seg(name, score, tokens=1) for name, score in scores.items()]
        document = {"segments": window, "keep_top_k": 0}
        tracemalloc.start()
        try:
            plan = engine.plan(document)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(plan.evict) == size
        evicted = [scores[name] for name in plan.evict]
        assert evicted == sorted(evicted)  # lowest score first
        return peak


class TestDependencies:
    def test_dependent_of_an_evicted_segment_is_unscoreable(self, engine: Engine) -> None:
        """Seed 001: a score judged against a segment this pass evicts is not trusted."""
        window = [seg("base", 0.125), seg("dep", 0.25, score_dependencies=["base"]), seg("x", 0.5)]
        plan = engine.plan({"segments": window, "free_tokens": 200})
        assert plan.evict == ("base", "x")
        assert plan.unscoreable == ("dep",)

    def test_dependency_of_an_evicted_segment_is_kept(self, engine: Engine) -> None:
        """Evicting what a chosen segment was judged against would make that choice circular."""
        window = [seg("dep", 0.125, score_dependencies=["base"]), seg("base", 0.25), seg("x", 0.5)]
        plan = engine.plan({"segments": window, "free_tokens": 200})
        assert plan.evict == ("dep", "x")
        assert plan.unscoreable == ("base",)

    def test_self_dependency_is_ignored(self, engine: Engine) -> None:
        """A segment listing itself as a dependency is still scoreable."""
        plan = engine.plan(
            {"segments": [seg("s", 0.125, score_dependencies=["s"])], "free_tokens": 1}
        )
        assert plan.evict == ("s",)


class TestGates:
    def test_collapse_gate_freezes(self, engine: Engine) -> None:
        """A halting collapse history freezes the pass: nothing evicted."""
        history = [
            {
                "cycle": c,
                "pinned": ["task"],
                "scores": {"task": 0.5, "a": 0.5 + 0.01 * c, "b": 0.52, "c": 0.54},
            }
            for c in (1, 2, 3)
        ]
        plan = engine.plan(
            {"segments": WINDOW, "free_tokens": 200, "history": history, "baseline": {"task": 0.9}}
        )
        assert plan.frozen
        assert plan.evict == ()
        assert [d.codes[0] for d in plan.decisions] == ["collapse_detected"]

    def test_stale_scores_freeze_with_recompute(self, engine: Engine) -> None:
        """Seed 002: a score bound to other text freezes the pass and lists the recompute."""
        window = [*WINDOW[:3], {**WINDOW[3], "text": "rewritten"}, WINDOW[4]]
        plan = engine.plan({"segments": window, "free_tokens": 200})
        assert plan.frozen
        assert plan.recompute == ("b", "c", "d")
        assert plan.decisions[0].codes == ("hash_mismatch",)

    def test_unbound_window_freezes(self, engine: Engine) -> None:
        """Segments without a text hash cannot be pruned on their scores."""
        window = [{k: v for k, v in s.items() if k != "text_sha256"} for s in WINDOW]
        plan = engine.plan({"segments": window, "free_tokens": 200})
        assert plan.frozen
        assert plan.decisions[0].codes == ("unbound_score",)

    def test_staleness_off_skips_the_gate(self, engine_with: EngineFactory) -> None:
        """With the staleness guard off, unbound windows are planned on their scores."""
        window = [{k: v for k, v in s.items() if k != "text_sha256"} for s in WINDOW]
        plan = engine_with(staleness={"mode": "off"}).plan({"segments": window, "free_tokens": 200})
        assert plan.evict == ("b", "a")

    def test_session_plan_uses_the_halt_and_the_turns(self, engine: Engine) -> None:
        """A session's halted collapse guard freezes its plans."""
        session = engine.session("s")
        flat = {"task": 0.5, "a": 0.5, "b": 0.52, "c": 0.54}
        session.observe_cycle({"task": 0.9, "a": 0.1, "b": 0.5, "c": 0.95}, ["task"])
        session.observe_cycle(flat, ["task"])
        session.observe_cycle(flat, ["task"])
        plan = session.plan(WINDOW, free_tokens=200)
        assert plan.frozen
        assert plan.decisions[0].codes == ("pruning_halted",)


class TestInput:
    @pytest.mark.parametrize(
        ("document", "path"),
        [
            ({"segments": WINDOW}, "$"),
            ({"segments": WINDOW, "free_tokens": 1, "keep_top_k": 1}, "$.keep_top_k"),
            ({"segments": [WINDOW[0], WINDOW[0]], "free_tokens": 1}, "$.segments[1].id"),
            ({"segments": [{**WINDOW[1], "score": 1.5}], "free_tokens": 1}, "$.segments[0].score"),
            ({"segments": [{**WINDOW[1], "bogus": 1}], "free_tokens": 1}, "$.segments[0].bogus"),
        ],
    )
    def test_malformed_plans_are_input_errors(
        self, engine: Engine, document: dict[str, Any], path: str
    ) -> None:
        """A missing or double target, duplicate ids, bad scores, unknown fields are refused."""
        with pytest.raises(InputError) as raised:
            engine.plan(document)
        assert path in [p.path for p in raised.value.problems]

    def test_two_targets_name_the_conflict(self, engine: Engine) -> None:
        """free_tokens with keep_top_k is one problem naming both fields, not a raw oneOf
        dump; neither is one problem naming the choice."""
        with pytest.raises(InputError) as raised:
            engine.plan({"segments": WINDOW, "free_tokens": 1, "keep_top_k": 1})
        (problem,) = raised.value.problems
        assert problem.path == "$.keep_top_k"
        assert problem.message == (
            "'free_tokens' and 'keep_top_k' conflict: give only one of 'free_tokens' or "
            "'keep_top_k'"
        )
        with pytest.raises(InputError) as raised:
            engine.plan({"segments": WINDOW})
        (problem,) = raised.value.problems
        assert (problem.path, problem.message) == (
            "$",
            "one of 'free_tokens' or 'keep_top_k' is required",
        )

    @settings(max_examples=60, deadline=None)
    @given(
        scores=st.lists(
            st.sampled_from([0.0, 0.125, 0.25, 0.5, 0.75, 1.0]), min_size=1, max_size=12
        ),
        kinds=st.lists(st.sampled_from(["turn", "turn", "constraint"]), min_size=12, max_size=12),
        deps=st.lists(st.integers(0, 11), max_size=6, unique=True),
        free=st.integers(0, 1500),
    )
    def test_plans_respect_the_invariants(
        self, scores: list[float], kinds: list[str], deps: list[int], free: int
    ) -> None:
        """Never a pinned eviction, never an evicted segment judged against another evicted
        one, and freed tokens add up."""
        window = [
            seg(
                f"s{i}",
                s,
                kind=kinds[i],
                tokens=100 + i,
                score_dependencies=[f"s{d}" for d in deps if d < len(scores) and d != i][:2],
            )
            for i, s in enumerate(scores)
        ]

        class Quiet:
            def info(self, *args: Any, **kwargs: Any) -> None:
                pass

        plan = Engine.default(logger=Quiet()).plan({"segments": window, "free_tokens": free})
        by_id = {w["id"]: w for w in window}
        evicted = set(plan.evict)
        assert not evicted & set(plan.pinned)
        for seg_id in evicted:
            assert not set(by_id[seg_id]["score_dependencies"]) & evicted
        assert plan.freed_tokens == sum(by_id[i]["tokens"] for i in plan.evict)
        assert plan.target_met == (plan.freed_tokens >= free)


class TestCli:
    def test_plan_prints_json_and_logs(self, tmp_path: Path) -> None:
        """prunewarden plan prints the plan; every decision goes to the audit log."""
        document = tmp_path / "window.json"
        document.write_text(json.dumps({"segments": WINDOW, "free_tokens": 200}))
        log = tmp_path / "audit.jsonl"
        out, err = io.StringIO(), io.StringIO()
        code = run(["plan", "--audit-log", str(log), str(document)], out, err)
        assert (code, err.getvalue()) == (0, "")
        plan = json.loads(out.getvalue())
        assert plan["evict"] == ["b", "a"]
        assert len(plan["decisions"]) == 3
        assert run(["audit", "verify", str(log)], io.StringIO(), io.StringIO()) == 0

    def test_frozen_plan_exits_one_with_text(self, tmp_path: Path) -> None:
        """A frozen pass exits 1; --format text says so."""
        window = [{k: v for k, v in s.items() if k != "text_sha256"} for s in WINDOW]
        document = tmp_path / "window.json"
        document.write_text(json.dumps({"segments": window, "keep_top_k": 2}))
        out = io.StringIO()
        code = run(
            ["plan", "--format", "text", "--audit-log", str(tmp_path / "a.jsonl"), str(document)],
            out,
            io.StringIO(),
        )
        assert code == 1
        assert out.getvalue().startswith("plan: FROZEN")
        assert "staleness deny: unbound_score" in out.getvalue()

    def test_bad_plan_exits_two(self, tmp_path: Path) -> None:
        """A malformed window is an input error with a located message."""
        document = tmp_path / "window.json"
        document.write_text('{"segments": [],\n "free_tokens": -1}')
        err = io.StringIO()
        assert run(["plan", str(document)], io.StringIO(), err) == 2
        assert f"{document}:2:17: $.free_tokens: -1 is less than the minimum of 0" in err.getvalue()


def grouped(seg_id: str, score: float, group: str, **extra: Any) -> dict[str, Any]:
    return {**seg(seg_id, score, **extra), "group": group}


class TestGroups:
    def test_a_group_is_evicted_whole(self, engine: Engine) -> None:
        """A tool call and its result go together, in window order, even past the target."""
        window = [
            seg("a", 0.25),
            grouped("call", 0.125, "t1"),
            grouped("result", 0.375, "t1"),
            seg("b", 0.5),
        ]
        plan = engine.plan({"segments": window, "free_tokens": 250})
        assert plan.evict == ("a", "call", "result")
        assert plan.freed_tokens == 300
        assert plan.tombstones == ("a", "call", "result")

    def test_a_group_ranks_by_its_most_relevant_member(self, engine: Engine) -> None:
        """A low-scored member does not drag its group ahead of a segment scored between."""
        window = [grouped("call", 0.125, "t1"), grouped("result", 0.75, "t1"), seg("a", 0.5)]
        plan = engine.plan({"segments": window, "free_tokens": 100})
        assert plan.evict == ("a",)

    def test_a_refused_member_refuses_the_group_naming_it(self, engine: Engine) -> None:
        """The unstable result is refused; the call is refused with group_member_refused."""
        window = [
            grouped("call", 0.125, "t1"),
            grouped("result", 0.125, "t1", perturbed_score=0.875),
            seg("a", 0.25),
        ]
        plan = engine.plan({"segments": window, "keep_top_k": 0})
        assert plan.evict == ("a",)
        evictions = [d for d in plan.decisions if d.check == "eviction"]
        assert [(d.outcome, d.codes) for d in evictions] == [
            ("allow", ("authorized",)),
            ("deny", ("unstable_score",)),
            ("deny", ("group_member_refused",)),
            ("allow", ("authorized",)),
        ]
        detail = evictions[2].reasons[0].detail
        assert detail == {"group": "t1", "member": "result", "codes": ["unstable_score"]}
        assert "'result'" in evictions[2].reasons[0].message

    def test_a_refused_group_leaves_no_candidates_behind(self, engine_with: EngineFactory) -> None:
        """Later picks' candidates hold only what was really chosen: a rule allowing two
        candidates lets a and b go after the refused pair."""
        rule = {
            "name": "two-per-pass",
            "check": "eviction",
            "when": "size(candidates) > 2",
            "effect": "deny",
            "message": "at most two evictions in one pass",
        }
        window = [
            grouped("call", 0.125, "t1"),
            grouped("result", 0.125, "t1", perturbed_score=0.875),
            seg("a", 0.25),
            seg("b", 0.375),
        ]
        plan = engine_with(rules=[rule]).plan({"segments": window, "keep_top_k": 0})
        assert plan.evict == ("a", "b")
        assert [d.codes for d in plan.decisions[1:]] == [
            ("authorized",),
            ("unstable_score",),
            ("group_member_refused",),
            ("authorized",),
            ("authorized",),
        ]

    def test_a_pinned_member_pins_the_group(self, engine: Engine) -> None:
        """A group holding a pinned kind is never evicted on its score; all of it is pinned."""
        window = [
            grouped("rule", 0.125, "g", kind="constraint"),
            grouped("note", 0.125, "g"),
            seg("a", 0.25),
        ]
        plan = engine.plan({"segments": window, "keep_top_k": 0})
        assert plan.evict == ("a",)
        assert plan.pinned == ("rule", "note")

    def test_a_member_judged_against_a_chosen_segment_makes_the_group_unscoreable(
        self, engine: Engine
    ) -> None:
        """One untrusted score holds back the whole group; mates may depend on each other."""
        window = [
            seg("base", 0.125),
            grouped("call", 0.25, "t1", score_dependencies=["result"]),
            grouped("result", 0.25, "t1", score_dependencies=["base"]),
            seg("x", 0.5),
        ]
        plan = engine.plan({"segments": window, "keep_top_k": 0})
        assert plan.evict == ("base", "x")
        assert plan.unscoreable == ("call", "result")

    def test_mates_judged_against_each_other_are_refused(self, engine: Engine) -> None:
        """The guard refuses a score judged against a mate slated in the same pass: the
        group stays (a scorer leaves mates out of a segment's dependencies)."""
        window = [
            grouped("call", 0.25, "t1"),
            grouped("result", 0.25, "t1", score_dependencies=["call"]),
        ]
        plan = engine.plan({"segments": window, "keep_top_k": 0})
        assert plan.evict == ()
        evictions = [d for d in plan.decisions if d.check == "eviction"]
        assert [d.codes for d in evictions] == [
            ("authorized",),
            ("unscoreable",),
            ("group_member_refused",),
        ]

    def test_an_empty_group_id_is_an_input_error(self, engine: Engine) -> None:
        """group is an id: an empty one is located under the segment."""
        with pytest.raises(InputError) as raised:
            engine.plan({"segments": [grouped("a", 0.5, "")], "keep_top_k": 0})
        assert [p.path for p in raised.value.problems] == ["$.segments[0].group"]


class TestAShadowedPlansRecord:
    def test_the_shadows_verdicts_match_the_plans_one_for_one(self) -> None:
        """A plan beside a shadow policy is one version 2 record whose shadow verdicts stand
        one for one beside its verdicts, in order: the candidate decided each decision once."""
        stream = io.StringIO()
        active = Engine.default().policy
        engine = Engine(active, audit=AuditLog(stream), shadow=active)
        plan = engine.plan({"segments": WINDOW, "free_tokens": 200})
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        (record,) = [r for r in records if r["kind"] == "pass"]
        assert record["record_version"] == 2
        assert len(record["verdicts"]) == len(plan.decisions) == len(record["shadow"]["verdicts"])
        assert [v["codes"] for v in record["shadow"]["verdicts"]] == [
            list(d.codes) for d in plan.decisions
        ]
        assert all(v["agrees"] for v in record["shadow"]["verdicts"])


class NoSpace(io.StringIO):
    """A text stream that refuses every write (no space left)."""

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device", text[:0])


class TestPassRecordsWrittenOrNot:
    def test_an_empty_pass_writes_no_record(self) -> None:
        """A pass of no segment decides nothing, and its log gets no pass record."""
        stream = io.StringIO()
        engine = Engine.default(audit=AuditLog(stream))
        engine.passes.columnar = None  # the general path, which writes the pass log's records
        assert len(engine.authorize_pass([])) == 0
        kinds = [json.loads(line)["kind"] for line in stream.getvalue().splitlines()]
        assert "pass" not in kinds

    def test_an_optional_log_that_fails_leaves_the_plan_and_is_reported(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A plan whose record an audit log that is not required cannot write stands as
        planned, and the failure is reported with the pass's id."""
        audit = AuditLog(NoSpace(), required=False)
        plan = Engine.default(audit=audit).plan({"segments": WINDOW, "free_tokens": 200})
        assert plan.evict
        assert not plan.frozen
        pass_id = plan.decisions[0].pass_id
        assert f"audit_write_failed: sink {audit.name}, pass {pass_id}" in caplog.text


class FirstWriteFails(io.StringIO):
    """A text stream whose first write fails (no space left), and whose later writes land."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def write(self, text: str) -> int:
        if not self.failed:
            self.failed = True
            raise OSError(28, "No space left on device")
        return super().write(text)


class TestAPlanThatCannotBeLogged:
    def test_it_frees_nothing_and_its_refusals_are_logged_and_handed_on(self) -> None:
        """A plan whose record a required log cannot write evicts nothing and frees no token;
        every decision is refused (audit_unavailable), the record of those refusals is written
        once the log takes writes again, and the hooks get each refusal with it."""
        stream = FirstWriteFails()
        heard: list[tuple[Decision, dict[str, Any]]] = []
        engine = Engine.default(
            audit=AuditLog(stream), on_decision=lambda d, r: heard.append((d, dict(r)))
        )
        engine.passes.columnar = None  # the general path: the pass log writes the record
        plan = engine.plan({"segments": WINDOW, "free_tokens": 200})
        assert (plan.evict, plan.tombstones, plan.frozen, plan.freed_tokens) == ((), (), True, 0)
        assert {d.codes for d in plan.decisions} == {("audit_unavailable",)}
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        (record,) = [r for r in records if r["kind"] == "pass"]
        assert [[r["code"] for r in row["reasons"]] for row in decision_rows(record)] == [
            ["audit_unavailable"]
        ] * len(plan.decisions)
        assert [d for d, _ in heard] == list(plan.decisions)
        assert {r["pass_id"] for _, r in heard} == {record["pass_id"]}


PINS = Path(__file__).parents[1] / "examples" / "policies" / "content-pins.yaml"


class TestAPlansRecordNamesTheRulesBackend:
    def plan_record(self, engine_of: Callable[[io.StringIO], Engine]) -> dict[str, Any]:
        stream = io.StringIO()
        engine_of(stream).plan({"segments": WINDOW, "free_tokens": 200})
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        (record,) = [r for r in records if r["kind"] == "pass"]
        return dict(record)

    def test_under_a_policy_with_rules(self) -> None:
        """A plan under a policy with rules names the CEL backend that evaluated them."""
        pins = load_policy(PINS)
        record = self.plan_record(lambda s: Engine(pins, audit=AuditLog(s), cel="python"))
        assert record["cel"] == "python"

    def test_beside_a_shadow_policy_with_rules(self) -> None:
        """Rules of the shadow policy alone are evaluated too: the record names the backend."""
        pins, active = load_policy(PINS), Engine.default().policy
        record = self.plan_record(
            lambda s: Engine(active, audit=AuditLog(s), shadow=pins, cel="python")
        )
        assert record["cel"] == "python"

    def test_without_rules_no_backend_is_named(self) -> None:
        """No rule, no backend named."""
        record = self.plan_record(lambda s: Engine.default(audit=AuditLog(s), cel="python"))
        assert "cel" not in record


class TestAPlansRecordSaysItsMaking:
    def test_it_records_its_duration_and_trace(self) -> None:
        """A plan's record says how long deciding took and names the caller's trace and span."""
        trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        stream = io.StringIO()
        engine = Engine.default(audit=AuditLog(stream), trace_context=lambda: (trace, span))
        engine.passes.columnar = None  # the general path: the pass log writes the record
        engine.plan({"segments": WINDOW, "free_tokens": 200})
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        (record,) = [r for r in records if r["kind"] == "pass"]
        assert isinstance(record["duration_ns"], int)
        assert record["duration_ns"] > 0
        assert (record["trace_id"], record["span_id"]) == (trace, span)
